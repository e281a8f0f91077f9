package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// TimerfdClock is the system clock with sleeps on a timerfd in Go's poller. A Go timer
// can wake up to a millisecond late when the process is idle (the runtime's poller
// waits in whole milliseconds), which sent small-messages' records 1.1 ms after their
// intended time at p99, and every latency counts from that time; a timerfd wakes the
// poller at its time. One clock serves one goroutine at a time.
type TimerfdClock struct {
	f *os.File
	// fd is f's descriptor, kept because f.Fd() would put it in blocking mode, out of the
	// poller whose deadlines end a cancelled sleep.
	fd  int
	buf [8]byte
}

// newPacerClock returns the clock a producer's pacer sleeps on: on Linux a TimerfdClock.
func newPacerClock() (pacerClock, error) { return NewTimerfdClock() }

// NewTimerfdClock opens a clock's timerfd; Close releases it.
func NewTimerfdClock() (*TimerfdClock, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd clock: %w", err)
	}
	return &TimerfdClock{f: os.NewFile(uintptr(fd), "timerfd"), fd: fd}, nil
}

// Close releases the clock's timerfd.
func (c *TimerfdClock) Close() error { return c.f.Close() }

// Now returns time.Now().
func (c *TimerfdClock) Now() time.Time { return time.Now() }

// SleepUntil sleeps until t, or returns early with ctx's error.
func (c *TimerfdClock) SleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(c.fd, 0, &spec, nil); err != nil {
		return fmt.Errorf("timerfd clock: arm for %v: %w", d, err)
	}
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.f.SetReadDeadline(time.Now())
		close(interrupted)
	})
	_, err := c.f.Read(c.buf[:])
	if !stop() {
		// ctx ended, perhaps the read: the next sleep waits without a deadline.
		<-interrupted
		_ = c.f.SetReadDeadline(time.Time{})
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("timerfd clock: wait for %v: %w", t, err)
	}
	return nil
}
