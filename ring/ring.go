// Package ring is the network event loop of the broker: one io_uring ring per
// core (multishot accept on a SO_REUSEPORT listener of its own, recvs into a
// provided-buffer ring or straight into a handler's buffer, sendmsg, SEND_ZC,
// sendfile on POLLOUT), and a netpoll (Go net) fallback behind the same
// interface for machines where io_uring is absent or forbidden.
//
// Each ring runs on its own locked OS thread, set up with SINGLE_ISSUER and
// DEFER_TASKRUN where the kernel has them. By default (WaitHandoff) it gives
// its Go P to another thread before it blocks in io_uring_enter, so goroutines
// it has just readied run at once; with WaitHold it keeps the P, which the
// process then sizes for (Server.SetWait). Other goroutines wake it through an
// eventfd only when it sleeps. The netpoll backend runs a reader and a writer
// goroutine per connection.
//
// Handler callbacks for one connection run on one goroutine, in order:
// OnOpen, OnData and OnFilled, OnClose. With the io_uring backend that
// goroutine is the ring's own locked OS thread (but for TLS, below), so a
// handler that blocks stalls every connection of that ring; hand slow work to
// another goroutine and answer with Conn.Send. A handler steers reading with
// the Next it returns: a buffer of its own for the next bytes (no copy through
// a receive buffer), or a pause until Conn.Resume (a muted connection).
// Conn.Send writes at once from the calling goroutine when nothing is queued,
// without blocking, and leaves the rest to the event loop.
//
// TLS listeners (Config.TLS) run crypto/tls in user space on both backends:
// every TLS connection is served as a netpoll connection is, by a reader
// goroutine (the server handshake, bounded by Config.HandshakeTimeout, then
// every Handler call) and a writer goroutine, over a tls.Conn on the socket.
// An io_uring listener still accepts on its rings, so connections spread over
// them and Conn.Loop names the ring that accepted each, and hands every socket
// over at once: no handshake and no record is ever processed on a ring's
// locked thread, which serves all its other connections. The Handler contract
// is unchanged: Fill is filled by copying decrypted bytes into it; Send always
// queues to the writer (a TLS write cannot stop half-way without blocking),
// which gathers small pieces into few records and reads FileRange pieces with
// pread into a pooled buffer, since sendfile cannot encrypt; Close sends a
// close_notify after the queue. A failed or timed-out handshake closes the
// socket without any Handler call. Conn.TLS gives the handler the handshake's
// result (client certificates, cipher suite). Kernel TLS (kTLS), with which the
// rings could recv, send and sendfile TLS connections themselves, is not
// built; Server.TLSInfo says so and whether the kernel would have it.
package ring

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Backend names an event-loop implementation.
type Backend string

// Backends that Config.Backend accepts.
const (
	// Auto runs io_uring when it works here and netpoll otherwise.
	Auto Backend = "auto"
	// Uring runs one io_uring ring per event loop; Listen fails if io_uring is unusable.
	Uring Backend = "uring"
	// Netpoll runs on Go's net package (epoll through the runtime netpoller).
	Netpoll Backend = "netpoll"
)

// DisableEnv, set to "1", makes io_uring look unavailable, so tests and
// operators can force the netpoll fallback without changing the kernel.
const DisableEnv = "RINGBROKER_IO_URING_DISABLE"

// ErrClosed is returned (wrapped) by Conn.Send on a closed connection.
var ErrClosed = errors.New("connection closed")

// ParseBackend turns a config value ("auto", "uring", "netpoll"; any case,
// "" meaning auto) into a Backend.
func ParseBackend(s string) (Backend, error) {
	switch b := Backend(strings.ToLower(strings.TrimSpace(s))); b {
	case "", Auto:
		return Auto, nil
	case Uring, Netpoll:
		return b, nil
	default:
		return "", fmt.Errorf("unknown ring backend %q; want auto, uring or netpoll", s)
	}
}

