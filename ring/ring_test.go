package ring

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestParseBackend(t *testing.T) {
	tests := []struct {
		in      string
		want    Backend
		wantErr bool
	}{
		{"", Auto, false},
		{"auto", Auto, false},
		{" Uring ", Uring, false},
		{"NETPOLL", Netpoll, false},
		{"epoll", "", true},
		{"uring2", "", true},
	}
	for _, tt := range tests {
		got, err := ParseBackend(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseBackend(%q)=%q, %v; want %q, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseBackend(f *testing.F) {
	for _, s := range []string{"", "auto", "uring", "netpoll", "URING", "x", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBackend(s)
		if err != nil {
			if !strings.Contains(err.Error(), "unknown ring backend") {
				t.Fatalf("ParseBackend(%q) error %q lacks context", s, err)
			}
			return
		}
		if b != Auto && b != Uring && b != Netpoll {
			t.Fatalf("ParseBackend(%q)=%q; not a known backend", s, b)
		}
		if again, err := ParseBackend(string(b)); err != nil || again != b {
			t.Fatalf("ParseBackend(%q)=%q, %v; want it to round-trip", b, again, err)
		}
	})
}

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
		check   func(Config) bool
	}{
		{name: "zero", cfg: Config{}, check: func(c Config) bool {
			return c.Backend == Auto && c.Rings > 0 && c.RecvBufferSize == 32<<10 && c.RecvBuffers == 256 &&
				c.SendZCThreshold == 64<<10 && c.Logger != nil
		}},
		{name: "zc off stays negative", cfg: Config{SendZCThreshold: -1}, check: func(c Config) bool { return c.SendZCThreshold == -1 }},
		{name: "buffers not power of two", cfg: Config{RecvBuffers: 3}, wantErr: "RecvBuffers=3"},
		{name: "too many buffers", cfg: Config{RecvBuffers: 1 << 16}, wantErr: "RecvBuffers=65536"},
		{name: "negative rings", cfg: Config{Rings: -1}, wantErr: "Rings=-1"},
		{name: "negative buffer size", cfg: Config{RecvBufferSize: -5}, wantErr: "RecvBufferSize=-5"},
		{name: "bad backend", cfg: Config{Backend: "kqueue"}, wantErr: "kqueue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.withDefaults()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("withDefaults()=%v; want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(got) {
				t.Fatalf("withDefaults()=%+v, %v", got, err)
			}
		})
	}
}

func TestParseKernelRelease(t *testing.T) {
	tests := []struct {
		rel        string
		wmaj, wmin int
		wok        bool
	}{
		{"6.18.44-fc-v1045", 6, 18, true},
		{"5.15.0-91-generic", 5, 15, true},
		{"6.1", 6, 1, true},
		{"6.0rc1", 6, 0, true},
		{"garbage", 0, 0, false},
	}
	for _, tt := range tests {
		maj, min, ok := parseKernelRelease(tt.rel)
		if maj != tt.wmaj || min != tt.wmin || ok != tt.wok {
			t.Errorf("parseKernelRelease(%q)=%d,%d,%v; want %d,%d,%v", tt.rel, maj, min, ok, tt.wmaj, tt.wmin, tt.wok)
		}
	}
}

// TestEcho pipelines frames from 1 byte to 4 MiB over many concurrent
// connections and checks every echo comes back whole and in order.
func TestEcho(t *testing.T) {
	sizes := []int{1, 2, 3, 100, 1000, 4095, 4096, 65535, 65536, 65537, 300_000, 1 << 20, 4 << 20}
	conns, smallPerConn := 16, 200
	if raceEnabled {
		conns, smallPerConn = 6, 50
	}
	tests := []struct {
		backend Backend
		zc      int
		name    string
	}{
		{Uring, 0, "uring/zc-default"},
		{Uring, 1, "uring/zc-everything"},
		{Uring, -1, "uring/zc-off"},
		{Netpoll, 0, "netpoll"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newEchoHandler(t)
			s := startServer(t, Config{Backend: tt.backend, Rings: 2, SendZCThreshold: tt.zc, SendZCLoopback: true, RecvBuffers: 64}, h)
			var wg sync.WaitGroup
			for ci := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := echoClient(s, ci, sizes, smallPerConn); err != nil {
						t.Errorf("client %d: %v", ci, err)
					}
				}()
			}
			wg.Wait()
			waitFor(t, 5*time.Second, "all connections closed", func() bool { return h.closes.Load() == int64(conns) })
			h.checkDones(t)
			st := s.Stats()
			t.Logf("stats: %+v", st)
			if st.Accepted != uint64(conns) || st.Open != 0 {
				t.Errorf("Accepted=%d Open=%d; want %d, 0", st.Accepted, st.Open, conns)
			}
			if st.BytesIn != st.BytesOut || st.BytesIn == 0 {
				t.Errorf("BytesIn=%d BytesOut=%d; want equal and non-zero", st.BytesIn, st.BytesOut)
			}
			if tt.backend == Uring && tt.zc >= 0 && st.ZCSends == 0 {
				t.Errorf("ZCSends=0; want SEND_ZC used for the large frames")
			}
			if tt.backend == Uring && tt.zc < 0 && st.ZCSends != 0 {
				t.Errorf("ZCSends=%d with SEND_ZC disabled", st.ZCSends)
			}
		})
	}
}

