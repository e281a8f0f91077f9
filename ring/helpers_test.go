package ring

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// backends lists the backends every behaviour test runs on.
var backends = []Backend{Uring, Netpoll}

// waitFor polls cond every few milliseconds for at most d, failing the test if it never holds.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		<-tick.C
	}
}

// quietLogger drops logs below Warn so test output stays readable.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startServer listens with cfg on 127.0.0.1:0 and shuts down at cleanup. An
// unusable io_uring skips the test, since the fallback has its own test.
func startServer(t testing.TB, cfg Config, h Handler) *Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	s, err := Listen(cfg, h)
	if cfg.Backend == Uring && errors.Is(err, errUnavailable) {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	if err != nil {
		t.Fatalf("Listen(%+v): %v", cfg, err)
	}
	if cfg.Backend != Auto && s.Backend() != cfg.Backend {
		t.Fatalf("Backend()=%s; want %s", s.Backend(), cfg.Backend)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("cleanup Shutdown: %v", err)
		}
	})
	return s
}

func dial(t testing.TB, s *Server) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", s.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// connState checks the Handler call order of one connection.
type connState struct {
	opened, closed bool
	frame          []byte // echo: bytes of an incomplete frame
}

// echoHandler echoes length-prefixed frames (4-byte big-endian size, then
// payload) as one Send of two buffers, and checks the Handler contract: call
// order per connection, done exactly once per Send.
type echoHandler struct {
	t testing.TB

	sends, dones, doubleDones atomic.Int64
	opens, closes             atomic.Int64

	mu        sync.Mutex
	conns     map[uint64]Conn  // guarded by mu: open connections
	closeErrs map[uint64]error // guarded by mu
	opened    chan Conn        // every OnOpen, if non-nil (buffered)
	// quit: a frame with this payload makes OnData return errQuit.
	quit []byte
}

var errQuit = errors.New("quit frame")

func newEchoHandler(t testing.TB) *echoHandler {
	return &echoHandler{t: t, conns: map[uint64]Conn{}, closeErrs: map[uint64]error{}, opened: make(chan Conn, 1024)}
}

func (h *echoHandler) OnOpen(c Conn) {
	if c.Context() != nil {
		h.t.Errorf("conn %d: OnOpen with a context already set", c.ID())
	}
	c.SetContext(&connState{opened: true})
	h.opens.Add(1)
	h.mu.Lock()
	h.conns[c.ID()] = c
	h.mu.Unlock()
	select {
	case h.opened <- c:
	default:
	}
}

func (h *echoHandler) OnData(c Conn, data []byte) (Next, error) {
	st, _ := c.Context().(*connState)
	if st == nil || !st.opened || st.closed {
		h.t.Errorf("conn %d: OnData out of order (state %+v)", c.ID(), st)
		return Next{Consumed: len(data)}, nil
	}
	st.frame = append(st.frame, data...)
	for len(st.frame) >= 4 {
		n := int(binary.BigEndian.Uint32(st.frame))
		if len(st.frame) < 4+n {
			break
		}
		frame := bytes.Clone(st.frame[:4+n])
		st.frame = st.frame[4+n:]
		if h.quit != nil && bytes.Equal(frame[4:], h.quit) {
			return Next{}, errQuit
		}
		if err := h.send(c, [][]byte{frame[:4], frame[4:]}); err != nil {
			h.t.Errorf("conn %d: echo Send: %v", c.ID(), err)
		}
	}
	if len(st.frame) == 0 {
		st.frame = nil
	}
	return Next{Consumed: len(data)}, nil
}

// OnFilled implements Handler; the echo handler never asks for fills.
func (h *echoHandler) OnFilled(c Conn) (Next, error) {
	h.t.Errorf("conn %d: OnFilled without a fill", c.ID())
	return Next{}, nil
}

// send wraps Conn.Send with done accounting; failed Sends are not counted.
func (h *echoHandler) send(c Conn, bufs [][]byte) error {
	var once atomic.Bool
	err := c.Send(pieces(bufs...), func() {
		if !once.CompareAndSwap(false, true) {
			h.doubleDones.Add(1)
		}
		h.dones.Add(1)
	})
	if err == nil {
		h.sends.Add(1)
	}
	return err
}

func (h *echoHandler) OnClose(c Conn, err error) {
	st, _ := c.Context().(*connState)
	if st == nil || !st.opened || st.closed {
		h.t.Errorf("conn %d: OnClose out of order (state %+v)", c.ID(), st)
	} else {
		st.closed = true
	}
	h.closes.Add(1)
	h.mu.Lock()
	delete(h.conns, c.ID())
	h.closeErrs[c.ID()] = err
	h.mu.Unlock()
}

func (h *echoHandler) closeErr(id uint64) (error, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	err, ok := h.closeErrs[id]
	return err, ok
}

// checkDones waits until every accepted Send had its done, and no done ran twice.
func (h *echoHandler) checkDones(t testing.TB) {
	t.Helper()
	waitFor(t, 10*time.Second, "done for every Send", func() bool { return h.dones.Load() == h.sends.Load() })
	if n := h.doubleDones.Load(); n != 0 {
		t.Errorf("%d done callbacks ran more than once", n)
	}
}

// pieces turns byte slices into memory pieces.
func pieces(bufs ...[]byte) []Piece {
	ps := make([]Piece, len(bufs))
	for i, b := range bufs {
		ps[i] = Bytes(b)
	}
	return ps
}

// frame builds a length-prefixed frame of n payload bytes, its content a function of (seed, n).
func frame(seed, n int) []byte {
	b := make([]byte, 4+n)
	binary.BigEndian.PutUint32(b, uint32(n))
	for i := range n {
		b[4+i] = byte(i*7 + seed*13 + i>>9)
	}
	return b
}

// readFrame reads one frame from r.
func readFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	b := make([]byte, 4+n)
	copy(b, hdr[:])
	if _, err := io.ReadFull(r, b[4:]); err != nil {
		return nil, fmt.Errorf("frame body of %d bytes: %w", n, err)
	}
	return b, nil
}

// roundTrip sends one small frame on c and checks the echo.
func roundTrip(t testing.TB, c net.Conn, seed int) {
	t.Helper()
	want := frame(seed, 10)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(want); err != nil {
		t.Fatalf("write: %v", err)
	}
	got, err := readFrame(c)
	if err != nil {
		t.Fatalf("read echo: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("echo mismatch: got %x; want %x", got, want)
	}
	_ = c.SetDeadline(time.Time{})
}

// readToEnd reads from c until EOF or error, returning the bytes and the error (nil at EOF).
func readToEnd(c net.Conn, d time.Duration) ([]byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(c)
	return b, err
}
