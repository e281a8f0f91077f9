package ring

import (
	"fmt"
	"strings"
	"syscall"
	"unsafe"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

// WaitMode is how an io_uring event loop blocks for completions.
type WaitMode string

// Wait modes of Config.Wait.
const (
	// WaitSyscall blocks in io_uring_enter as an ordinary system call: the loop's thread keeps
	// its Go P until the runtime's sysmon retakes it (20 µs to 10 ms later), so goroutines it
	// readied just before may wait that long.
	WaitSyscall WaitMode = "syscall"
	// WaitHandoff hands the P to another thread before blocking (the runtime's
	// entersyscallblock, as for known-blocking calls), so work the loop readied runs at once.
	WaitHandoff WaitMode = "handoff"
)

// ParseWaitMode turns a config value ("" meaning the default, handoff) into a WaitMode.
func ParseWaitMode(s string) (WaitMode, error) {
	switch m := WaitMode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return WaitHandoff, nil
	case WaitSyscall, WaitHandoff:
		return m, nil
	default:
		return "", fmt.Errorf("unknown io_uring wait mode %q; want syscall or handoff", s)
	}
}

// entersyscallblock and exitsyscall are the runtime's own brackets around a system call known
// to block (reached by linkname; the build passes -checklinkname=0 for giouring anyway).
//
//go:linkname entersyscallblock runtime.entersyscallblock
func entersyscallblock()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()

// enterBlocking is io_uring_enter(fd, 0, 1, GETEVENTS) bracketed by entersyscallblock, so the
// P goes to another thread for the duration.
//
//go:nosplit
func enterBlocking(fd uintptr) syscall.Errno {
	entersyscallblock()
	_, _, errno := syscall.RawSyscall6(unix.SYS_IO_URING_ENTER, fd, 0, 1, uintptr(giouring.EnterGetEvents), 0, 0)
	exitsyscall()
	return errno
}

// ringLayout mirrors the fields of giouring.Ring (pinned version
// v0.0.0-20230826085535-69588b89acb9) up to its ring descriptor; TestRingFdLayout checks it.
type ringLayout struct {
	sqRing      unsafe.Pointer
	cqRing      unsafe.Pointer
	flags       uint32
	ringFd      int
	features    uint32
	enterRingFd int
	intFlags    uint8
	pad         [3]uint8
	pad2        uint32
}

// ringFd returns the io_uring descriptor of ring.
func ringFd(ring *giouring.Ring) int {
	return (*ringLayout)(unsafe.Pointer(ring)).ringFd
}
