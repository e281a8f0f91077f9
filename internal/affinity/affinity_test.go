package affinity

import (
	"runtime"
	"slices"
	"testing"
)

func TestPinThread(t *testing.T) {
	tests := []struct {
		name    string
		cpu     int
		wantErr bool
	}{
		{"first", 0, false},
		{"wraps", runtime.NumCPU(), false},
		{"negative", -1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				// The thread is left pinned and exits with the goroutine: no Unlock.
				runtime.LockOSThread()
				err := PinThread(tt.cpu)
				if (err != nil) != tt.wantErr {
					t.Errorf("PinThread(%d) err=%v; wantErr %v", tt.cpu, err, tt.wantErr)
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
				if want := []int{tt.cpu % runtime.NumCPU()}; !slices.Equal(cpus, want) {
					t.Errorf("ThreadCPUs()=%v; want %v", cpus, want)
				}
			}()
			<-done
		})
	}
}
