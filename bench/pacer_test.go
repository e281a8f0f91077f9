package bench

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// fakeClock advances only when told to, or instantly when slept on, and
// records every sleep so a test can see whether the pacer waited.
type fakeClock struct {
	now    time.Time
	sleeps []time.Time
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) SleepUntil(ctx context.Context, t time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.sleeps = append(c.sleeps, t)
	if t.After(c.now) {
		c.now = t
	}
	return nil
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func TestPacerSchedule(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		n     int
		wLast time.Duration // intended offset of message n-1
	}{
		{"1000/s", 1000, 1000, 999 * time.Millisecond},
		{"3/s does not drift", 3, 3001, 1000 * time.Second},
		{"7/s", 7, 701, 100 * time.Second},
		{"250k/s", 250_000, 250_001, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{now: t0}
			p, err := NewPacer(clk, t0, tt.rate, 0)
			if err != nil {
				t.Fatal(err)
			}
			var last time.Time
			for i := range tt.n {
				got, err := p.Next(context.Background())
				if err != nil {
					t.Fatalf("Next #%d: %v", i, err)
				}
				want := t0.Add(time.Duration(math.Round(float64(i) * 1e9 / tt.rate)))
				if d := got.Sub(want).Abs(); d > time.Nanosecond {
					t.Fatalf("message %d intended %v, want %v", i, got.Sub(t0), want.Sub(t0))
				}
				if !clk.now.Equal(got) {
					t.Fatalf("message %d returned at clock %v, before its time %v", i, clk.now.Sub(t0), got.Sub(t0))
				}
				last = got
			}
			if d := last.Sub(t0) - tt.wLast; d.Abs() > time.Nanosecond {
				t.Fatalf("last message at %v, want %v", last.Sub(t0), tt.wLast)
			}
			// The first message is due at start, so no sleep for it; one per message after.
			if len(clk.sleeps) != tt.n-1 {
				t.Fatalf("%d sleeps, want %d", len(clk.sleeps), tt.n-1)
			}
			if got := p.Due(t0.Add(tt.wLast)); got != uint64(tt.n-1) {
				t.Fatalf("Due(last) = %d, want %d", got, tt.n-1)
			}
			if p.Sent() != uint64(tt.n) {
				t.Fatalf("Sent = %d, want %d", p.Sent(), tt.n)
			}
		})
	}
}

