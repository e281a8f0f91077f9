package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestTimerClockSleepUntil: the Go-timer clock, which pacers sleep on where there is no
// timerfd, never wakes early and ends a sleep when its context is cancelled.
func TestTimerClockSleepUntil(t *testing.T) {
	checkClockSleepUntil(t, timerClock{})
}

// checkClockSleepUntil checks that clk's sleeps do not end before their time, and that a
// cancelled context ends one at once, after which the clock sleeps again.
func checkClockSleepUntil(t *testing.T, clk Clock) {
	t.Helper()
	for _, d := range []time.Duration{0, 50 * time.Microsecond, 2 * time.Millisecond} {
		target := clk.Now().Add(d)
		if err := clk.SleepUntil(context.Background(), target); err != nil {
			t.Fatal(err)
		}
		if now := clk.Now(); now.Before(target) {
			t.Fatalf("woke at %v, before target %v", now, target)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if err := clk.SleepUntil(ctx, clk.Now().Add(time.Hour)); !errors.Is(err, context.Canceled) {
		t.Fatalf("SleepUntil cancelled during an hour's sleep = %v", err)
	}
	target := clk.Now().Add(time.Millisecond)
	if err := clk.SleepUntil(context.Background(), target); err != nil || clk.Now().Before(target) {
		t.Fatalf("sleep after a cancelled one: %v, woke %v before its time", err, target.Sub(clk.Now()))
	}
}
