package ring

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// TLS listeners (Config.TLS). Records are sealed and opened by crypto/tls in user space, on
// goroutines: each TLS connection, on either backend, is an npConn of a connGroup with a
// tls.Conn over its socket, a reader goroutine (handshake, then every Handler call) and a
// writer goroutine. An io_uring listener still accepts on its rings and hands each socket to
// the group, so Conn.Loop keeps naming the ring that accepted it.

// Defaults and sizes of TLS listeners.
const (
	defaultHandshakeTimeout = 10 * time.Second
	// tlsBufSize is the size of a TLS writer's buffer, taken from a pool for one batch of
	// queued sends: small pieces are gathered into it and file ranges read into it, so a
	// connection's writer holds at most one.
	tlsBufSize = 64 << 10
	// tlsDirectMin: memory pieces at least this long are encrypted from where they are rather
	// than gathered (a TLS record holds at most 16 KiB).
	tlsDirectMin = 16 << 10
)

// TLSMode says where a listener's TLS records are sealed and opened.
type TLSMode string

// Modes of TLSInfo.
const (
	// TLSOff is a plaintext listener.
	TLSOff TLSMode = "off"
	// TLSUserSpace is crypto/tls on a reader and a writer goroutine per connection, on
	// either backend; FileRange pieces are read from their files and encrypted.
	TLSUserSpace TLSMode = "user"
)

// TLSInfo says how a Server runs TLS, so that logs and metrics show when TLS is not in the
// kernel (kTLS), which is what io_uring would want: plain recv, send and sendfile on the ring.
type TLSInfo struct {
	Mode TLSMode
	// Reason is why the records are not left to the kernel: the answer of the kTLS probe
	// (setsockopt TCP_ULP "tls"). Empty on a plaintext listener.
	Reason string
}

// tlsSetup is what the connections of a TLS listener share.
type tlsSetup struct {
	config  *tls.Config
	timeout time.Duration
	bufs    sync.Pool // *[]byte of tlsBufSize
}

func newTLSSetup(cfg Config) *tlsSetup {
	t := &tlsSetup{config: cfg.TLS, timeout: cfg.HandshakeTimeout}
	t.bufs.New = func() any {
		b := make([]byte, tlsBufSize)
		return &b
	}
	return t
}

// checkTLSConfig refuses a config with which every handshake would fail, as tls.Listen does.
func checkTLSConfig(c *tls.Config) error {
	if len(c.Certificates) == 0 && c.GetCertificate == nil && c.GetConfigForClient == nil {
		return errors.New("ring config: TLS has neither Certificates, GetCertificate nor GetConfigForClient")
	}
	return nil
}

// tlsInfo describes a listener with config tc (nil: plaintext) on this kernel.
func tlsInfo(tc *tls.Config) TLSInfo {
	if tc == nil {
		return TLSInfo{Mode: TLSOff}
	}
	reason := "kernel TLS (TCP_ULP tls) is available but not used by ring yet"
	if err := probeKernelTLS(); err != nil {
		reason = "kernel TLS unavailable: " + err.Error()
	}
	return TLSInfo{Mode: TLSUserSpace, Reason: reason}
}

// probeKernelTLS asks the kernel for its "tls" upper layer protocol on a fresh TCP socket. The
// ULP attaches only to connected sockets, so ENOTCONN means the kernel has it; ENOENT means it
// has not (no tls module, or no CAP_NET_ADMIN to load it).
func probeKernelTLS() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return fmt.Errorf("socket for the kTLS probe: %w", err)
	}
	defer unix.Close(fd)
	err = unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_ULP, "tls")
	if err == nil || errors.Is(err, unix.ENOTCONN) {
		return nil
	}
	return fmt.Errorf("setsockopt TCP_ULP %q: %w", "tls", err)
}

// adopt serves a socket an io_uring ring accepted on a TLS listener. Everything after the
// accept, the handshake included, runs on the connection's own goroutines, never on the ring's
// locked thread.
func (g *connGroup) adopt(fd int, id uint64, loop int, st *ringCounters) {
	if !g.admit() {
		unix.Close(fd)
		return
	}
	go func() {
		nc, err := fdConn(fd)
		if err != nil {
			g.log.Warn("ring: cannot serve accepted TLS connection", "ring", loop, "err", err.Error())
			g.wg.Done()
			return
		}
		g.run(nc, nil, id, loop, st)
	}()
}

// fdConn turns an accepted socket into a *net.TCPConn on Go's netpoller; fd is closed either way.
func fdConn(fd int) (*net.TCPConn, error) {
	f := os.NewFile(uintptr(fd), "tcp")
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("conn of accepted fd %d: %w", fd, err)
	}
	nc, ok := fc.(*net.TCPConn)
	if !ok {
		fc.Close()
		return nil, fmt.Errorf("accepted fd %d is a %T; want a TCP socket", fd, fc)
	}
	return nc, nil
}

