package ring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestListenRefusesSharedPort starts a server and then another on the same address: the
// second is refused with EADDRINUSE whichever backends the two run, as a second Kafka on
// the port would be, rather than joining the io_uring listeners' SO_REUSEPORT group and
// taking a share of the connections.
func TestListenRefusesSharedPort(t *testing.T) {
	for _, first := range backends {
		for _, second := range backends {
			t.Run(fmt.Sprintf("%s-then-%s", first, second), func(t *testing.T) {
				s := startServer(t, Config{Backend: first, Rings: 2}, newEchoHandler(t))
				addr := s.Addr().String()
				other, err := Listen(Config{Backend: second, Rings: 2, Addr: addr, Logger: quietLogger()}, newEchoHandler(t))
				if err == nil {
					other.Shutdown(t.Context())
					t.Fatalf("a %s server listened on %s, which a %s server holds", second, addr, first)
				}
				if !errors.Is(err, unix.EADDRINUSE) {
					t.Fatalf("second listen on %s: %v, want EADDRINUSE", addr, err)
				}
				// The first still serves.
				c := dial(t, s)
				if _, err := c.Write([]byte("ping")); err != nil {
					t.Fatalf("write to the first server: %v", err)
				}
			})
		}
	}
}

// TestListenSocketsOtherAddress binds the port of a listener group on another loopback
// address: the addresses do not overlap, so it is allowed, as it is without SO_REUSEPORT.
func TestListenSocketsOtherAddress(t *testing.T) {
	fds, bound, err := listenSockets("127.0.0.1:0", 2, SocketBuffers{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFDs(fds)
	other, _, err := listenSockets(fmt.Sprintf("127.0.0.2:%d", bound.Port), 2, SocketBuffers{})
	if err != nil {
		t.Fatalf("listen on 127.0.0.2:%d beside 127.0.0.1: %v", bound.Port, err)
	}
	closeFDs(other)
	if _, _, err := listenSockets(fmt.Sprintf("0.0.0.0:%d", bound.Port), 1, SocketBuffers{}); !errors.Is(err, unix.EADDRINUSE) {
		t.Fatalf("listen on 0.0.0.0:%d over 127.0.0.1: %v, want EADDRINUSE", bound.Port, err)
	}
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// TestParseListeners reads listening sockets out of /proc/net/tcp and tcp6 lines in the
// kernel's format, and skips the rest.
func TestParseListeners(t *testing.T) {
	// procAddr prints an address as the kernel does: each 32-bit word of its network-order
	// bytes as a native-endian integer in hex.
	procAddr := func(a netip.Addr) string {
		b := a.AsSlice()
		s := ""
		for i := 0; i < len(b); i += 4 {
			s += fmt.Sprintf("%08X", binary.NativeEndian.Uint32(b[i:i+4]))
		}
		return s
	}
	line := func(a netip.Addr, port int, st string, inode int) string {
		return fmt.Sprintf("   0: %s:%04X 00000000:0000 %s 00000000:00000000 00:00000000 00000000     0        0 %d 1 0000000000000000 100 0 0 10 0",
			procAddr(a), port, st, inode)
	}
	loop := netip.MustParseAddr("127.0.0.1")
	v6 := netip.MustParseAddr("fe80::1")
	mapped := netip.MustParseAddr("::ffff:10.1.2.3")
	table := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		line(loop, 19092, tcpListen, 101) + "\n" +
		line(loop, 19092, "01", 102) + "\n" + // established: not a listener
		line(v6, 9644, tcpListen, 103) + "\n" +
		line(mapped, 80, tcpListen, 104) + "\n" +
		"   9: garbage 0A\n"
	got := parseListeners([]byte(table))
	want := []listener{
		{addr: loop, port: 19092, inode: 101},
		{addr: v6, port: 9644, inode: 103},
		{addr: netip.MustParseAddr("10.1.2.3"), port: 80, inode: 104},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("parseListeners = %v, want %v", got, want)
	}
}

// TestSocketBuffers: connections a server accepts have the SO_SNDBUF and SO_RCVBUF its config
// gives (the kernel reports twice a size), on both backends; with none given they keep the
// kernel's autotuned sizes.
func TestSocketBuffers(t *testing.T) {
	const send, recv = 64 << 10, 256 << 10
	for _, be := range backends {
		t.Run(string(be), func(t *testing.T) {
			s := startServer(t, Config{Backend: be, Rings: 2, SocketBuffers: SocketBuffers{Send: send, Receive: recv}}, newEchoHandler(t))
			plain := startServer(t, Config{Backend: be, Rings: 2}, newEchoHandler(t))
			for _, c := range []struct {
				srv        *Server
				send, recv int
			}{{s, 2 * send, 2 * recv}, {plain, 0, 0}} {
				cl := dial(t, c.srv)
				fd := acceptedFD(t, cl.LocalAddr().(*net.TCPAddr))
				gotSend, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
				if err != nil {
					t.Fatal(err)
				}
				gotRecv, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
				if err != nil {
					t.Fatal(err)
				}
				if c.send == 0 {
					// The kernel sizes them: the send buffer from the connection's MSS (megabytes
					// on loopback), the receive buffer from net.ipv4.tcp_rmem (128 KiB here).
					if gotSend == 2*send || gotRecv == 2*recv {
						t.Fatalf("unset buffers: SO_SNDBUF %d, SO_RCVBUF %d; want the kernel's own sizes", gotSend, gotRecv)
					}
					continue
				}
				if gotSend != c.send || gotRecv != c.recv {
					t.Fatalf("accepted connection: SO_SNDBUF %d, SO_RCVBUF %d; want %d, %d", gotSend, gotRecv, c.send, c.recv)
				}
			}
		})
	}
}

// acceptedFD finds, among this process's descriptors, the server side of the loopback
// connection whose client end is at client.
func acceptedFD(t *testing.T, client *net.TCPAddr) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			fd, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			peer, err := unix.Getpeername(fd)
			if err != nil {
				continue
			}
			if a := sockaddrToTCP(peer); a.Port == client.Port && a.IP.Equal(client.IP) {
				return fd
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no accepted connection from %s", client)
	return -1
}

// TestSocketBuffersCapped: a size above net.core.wmem_max / rmem_max is granted only up to
// that, and cappedSocketBuffers names it for the warning at start; a size below is not named.
func TestSocketBuffersCapped(t *testing.T) {
	readMax := func(name string) int {
		b, err := os.ReadFile("/proc/sys/net/core/" + name)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	wmax, rmax := readMax("wmem_max"), readMax("rmem_max")
	bufs := SocketBuffers{Send: 2 * wmax, Receive: rmax / 2}
	fds, _, err := listenSockets("127.0.0.1:0", 1, bufs)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFDs(fds)
	capped := cappedSocketBuffers(fds[0], bufs)
	want := fmt.Sprintf("SO_SNDBUF of %d bytes is capped by net.core.wmem_max at %d", 2*wmax, wmax)
	if len(capped) != 1 || capped[0] != want {
		t.Fatalf("capped: %q; want only %q", capped, want)
	}
}
