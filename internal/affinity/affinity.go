// Package affinity pins OS threads to CPUs, so an event loop or a handler
// worker stays on one core with its caches.
package affinity

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// PinThread restricts the calling OS thread to the i-th (modulo their number) of the CPUs it
// may run on now, which for a thread not pinned yet are the process's (taskset, a cgroup's
// cpuset): loop i of a broker started on CPUs 4-7 goes to CPU 4+i%4, never outside them. The
// caller must hold runtime.LockOSThread, or the goroutine may move to another, unpinned thread.
func PinThread(i int) error {
	if i < 0 {
		return fmt.Errorf("pin thread: index %d; want >= 0", i)
	}
	cpus, err := ThreadCPUs()
	if err != nil {
		return fmt.Errorf("pin thread %d: %w", i, err)
	}
	if len(cpus) == 0 {
		return fmt.Errorf("pin thread %d: the thread may run on no CPU", i)
	}
	cpu := cpus[i%len(cpus)]
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin thread %d to cpu %d: %w", i, cpu, err)
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
