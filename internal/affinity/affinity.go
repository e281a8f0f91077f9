// Package affinity pins OS threads to CPUs, so an event loop or a handler
// worker stays on one core with its caches.
package affinity

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// PinThread restricts the calling OS thread to CPU cpu % runtime.NumCPU().
// The caller must hold runtime.LockOSThread, or the goroutine may move to
// another, unpinned thread.
func PinThread(cpu int) error {
	if cpu < 0 {
		return fmt.Errorf("pin thread: cpu=%d; want >= 0", cpu)
	}
	cpu %= runtime.NumCPU()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin thread to cpu %d: %w", cpu, err)
	}
	return nil
}

// ThreadCPUs returns the CPUs the calling OS thread may run on.
func ThreadCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("get thread affinity: %w", err)
	}
	var cpus []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}
