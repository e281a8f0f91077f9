package bench

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// system is a toy broker and clients for the controller: producers that publish at most
// produceCap records/s and consumers that read at most consumeCap, with the backlog between.
// On shared cores the consumers read less the more the producers publish: shared records/s of
// their capacity per record/s published.
type system struct {
	produceCap, consumeCap float64
	shared                 float64
	// noise varies the consumers' capacity from period to period by up to this fraction
	// either way (GC, scheduling), drawn from rng.
	noise float64
	rng   *rand.Rand
	// stallEvery, when set, makes every stallEvery-th period one in which the producers reach
	// only stallShare of their capacity (a pause in the broker or the client).
	stallEvery int
	stallShare float64
	periods    int
	backlog    float64
}

// capacity is the highest rate both sides sustain.
func (s *system) capacity() float64 {
	return min(s.produceCap, s.consumeCap/(1+s.shared))
}

// period runs one second at rate and returns what the controller would see.
func (s *system) period(rate float64) RatePeriod {
	s.periods++
	produceCap := s.produceCap
	if s.stallEvery > 0 && s.periods%s.stallEvery == 0 {
		produceCap *= s.stallShare
	}
	published := min(rate, produceCap)
	consumeCap := s.consumeCap
	if s.noise > 0 {
		consumeCap *= 1 + s.noise*(2*s.rng.Float64()-1)
	}
	consumed := max(0, min(s.backlog+published, consumeCap-s.shared*published))
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
		shared, noise          float64
		stallEvery             int
		stallShare             float64
		// least is the lowest mean published, as a share of the capacity, that passes.
		least float64
	}{
		{"consumer-bound", 900_000, 350_000, 0, 0, 0, 0, 0.93},
		{"producer-bound", 200_000, 800_000, 0, 0, 0, 0, 0.93},
		{"slow system", 4_000, 3_000, 0, 0, 0, 0, 0.93},
		{"equal", 500_000, 500_000, 0, 0, 0, 0, 0.93},
		// ringbroker's run of 2026-12-05: the consumer read 672k rec/s while producers
		// published 325k and 360k while they published 700k.
		{"shared cores", 700_000, 942_000, 0.83, 0, 0, 0, 0.93},
		{"shared cores, noisy", 700_000, 942_000, 0.83, 0.1, 0, 0, 0.93},
		// Producers that stall for a period now and then (a pause in the broker or a client):
		// every ninth period here they reach 40 % of their capacity, so at best the mean is
		// 93.3 % of it; the search must come back after each stall rather than climb again
		// from its low by the smallest steps.
		{"producer stalls", 300_000, 900_000, 0, 0, 9, 0.4, 0.88},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := &system{produceCap: tt.produceCap, consumeCap: tt.consumeCap, shared: tt.shared,
				noise: tt.noise, rng: rand.New(rand.NewPCG(1, 2)), stallEvery: tt.stallEvery, stallShare: tt.stallShare}
			c := NewRateController()
			if c.Rate() != InitialSearchRate {
				t.Fatalf("first target %v, want %v", c.Rate(), InitialSearchRate)
			}
			capacity := sys.capacity()
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
			if mean < tt.least*capacity || mean > 1.01*capacity {
				t.Errorf("mean published %.0f rec/s after warmup, want within %.0f-101%% of the capacity %.0f", mean, 100*tt.least, capacity)
			}
			if worstBacklog > 0.6 {
				t.Errorf("backlog reached %.2f s of the capacity after warmup, want under 0.6 s", worstBacklog)
			}
		})
	}
}

// TestRateControllerRules checks each rule on one period.
func TestRateControllerRules(t *testing.T) {
	sec := time.Second
	c := NewRateController()
	next := func(what string, p RatePeriod, want float64) {
		t.Helper()
		if got := c.Next(p); math.Abs(got-want) > 1e-6 {
			t.Fatalf("%s: next %v, want %v", what, got, want)
		}
	}
	keptUp := func(rate float64) RatePeriod {
		return RatePeriod{Length: sec, Published: uint64(rate), Consumed: uint64(rate)}
	}
	// Keeping up: doubles while it has found no ceiling.
	next("keeping up from 10000", RatePeriod{Length: sec, Published: 10_000, Consumed: 10_000, Backlog: 500}, 20_000)
	// Consumers behind: 0.95 of what they read (more than the 10000 last sustained), less a
	// third of the excess backlog.
	next("consumers behind", RatePeriod{Length: sec, Published: 20_000, Consumed: 16_000, Backlog: 5_000},
		0.95*16_000-(5_000-2_000)/3.0)
	// The period after a cut holds, whatever it saw.
	next("after a cut", RatePeriod{Length: sec, Published: 20_000, Consumed: 10_000, Backlog: 15_000}, 14_200)
	// Still behind but the backlog shrinking: the rate holds.
	next("draining", RatePeriod{Length: sec, Published: 14_200, Consumed: 16_000, Backlog: 4_000}, 14_200)
	// The climb goes halfway to the 20000 that failed, then by the smallest step past it.
	next("climb towards the failed rate", keptUp(14_200), 17_100)
	next("halfway again", keptUp(17_100), 18_550)
	next("halfway again", keptUp(18_550), 19_275)
	next("close: the smallest step", keptUp(19_275), 19_275*(1+minStep))
	probe := 19_275 * (1 + minStep) * (1 + minStep)
	next("just past the failed rate", keptUp(19_660.5), probe)
	// Sustaining the failed rate forgets it: the climb starts at the smallest step and doubles.
	next("sustained past the failed rate", keptUp(probe), probe*(1+minStep))
	next("and again", keptUp(probe*(1+minStep)), probe*(1+minStep)*(1+2*minStep))
	// Consumers overrun and starved: the cut goes under the rate last sustained (20454), not
	// under what they read.
	next("consumers starved", RatePeriod{Length: sec, Published: 30_000, Consumed: 5_000, Backlog: 25_000},
		0.95*20_454-0.25*20_454)
	next("after a cut", keptUp(10_000), 0.7*20_454)
	// Producers short of the target (14318) with nothing sustained since the last cut: 0.95
	// of what they published, then a period held.
	next("producers short", RatePeriod{Length: sec, Published: 10_000, Consumed: 10_000}, 9_500)
	next("after a cut, held", keptUp(9_500), 9_500)
	// The held period kept up, so it counts as sustained: the climb goes halfway to the
	// target that failed, not to what the short period published.
	next("climb towards the missed target", keptUp(9_500), (9_500+0.7*20_454)/2)
	// A stall after a sustained period: under the rate last sustained (9500), not under the
	// stall's 2000.
	next("producers stalled", RatePeriod{Length: sec, Published: 2_000, Consumed: 2_000}, 0.95*9_500)
	next("after a cut, held", RatePeriod{Length: sec, Published: 10, Consumed: 10}, 0.95*9_500)
	// Never under the floor, and a period of no length changes nothing.
	next("nothing published", RatePeriod{Length: sec, Published: 10, Consumed: 10}, minSearchRate)
	next("empty period", RatePeriod{}, minSearchRate)
}
