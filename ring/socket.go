package ring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenBacklog is the accept queue length asked of listen(2); the kernel
// caps it at net.core.somaxconn.
const listenBacklog = 4096

// listenSockets opens n listening sockets on addr with SO_REUSEPORT, so the
// kernel spreads connections over them. With port 0 the first socket picks the
// port and the others bind the same one. It returns the fds and the bound address.
//
// SO_REUSEPORT would let any process of the same user join the group and take a
// share of the connections (a second broker started on the port by mistake, which
// then answers clients from other metadata), where a plain listener fails to bind.
// So once bound, the sockets must be the only listeners on the port (checkSoleListener),
// or the address is refused as in use, as Kafka's own bind would be.
func listenSockets(addr string, n int, bufs SocketBuffers) ([]int, *net.TCPAddr, error) {
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("resolve listen address %q: %w", addr, err)
	}
	fds := make([]int, 0, n)
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	var bound *net.TCPAddr
	for i := range n {
		fd, local, err := listenSocket(ta, bufs)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("listen socket %d of %d on %s: %w", i+1, n, ta, err)
		}
		fds = append(fds, fd)
		if bound == nil {
			bound = local
			ta = &net.TCPAddr{IP: ta.IP, Port: local.Port, Zone: ta.Zone}
		}
	}
	if err := checkSoleListener(fds, bound); err != nil {
		closeAll()
		return nil, nil, err
	}
	return fds, bound, nil
}

// checkSoleListener reports an EADDRINUSE error when a socket other than fds listens on
// bound's port at an address that overlaps bound's (the same one, or either unspecified), as
// /proc/net/tcp and /proc/net/tcp6 list them for this network namespace.
func checkSoleListener(fds []int, bound *net.TCPAddr) error {
	ours := make(map[uint64]bool, len(fds))
	for _, fd := range fds {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("stat listening socket: %w", err)
		}
		ours[st.Ino] = true
	}
	want := bound.AddrPort().Addr().Unmap()
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no IPv6
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", table, err)
		}
		for _, l := range parseListeners(data) {
			if l.port != bound.Port || ours[l.inode] {
				continue
			}
			if l.addr == want || l.addr.IsUnspecified() || want.IsUnspecified() {
				return fmt.Errorf("listen on %s: another process listens on %s (socket inode %d): %w",
					bound, netip.AddrPortFrom(l.addr, uint16(l.port)), l.inode, unix.EADDRINUSE)
			}
		}
	}
	return nil
}

// listener is one listening socket of /proc/net/tcp or tcp6.
type listener struct {
	addr  netip.Addr
	port  int
	inode uint64
}

// tcpListen is the st column of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// parseListeners returns the listening sockets of a /proc/net/tcp or /proc/net/tcp6 table; a
// line it cannot read is skipped. The kernel prints an address as the 32-bit words of its
// network-order bytes, each in hex as a native-endian integer, then ":" and the port in hex.
func parseListeners(table []byte) []listener {
	var out []listener
	for _, line := range strings.Split(string(table), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != tcpListen {
			continue
		}
		hexAddr, hexPort, ok := strings.Cut(f[1], ":")
		if !ok || (len(hexAddr) != 8 && len(hexAddr) != 32) {
			continue
		}
		raw := make([]byte, 0, 16)
		bad := false
		for i := 0; i < len(hexAddr); i += 8 {
			w, err := strconv.ParseUint(hexAddr[i:i+8], 16, 32)
			if err != nil {
				bad = true
				break
			}
			raw = binary.NativeEndian.AppendUint32(raw, uint32(w))
		}
		port, perr := strconv.ParseUint(hexPort, 16, 16)
		inode, ierr := strconv.ParseUint(f[9], 10, 64)
		addr, aok := netip.AddrFromSlice(raw)
		if bad || perr != nil || ierr != nil || !aok {
			continue
		}
		out = append(out, listener{addr: addr.Unmap(), port: int(port), inode: inode})
	}
	return out
}

// listenSocket opens one SO_REUSEPORT listening socket on ta: IPv4 for a v4
// address, dual-stack IPv6 for an unspecified one (IPv4 if the host has no IPv6).
func listenSocket(ta *net.TCPAddr, bufs SocketBuffers) (int, *net.TCPAddr, error) {
	if ta.IP == nil || ta.IP.IsUnspecified() && ta.IP.To4() == nil {
		fd, local, err := listenSocketFamily(unix.AF_INET6, ta, bufs)
		if !errors.Is(err, unix.EAFNOSUPPORT) {
			return fd, local, err
		}
		return listenSocketFamily(unix.AF_INET, &net.TCPAddr{IP: net.IPv4zero, Port: ta.Port}, bufs)
	}
	if ta.IP.To4() != nil {
		return listenSocketFamily(unix.AF_INET, ta, bufs)
	}
	return listenSocketFamily(unix.AF_INET6, ta, bufs)
}

