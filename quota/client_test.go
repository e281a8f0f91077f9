package quota

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// newClientQuotas is a manager on a fresh store and fake clock with Kafka's default sampling.
func newClientQuotas(t *testing.T) (*ClientQuotas, *Store, *fakeClock) {
	t.Helper()
	s, c := NewStore(), newFakeClock()
	q, err := NewClientQuotas(s, DefaultConfig(), c.now)
	if err != nil {
		t.Fatal(err)
	}
	return q, s, c
}

// TestProducerAtTwiceBound checks the throttle figures of a producer bounded to 1000 B/s.
// From rest, 20000 bytes at once is 2000 B/s over the 10 windows the span counts as at least,
// so the throttle is (2000-1000)/1000 × 10 s = 10 s. Producing 2000 B/s steadily, 200 bytes
// every 100 ms, the 11 samples kept hold 22000 bytes over 10.9 s (the oldest starts at its
// first record, 10.9 s ago), so the throttle is (22000/10.9 - 1000)/1000 × 10900 ms = 11100 ms.
func TestProducerAtTwiceBound(t *testing.T) {
	q, s, c := newClientQuotas(t)
	s.Set(Entity{User: NameOf("alice")}, KeyProducerByteRate, 1000)
	if got := q.Record(Produce, "alice", "p", 20000); got != 10*time.Second {
		t.Fatalf("burst from rest: throttle %v, want 10s", got)
	}

	q, s, c = newClientQuotas(t)
	s.Set(Entity{User: NameOf("alice")}, KeyProducerByteRate, 1000)
	var got time.Duration
	for range 300 {
		got = q.Record(Produce, "alice", "p", 200)
		c.advance(100 * time.Millisecond)
	}
	if got != 11100*time.Millisecond {
		t.Fatalf("steady 2x: throttle %v, want 11.1s", got)
	}
}

// TestWindowsExpire follows a 20000-byte burst against 1000 B/s: the span stays at its
// 10-window floor until the burst is 10 s old, then grows, and once the burst's sample has had
// no event for 11 windows it is purged and the client is free.
func TestWindowsExpire(t *testing.T) {
	for _, tc := range []struct {
		after time.Duration
		w     time.Duration
	}{
		{0, 10 * time.Second},
		{5 * time.Second, 10 * time.Second},
		{10500 * time.Millisecond, 9500 * time.Millisecond}, // 20000 B over 10.5 s
		{11 * time.Second, 0},
	} {
		t.Run(fmt.Sprint(tc.after), func(t *testing.T) {
			q, s, c := newClientQuotas(t)
			s.Set(Entity{ClientID: NameOf("p")}, KeyProducerByteRate, 1000)
			q.Record(Produce, "alice", "p", 20000)
			c.advance(tc.after)
			if got := q.Record(Produce, "alice", "p", 0); got != tc.w {
				t.Fatalf("throttle %v, want %v", got, tc.w)
			}
		})
	}
}

// TestDefaultQuotaMeasuresEachClient checks that clients sharing the <default> client-id quota
// are measured apart: each may send its own 10 windows' worth.
func TestDefaultQuotaMeasuresEachClient(t *testing.T) {
	q, s, _ := newClientQuotas(t)
	s.Set(Entity{ClientID: DefaultName()}, KeyProducerByteRate, 1000)
	for _, client := range []string{"a", "b", "c"} {
		if got := q.Record(Produce, "u", client, 10000); got != 0 {
			t.Fatalf("client %s: throttle %v, want none", client, got)
		}
	}
	if got := q.Record(Produce, "u", "a", 10000); got != 10*time.Second {
		t.Fatalf("client a again: throttle %v, want 10s", got)
	}
}

// TestFetchUnrecord checks that a throttled fetch taken back leaves the client free, and that
// MaxValueInWindow is quota × (windows - 1) × window.
func TestFetchUnrecord(t *testing.T) {
	q, s, _ := newClientQuotas(t)
	if _, ok := q.MaxValueInWindow(Fetch, "u", "c"); ok {
		t.Fatal("max value without a quota")
	}
	s.Set(Entity{User: DefaultName()}, KeyConsumerByteRate, 1000)
	if v, ok := q.MaxValueInWindow(Fetch, "u", "c"); !ok || v != 10000 {
		t.Fatalf("MaxValueInWindow = %v %v, want 10000", v, ok)
	}
	if got := q.Record(Fetch, "u", "c", 30000); got != 20*time.Second {
		t.Fatalf("throttle %v, want 20s", got)
	}
	q.Unrecord(Fetch, "u", "c", 30000)
	if got := q.Record(Fetch, "u", "c", 0); got != 0 {
		t.Fatalf("after unrecord: throttle %v, want none", got)
	}
}