// echoClient writes frames (the sizes in order, interleaved with small ones)
// while a reader checks the echoes arrive in the same order, then closes.
func echoClient(s *Server, seed int, sizes []int, small int) error {
	c, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	if err != nil {
		return err
	}
	return echoOver(c, seed, sizes, small)
}

// echoOver is echoClient on a connection already made (plaintext or TLS); it closes c.
func echoOver(c net.Conn, seed int, sizes []int, small int) error {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	var plan []int
	for i := range small {
		plan = append(plan, 1+(i*37+seed)%200)
		if i%(small/len(sizes)+1) == 0 && len(plan) < small+len(sizes) {
			plan = append(plan, sizes[(i/(small/len(sizes)+1))%len(sizes)])
		}
	}
	plan = append(plan, sizes...)
	werr := make(chan error, 1)
	go func() {
		var buf []byte
		for i, n := range plan {
			buf = append(buf, frame(seed+i, n)...)
			if len(buf) > 32<<10 || i == len(plan)-1 {
				if _, err := c.Write(buf); err != nil {
					werr <- fmt.Errorf("write frame %d: %w", i, err)
					return
				}
				buf = buf[:0]
			}
		}
		werr <- nil
	}()
	for i, n := range plan {
		got, err := readFrame(c)
		if err != nil {
			return fmt.Errorf("read echo %d (%d bytes): %w", i, n, err)
		}
		if want := frame(seed+i, n); !bytes.Equal(got, want) {
			return fmt.Errorf("echo %d: got %d bytes, want %d; out of order or corrupt", i, len(got), len(want))
		}
	}
	return <-werr
}

func TestCloseFromOtherGoroutine(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s := startServer(t, Config{Backend: b, Rings: 1}, h)
			cl := dial(t, s)
			var sc Conn
			select {
			case sc = <-h.opened:
			case <-time.After(5 * time.Second):
				t.Fatal("no OnOpen")
			}
			if sc.RemoteAddr().String() != cl.LocalAddr().String() {
				t.Errorf("RemoteAddr()=%s; want %s", sc.RemoteAddr(), cl.LocalAddr())
			}
			payload := frame(1, 3<<20)
			// Queue from this goroutine, then close at once: the data must still arrive.
			if err := h.send(sc, [][]byte{payload[:1000], payload[1000:]}); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if err := sc.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := sc.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if err := sc.Send(pieces([]byte("late")), nil); !errors.Is(err, ErrClosed) {
				t.Fatalf("Send after Close: %v; want ErrClosed", err)
			}
			got, err := readToEnd(cl, 10*time.Second)
			if err != nil {
				t.Fatalf("client read: %v after %d bytes", err, len(got))
			}
			if !bytes.Equal(got, payload) {
				t.Fatalf("client got %d bytes; want the %d queued before Close", len(got), len(payload))
			}
			waitFor(t, 5*time.Second, "OnClose", func() bool { return h.closes.Load() == 1 })
			if err, _ := h.closeErr(sc.ID()); err != nil {
				t.Errorf("OnClose err=%v; want nil for a local Close", err)
			}
			h.checkDones(t)
		})
	}
}