// Config configures Listen. The zero value of every field means its default.
type Config struct {
	// Addr is host:port to listen on; port 0 picks one (all rings then share the picked port).
	Addr string
	// Backend selects the event loop; Auto when empty.
	Backend Backend
	// Rings is the number of event loops; 0 means runtime.NumCPU().
	Rings int
	// PinCPUs pins ring i's locked OS thread to the i-th (modulo their number) of the CPUs
	// the process may run on.
	PinCPUs bool
	// RecvBufferSize is the size in bytes of one provided recv buffer (netpoll: of each
	// connection's read buffer); 0 means 32 KiB. Larger messages are received straight into the
	// handler's buffers (Next.Fill), so these only hold small messages and message starts.
	RecvBufferSize int
	// RecvBuffers is the number of provided buffers per ring, a power of two; 0 means 256.
	RecvBuffers int
	// SendZCThreshold: a send of at least this many bytes uses SEND_ZC; 0 means 64 KiB;
	// negative disables SEND_ZC.
	SendZCThreshold int
	// SendZCLoopback uses SEND_ZC for loopback peers too. By default they get plain sends: the
	// kernel copies loopback data anyway, and zero-copy only adds its notification (slower in
	// BenchmarkStream). Tests set it to exercise the SEND_ZC path over loopback.
	SendZCLoopback bool
	// Wait is how io_uring loops block for completions; "" means WaitHandoff. Listen takes
	// WaitHold as given: the caller has made room for it (Server.SetWait).
	Wait WaitMode
	// Logger receives backend selection and error logs; nil means slog.Default().
	Logger *slog.Logger
	// TLS, when set, makes this a TLS listener: every accepted connection completes a
	// crypto/tls server handshake before Handler.OnOpen, and the handler sees plaintext. It is
	// cloned by Listen. nil is plaintext.
	TLS *tls.Config
	// HandshakeTimeout bounds a TLS handshake from accept to its end; a connection that has
	// not finished by then is closed unseen by the handler. 0 means 10 s.
	HandshakeTimeout time.Duration
	// SocketBuffers are the SO_SNDBUF and SO_RCVBUF of the accepted connections.
	SocketBuffers SocketBuffers
}

// SocketBuffers sizes the kernel's socket buffers of accepted connections, as Kafka's
// socket.send.buffer.bytes and socket.receive.buffer.bytes do. They are set on the listening
// sockets, which accepted connections inherit them from. 0 leaves a direction to the kernel's
// autotuning; the kernel doubles a size and caps it at net.core.wmem_max / rmem_max.
type SocketBuffers struct {
	Send, Receive int
}

// Defaults and bounds of Config.
const (
	defaultRecvBufferSize  = 32 << 10
	defaultRecvBuffers     = 256
	defaultSendZCThreshold = 64 << 10
	// maxRecvBuffers is the kernel's limit on entries of one provided-buffer ring.
	maxRecvBuffers = 1 << 15
	// maxRecvBufferSize keeps a buffer length within the 32-bit CQE result.
	maxRecvBufferSize = 1 << 30
	// maxRings bounds Rings against typos that would open thousands of rings.
	maxRings = 1024
)

// withDefaults validates cfg and fills in its defaults.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Backend == "" {
		cfg.Backend = Auto
	}
	b, err := ParseBackend(string(cfg.Backend))
	if err != nil {
		return cfg, err
	}
	cfg.Backend = b
	switch {
	case cfg.Rings < 0 || cfg.Rings > maxRings:
		return cfg, fmt.Errorf("ring config: Rings=%d; want 0..%d", cfg.Rings, maxRings)
	case cfg.Rings == 0:
		cfg.Rings = runtime.NumCPU()
	}
	switch {
	case cfg.RecvBufferSize < 0 || cfg.RecvBufferSize > maxRecvBufferSize:
		return cfg, fmt.Errorf("ring config: RecvBufferSize=%d; want 0..%d", cfg.RecvBufferSize, maxRecvBufferSize)
	case cfg.RecvBufferSize == 0:
		cfg.RecvBufferSize = defaultRecvBufferSize
	}
	switch {
	case cfg.RecvBuffers < 0 || cfg.RecvBuffers > maxRecvBuffers || cfg.RecvBuffers&(cfg.RecvBuffers-1) != 0:
		return cfg, fmt.Errorf("ring config: RecvBuffers=%d; want a power of two up to %d", cfg.RecvBuffers, maxRecvBuffers)
	case cfg.RecvBuffers == 0:
		cfg.RecvBuffers = defaultRecvBuffers
	}
	if cfg.SendZCThreshold == 0 {
		cfg.SendZCThreshold = defaultSendZCThreshold
	}
	if cfg.Wait, err = ParseWaitMode(string(cfg.Wait)); err != nil {
		return cfg, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SocketBuffers.Send < 0 || cfg.SocketBuffers.Receive < 0 {
		return cfg, fmt.Errorf("ring config: SocketBuffers=%+v; want 0 (the kernel's autotuning) or more", cfg.SocketBuffers)
	}
	switch {
	case cfg.HandshakeTimeout < 0:
		return cfg, fmt.Errorf("ring config: HandshakeTimeout=%v; want 0 (the default) or more", cfg.HandshakeTimeout)
	case cfg.HandshakeTimeout == 0:
		cfg.HandshakeTimeout = defaultHandshakeTimeout
	}
	if cfg.TLS != nil {
		if err := checkTLSConfig(cfg.TLS); err != nil {
			return cfg, err
		}
		cfg.TLS = cfg.TLS.Clone()
	}
	return cfg, nil
}