// handshake runs c's TLS server handshake within the handshake timeout. On success the
// connection state is recorded for Conn.TLS. A handshake that fails, times out or is cut short
// by Shutdown closes the socket and reports false: the handler never sees the connection.
func (c *npConn) handshake() bool {
	t := c.g.tls
	_ = c.tc.SetDeadline(time.Now().Add(t.timeout))
	err := c.tc.Handshake()
	if err == nil {
		_ = c.tc.SetDeadline(time.Time{})
		st := c.tc.ConnectionState()
		c.state = &st
	}
	c.mu.Lock()
	shut := c.closed
	ok := err == nil && !shut
	c.opened = ok
	c.mu.Unlock()
	if ok {
		c.st.tlsHandshakes.Add(1)
		return true
	}
	c.nc.Close()
	if shut {
		return false // Shutdown, not the peer
	}
	c.st.tlsHandshakeErrors.Add(1)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.st.tlsHandshakeTimeouts.Add(1)
		err = fmt.Errorf("not finished within %v: %w", t.timeout, err)
	}
	// As Kafka's Selector logs a failed SSL handshake (an SslAuthenticationException). A peer
	// that closes before sending a byte (a liveness probe, a port check) tried nothing.
	level := slog.LevelInfo
	if errors.Is(err, io.EOF) {
		level = slog.LevelDebug
	}
	c.g.log.Log(context.Background(), level, "ring: failed authentication", "conn", c.id, "remote", c.nc.RemoteAddr().String(),
		"err", "SSL handshake failed: "+err.Error())
	return false
}

// writeTLS encrypts the pieces of q in order and writes them, releasing each item once its
// bytes are written, and every item when it fails. Small memory pieces of consecutive items are
// gathered into one buffer, so they go out in few records; large ones are encrypted from where
// they are; file ranges are read (pread) into the same buffer one chunk at a time.
func (c *npConn) writeTLS(q []*outItem) error {
	bp, _ := c.g.tls.bufs.Get().(*[]byte)
	defer c.g.tls.bufs.Put(bp)
	w := tlsWriter{c: c, buf: (*bp)[:0]}
	for i, it := range q {
		if err := w.add(it); err != nil {
			w.release()
			for _, rest := range q[i:] {
				rest.release()
			}
			return err
		}
	}
	err := w.flush()
	w.release()
	return err
}

// tlsWriter is one batch of writeTLS.
type tlsWriter struct {
	c   *npConn
	buf []byte // gathered bytes not yet written; cap tlsBufSize
	// written are items whose bytes are all in the tls.Conn or buf; they are released once buf
	// is written.
	written []*outItem
}

// add writes, or gathers, the rest of it.
func (w *tlsWriter) add(it *outItem) error {
	for it.left > 0 {
		p := &it.pieces[it.idx]
		rem := p.size() - it.off
		switch {
		case p.FileLen > 0:
			if err := w.flush(); err != nil {
				return err
			}
			b := w.buf[:min(rem, cap(w.buf))]
			off := p.FileOff + int64(it.off)
			if err := preadFull(p.FileFD, b, off); err != nil {
				return fmt.Errorf("file range of conn %d: read %d bytes at %d of fd %d: %w", w.c.id, len(b), off, p.FileFD, err)
			}
			if err := w.write(b); err != nil {
				return err
			}
			it.advance(len(b))
		case rem >= tlsDirectMin:
			if err := w.flush(); err != nil {
				return err
			}
			if err := w.write(p.Buf[it.off:]); err != nil {
				return err
			}
			it.advance(rem)
		default:
			if len(w.buf)+rem > cap(w.buf) {
				if err := w.flush(); err != nil {
					return err
				}
			}
			w.buf = append(w.buf, p.Buf[it.off:]...)
			it.advance(rem)
		}
	}
	w.written = append(w.written, it)
	if len(w.buf) == 0 {
		w.release()
	}
	return nil
}

// flush writes the gathered bytes, then releases the items they completed.
func (w *tlsWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.write(w.buf)
	w.buf = w.buf[:0]
	if err != nil {
		return err
	}
	w.release()
	return nil
}

// release runs the done of every written item.
func (w *tlsWriter) release() {
	for i, it := range w.written {
		it.release()
		w.written[i] = nil
	}
	w.written = w.written[:0]
}

// write encrypts b into TLS records and writes them, blocking while the socket is full.
func (w *tlsWriter) write(b []byte) error {
	c := w.c
	n, err := c.tc.Write(b)
	c.st.bytesOut.Add(uint64(n))
	c.st.sends.Add(1)
	if err != nil {
		return fmt.Errorf("send %d bytes on TLS conn %d to %s: %w", len(b)-n, c.id, c.nc.RemoteAddr(), err)
	}
	return nil
}

// preadFull fills b from fd at off; a file that ends first is io.ErrUnexpectedEOF.
func preadFull(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pread(fd, b, off)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n == 0:
			return io.ErrUnexpectedEOF
		}
		b = b[n:]
		off += int64(n)
	}
	return nil
}
