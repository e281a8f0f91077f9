package bench

import (
	"context"
	"time"
)

// timerClock is the system clock with sleeps on Go timers, for systems without a timerfd
// (pacerclock_other.go): on a mostly idle process a sleep can end up to a millisecond late,
// which a record's latency then counts.
type timerClock struct{}

// Now returns time.Now().
func (timerClock) Now() time.Time { return time.Now() }

// SleepUntil sleeps on a timer until t, or returns early with ctx's error.
func (timerClock) SleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// Close does nothing: a timerClock holds nothing to release.
func (timerClock) Close() error { return nil }