// Handler receives connection events. All calls for one connection are made
// from one goroutine, one at a time, in order: OnOpen, then OnData and
// OnFilled, then OnClose (exactly once).
type Handler interface {
	// OnOpen announces a new connection before any of its data.
	OnOpen(c Conn)
	// OnData gets bytes read from c. data is valid only until OnData returns (it is a provided
	// buffer that is recycled). Next says what to do with the rest of the stream. A non-nil
	// error closes the connection at once, dropping queued sends; call c.Close and return nil
	// to close after them instead.
	OnData(c Conn, data []byte) (Next, error)
	// OnFilled reports that the Fill asked for by the last Next is complete; Next.Consumed is
	// ignored.
	OnFilled(c Conn) (Next, error)
	// OnClose reports the end of c: err is nil when it was closed locally (Close, Shutdown),
	// io.EOF when the peer closed it, otherwise what broke it.
	OnClose(c Conn, err error)
}

// Next is what a Handler wants done after it has seen data: go on reading, receive the next
// bytes straight into a buffer of its own, or stop reading for a while.
type Next struct {
	// Consumed is how many bytes of the data the handler used. Fewer than all pauses the
	// connection: data[Consumed:] is kept and delivered again, before anything read later,
	// once Resume is called.
	Consumed int
	// Pause stops reading from the connection until Resume, also when all data was consumed
	// (a muted connection: the peer's bytes wait in the kernel).
	Pause bool
	// Fill, when not empty, asks for the next len(Fill) bytes of the stream to be received
	// straight into it, with no copy through a receive buffer; OnFilled follows. Only with
	// Consumed == len(data) and no Pause. Fill must stay valid until OnFilled or OnClose.
	Fill []byte
}

// Piece is one part of a message to send: bytes in memory (Buf), or, when FileLen > 0,
// FileLen bytes of the open file FileFD from offset FileOff, sent with sendfile(2) from the
// page cache without being read into, or mapped by, the process.
type Piece struct {
	Buf     []byte
	FileFD  int
	FileOff int64
	FileLen int
}

// Bytes is a Piece of memory.
func Bytes(b []byte) Piece { return Piece{Buf: b} }

// FileRange is a Piece of n bytes of the file fd from off.
func FileRange(fd int, off int64, n int) Piece { return Piece{FileFD: fd, FileOff: off, FileLen: n} }

// size is the piece's length in bytes.
func (p *Piece) size() int {
	if p.FileLen > 0 {
		return p.FileLen
	}
	return len(p.Buf)
}

