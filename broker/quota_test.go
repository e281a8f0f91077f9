package broker

import (
	"testing"
	"time"
)

// TestRateQuotaWindows checks the bytes-per-window accounting against Kafka's Rate: the
// measured rate is the bytes of the last quotaWindows windows over at least quotaWindows-1
// windows, so a quota from rest lets a burst of that many windows' worth through, and a window
// older than quotaWindows no longer counts.
func TestRateQuotaWindows(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	q := newRateQuota()
	if q.bounded() || q.exceeded(t0) {
		t.Fatal("a new quota is bounded")
	}
	q.setBound(1000)
	q.record(t0, 10_000) // 10 windows' worth at once
	if r := q.rate(t0); r != 1000 {
		t.Fatalf("rate after 10000 bytes at rest = %v, want 1000 (over the 10 s minimum span)", r)
	}
	if q.exceeded(t0) {
		t.Fatal("exceeded at exactly the bound")
	}
	q.record(t0.Add(500*time.Millisecond), 1)
	if !q.exceeded(t0.Add(500 * time.Millisecond)) {
		t.Fatal("not exceeded one byte over the bound")
	}
	if r := q.rate(t0.Add(20 * time.Second)); r != 0 {
		t.Fatalf("rate 20 s later = %v, want 0: the windows expired", r)
	}
	// Past the minimum span the rate divides by the time the windows really span.
	q2 := newRateQuota()
	q2.setBound(1000)
	for s := range 11 {
		q2.record(t0.Add(time.Duration(s)*time.Second), 1000)
	}
	if r := q2.rate(t0.Add(10*time.Second + 500*time.Millisecond)); r < 1000 || r > 1100 {
		t.Fatalf("rate of 1000 B each second for 11 s = %v, want about 1000-1100", r)
	}
	q.setBound(1<<63 - 1)
	if q.bounded() || q.exceeded(t0.Add(500*time.Millisecond)) {
		t.Fatal("unbounded again, still throttled")
	}
}

// TestRateQuotaPacesASender simulates a follower that fetches 64 KiB whenever the quota is not
// exceeded, every 10 ms for 60 s at a bound of 100 KiB/s: after the first burst of 10 windows
// it moves at the bound.
func TestRateQuotaPacesASender(t *testing.T) {
	const bound, chunk = 100 << 10, 64 << 10
	q := newRateQuota()
	q.setBound(bound)
	t0 := time.Unix(1_700_000_000, 0)
	sent := 0
	for ms := 0; ms < 60_000; ms += 10 {
		now := t0.Add(time.Duration(ms) * time.Millisecond)
		if !q.exceeded(now) {
			q.record(now, chunk)
			sent += chunk
		}
	}
	// 60 s at the bound, at most one chunk over at each check of a window.
	if lo, hi := 55*bound, 62*bound+60*chunk; sent < lo || sent > hi {
		t.Fatalf("sent %d bytes in 60 s at %d B/s, want %d-%d", sent, bound, lo, hi)
	}
}

func TestListsReplica(t *testing.T) {
	for _, tc := range []struct {
		val     string
		p, node int32
		want    bool
	}{
		{"*", 3, 7, true},
		{"0:1,1:2", 1, 2, true},
		{"0:1, 1:2", 1, 2, true},
		{"0:1,1:2", 1, 1, false},
		{"", 0, 1, false},
		{"10:1", 1, 1, false},
	} {
		if got := listsReplica(tc.val, tc.p, tc.node); got != tc.want {
			t.Errorf("listsReplica(%q, %d, %d) = %v, want %v", tc.val, tc.p, tc.node, got, tc.want)
		}
	}
}