// TestOnDataErrorCloses: a handler error closes the connection and reaches OnClose.
func TestOnDataErrorCloses(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			h.quit = []byte("quit")
			s := startServer(t, Config{Backend: b, Rings: 1}, h)
			cl := dial(t, s)
			roundTrip(t, cl, 1)
			q := append(frame(0, 0)[:0:0], 0, 0, 0, 4, 'q', 'u', 'i', 't')
			if _, err := cl.Write(q); err != nil {
				t.Fatalf("write quit: %v", err)
			}
			_, _ = readToEnd(cl, 5*time.Second) // EOF or reset, either is fine
			waitFor(t, 5*time.Second, "OnClose", func() bool { return h.closes.Load() == 1 })
			h.mu.Lock()
			defer h.mu.Unlock()
			for id, err := range h.closeErrs {
				if !errors.Is(err, errQuit) {
					t.Errorf("conn %d OnClose err=%v; want errQuit", id, err)
				}
			}
		})
	}
}

// TestPeerCloses: the peer's FIN reaches OnClose as io.EOF.
func TestPeerCloses(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s := startServer(t, Config{Backend: b, Rings: 1}, h)
			cl := dial(t, s)
			roundTrip(t, cl, 2)
			cl.Close()
			waitFor(t, 5*time.Second, "OnClose", func() bool { return h.closes.Load() == 1 })
			h.mu.Lock()
			defer h.mu.Unlock()
			for id, err := range h.closeErrs {
				if !errors.Is(err, io.EOF) {
					t.Errorf("conn %d OnClose err=%v; want io.EOF", id, err)
				}
			}
		})
	}
}

// TestPeerResetMidSend: the peer resets while a large queue is being written;
// the server reports an error, calls every done, and keeps serving.
func TestPeerResetMidSend(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s := startServer(t, Config{Backend: b, Rings: 1, SendZCThreshold: 256 << 10}, h)
			cl := dial(t, s)
			sc := <-h.opened
			chunk := make([]byte, 1<<20)
			small := make([]byte, 1000)
			for i := range 48 {
				buf := chunk
				if i%2 == 1 {
					buf = small // alternate SEND_ZC and plain sends
				}
				if err := h.send(sc, [][]byte{buf}); err != nil {
					t.Fatalf("Send %d: %v", i, err)
				}
			}
			if _, err := io.ReadFull(cl, make([]byte, 100_000)); err != nil {
				t.Fatalf("client read: %v", err)
			}
			if err := cl.SetLinger(0); err != nil {
				t.Fatal(err)
			}
			cl.Close() // RST
			waitFor(t, 5*time.Second, "OnClose", func() bool { return h.closes.Load() == 1 })
			if err, _ := h.closeErr(sc.ID()); err == nil {
				t.Errorf("OnClose err=nil; want the reset")
			} else {
				t.Logf("OnClose err: %v", err)
			}
			h.checkDones(t)
			if err := sc.Send(pieces(small), nil); !errors.Is(err, ErrClosed) {
				t.Errorf("Send after reset: %v; want ErrClosed", err)
			}
			roundTrip(t, dial(t, s), 3)
		})
	}
}

// TestShutdownWithOpenConns: idle connections and one with a large queued
// send; Shutdown delivers the send, closes everything and stops accepting.
func TestShutdownWithOpenConns(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s, err := Listen(Config{Addr: "127.0.0.1:0", Backend: b, Rings: 2, Logger: quietLogger()}, h)
			if b == Uring && errors.Is(err, errUnavailable) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			const idle = 10
			var clients []*net.TCPConn
			for i := range idle {
				c := dial(t, s)
				roundTrip(t, c, i)
				clients = append(clients, c)
			}
			busy := dial(t, s)
			waitFor(t, 5*time.Second, "all open", func() bool { return s.Stats().Open == idle+1 })
			// Open counts a connection just before OnOpen runs, so wait for the handler to have it.
			var busyConn Conn
			waitFor(t, 5*time.Second, "OnOpen of the busy conn", func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				for _, c := range h.conns {
					if c.RemoteAddr().String() == busy.LocalAddr().String() {
						busyConn = c
					}
				}
				return busyConn != nil
			})
			payload := frame(9, 2<<20)
			if err := h.send(busyConn, [][]byte{payload}); err != nil {
				t.Fatal(err)
			}
			got := make(chan []byte, 1)
			go func() {
				b, _ := readToEnd(busy, 10*time.Second)
				got <- b
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if g := <-got; !bytes.Equal(g, payload) {
				t.Errorf("busy client got %d bytes; want %d", len(g), len(payload))
			}
			if n := h.closes.Load(); n != idle+1 {
				t.Errorf("OnClose calls=%d; want %d", n, idle+1)
			}
			for i, c := range clients {
				if b, err := readToEnd(c, 5*time.Second); err != nil || len(b) != 0 {
					t.Errorf("idle client %d: read %d bytes, err %v; want clean EOF", i, len(b), err)
				}
			}
			if st := s.Stats(); st.Open != 0 {
				t.Errorf("Open=%d after Shutdown", st.Open)
			}
			if c, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
				c.Close()
				t.Errorf("dial after Shutdown succeeded")
			}
			h.checkDones(t)
			if err := s.Shutdown(ctx); err != nil {
				t.Errorf("second Shutdown: %v", err)
			}
		})
	}
}