// TestRequestPercentage checks request_percentage: handler time counts as percent of one
// thread, and the throttle is capped at one window.
func TestRequestPercentage(t *testing.T) {
	for _, tc := range []struct {
		handler time.Duration
		w       time.Duration
	}{
		{5 * time.Second, 0},                              // 500 %·s over 10 s: 50 %, at the quota
		{5200 * time.Millisecond, 400 * time.Millisecond}, // 52 %: (52-50)/50 × 10 s
		{10 * time.Second, time.Second},                   // 100 %: 10 s, capped at one window
	} {
		t.Run(tc.handler.String(), func(t *testing.T) {
			q, s, _ := newClientQuotas(t)
			s.Set(Entity{User: NameOf("u")}, KeyRequestPercentage, 50)
			if got := q.RecordRequestTime("u", "c", tc.handler); got != tc.w {
				t.Fatalf("throttle %v, want %v", got, tc.w)
			}
		})
	}
}

// TestQuotaChangeKeepsHistory checks that a changed bound applies at once to what was
// recorded before it.
func TestQuotaChangeKeepsHistory(t *testing.T) {
	q, s, _ := newClientQuotas(t)
	e := Entity{User: NameOf("u")}
	s.Set(e, KeyProducerByteRate, 1000)
	if got := q.Record(Produce, "u", "c", 15000); got != 5*time.Second {
		t.Fatalf("throttle %v, want 5s", got)
	}
	s.Set(e, KeyProducerByteRate, 2000)
	if got := q.Record(Produce, "u", "c", 0); got != 0 {
		t.Fatalf("after raising the quota: throttle %v, want none", got)
	}
	s.Set(e, KeyProducerByteRate, 500)
	if got := q.Record(Produce, "u", "c", 0); got != 20*time.Second {
		t.Fatalf("after lowering the quota: throttle %v, want 20s", got)
	}
}

// TestNothingMeasuredWithoutQuotas checks that no sensor exists while no quota of a kind is set.
func TestNothingMeasuredWithoutQuotas(t *testing.T) {
	q, s, _ := newClientQuotas(t)
	s.Set(Entity{User: NameOf("u")}, KeyConsumerByteRate, 1)
	if got := q.Record(Produce, "u", "c", 1e9); got != 0 || q.sensorCount(Produce) != 0 {
		t.Fatalf("throttle %v with %d sensors, want none", got, q.sensorCount(Produce))
	}
	s.Set(Entity{User: NameOf("u")}, "", 1) // a record with no key must not reach a kind out of range
	if got := q.Record(Kind(9), "u", "c", 1); got != 0 {
		t.Fatalf("unknown kind: throttle %v", got)
	}
}

// TestRecordMutation checks Record for ControllerMutation: it checks the bucket first, so an
// exhausted bucket records nothing and answers the refill time.
func TestRecordMutation(t *testing.T) {
	q, s, c := newClientQuotas(t)
	s.Set(Entity{ClientID: NameOf("c")}, KeyControllerMutationRate, 10)
	if got := q.Record(ControllerMutation, "u", "c", 120); got != 0 { // 110 → -10
		t.Fatalf("first: %v, want 0", got)
	}
	if got := q.Record(ControllerMutation, "u", "c", 50); got != time.Second {
		t.Fatalf("exhausted: %v, want 1s", got)
	}
	c.advance(time.Second) // back to 0, the 50 refused never counted
	if got := q.Record(ControllerMutation, "u", "c", 1); got != 0 {
		t.Fatalf("after refill: %v, want 0", got)
	}
}

