package bench

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Clock is the time source of a Pacer. Runs use a TimerfdClock (on Linux); tests use a fake
// that advances instantly, so a schedule can be checked exactly.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// SleepUntil blocks until t or until ctx is done, returning ctx's error then.
	SleepUntil(ctx context.Context, t time.Time) error
}

// Pacer hands out intended send times for an open-loop, fixed-rate schedule:
// message i is due at start + i/rate, whatever happened to earlier messages.
// When the sender falls behind (a slow broker, a blocked client buffer),
// Next returns the overdue times at once instead of shifting the schedule, so
// latency measured from the intended time includes the stall (no coordinated
// omission). A rate of 0 means unpaced: each message is due when asked for.
// SetRate changes the rate mid-schedule, for a run that searches for the
// highest rate its consumers sustain.
type Pacer struct {
	clock Clock
	// start is when message base is due; the schedule counts from there.
	start time.Time
	base  uint64
	// interval is 1/rate in nanoseconds, as a float so that rates that do not
	// divide a second evenly do not drift; 0 when unpaced.
	interval float64
	// next is the index of the next message to hand out.
	next uint64
	// seen is a time the clock has already passed: a message due by then is overdue without
	// asking the clock again, which at hundreds of thousands of messages a second is a
	// measurable share of the sender's CPU.
	seen time.Time
	// minSleep is the least time between two wake-ups: a message due sooner after woke, the
	// last one, leaves at woke+minSleep with the others due by then.
	minSleep time.Duration
	woke     time.Time
}

// NewPacer returns a pacer whose first message is due at start, then one
// every 1/rate seconds. rate 0 is unpaced; a negative or NaN rate is an error.
// It wakes at most once per minSleep: at a high rate a wake-up for every message
// would cost the sender more CPU than sending it, so messages due within minSleep
// of a wake-up leave together at the next, none before its time.
func NewPacer(clock Clock, start time.Time, rate float64, minSleep time.Duration) (*Pacer, error) {
	if math.IsNaN(rate) || math.IsInf(rate, 0) || rate < 0 {
		return nil, fmt.Errorf("new pacer: rate=%v; want >= 0", rate)
	}
	p := &Pacer{clock: clock, start: start, minSleep: minSleep}
	if rate > 0 {
		p.interval = 1e9 / rate
	}
	return p, nil
}

// SetRate changes the rate from the next message on: that message stays due
// when it was due at the old rate (now, if the pacer was unpaced), the ones
// after it 1/rate apart. A sender behind schedule stays behind by as much, so
// a lower rate does not forgive a stall. rate 0 makes the pacer unpaced.
func (p *Pacer) SetRate(rate float64) error {
	if math.IsNaN(rate) || math.IsInf(rate, 0) || rate < 0 {
		return fmt.Errorf("pacer: set rate %v; want >= 0", rate)
	}
	at := p.clock.Now()
	if p.interval > 0 {
		at = p.Intended(p.next)
	}
	p.start, p.base, p.interval = at, p.next, 0
	if rate > 0 {
		p.interval = 1e9 / rate
	}
	return nil
}

// Intended returns when message i (not before the last SetRate) is due. For an
// unpaced pacer it is the start of its schedule.
func (p *Pacer) Intended(i uint64) time.Time {
	return p.start.Add(time.Duration(float64(i-p.base) * p.interval))
}

// Due returns how many messages are due strictly before t (not before the last
// SetRate): the number a sender that kept up would have sent by t.
func (p *Pacer) Due(t time.Time) uint64 {
	d := t.Sub(p.start)
	if d <= 0 {
		return p.base
	}
	if p.interval == 0 {
		return p.next
	}
	return p.base + uint64(math.Ceil(float64(d)/p.interval))
}

// Sent returns how many intended times Next has handed out.
func (p *Pacer) Sent() uint64 { return p.next }

// Next waits until the next message is due, or until the pacer's next wake-up
// (minSleep after its last) if that is later, and returns its intended send
// time. An overdue message returns at once with its original time. An
// unpaced pacer returns the clock's current time. It fails only when ctx is
// done first.
func (p *Pacer) Next(ctx context.Context) (time.Time, error) {
	if p.interval == 0 {
		if err := ctx.Err(); err != nil {
			return time.Time{}, err
		}
		p.next++
		return p.clock.Now(), nil
	}
	t := p.Intended(p.next)
	if t.After(p.seen) {
		p.seen = p.clock.Now()
	}
	if t.After(p.seen) {
		wake := t
		if q := p.woke.Add(p.minSleep); q.After(wake) {
			wake = q
		}
		if err := p.clock.SleepUntil(ctx, wake); err != nil {
			return time.Time{}, fmt.Errorf("pacer: wait for message %d due %v: %w", p.next, t, err)
		}
		p.seen, p.woke = wake, wake
	} else if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	p.next++
	return t, nil
}
