package testutil

import (
	"errors"
	"testing"
	"time"
)

// Poll intervals of WaitFor: the first poll comes after minPoll, each later one after twice the
// previous wait, up to maxPoll, so quick conditions are seen at once and slow ones (a broker
// process starting) are not polled in a busy loop.
const (
	minPoll = time.Millisecond
	maxPoll = 50 * time.Millisecond
)

// WaitFor is the bounded wait of every test: it calls cond until it returns nil and fails tb
// with cond's last error once timeout has passed. Tests wait with it instead of sleeping for a
// guessed time, so they are as fast as the system allows and fail with a reason when it does
// not get there.
func WaitFor(tb testing.TB, timeout time.Duration, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	wait := minPoll
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not met within %v: %v", timeout, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, maxPoll)
	}
}

// Holds makes a WaitFor condition of a boolean one: its error, while cond is false, says that
// what is still awaited.
func Holds(what string, cond func() bool) func() error {
	return func() error {
		if !cond() {
			return errors.New("waiting for " + what)
		}
		return nil
	}
}
