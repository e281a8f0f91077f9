package meta

import (
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestListenControl checks that RaftConfig.ListenControl runs on the controller listener's
// socket before it listens: the send buffer it sets is there on the listening socket, which
// the connections it accepts inherit.
func TestListenControl(t *testing.T) {
	const sndbuf = 256 << 10
	var calls int
	q := newQuorum(t, 1, 0, func(c *RaftConfig) {
		c.ListenControl = func(network, address string, rc syscall.RawConn) error {
			calls++
			var err error
			if cerr := rc.Control(func(fd uintptr) {
				err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, sndbuf)
			}); cerr != nil {
				return cerr
			}
			return err
		}
	})
	s := q.stores[1]
	if calls != 1 || s.ln == nil {
		t.Fatalf("ListenControl called %d times, listener %v; want once and a listener", calls, s.ln)
	}
	rc, err := s.ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	if err := rc.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) }); err != nil {
		t.Fatal(err)
	}
	// The kernel doubles the size asked for.
	if gerr != nil || got != 2*sndbuf {
		t.Fatalf("controller listener SO_SNDBUF = %d (%v), want %d", got, gerr, 2*sndbuf)
	}
}
