package affinity

import (
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPinThread(t *testing.T) {
	all, err := ThreadCPUs()
	if err != nil {
		t.Fatalf("ThreadCPUs: %v", err)
	}
	// All but the first CPU the test may use (that one, on a single-CPU machine), standing
	// for a broker started under taskset or in a cpuset: pinning must stay among them.
	tail := all[min(1, len(all)-1):]
	tests := []struct {
		name    string
		allowed []int // the thread's CPUs before PinThread
		i       int
		wantErr bool
	}{
		{"first", all, 0, false},
		{"wraps", all, len(all), false},
		{"within a restricted set", tail, 0, false},
		{"wraps within a restricted set", tail, len(tail) + 1, false},
		{"negative", all, -1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				// The thread is left pinned and exits with the goroutine: no Unlock.
				runtime.LockOSThread()
				var set unix.CPUSet
				for _, c := range tt.allowed {
					set.Set(c)
				}
				if err := unix.SchedSetaffinity(0, &set); err != nil {
					t.Errorf("restrict the thread to %v: %v", tt.allowed, err)
					return
				}
				err := PinThread(tt.i)
				if (err != nil) != tt.wantErr {
					t.Errorf("PinThread(%d) err=%v; wantErr %v", tt.i, err, tt.wantErr)
					return
				}
				if tt.wantErr {
					return
				}
				cpus, err := ThreadCPUs()
				if err != nil {
					t.Errorf("ThreadCPUs: %v", err)
					return
				}
				if want := []int{tt.allowed[tt.i%len(tt.allowed)]}; !slices.Equal(cpus, want) {
					t.Errorf("ThreadCPUs()=%v after PinThread(%d) on %v; want %v", cpus, tt.i, tt.allowed, want)
				}
			}()
			<-done
		})
	}
}
