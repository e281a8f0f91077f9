package ring

import (
	"os"
	"strconv"
	"testing"
	"unsafe"

	"github.com/pawelgaczynski/giouring"
)

// TestRingFdLayout checks that ringLayout still mirrors giouring.Ring: same size, and the
// descriptor it reads is an io_uring instance.
func TestRingFdLayout(t *testing.T) {
	if a, b := unsafe.Sizeof(ringLayout{}), unsafe.Sizeof(giouring.Ring{}); a != b {
		t.Fatalf("ringLayout is %d bytes, giouring.Ring %d: the pinned giouring changed", a, b)
	}
	if err := checkKernelForTest(); err != nil {
		t.Skip(err)
	}
	ring := giouring.NewRing()
	if err := ring.QueueInit(8, 0); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	defer ring.QueueExit()
	fd := ringFd(ring)
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || link != "anon_inode:[io_uring]" {
		t.Fatalf("ringFd = %d, which is %q (%v); want an io_uring descriptor", fd, link, err)
	}
}

func checkKernelForTest() error {
	if disabledByEnv() {
		return errUnavailable
	}
	_, err := checkKernel()
	return err
}

func TestParseWaitMode(t *testing.T) {
	for in, want := range map[string]WaitMode{"": WaitHandoff, "handoff": WaitHandoff, " Syscall ": WaitSyscall} {
		if got, err := ParseWaitMode(in); err != nil || got != want {
			t.Errorf("ParseWaitMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseWaitMode("spin"); err == nil {
		t.Error("ParseWaitMode(spin) accepted")
	}
}
