package testutil

import (
	"syscall"
	"testing"
	"time"
)

// ProcessCPU is the user plus system CPU time this process has used so far. Benchmarks report
// CPU per operation from it: on a machine shared with other work it is steadier than wall time.
func ProcessCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
