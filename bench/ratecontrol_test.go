package bench

import (
	"math"
	"testing"
	"time"
)

// system is a toy broker and clients for the controller: producers that publish at most
// produceCap records/s and consumers that read at most consumeCap, with the backlog between.
type system struct {
	produceCap, consumeCap float64
	backlog                float64
}

// period runs one second at rate and returns what the controller would see.
func (s *system) period(rate float64) RatePeriod {
	published := min(rate, s.produceCap)
	consumed := min(s.backlog+published, s.consumeCap)
	s.backlog += published - consumed
	return RatePeriod{Length: time.Second, Published: uint64(published), Consumed: uint64(consumed), Backlog: int64(s.backlog)}
}

// TestRateControllerSettles checks that the search settles near the lower of the two
// capacities within a warmup's worth of periods, and then keeps the consumers' backlog
// within a fraction of a second of the rate.
func TestRateControllerSettles(t *testing.T) {
	tests := []struct {
		name                   string
		produceCap, consumeCap float64
	}{
		{"consumer-bound", 900_000, 350_000},
		{"producer-bound", 200_000, 800_000},
		{"slow system", 4_000, 3_000},
		{"equal", 500_000, 500_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := &system{produceCap: tt.produceCap, consumeCap: tt.consumeCap}
			c := NewRateController()
			if c.Rate() != InitialSearchRate {
				t.Fatalf("first target %v, want %v", c.Rate(), InitialSearchRate)
			}
			capacity := min(tt.produceCap, tt.consumeCap)
			const warmup, measured = 12, 60
			var sum, worstBacklog float64
			for i := range warmup + measured {
				rate := c.Rate()
				p := sys.period(rate)
				if i >= warmup {
					sum += float64(p.Published)
					worstBacklog = max(worstBacklog, sys.backlog/capacity)
				}
				c.Next(p)
			}
			mean := sum / measured
			t.Logf("mean %.0f rec/s (%.1f%% of the capacity), worst backlog %.3f s", mean, 100*mean/capacity, worstBacklog)
			if mean < 0.85*capacity || mean > 1.01*capacity {
				t.Errorf("mean published %.0f rec/s after warmup, want within 85-101%% of the capacity %.0f", mean, capacity)
			}
			if worstBacklog > 0.5 {
				t.Errorf("backlog reached %.2f s of the capacity after warmup, want under 0.5 s", worstBacklog)
			}
		})
	}
}

// TestRateControllerRules checks each rule on one period.
func TestRateControllerRules(t *testing.T) {
	sec := time.Second
	c := NewRateController()
	// Keeping up: doubles while it has found no ceiling.
	if got := c.Next(RatePeriod{Length: sec, Published: 10_000, Consumed: 10_000, Backlog: 500}); got != 20_000 {
		t.Fatalf("keeping up from 10000: next %v, want 20000", got)
	}
	// Consumers behind: 0.95 of what they read, less a third of the excess backlog.
	got := c.Next(RatePeriod{Length: sec, Published: 20_000, Consumed: 16_000, Backlog: 5_000})
	if want := 0.95*16_000 - (5_000-2_000)/3.0; math.Abs(got-want) > 1e-6 {
		t.Fatalf("consumers behind: next %v, want %v", got, want)
	}
	// The period after a cut holds, whatever it saw.
	before := c.Rate()
	if got := c.Next(RatePeriod{Length: sec, Published: 20_000, Consumed: 10_000, Backlog: 15_000}); got != before {
		t.Fatalf("after a cut: next %v, want %v held", got, before)
	}
	// Still behind but the backlog shrinking: the rate holds.
	if got := c.Next(RatePeriod{Length: sec, Published: uint64(before), Consumed: 16_000, Backlog: 4_000}); got != before {
		t.Fatalf("draining: next %v, want %v held", got, before)
	}
	// The climb after a ceiling is half the last one.
	if got := c.Next(RatePeriod{Length: sec, Published: uint64(before), Consumed: uint64(before)}); math.Abs(got-1.5*before) > 1e-6 {
		t.Fatalf("climb after one cut: next %v, want %v", got, 1.5*before)
	}
	// Producers short of the target: 0.95 of what they published, then a period held.
	if got := c.Next(RatePeriod{Length: sec, Published: 10_000, Consumed: 10_000}); got != 9_500 {
		t.Fatalf("producers short: next %v, want 9500", got)
	}
	if got := c.Next(RatePeriod{Length: sec, Published: 10, Consumed: 10}); got != 9_500 {
		t.Fatalf("after a cut: next %v, want 9500 held", got)
	}
	// Never under the floor, and a period of no length changes nothing.
	if got := c.Next(RatePeriod{Length: sec, Published: 10, Consumed: 10}); got != minSearchRate {
		t.Fatalf("nothing published: next %v, want the floor %v", got, minSearchRate)
	}
	if got := c.Next(RatePeriod{}); got != minSearchRate {
		t.Fatalf("empty period: next %v, want %v unchanged", got, minSearchRate)
	}
}