// Conn is one accepted TCP connection.
type Conn interface {
	// ID is unique among the connections of one Server, starting at 1.
	ID() uint64
	// RemoteAddr is the peer's address.
	RemoteAddr() net.Addr
	// Loop is the index of the event loop serving the connection (0 with netpoll), so a
	// handler can keep the connection's work on that loop's core.
	Loop() int
	// Shared reports whether the Handler's calls for the connection run on an event loop
	// thread that other connections share (io_uring), where anything that blocks holds them
	// all up; false where each connection has a goroutine of its own (netpoll, TLS).
	Shared() bool
	// Send writes pieces after everything sent before on this connection. Safe to call from
	// any goroutine, also from inside OnData. When nothing is queued for the socket the bytes
	// are written at once by the calling goroutine, without blocking; what the socket does not
	// take then is written by the event loop. done (may be nil) is called exactly once, from
	// any goroutine (possibly before Send returns), when the kernel no longer references the
	// pieces: after the write completed (for SEND_ZC: after the notification), or when the
	// connection closed first. Pieces must not be modified until done. Returns an error if the
	// conn is closed.
	Send(pieces []Piece, done func()) error
	// Resume restarts reading after a Next that paused; safe from any goroutine. A Resume
	// while not paused is ignored.
	Resume()
	// Close closes the connection after the already-queued sends are written (best effort);
	// safe from any goroutine, idempotent.
	Close() error
	// SetContext stores the handler's per-connection state.
	SetContext(v any)
	// Context returns what SetContext stored, or nil.
	Context() any
	// TLS is the state of the connection's completed TLS handshake (version, cipher suite,
	// the client's certificates under mutual TLS), or nil on a plaintext listener.
	TLS() *tls.ConnectionState
}

// Stats are counters of one ring (or, summed, of a Server). On a TLS listener the byte counts
// are of plaintext, as the handler sees it, and a TLS connection counts in Open from the end
// of its handshake.
type Stats struct {
	Accepted      uint64 // connections accepted
	Open          uint64 // connections open now
	BytesIn       uint64 // bytes received
	BytesOut      uint64 // bytes written to sockets
	Sends         uint64 // send operations issued to the kernel (one may carry many Send calls)
	ZCSends       uint64 // of Sends, those issued as SEND_ZC / SENDMSG_ZC
	ZCCopied      uint64 // SEND_ZC notifications saying the kernel copied after all
	PartialSends  uint64 // send operations that wrote fewer bytes than asked, then resubmitted
	CQEs          uint64 // completion queue entries reaped
	Enters        uint64 // io_uring_enter calls of the event loop
	Wakeups       uint64 // eventfd wake-ups from Send/Close on other goroutines
	NoBufs        uint64 // recvs that found no provided buffer and waited for one
	DirectSends   uint64 // Send calls written at once by the calling goroutine
	DirectBlocked uint64 // of DirectSends, those the socket did not take whole (finished by the loop)
	Fills         uint64 // direct receives into a handler's buffer (Next.Fill)
	Pauses        uint64 // times a connection stopped reading (Next.Pause or a partial Consumed)
	// TLSHandshakes counts TLS handshakes completed: connections handed to the handler.
	TLSHandshakes uint64
	// TLSHandshakeErrors counts TLS handshakes that failed (garbage, no shared version or
	// cipher, a missing or bad client certificate) or timed out; their sockets were closed
	// without a Handler call.
	TLSHandshakeErrors uint64
	// TLSHandshakeTimeouts counts the TLSHandshakeErrors that were Config.HandshakeTimeout
	// running out.
	TLSHandshakeTimeouts uint64
	// Idle is how long the event loop has waited for work since it started: on io_uring the
	// time its thread blocked in io_uring_enter (a wait in progress included); on netpoll,
	// which has no loop thread, the time since start less the time its connections' readers
	// spent in the Handler's OnData. Kafka's NetworkProcessorAvgIdlePercent is made of it.
	Idle time.Duration
	// Uptime is how long the event loop has run; Idle / Uptime is its idle share.
	Uptime time.Duration
}

// add sums o into s.
func (s *Stats) add(o Stats) {
	s.Accepted += o.Accepted
	s.Idle += o.Idle
	s.Uptime += o.Uptime
	s.Open += o.Open
	s.BytesIn += o.BytesIn
	s.BytesOut += o.BytesOut
	s.Sends += o.Sends
	s.ZCSends += o.ZCSends
	s.ZCCopied += o.ZCCopied
	s.PartialSends += o.PartialSends
	s.CQEs += o.CQEs
	s.Enters += o.Enters
	s.Wakeups += o.Wakeups
	s.NoBufs += o.NoBufs
	s.DirectSends += o.DirectSends
	s.DirectBlocked += o.DirectBlocked
	s.Fills += o.Fills
	s.Pauses += o.Pauses
	s.TLSHandshakes += o.TLSHandshakes
	s.TLSHandshakeErrors += o.TLSHandshakeErrors
	s.TLSHandshakeTimeouts += o.TLSHandshakeTimeouts
}

