//go:build !linux

package bench

// newPacerClock returns the clock a producer's pacer sleeps on: here a timerClock.
func newPacerClock() (pacerClock, error) { return timerClock{}, nil }