// TestShutdownForced: a peer that never reads holds the drain until ctx ends;
// Shutdown then closes forcibly, reports ctx's error and still calls every done.
func TestShutdownForced(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s, err := Listen(Config{Addr: "127.0.0.1:0", Backend: b, Rings: 1, Logger: quietLogger()}, h)
			if b == Uring && errors.Is(err, errUnavailable) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			dial(t, s)
			sc := <-h.opened
			big := make([]byte, 4<<20)
			for range 8 {
				if err := h.send(sc, [][]byte{big}); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Shutdown=%v; want DeadlineExceeded", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("forced Shutdown took %v", d)
			}
			if n := h.closes.Load(); n != 1 {
				t.Errorf("OnClose calls=%d; want 1", n)
			}
			h.checkDones(t)
		})
	}
}

// TestAutoFallback: with io_uring "disabled" Auto runs netpoll and says why; Uring refuses.
func TestAutoFallback(t *testing.T) {
	t.Setenv(DisableEnv, "1")
	var logBuf syncBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	h := newEchoHandler(t)
	s := startServer(t, Config{Backend: Auto, Logger: log}, h)
	if s.Backend() != Netpoll {
		t.Fatalf("Backend()=%s; want netpoll", s.Backend())
	}
	logs := logBuf.String()
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, DisableEnv) {
		t.Errorf("log lacks a Warn naming %s:\n%s", DisableEnv, logs)
	}
	roundTrip(t, dial(t, s), 1)

	_, err := Listen(Config{Addr: "127.0.0.1:0", Backend: Uring, Logger: quietLogger()}, h)
	if !errors.Is(err, errUnavailable) {
		t.Errorf("Listen(Uring) with %s=1: err=%v; want errUnavailable", DisableEnv, err)
	}
}

// TestListenErrorNoFallback: a bad address fails Auto instead of falling back.
func TestListenErrorNoFallback(t *testing.T) {
	h := newEchoHandler(t)
	for _, b := range []Backend{Auto, Netpoll} {
		if _, err := Listen(Config{Addr: "256.1.1.1:0", Backend: b, Logger: quietLogger()}, h); err == nil {
			t.Errorf("Listen(%s, bad address) succeeded", b)
		}
	}
	if _, err := Listen(Config{}, nil); err == nil {
		t.Errorf("Listen with nil Handler succeeded")
	}
}

// TestPortZeroManyRings: port 0 with four rings; all share the picked port
// and the kernel spreads connections over them.
func TestPortZeroManyRings(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s := startServer(t, Config{Addr: "127.0.0.1:0", Backend: b, Rings: 4, PinCPUs: true}, h)
			if s.Addr().(*net.TCPAddr).Port == 0 {
				t.Fatalf("Addr()=%s; want the picked port", s.Addr())
			}
			const n = 64
			for i := range n {
				roundTrip(t, dial(t, s), i)
			}
			per := s.RingStats()
			used := 0
			var total uint64
			for _, st := range per {
				if st.Accepted > 0 {
					used++
				}
				total += st.Accepted
			}
			t.Logf("accepted per ring: %v", func() []uint64 {
				var a []uint64
				for _, st := range per {
					a = append(a, st.Accepted)
				}
				return a
			}())
			if total != n {
				t.Errorf("accepted %d; want %d", total, n)
			}
			if b == Uring && (len(per) != 4 || used < 2) {
				t.Errorf("%d rings, %d of them accepted; want 4 rings sharing the load", len(per), used)
			}
		})
	}
}