// engine is one running backend.
type engine interface {
	addr() net.Addr
	ringStats() []Stats
	// setWait changes how io_uring loops block; netpoll has none.
	setWait(m WaitMode)
	// shutdown stops accepting, drains, closes; after ctx is done it forces the rest.
	shutdown(ctx context.Context) error
}

// Server is a running listener with its event loops.
type Server struct {
	backend Backend
	eng     engine
	tls     TLSInfo

	shutOnce sync.Once
	shutErr  error
}

// Listen opens the listeners and starts the event loops of cfg.Backend,
// falling back from Auto to Netpoll (with a Warn log saying why) when io_uring
// cannot be set up here.
func Listen(cfg Config, h Handler) (*Server, error) {
	if h == nil {
		return nil, errNilHandler
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	srv, err := listen(cfg, h)
	if err != nil {
		return nil, err
	}
	if srv.tls = tlsInfo(cfg.TLS); srv.tls.Mode != TLSOff {
		cfg.Logger.Info("ring: TLS listener, records sealed and opened in user space (crypto/tls)",
			"addr", srv.Addr().String(), "handshake_timeout", cfg.HandshakeTimeout.String(), "kernel_tls", srv.tls.Reason)
	}
	return srv, nil
}

// listen starts the backend cfg asks for.
func listen(cfg Config, h Handler) (*Server, error) {
	if cfg.Backend != Netpoll {
		eng, err := listenUring(cfg, h)
		switch {
		case err == nil:
			cfg.Logger.Info("ring: io_uring backend running", "addr", eng.addr().String(), "rings", cfg.Rings,
				"setup", eng.setupDesc, "send_zc_threshold", eng.zcThreshold)
			return &Server{backend: Uring, eng: eng}, nil
		case cfg.Backend == Uring || !errors.Is(err, errUnavailable):
			return nil, err
		}
		cfg.Logger.Warn("ring: io_uring unavailable, falling back to netpoll", "reason", err.Error())
	}
	eng, err := listenNetpoll(cfg, h)
	if err != nil {
		return nil, err
	}
	cfg.Logger.Info("ring: netpoll backend running", "addr", eng.addr().String())
	return &Server{backend: Netpoll, eng: eng}, nil
}

// Addr is the address the server listens on (with the picked port when Config.Addr had port 0).
func (s *Server) Addr() net.Addr { return s.eng.addr() }

// Backend is the backend actually running: Uring or Netpoll.
func (s *Server) Backend() Backend { return s.backend }

// TLSInfo says whether the listener speaks TLS and where its records are sealed and opened.
func (s *Server) TLSInfo() TLSInfo { return s.tls }

// Stats sums the counters of all rings.
func (s *Server) Stats() Stats {
	var t Stats
	for _, r := range s.eng.ringStats() {
		t.add(r)
	}
	return t
}

// SetWait changes how the server's io_uring loops block for completions, each from its next
// wait on; a netpoll server has no such loops. WaitHold keeps a Go P per loop while the loop
// sleeps: switch to it only once GOMAXPROCS has a P for every loop beside those the rest of
// the process needs, or the other goroutines wait for the loops.
func (s *Server) SetWait(m WaitMode) { s.eng.setWait(m) }

// RingStats returns the counters of each ring (one entry for netpoll), to see
// how the kernel spreads connections over the rings.
func (s *Server) RingStats() []Stats { return s.eng.ringStats() }

// Shutdown stops accepting, waits (until ctx is done) for queued sends to
// finish, closes all connections (OnClose for each) and the rings. Data that
// arrives after Shutdown starts is not delivered. It returns ctx's error when
// ctx ended the wait and the rest was closed forcibly; later calls return the
// first call's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutOnce.Do(func() { s.shutErr = s.eng.shutdown(ctx) })
	return s.shutErr
}

// errNilHandler refuses a server without a Handler.
var errNilHandler = errors.New("ring: nil Handler")

// errUnavailable marks errors that mean "io_uring cannot run here", as
// opposed to errors of the listen address, so Auto knows when to fall back.
var errUnavailable = errors.New("io_uring unavailable")

// disabledByEnv reports whether DisableEnv asks to pretend io_uring is absent.
func disabledByEnv() bool { return os.Getenv(DisableEnv) == "1" }