// TestPacerStallKeepsSchedule checks the open-loop property: after the sender
// stalls, overdue messages keep their original intended times and are handed
// out without sleeping, so the stall shows up as latency.
func TestPacerStallKeepsSchedule(t *testing.T) {
	clk := &fakeClock{now: t0}
	p, err := NewPacer(clk, t0, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 5 {
		if _, err := p.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The sender blocks for 10.5 ms after message 4 (due at 4 ms).
	clk.now = t0.Add(14500 * time.Microsecond)
	sleepsBefore := len(clk.sleeps)
	for i := 5; i <= 14; i++ {
		got, err := p.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := t0.Add(time.Duration(i) * time.Millisecond); !got.Equal(want) {
			t.Fatalf("overdue message %d intended %v, want %v", i, got.Sub(t0), want.Sub(t0))
		}
	}
	if len(clk.sleeps) != sleepsBefore {
		t.Fatalf("pacer slept %d times while behind schedule", len(clk.sleeps)-sleepsBefore)
	}
	if got, want := p.Due(clk.now), uint64(15); got != want {
		t.Fatalf("Due(14.5ms) = %d, want %d", got, want)
	}
	// Caught up: message 15 is in the future again and needs a sleep.
	got, err := p.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(15 * time.Millisecond); !got.Equal(want) || len(clk.sleeps) != sleepsBefore+1 {
		t.Fatalf("message 15 at %v after %d sleeps; want %v after one sleep", got.Sub(t0), len(clk.sleeps)-sleepsBefore, want.Sub(t0))
	}
}

func TestPacerUnpaced(t *testing.T) {
	clk := &fakeClock{now: t0}
	p, err := NewPacer(clk, t0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		clk.now = t0.Add(time.Duration(i) * time.Second)
		got, err := p.Next(context.Background())
		if err != nil || !got.Equal(clk.now) {
			t.Fatalf("unpaced Next = %v, %v; want now %v", got, err, clk.now)
		}
	}
	if len(clk.sleeps) != 0 || p.Due(t0.Add(time.Hour)) != 3 {
		t.Fatalf("unpaced pacer slept %d times, Due = %d; want 0 and 3", len(clk.sleeps), p.Due(t0.Add(time.Hour)))
	}
}

// TestPacerSetRate checks a rate change mid-schedule: the next message keeps the
// time it had, the ones after follow the new rate, a sender behind schedule
// stays behind, and an unpaced pacer starts its schedule at the clock's now.
func TestPacerSetRate(t *testing.T) {
	clk := &fakeClock{now: t0}
	p, err := NewPacer(clk, t0, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	next := func() time.Duration {
		t.Helper()
		got, err := p.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return got.Sub(t0)
	}
	for range 3 {
		next() // 0, 1, 2 ms
	}
	if err := p.SetRate(100); err != nil {
		t.Fatal(err)
	}
	// Message 3 was due at 3 ms and stays so; then one every 10 ms.
	for _, want := range []time.Duration{3, 13, 23} {
		if got := next(); got != want*time.Millisecond {
			t.Fatalf("after SetRate(100): message at %v, want %v ms", got, want)
		}
	}
	if got := p.Due(t0.Add(33 * time.Millisecond)); got != 6 {
		t.Fatalf("Due(33ms) = %d, want 6 (0-2 at 1000/s, 3, 13, 23 at 100/s)", got)
	}
	// Behind schedule at 100 ms, then faster: the overdue message keeps its time.
	clk.now = t0.Add(100 * time.Millisecond)
	if err := p.SetRate(2000); err != nil {
		t.Fatal(err)
	}
	for _, want := range []time.Duration{33_000, 33_500, 34_000} {
		if got := next(); got != want*time.Microsecond {
			t.Fatalf("after SetRate(2000) while behind: message at %v, want %v µs", got, want)
		}
	}
	// Unpaced, then paced: the schedule starts at the clock's now.
	u, err := NewPacer(clk, t0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Next(ctx); err != nil {
		t.Fatal(err)
	}
	clk.now = t0.Add(time.Second)
	if err := u.SetRate(10); err != nil {
		t.Fatal(err)
	}
	for _, want := range []time.Duration{1000, 1100} {
		got, err := u.Next(ctx)
		if err != nil || got.Sub(t0) != want*time.Millisecond {
			t.Fatalf("unpaced then 10/s: message at %v (%v), want %v ms", got.Sub(t0), err, want)
		}
	}
	if err := u.SetRate(-1); err == nil {
		t.Fatal("SetRate(-1) succeeded, want an error")
	}
}

func TestPacerCancel(t *testing.T) {
	clk := &fakeClock{now: t0}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, rate := range []float64{0, 10} {
		p, err := NewPacer(clk, t0.Add(time.Second), rate, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Next(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("rate %v: Next on a cancelled context = %v, want context.Canceled", rate, err)
		}
	}
}

func TestPacerBadRate(t *testing.T) {
	for _, rate := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := NewPacer(&fakeClock{now: t0}, t0, rate, 0); err == nil {
			t.Errorf("NewPacer(rate=%v) succeeded, want an error", rate)
		}
	}
}

// TestPacerMinSleep: at 10 messages a millisecond with a minimum sleep of 250 µs the pacer
// wakes once per 250 µs and hands out what is due by then, each with its intended time;
// once the sender was busy for longer, the next message due wakes it at its time.
func TestPacerMinSleep(t *testing.T) {
	clk := &fakeClock{now: t0}
	p, err := NewPacer(clk, t0, 10_000, 250*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 11 {
		got, err := p.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := t0.Add(time.Duration(i) * 100 * time.Microsecond); !got.Equal(want) {
			t.Fatalf("message %d intended %v, want %v", i, got.Sub(t0), want.Sub(t0))
		}
	}
	// Message 0 leaves at once and 1 at its time; from there the pacer wakes every 250 µs
	// and sends what is due: 2–3 at 350 µs, 4–6 at 600, 7–8 at 850, 9–10 at 1,100.
	want := []time.Duration{100, 350, 600, 850, 1100}
	if len(clk.sleeps) != len(want) {
		t.Fatalf("slept until %v; want %v µs", clk.sleeps, want)
	}
	for i, w := range want {
		if got := clk.sleeps[i].Sub(t0); got != w*time.Microsecond {
			t.Fatalf("wake-up %d at %v, want %v µs", i, got, w)
		}
	}
	// The sender is busy until 1,390 µs: 11–13 are overdue, 14 (due at 1,400 µs) wakes at its
	// time, 300 µs after the last wake-up.
	clk.now = t0.Add(1390 * time.Microsecond)
	for range 4 {
		if _, err := p.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(clk.sleeps); n != 6 || clk.sleeps[5].Sub(t0) != 1400*time.Microsecond {
		t.Fatalf("after a busy sender: slept until %v; want a sixth wake-up at 1.4 ms", clk.sleeps)
	}
}
