package bench

import "time"

// RateController searches for the highest publish rate a run's consumers keep up with. A
// workload of producerRate 0 means that rate, as it does in the OpenMessaging Benchmark whose
// workload files ours follow: records published faster than they can be consumed only pile up
// in the log, and their end-to-end latency then measures how long the run lasted, not the
// system. Once per period the run reports what happened; the controller answers the rate for
// the next period. It is pure: the run owns the clock and the counters.
//
// The search doubles the rate while the consumers and the producers keep up. Once either
// falls short it remembers the rate that failed and goes back under the last rate that was
// sustained, holding there for a period and while the consumers drain what piled up. It then
// climbs halfway to the failed rate each period and, once close, by the smallest step past
// it. A failed rate sustained after all is forgotten, and the climb from there starts at the
// smallest step and doubles with each period kept up, so the rate settles just under the
// sustainable maximum and still follows it when it rises. The last sustained rate, not what the
// consumers read while overrun, sets the cut: on a shared machine producers that overrun the
// ceiling starve the consumers of CPU, and what they read then is far below what they sustain.
// Likewise when the producers fall short: a pause of a moment in the broker or a client looks
// like a ceiling for one period, so the cut goes no lower than under the rate last sustained,
// and the climb goes back towards the target they missed.
type RateController struct {
	rate float64
	// step is the next climb above any failed rate, a fraction of the rate: 1 (doubling)
	// until the first cut, then from minStep, doubling with each period kept up.
	step float64
	// sustained is the rate published in the last period both sides kept up with, since the
	// last cut; 0 when none.
	sustained float64
	// failed is the rate that last fell short, until a rate as high is sustained; 0 when
	// none. When the consumers fell behind it is the rate published then, when the producers
	// fell short the target they missed.
	failed float64
	// backlog is the last period's Backlog.
	backlog int64
	// settling is set by a cut: the next period still carries what was sent and queued
	// before it, so it holds the rate whatever it sees.
	settling bool
}

// RatePeriod is what one control period saw.
type RatePeriod struct {
	// Length is the period's duration.
	Length time.Duration
	// Published counts the records acknowledged in the period; Consumed the records read.
	Published, Consumed uint64
	// Backlog is how many records acknowledged since the run began were not consumed by the
	// period's end (negative when a record is read before its acknowledgement arrives).
	Backlog int64
}

const (
	// InitialSearchRate is where the search starts, in records per second.
	InitialSearchRate = 10_000
	// minSearchRate is the floor of the search, so a bad period cannot stop the load.
	minSearchRate = 1_000
	// lagAllowance is how far behind, in time at the current rate, the consumers may be and
	// still count as keeping up: a few fetches in flight at the highest rates.
	lagAllowance = 100 * time.Millisecond
	// minBacklogAllowance is the allowance in records at low rates.
	minBacklogAllowance = 1_000
	// shortfall is the fraction of the target the producers must reach to count as keeping up.
	shortfall = 0.95
	// underAchieved is how far under the rate last achieved the target goes after a shortfall.
	underAchieved = 0.95
	// maxDrainShare caps the share of the rate given up to drain a backlog.
	maxDrainShare = 0.25
	// drainPeriods is how many periods a backlog above the allowance is drained over.
	drainPeriods = 3
	// minStep is the smallest climb per period once the search has found a ceiling.
	minStep = 0.02
)

// NewRateController returns a controller whose first target is InitialSearchRate.
func NewRateController() *RateController {
	return &RateController{rate: InitialSearchRate, step: 1}
}

// Rate returns the current target in records per second.
func (c *RateController) Rate() float64 { return c.rate }

// Next takes one period's figures and returns the target for the next period.
func (c *RateController) Next(p RatePeriod) float64 {
	secs := p.Length.Seconds()
	if secs <= 0 {
		return c.rate
	}
	allowance := max(minBacklogAllowance, c.rate*lagAllowance.Seconds())
	consumed, published := float64(p.Consumed)/secs, float64(p.Published)/secs
	behind, growing := float64(p.Backlog) > allowance, p.Backlog > c.backlog
	short := published < shortfall*c.rate
	c.backlog = p.Backlog
	settling := c.settling
	c.settling = false
	switch {
	case settling, behind && !growing:
		// Just cut, or draining since: hold the rate rather than cut again. A period that
		// kept up all the same counts as sustained, so that a stall right after a cut does
		// not take the rate down to what the stalled period published.
		if !behind && !short {
			c.sustained = published
		}
	case behind:
		// Go under the rate last sustained, or under what the consumers read if nothing was
		// sustained since the last cut, and further under by what drains the excess over a
		// few periods.
		base := max(c.sustained, consumed)
		drain := min(maxDrainShare*base, (float64(p.Backlog)-allowance)/(drainPeriods*secs))
		c.cut(published, underAchieved*base-drain)
	case short:
		// The producers (or the broker behind them) could not reach the target. A stall of a
		// moment looks the same as a ceiling, so the cut goes under the rate last sustained
		// if that is higher than what they published, and what failed is the target, not the
		// stalled period's rate: the climb goes back towards it.
		c.cut(c.rate, underAchieved*max(c.sustained, published))
	default:
		c.sustained = published
		if c.failed > 0 && published >= c.failed {
			// Sustained what failed before: that failure was passing.
			c.failed = 0
		}
		if c.failed > 0 {
			// Halve the distance to the rate that failed, and once close, try just past it.
			c.rate = max((c.rate+c.failed)/2, c.rate*(1+minStep))
			break
		}
		c.rate *= 1 + c.step
		c.step = min(1, 2*c.step)
	}
	c.rate = max(c.rate, minSearchRate)
	return c.rate
}

// cut records a period in which the rate failed fell short, and sets the rate to target.
func (c *RateController) cut(failed, target float64) {
	c.failed, c.sustained = failed, 0
	c.rate = target
	c.step = minStep
	c.settling = true
}