// TestSendFromOtherGoroutines: many goroutines Send on one connection at once;
// each Send's bytes stay contiguous and everything arrives.
func TestSendFromOtherGoroutines(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s := startServer(t, Config{Backend: b, Rings: 1}, h)
			cl := dial(t, s)
			sc := <-h.opened
			const senders, each = 8, 200
			var wg sync.WaitGroup
			for g := range senders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						f := frame(g*1000+i, 1+(i*31)%3000)
						if err := h.send(sc, [][]byte{f[:2], f[2:]}); err != nil {
							t.Errorf("Send: %v", err)
							return
						}
					}
				}()
			}
			emptyDone := make(chan struct{})
			if err := sc.Send(nil, func() { close(emptyDone) }); err != nil {
				t.Fatalf("empty Send: %v", err)
			}
			if err := sc.Send(pieces([]byte{}, nil), nil); err != nil {
				t.Fatalf("Send of empty buffers with nil done: %v", err)
			}
			next := make([]int, senders)
			_ = cl.SetReadDeadline(time.Now().Add(20 * time.Second))
			for range senders * each {
				got, err := readFrame(cl)
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				// Identify the sender by trying each one's next expected frame.
				ok := false
				for g := range senders {
					if next[g] < each && bytes.Equal(got, frame(g*1000+next[g], 1+(next[g]*31)%3000)) {
						next[g]++
						ok = true
						break
					}
				}
				if !ok {
					t.Fatalf("frame of %d bytes matches no sender's next frame: sends interleaved or reordered", len(got))
				}
			}
			wg.Wait()
			select {
			case <-emptyDone:
			case <-time.After(5 * time.Second):
				t.Fatal("done of an empty Send never ran")
			}
			h.checkDones(t)
			t.Logf("stats: %+v", s.Stats())
		})
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (log output).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRawLayouts: the off-heap msghdr and iovec match the kernel's (x/sys's) layout.
func TestRawLayouts(t *testing.T) {
	var m unix.Msghdr
	var rm rawMsghdr
	var v unix.Iovec
	var rv rawIovec
	tests := []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof msghdr", unsafe.Sizeof(rm), unsafe.Sizeof(m)},
		{"msghdr.iov", unsafe.Offsetof(rm.iov), unsafe.Offsetof(m.Iov)},
		{"msghdr.iovlen", unsafe.Offsetof(rm.iovlen), unsafe.Offsetof(m.Iovlen)},
		{"msghdr.control", unsafe.Offsetof(rm.control), unsafe.Offsetof(m.Control)},
		{"msghdr.flags", unsafe.Offsetof(rm.flags), unsafe.Offsetof(m.Flags)},
		{"sizeof iovec", unsafe.Sizeof(rv), unsafe.Sizeof(v)},
		{"iovec.len", unsafe.Offsetof(rv.len), unsafe.Offsetof(v.Len)},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s=%d; want %d", tt.name, tt.got, tt.want)
		}
	}
}

// TestListenAnyAddress: ":0" listens on every address; IPv4 and, where the
// host has it, IPv6 loopback both reach the server.
func TestListenAnyAddress(t *testing.T) {
	targets := []string{"127.0.0.1"}
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		ln.Close()
		targets = append(targets, "::1")
	}
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s := startServer(t, Config{Addr: ":0", Backend: b, Rings: 2}, h)
			port := s.Addr().(*net.TCPAddr).Port
			for i, host := range targets {
				c, err := net.DialTimeout("tcp", net.JoinHostPort(host, fmt.Sprint(port)), 5*time.Second)
				if err != nil {
					t.Fatalf("dial %s: %v", host, err)
				}
				roundTrip(t, c, i)
				c.Close()
			}
		})
	}
}

