package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalTB records the failure WaitFor reports and ends the goroutine as t.Fatalf does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestWaitForReturnsOnceMet(t *testing.T) {
	calls := 0
	WaitFor(t, 10*time.Second, Holds("the third call", func() bool { calls++; return calls == 3 }))
	if calls != 3 {
		t.Fatalf("cond called %d times; want 3", calls)
	}
}

func TestWaitForFailsWithLastError(t *testing.T) {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		WaitFor(f, 20*time.Millisecond, Holds("a condition that never holds", func() bool { return false }))
	}()
	<-done
	if !strings.Contains(f.msg, "not met within 20ms") || !strings.Contains(f.msg, "a condition that never holds") {
		t.Fatalf("failure %q; want the timeout and what was awaited", f.msg)
	}
}
