package eventloop

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestLoopRunsPushedAndScheduled checks that functions pushed from other goroutines run on the
// loop in push order, that timers fire once the clock passes them and not before, that a stopped
// timer does not fire, and that Stop ends Run.
func TestLoopRunsPushedAndScheduled(t *testing.T) {
	clock := NewManualClock(time.Unix(1000, 0))
	l, stop := startLoop(t, clock)
	var mu sync.Mutex
	var got []string
	note := func(s string) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	}
	sync := func() {
		ch := make(chan struct{})
		l.Push(func() { close(ch) })
		<-ch
	}
	fired := make(chan struct{})
	l.Push(func() { note("a") })
	l.Push(func() {
		note("b")
		l.Schedule(2*time.Second, func() {
			note("timer 2s")
			close(fired)
		})
		cancelled := l.Schedule(time.Second, func() { note("cancelled") })
		cancelled.Stop()
	})
	sync()
	clock.Advance(time.Second)
	sync()
	mu.Lock()
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after 1 s: %v; want a b", got)
	}
	mu.Unlock()
	clock.Advance(time.Second)
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the 2 s timer did not fire once the clock passed it")
	}
	stop()
	if !slices.Equal(got, []string{"a", "b", "timer 2s"}) {
		t.Fatalf("after 2 s: %v; want a b, timer 2s", got)
	}
}

// TestLend checks that Lend runs a function on the caller while the loop waits idle, refuses
// while the loop is busy, and that a function pushed during a lend runs on the loop afterwards.
func TestLend(t *testing.T) {
	l, stop := startLoop(t, SystemClock{})
	ran := false
	for !l.Lend(func() { ran = true }) {
		time.Sleep(time.Millisecond) // the loop's goroutine has not parked yet
	}
	if !ran {
		t.Fatal("Lend reported true without running the function")
	}

	busy, release := make(chan struct{}), make(chan struct{})
	l.Push(func() {
		close(busy)
		<-release
	})
	<-busy
	if l.Lend(func() { t.Error("a lent function ran while the loop was busy") }) {
		t.Fatal("Lend succeeded while a pushed function ran")
	}
	close(release)

	after := make(chan struct{})
	for !l.Lend(func() { l.Push(func() { close(after) }) }) {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-after:
	case <-time.After(10 * time.Second):
		t.Fatal("a function pushed during a lend did not run")
	}
	stop()
}

// startLoop starts a loop on clock running on a goroutine of its own; stop pushes Stop and
// fails the test unless Run returns.
func startLoop(t *testing.T, clock Clock) (l *Loop, stop func()) {
	t.Helper()
	l, err := New(clock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		l.Run()
		close(done)
	}()
	return l, func() {
		t.Helper()
		l.Push(l.Stop)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after Stop")
		}
	}
}