// TestNoZeroCopyToLoopback checks that a large send to a loopback peer goes out as a plain send
// unless Config.SendZCLoopback asks otherwise: the kernel copies loopback data anyway.
func TestNoZeroCopyToLoopback(t *testing.T) {
	for _, forced := range []bool{false, true} {
		t.Run(fmt.Sprintf("SendZCLoopback=%v", forced), func(t *testing.T) {
			h := make(openerHandler, 1)
			s := startServer(t, Config{Backend: Uring, Rings: 1, SendZCThreshold: 64 << 10, SendZCLoopback: forced}, h)
			c := dial(t, s)
			sc := <-h
			const size = 1 << 20
			if err := sc.Send(pieces(make([]byte, size)), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := io.CopyN(io.Discard, c, size); err != nil {
				t.Fatalf("read %d bytes: %v", size, err)
			}
			st := s.Stats()
			if forced && st.ZCSends == 0 {
				t.Errorf("ZCSends=0 with SendZCLoopback; want SEND_ZC used")
			}
			if !forced && st.ZCSends != 0 {
				t.Errorf("ZCSends=%d to a loopback peer; want plain sends", st.ZCSends)
			}
		})
	}
}

// streamHandler sends small messages from a goroutine of its own on every connection until
// Send fails, so Conn.Send's direct writes race with whatever the loop does meanwhile.
type streamHandler struct{ wg sync.WaitGroup }

func (h *streamHandler) OnOpen(c Conn) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		msg := []byte("0123456789abcdef")
		for c.Send([]Piece{Bytes(msg)}, nil) == nil {
		}
	}()
}

func (h *streamHandler) OnData(_ Conn, data []byte) (Next, error) {
	return Next{Consumed: len(data)}, nil
}

func (h *streamHandler) OnFilled(Conn) (Next, error) { return Next{}, nil }

func (h *streamHandler) OnClose(Conn, error) {}

// TestShutdownDuringDirectSends: a drain that finds a connection in the middle of a direct
// send from another goroutine still closes it once that send is done, so Shutdown finishes
// without waiting for its context to run out.
func TestShutdownDuringDirectSends(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			for i := range 30 {
				h := &streamHandler{}
				s, err := Listen(Config{Addr: "127.0.0.1:0", Backend: b, Rings: 1, SendZCThreshold: -1, Logger: quietLogger()}, h)
				if b == Uring && errors.Is(err, errUnavailable) {
					t.Skip(err)
				}
				if err != nil {
					t.Fatal(err)
				}
				c := dial(t, s)
				go io.Copy(io.Discard, c)
				waitFor(t, 5*time.Second, "the connection open", func() bool { return s.Stats().Open == 1 })
				time.Sleep(time.Millisecond)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err = s.Shutdown(ctx)
				cancel()
				if err != nil {
					t.Fatalf("round %d: Shutdown: %v; want a drain that ends on its own", i, err)
				}
				h.wg.Wait()
			}
		})
	}
}

// spinHandler is an echo handler whose OnData first keeps the loop busy for spin.
type spinHandler struct {
	*echoHandler
	spin time.Duration
}

func (h spinHandler) OnData(c Conn, data []byte) (Next, error) {
	for start := time.Now(); time.Since(start) < h.spin; {
	}
	return h.echoHandler.OnData(c, data)
}

// TestIdleTime: Stats.Idle counts the event loop's time without work: nearly all of it while
// no connection sends anything, little of it while a client keeps a handler that takes a
// millisecond per read busy.
func TestIdleTime(t *testing.T) {
	for name, backend := range map[string]Backend{"uring": Uring, "netpoll": Netpoll} {
		t.Run(name, func(t *testing.T) {
			h := spinHandler{echoHandler: newEchoHandler(t), spin: time.Millisecond}
			s := startServer(t, Config{Backend: backend, Rings: 1}, h)
			c := dial(t, s)
			time.Sleep(200 * time.Millisecond)
			quiet := s.Stats()
			if share := float64(quiet.Idle) / float64(quiet.Uptime); share < 0.8 || share > 1 {
				t.Fatalf("an idle loop: Idle %v of Uptime %v; want most of it", quiet.Idle, quiet.Uptime)
			}
			for i, end := 0, time.Now().Add(300*time.Millisecond); time.Now().Before(end); i++ {
				roundTrip(t, c, i)
			}
			busy := s.Stats()
			idle, up := busy.Idle-quiet.Idle, busy.Uptime-quiet.Uptime
			t.Logf("idle %v of %v while busy", idle, up)
			if share := float64(idle) / float64(up); share > 0.5 || idle < 0 {
				t.Fatalf("a loop busy a millisecond per read: Idle grew %v over %v; want under half", idle, up)
			}
		})
	}
}
