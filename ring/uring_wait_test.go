package ring

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/pawelgaczynski/giouring"
)

// TestRingFdLayout checks that ringLayout still mirrors giouring.Ring: same size, and the
// descriptor it reads is an io_uring instance.
func TestRingFdLayout(t *testing.T) {
	if a, b := unsafe.Sizeof(ringLayout{}), unsafe.Sizeof(giouring.Ring{}); a != b {
		t.Fatalf("ringLayout is %d bytes, giouring.Ring %d: the pinned giouring changed", a, b)
	}
	if a, b := unsafe.Sizeof(sqLayout{}), unsafe.Sizeof(giouring.SubmissionQueue{}); a != b {
		t.Fatalf("sqLayout is %d bytes, giouring.SubmissionQueue %d: the pinned giouring changed", a, b)
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
	// A NOP flushed with flushSQ and submitted with enterBlocking completes.
	sqe := ring.GetSQE()
	sqe.PrepareNop()
	sqe.UserData = 42
	if n := flushSQ(ring); n != 1 {
		t.Fatalf("flushSQ = %d, want 1 SQE to submit", n)
	}
	if errno := enterBlocking(uintptr(fd), 1); errno != 0 {
		t.Fatalf("enterBlocking: %v", errno)
	}
	cqe, err := ring.PeekCQE()
	if err != nil || cqe.UserData != 42 {
		t.Fatalf("PeekCQE after enterBlocking = %+v, %v; want the NOP's completion", cqe, err)
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
	for in, want := range map[string]WaitMode{"": WaitHandoff, "handoff": WaitHandoff, " Syscall ": WaitSyscall, "HOLD": WaitHold} {
		if got, err := ParseWaitMode(in); err != nil || got != want {
			t.Errorf("ParseWaitMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseWaitMode("spin"); err == nil {
		t.Error("ParseWaitMode(spin) accepted")
	}
}

// TestWaitHold: loops that hold their P through the wait (GOMAXPROCS raised by one P per
// loop, as ringbroker does) echo as the default loops do, and a collection, whose
// stop-the-world must take the Ps of loops asleep in io_uring_enter, finishes while they are
// idle; after SetWait(WaitHandoff) they echo again.
func TestWaitHold(t *testing.T) {
	const rings = 2
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(runtime.NumCPU() + rings))
	h := newEchoHandler(t)
	s := startServer(t, Config{Backend: Uring, Rings: rings, Wait: WaitHold}, h)
	echoAll := func(conns int) {
		t.Helper()
		var wg sync.WaitGroup
		for ci := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := echoClient(s, ci, []int{1, 4096, 100_000}, 50); err != nil {
					t.Errorf("client %d: %v", ci, err)
				}
			}()
		}
		wg.Wait()
	}
	echoAll(4)
	time.Sleep(50 * time.Millisecond) // the loops are asleep in io_uring_enter now
	for i := range 3 {
		done := make(chan time.Duration, 1)
		go func() {
			start := time.Now()
			runtime.GC()
			done <- time.Since(start)
		}()
		select {
		case d := <-done:
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			t.Logf("runtime.GC with held waits: %v, its pauses %v", d, time.Duration(ms.PauseNs[(ms.NumGC+255)%256]))
		case <-time.After(10 * time.Second):
			t.Fatalf("runtime.GC %d did not finish in 10s: a held wait kept its P from the stop-the-world", i)
		}
	}
	s.SetWait(WaitHandoff)
	echoAll(2)
	waitFor(t, 5*time.Second, "all connections closed", func() bool { return h.closes.Load() == 6 })
	h.checkDones(t)
}