// TestSensorsExpire checks that sensors idle for more than an hour are dropped.
func TestSensorsExpire(t *testing.T) {
	q, s, c := newClientQuotas(t)
	s.Set(Entity{ClientID: DefaultName()}, KeyProducerByteRate, 1000)
	for i := range 100 {
		q.Record(Produce, "u", fmt.Sprint("client-", i), 1)
	}
	if n := q.sensorCount(Produce); n != 100 {
		t.Fatalf("%d sensors, want 100", n)
	}
	c.advance(time.Hour)
	q.Record(Produce, "u", "client-0", 1) // an hour idle is not yet more than an hour
	c.advance(31 * time.Second)
	q.Record(Produce, "u", "late", 1)
	if n := q.sensorCount(Produce); n != 2 {
		t.Fatalf("%d sensors after an hour, want 2 (client-0 and late)", n)
	}
}

// TestMutationQuota checks controller_mutation_rate at 10 partitions/s: the bucket holds
// 11 × 1 s × 10 = 110. A strict quota takes mutations while credits are not below zero, then
// refuses with THROTTLING_QUOTA_EXCEEDED for as long as the deficit takes to refill; a
// permissive one takes everything and only throttles.
func TestMutationQuota(t *testing.T) {
	q, s, c := newClientQuotas(t)
	s.Set(Entity{User: NameOf("admin")}, KeyControllerMutationRate, 10)

	strict := q.NewMutationQuota("admin", "c1", true)
	for _, n := range []int{100, 20} { // 110 → 10 → -10
		if err := strict.Record(n); err != nil {
			t.Fatalf("Record(%d): %v", n, err)
		}
	}
	err := strict.Record(1)
	var qe *Error
	if !errors.Is(err, kerr.ThrottlingQuotaExceeded) || !errors.As(err, &qe) || qe.Message != "The throttling quota has been exceeded." {
		t.Fatalf("Record over quota: %v, want THROTTLING_QUOTA_EXCEEDED", err)
	}
	if !strict.Exceeded() || strict.ThrottleTime() != time.Second {
		t.Fatalf("exceeded %v throttle %v, want true 1s", strict.Exceeded(), strict.ThrottleTime())
	}
	c.advance(400 * time.Millisecond)
	if got := strict.ThrottleTime(); got != 600*time.Millisecond {
		t.Fatalf("throttle after 400ms: %v, want 600ms", got)
	}
	c.advance(600 * time.Millisecond) // credits are back to 0
	if err := q.NewMutationQuota("admin", "c1", true).Record(1); err != nil {
		t.Fatalf("after refill: %v", err)
	}

	permissive := q.NewMutationQuota("admin", "c2", false) // same user, so the same sensor
	if err := permissive.Record(14); err != nil {
		t.Fatalf("permissive: %v", err)
	}
	if permissive.Exceeded() || permissive.ThrottleTime() != 1500*time.Millisecond {
		t.Fatalf("permissive: exceeded %v throttle %v, want false 1.5s", permissive.Exceeded(), permissive.ThrottleTime())
	}

	unbounded := q.NewMutationQuota("other", "c", true)
	if err := unbounded.Record(1_000_000); err != nil || unbounded.ThrottleTime() != 0 {
		t.Fatalf("unbounded: %v %v", err, unbounded.ThrottleTime())
	}
}

// TestStrictMutationQuota checks the request versions that get strict quotas.
func TestStrictMutationQuota(t *testing.T) {
	for _, tc := range []struct {
		key, version int16
		w            bool
	}{
		{19, 5, false}, {19, 6, true}, {20, 4, false}, {20, 5, true}, {37, 2, false}, {37, 3, true}, {0, 99, false},
	} {
		if got := StrictMutationQuota(tc.key, tc.version); got != tc.w {
			t.Errorf("key %d v%d: %v, want %v", tc.key, tc.version, got, tc.w)
		}
	}
}

// TestConfigValidation checks Kafka's lower bounds on the sampling keys.
func TestConfigValidation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Windows = 0
	if _, err := NewClientQuotas(NewStore(), cfg, nil); err == nil ||
		err.Error() != "client quotas: Invalid value 0 for configuration quota.window.num: Value must be at least 1" {
		t.Fatalf("got %v", err)
	}
	cfg = DefaultConfig()
	cfg.ControllerWindowSize = 1500 * time.Millisecond
	if _, err := NewClientQuotas(NewStore(), cfg, nil); err == nil {
		t.Fatal("a window of 1.5 s accepted")
	}
}
