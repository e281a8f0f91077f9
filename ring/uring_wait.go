package ring

import (
	"fmt"
	"strings"
	"sync/atomic"
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
	// WaitHold blocks in io_uring_enter as a raw system call, the P still counted as running:
	// work the loop readied is stolen by the other Ps, and the runtime's monitor thread (sysmon)
	// is neither woken by the loop's every wait nor polled back to its 20 µs cycle, which
	// handoff costs it on every wake-up of an idle process. The loop holds its P while it
	// sleeps, so the process must have a P per loop beyond those its other goroutines need:
	// set it only where GOMAXPROCS was raised for the loops (Server.SetWait).
	WaitHold WaitMode = "hold"
)

// ParseWaitMode turns a config value ("" meaning the default, handoff) into a WaitMode.
func ParseWaitMode(s string) (WaitMode, error) {
	switch m := WaitMode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return WaitHandoff, nil
	case WaitSyscall, WaitHandoff, WaitHold:
		return m, nil
	default:
		return "", fmt.Errorf("unknown io_uring wait mode %q; want handoff, hold or syscall", s)
	}
}

// entersyscallblock and exitsyscall are the runtime's own brackets around a system call known
// to block (reached by linkname; the build passes -checklinkname=0 for giouring anyway).
//
//go:linkname entersyscallblock runtime.entersyscallblock
func entersyscallblock()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()

// enterBlocking is io_uring_enter(fd, toSubmit, 1, GETEVENTS) bracketed by
// entersyscallblock, so the P goes to another thread for the duration: one system call
// submits what is queued and waits for a completion.
//
//go:nosplit
func enterBlocking(fd, toSubmit uintptr) syscall.Errno {
	entersyscallblock()
	errno := enterHolding(fd, toSubmit)
	exitsyscall()
	return errno
}

// enterHolding is io_uring_enter(fd, toSubmit, 1, GETEVENTS) without entering the scheduler's
// system-call state, for WaitHold. The runtime's preemption signal (sent to a goroutine
// running 10 ms, and again and again while a stop-the-world waits for it) interrupts the
// wait with EINTR, so the loop still yields its P when the runtime asks for it. It is
// nosplit because enterBlocking calls it in the system-call state, where the stack must not
// grow.
//
//go:nosplit
func enterHolding(fd, toSubmit uintptr) syscall.Errno {
	_, _, errno := syscall.RawSyscall6(unix.SYS_IO_URING_ENTER, fd, toSubmit, 1, uintptr(giouring.EnterGetEvents), 0, 0)
	return errno
}

// sqLayout mirrors giouring.SubmissionQueue of the pinned version; TestRingFdLayout checks
// its size.
type sqLayout struct {
	head, tail, ringMask, ringEntries, flags, dropped, array *uint32
	sqes                                                     unsafe.Pointer
	ringSize                                                 uint
	ringPtr                                                  unsafe.Pointer
	sqeHead, sqeTail                                         uint32
	pad                                                      [2]uint32
}

// flushSQ publishes the SQEs prepared since the last flush to the kernel (liburing's
// __io_uring_flush_sq) and returns how many are waiting to be submitted.
func flushSQ(ring *giouring.Ring) uint32 {
	sq := (*sqLayout)((*ringLayout)(unsafe.Pointer(ring)).sqRing)
	tail := sq.sqeTail
	if sq.sqeHead != tail {
		sq.sqeHead = tail
		atomic.StoreUint32(sq.tail, tail)
	}
	return tail - atomic.LoadUint32(sq.head)
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
