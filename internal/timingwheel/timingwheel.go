// Package timingwheel implements a hashed timing wheel for many short-lived
// deadlines: the session, rebalance and join-delay timeouts of a group
// coordinator shard, and the max-wait deadlines of the broker's parked
// fetches (its purgatory).
//
// The wheel has no clock and no goroutine: its owner calls Advance with the
// current time, and due callbacks run inside Advance on the owner's
// goroutine. That keeps the wheel free of locks (it is not safe for
// concurrent use) and lets tests drive it with a fake clock.
//
// Scheduling and stopping are O(1). Advance visits one slot per elapsed tick,
// and jumps over idle stretches longer than a rotation. Timers due in the
// same tick fire in the order they were scheduled.
package timingwheel

import (
	"fmt"
	"time"
)

// Timer is a scheduled callback. It is returned by Wheel.Schedule and
// Wheel.AfterFunc and can be stopped until it fires.
type Timer struct {
	w        *Wheel
	deadline int64 // unix nanoseconds
	// tick is the wheel tick whose slot holds the timer.
	// Invariant: tick >= the wheel's processed tick while the timer is linked.
	tick       int64
	fn         func()
	prev, next *Timer
	// linked is true while the timer is in a slot's list; firing is true
	// between being taken off the list for firing and its callback running.
	linked, firing bool
}

// Stop prevents the timer from firing. It reports whether the call stopped
// the timer, false if it had already fired or been stopped.
func (t *Timer) Stop() bool {
	switch {
	case t.linked:
		t.w.unlink(t)
		return true
	case t.firing:
		t.firing = false
		return true
	}
	return false
}

type slot struct{ head, tail *Timer }

// Wheel is a hashed timing wheel. The zero value is not usable; call New.
type Wheel struct {
	tick  int64 // nanoseconds per tick
	slots []slot
	// cur is the last tick processed by Advance; now the time it was given.
	cur, now int64
	count    int
	scratch  []*Timer
}

// New returns a wheel with the given tick length and slot count whose
// current time is now. Deadlines are honoured to the nanosecond by Advance;
// the tick only sets how finely they are bucketed.
func New(tick time.Duration, slots int, now time.Time) (*Wheel, error) {
	if tick <= 0 {
		return nil, fmt.Errorf("timing wheel tick %v: must be positive", tick)
	}
	if slots <= 0 {
		return nil, fmt.Errorf("timing wheel slots %d: must be positive", slots)
	}
	n := now.UnixNano()
	return &Wheel{tick: int64(tick), slots: make([]slot, slots), cur: n / int64(tick), now: n}, nil
}

// Now returns the time of the last Advance (or New).
func (w *Wheel) Now() time.Time { return time.Unix(0, w.now) }

// Len returns the number of pending timers.
func (w *Wheel) Len() int { return w.count }

// AfterFunc schedules fn to run d after the wheel's current time.
func (w *Wheel) AfterFunc(d time.Duration, fn func()) *Timer {
	return w.schedule(w.now+int64(d), fn)
}

// Schedule schedules fn to run at the first Advance whose time is at or after
// deadline. A deadline in the past fires at the next Advance.
func (w *Wheel) Schedule(deadline time.Time, fn func()) *Timer {
	return w.schedule(deadline.UnixNano(), fn)
}

func (w *Wheel) schedule(deadline int64, fn func()) *Timer {
	t := &Timer{w: w, deadline: deadline, fn: fn}
	t.tick = max(deadline/w.tick, w.cur)
	s := &w.slots[t.tick%int64(len(w.slots))]
	t.prev = s.tail
	if s.tail != nil {
		s.tail.next = t
	} else {
		s.head = t
	}
	s.tail = t
	t.linked = true
	w.count++
	return t
}

func (w *Wheel) unlink(t *Timer) {
	s := &w.slots[t.tick%int64(len(w.slots))]
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		s.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		s.tail = t.prev
	}
	t.prev, t.next, t.linked = nil, nil, false
	w.count--
}

// Advance moves the wheel to now and runs, in deadline-tick order, every
// timer whose deadline is not after now, including timers that callbacks
// schedule with deadlines not after now. Time never moves backwards: an
// earlier now is treated as the wheel's current time. Callbacks must not
// call Advance. It returns the number of callbacks run.
func (w *Wheel) Advance(now time.Time) int {
	w.now = max(w.now, now.UnixNano())
	target := w.now / w.tick
	fired := 0
	for {
		fired += w.fireSlot(w.cur)
		if w.cur >= target {
			return fired
		}
		switch {
		case w.count == 0:
			w.cur = target
		case target-w.cur > int64(len(w.slots)):
			w.cur = min(max(w.minTick(), w.cur+1), target)
		default:
			w.cur++
		}
	}
}

// fireSlot runs the due timers of tick's slot until none is left due.
func (w *Wheel) fireSlot(tick int64) int {
	s := &w.slots[tick%int64(len(w.slots))]
	fired := 0
	for {
		due := w.scratch[:0]
		for t := s.head; t != nil; t = t.next {
			if t.deadline <= w.now {
				due = append(due, t)
			}
		}
		if len(due) == 0 {
			w.scratch = due
			return fired
		}
		for _, t := range due {
			w.unlink(t)
			t.firing = true
		}
		for i, t := range due {
			due[i] = nil
			if t.firing { // not stopped by an earlier callback
				t.firing = false
				fired++
				t.fn()
			}
		}
		w.scratch = due[:0]
	}
}

// minTick returns the smallest tick of any pending timer.
func (w *Wheel) minTick() int64 {
	m := int64(-1)
	for i := range w.slots {
		for t := w.slots[i].head; t != nil; t = t.next {
			if m < 0 || t.tick < m {
				m = t.tick
			}
		}
	}
	return m
}

// NextDeadline returns a time at which the owner should call Advance next:
// the earliest pending deadline if one falls within the next rotation,
// otherwise the end of that rotation. It reports false when no timer is
// pending. Its cost is at most one pass over the slots, so owners call it
// after Advance rather than after every Schedule.
func (w *Wheel) NextDeadline() (time.Time, bool) {
	if w.count == 0 {
		return time.Time{}, false
	}
	n := int64(len(w.slots))
	for i := int64(0); i < n; i++ {
		tick := w.cur + i
		best := int64(-1)
		for t := w.slots[tick%n].head; t != nil; t = t.next {
			if t.tick <= tick && (best < 0 || t.deadline < best) {
				best = t.deadline
			}
		}
		if best >= 0 {
			return time.Unix(0, best), true
		}
	}
	return time.Unix(0, (w.cur+n)*w.tick), true
}