func listenSocketFamily(family int, ta *net.TCPAddr, bufs SocketBuffers) (int, *net.TCPAddr, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, nil, fmt.Errorf("socket: %w", err)
	}
	fail := func(what string, err error) (int, *net.TCPAddr, error) {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail("set SO_REUSEADDR", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return fail("set SO_REUSEPORT", err)
	}
	if err := setSocketBuffers(fd, bufs); err != nil {
		return fail("size socket buffers", err)
	}
	var sa unix.Sockaddr
	if family == unix.AF_INET {
		s := &unix.SockaddrInet4{Port: ta.Port}
		if ip4 := ta.IP.To4(); ip4 != nil {
			copy(s.Addr[:], ip4)
		}
		sa = s
	} else {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
			return fail("clear IPV6_V6ONLY", err)
		}
		s := &unix.SockaddrInet6{Port: ta.Port}
		if ta.IP != nil {
			copy(s.Addr[:], ta.IP.To16())
		}
		if ta.Zone != "" {
			ifi, err := net.InterfaceByName(ta.Zone)
			if err != nil {
				return fail("resolve zone "+ta.Zone, err)
			}
			s.ZoneId = uint32(ifi.Index)
		}
		sa = s
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	if err := unix.Listen(fd, listenBacklog); err != nil {
		return fail("listen", err)
	}
	local, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	return fd, sockaddrToTCP(local), nil
}

// sockaddrToTCP converts a socket address to a *net.TCPAddr; v4-mapped IPv6
// addresses come out as IPv4.
func sockaddrToTCP(sa unix.Sockaddr) *net.TCPAddr {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)))
	case *unix.SockaddrInet6:
		ip := netip.AddrFrom16(a.Addr).Unmap()
		return net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(a.Port)))
	default:
		return &net.TCPAddr{}
	}
}

// Apply sets the buffers on a socket not yet listening, from a net.ListenConfig's Control, and
// returns the sizes the kernel capped, for a warning at start. Listeners of plain Go networking
// (the netpoll backend, the controller listener) take their sizes this way.
func (b SocketBuffers) Apply(rc syscall.RawConn) (capped []string, err error) {
	if cerr := rc.Control(func(fd uintptr) {
		if err = setSocketBuffers(int(fd), b); err == nil {
			capped = cappedSocketBuffers(int(fd), b)
		}
	}); cerr != nil {
		return nil, fmt.Errorf("socket buffers: %w", cerr)
	}
	return capped, err
}

// setSocketBuffers sets fd's SO_SNDBUF and SO_RCVBUF where bufs gives a size. On a listening
// socket this happens before listen, as a receive buffer must for the TCP window scale it
// implies, and accepted connections inherit both.
func setSocketBuffers(fd int, bufs SocketBuffers) error {
	if bufs.Send > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, bufs.Send); err != nil {
			return fmt.Errorf("set SO_SNDBUF %d: %w", bufs.Send, err)
		}
	}
	if bufs.Receive > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, bufs.Receive); err != nil {
			return fmt.Errorf("set SO_RCVBUF %d: %w", bufs.Receive, err)
		}
	}
	return nil
}

// cappedSocketBuffers describes the sizes of bufs the kernel capped on fd, for a warning at
// start: it grants twice a size asked for, up to twice net.core.wmem_max or rmem_max.
func cappedSocketBuffers(fd int, bufs SocketBuffers) []string {
	var capped []string
	for _, b := range []struct {
		name, limit string
		opt, asked  int
	}{
		{"SO_SNDBUF", "net.core.wmem_max", unix.SO_SNDBUF, bufs.Send},
		{"SO_RCVBUF", "net.core.rmem_max", unix.SO_RCVBUF, bufs.Receive},
	} {
		if b.asked <= 0 {
			continue
		}
		got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, b.opt)
		if err == nil && got < 2*b.asked {
			capped = append(capped, fmt.Sprintf("%s of %d bytes is capped by %s at %d", b.name, b.asked, b.limit, got/2))
		}
	}
	return capped
}
