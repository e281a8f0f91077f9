// Package eventloop runs the work of one goroutine: functions queued from any goroutine on a
// lock-free MPSC queue, and timers on a timing wheel, driven by a Clock that tests replace. The
// coordinators' shards are built on it, so the state a loop owns needs no locks.
package eventloop

import (
	"fmt"
	"time"

	"ringbroker/internal/mpsc"
	"ringbroker/internal/timingwheel"
)

// Timing wheel geometry: 1 ms ticks, 4096 slots (a rotation of about 4 s).
const (
	wheelTick  = time.Millisecond
	wheelSlots = 4096
)

// Clock is a loop's time source; tests substitute a manual clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls fn once, on any goroutine, after d has elapsed, unless stopped first.
	// Loops use it only to wake themselves for deadlines.
	AfterFunc(d time.Duration, fn func()) (stop func() bool)
}

// SystemClock is the Clock of the time package.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc runs fn after d with time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, fn func()) func() bool {
	return time.AfterFunc(d, fn).Stop
}

// Loop is one event loop. Push and Lend are safe from any goroutine; every other method must be
// called from a function the loop runs (on the goroutine in Run, or one that Lend runs).
type Loop struct {
	clock Clock
	q     *mpsc.Queue[func()]
	wheel *timingwheel.Wheel
	// wakeAt is when the armed clock wake-up fires (zero if none); wakeStop cancels it.
	wakeAt   time.Time
	wakeStop func() bool
	stopped  bool
}

// New returns a loop on clock; Run drives it.
func New(clock Clock) (*Loop, error) {
	w, err := timingwheel.New(wheelTick, wheelSlots, clock.Now())
	if err != nil {
		return nil, fmt.Errorf("event loop: %w", err)
	}
	return &Loop{clock: clock, q: mpsc.New[func()](), wheel: w}, nil
}

// Push queues fn to run on the loop. Safe from any goroutine.
func (l *Loop) Push(fn func()) {
	l.q.Push(&mpsc.Node[func()]{Value: fn})
}

// Run runs queued functions and due timers until one of them calls Stop.
func (l *Loop) Run() {
	for {
		for n := l.q.Pop(); n != nil; n = l.q.Pop() {
			n.Value()
			if l.stopped {
				return
			}
		}
		l.RunDue()
		l.q.Wait(nil)
	}
}

// Lend runs fn on the calling goroutine as one of the loop's functions, when the loop is idle:
// its goroutine waits for work and nothing is queued. It reports whether it did; if not, the
// caller Pushes fn instead. A caller that would otherwise wake the loop and wait for its answer
// saves the wake-up, which on a busy machine can take longer than the work. Functions queued
// while fn runs run on the loop's goroutine afterwards. fn must not call Stop.
func (l *Loop) Lend(fn func()) bool {
	if !l.q.Lend() {
		return false
	}
	fn()
	l.q.Return()
	return true
}

// Stop ends Run once the function calling it returns, and cancels the clock wake-up.
func (l *Loop) Stop() {
	if l.wakeStop != nil {
		l.wakeStop()
	}
	l.stopped = true
}

// Now is the clock's current time.
func (l *Loop) Now() time.Time { return l.clock.Now() }

// Schedule runs fn on the loop after d; the returned timer cancels it.
func (l *Loop) Schedule(d time.Duration, fn func()) *timingwheel.Timer {
	deadline := l.Now().Add(d)
	t := l.wheel.Schedule(deadline, fn)
	if l.wakeAt.IsZero() || deadline.Before(l.wakeAt) {
		l.arm(deadline)
	}
	return t
}

// RunDue fires the timers the clock has passed and re-arms the clock wake-up when the armed one
// has passed. Run calls it after each batch of queued functions; a queued function may call it
// to have due timers fire before it goes on (tests on a manual clock do).
func (l *Loop) RunDue() {
	now := l.Now()
	l.wheel.Advance(now)
	if l.wakeAt.IsZero() || l.wakeAt.After(now) {
		return
	}
	l.wakeAt = time.Time{}
	if next, ok := l.wheel.NextDeadline(); ok {
		l.arm(next)
	}
}

// arm sets the clock wake-up to at, replacing an earlier one.
func (l *Loop) arm(at time.Time) {
	if l.wakeStop != nil {
		l.wakeStop()
	}
	l.wakeAt = at
	l.wakeStop = l.clock.AfterFunc(at.Sub(l.Now()), func() { l.Push(func() {}) })
}
