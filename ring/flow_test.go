package ring

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// frameHandler reassembles length-prefixed frames the way the broker does: the bytes of a frame
// that a chunk holds are copied into a buffer of exactly the frame's size, and the rest is
// received straight into that buffer with Next.Fill. Optionally it pauses after every frame and
// resumes from another goroutine a little later. Completed frames go to got.
type frameHandler struct {
	t          testing.TB
	pauseEvery bool // pause after each frame; a goroutine resumes after resumeDelay
	// partial makes OnData consume only up to the end of the first frame in a chunk, leaving
	// the rest for after Resume.
	partial     bool
	resumeDelay time.Duration
	got         chan []byte
	resumes     atomic.Int64

	mu  sync.Mutex
	per map[uint64]*frameConn // guarded by mu
}

type frameConn struct {
	hdr  []byte
	buf  []byte // frame being filled; buf[:have] holds bytes
	have int
}

func newFrameHandler(t testing.TB) *frameHandler {
	return &frameHandler{t: t, got: make(chan []byte, 1<<16), per: map[uint64]*frameConn{}}
}

func (h *frameHandler) OnOpen(c Conn) {
	h.mu.Lock()
	h.per[c.ID()] = &frameConn{hdr: make([]byte, 0, 4)}
	h.mu.Unlock()
}

func (h *frameHandler) state(c Conn) *frameConn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.per[c.ID()]
}

// complete hands a finished frame over and reports whether the connection should pause now.
func (h *frameHandler) complete(c Conn, fc *frameConn) bool {
	h.got <- fc.buf
	fc.buf, fc.have = nil, 0
	if !h.pauseEvery {
		return false
	}
	go func() {
		time.Sleep(h.resumeDelay)
		h.resumes.Add(1)
		c.Resume()
	}()
	return true
}

func (h *frameHandler) OnData(c Conn, data []byte) (Next, error) {
	fc := h.state(c)
	used := 0
	for used < len(data) {
		if fc.buf == nil {
			n := copy(fc.hdr[len(fc.hdr):4], data[used:])
			fc.hdr = fc.hdr[:len(fc.hdr)+n]
			used += n
			if len(fc.hdr) < 4 {
				break
			}
			fc.buf = make([]byte, binary.BigEndian.Uint32(fc.hdr))
			fc.hdr = fc.hdr[:0]
		}
		n := copy(fc.buf[fc.have:], data[used:])
		fc.have += n
		used += n
		if fc.have < len(fc.buf) {
			if len(fc.buf)-fc.have > 1000 {
				return Next{Consumed: used, Fill: fc.buf[fc.have:]}, nil
			}
			break
		}
		if h.complete(c, fc) {
			return Next{Consumed: used, Pause: true}, nil
		}
		if h.partial && used < len(data) {
			go func() {
				time.Sleep(h.resumeDelay)
				h.resumes.Add(1)
				c.Resume()
			}()
			return Next{Consumed: used}, nil
		}
	}
	return Next{Consumed: used}, nil
}

func (h *frameHandler) OnFilled(c Conn) (Next, error) {
	fc := h.state(c)
	fc.have = len(fc.buf)
	return Next{Pause: h.complete(c, fc)}, nil
}

func (h *frameHandler) OnClose(c Conn, err error) {
	h.mu.Lock()
	delete(h.per, c.ID())
	h.mu.Unlock()
}

// writeFrames writes frames of the given sizes (contents from frame()) in irregular writes.
func writeFrames(t testing.TB, c net.Conn, sizes []int) {
	t.Helper()
	var stream []byte
	for i, n := range sizes {
		stream = append(stream, frame(i, n)...)
	}
	for i := 0; len(stream) > 0; i++ {
		n := min(len(stream), 1+(i*7919)%200_000)
		if _, err := c.Write(stream[:n]); err != nil {
			t.Errorf("write: %v", err)
			return
		}
		stream = stream[n:]
	}
}

// checkFrames reads len(sizes) frames from h.got and compares them with frame(i, size).
func checkFrames(t testing.TB, h *frameHandler, sizes []int) {
	t.Helper()
	for i, n := range sizes {
		select {
		case f := <-h.got:
			if want := frame(i, n)[4:]; !bytes.Equal(f, want) {
				t.Fatalf("frame %d: %d bytes, want %d, contents differ=%v", i, len(f), len(want), len(f) == len(want))
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("frame %d of %d never arrived", i, len(sizes))
		}
	}
}

var flowSizes = []int{10, 3, 5000, 1 << 20, 7, 64 << 10, 200_000, 1, 4 << 20, 12}

// TestFill receives large frames straight into their buffers.
func TestFill(t *testing.T) {
	for _, backend := range backends {
		t.Run(string(backend), func(t *testing.T) {
			h := newFrameHandler(t)
			s := startServer(t, Config{Backend: backend, Rings: 1, RecvBufferSize: 16 << 10, RecvBuffers: 16}, h)
			c := dial(t, s)
			go writeFrames(t, c, flowSizes)
			checkFrames(t, h, flowSizes)
			st := s.Stats()
			if st.Fills == 0 {
				t.Errorf("Fills=0; want the large frames received by fills (stats %+v)", st)
			}
		})
	}
}

// TestPauseResume pauses after every frame, and also leaves the rest of chunks unconsumed, and
// resumes from other goroutines: every byte arrives once, in order.
func TestPauseResume(t *testing.T) {
	for _, backend := range backends {
		for _, partial := range []bool{false, true} {
			name := string(backend) + "/pause-after-frame"
			if partial {
				name = string(backend) + "/partial-consume"
			}
			t.Run(name, func(t *testing.T) {
				h := newFrameHandler(t)
				h.pauseEvery, h.partial, h.resumeDelay = !partial, partial, time.Millisecond
				s := startServer(t, Config{Backend: backend, Rings: 1, RecvBufferSize: 16 << 10, RecvBuffers: 16}, h)
				c := dial(t, s)
				sizes := append([]int{}, flowSizes...)
				for i := range 200 {
					sizes = append(sizes, 1+i%50)
				}
				go writeFrames(t, c, sizes)
				checkFrames(t, h, sizes)
				if h.resumes.Load() == 0 || s.Stats().Pauses == 0 {
					t.Fatalf("no pauses happened (resumes %d, stats %+v)", h.resumes.Load(), s.Stats())
				}
			})
		}
	}
}

// TestPausedConnNoBusyLoop checks that a paused connection with data waiting costs the event
// loop nothing until Resume.
func TestPausedConnNoBusyLoop(t *testing.T) {
	h := newFrameHandler(t)
	h.pauseEvery, h.resumeDelay = true, time.Hour // never resumed by itself
	s := startServer(t, Config{Backend: Uring, Rings: 1}, h)
	c := dial(t, s)
	go writeFrames(t, c, []int{5, 5, 5, 5})
	checkFrames(t, h, []int{5})
	before := s.Stats()
	time.Sleep(200 * time.Millisecond)
	after := s.Stats()
	if d := after.Enters - before.Enters; d > 20 {
		t.Fatalf("%d io_uring_enter calls in 200 ms while paused; want the loop asleep", d)
	}
}

// recordingHandler keeps every byte received per connection and lets the test send.
type recordingHandler struct {
	conns chan Conn
}

func (h recordingHandler) OnOpen(c Conn) { h.conns <- c }
func (recordingHandler) OnData(_ Conn, data []byte) (Next, error) {
	return Next{Consumed: len(data)}, nil
}
func (recordingHandler) OnFilled(Conn) (Next, error) { return Next{}, nil }
func (recordingHandler) OnClose(Conn, error)         {}

// TestSendFileRanges sends memory pieces and file ranges interleaved, larger than the socket
// buffer while the peer reads slowly at first, so direct writes block and the event loop
// finishes them: the peer gets exactly the bytes in order and every done runs once.
func TestSendFileRanges(t *testing.T) {
	dir := t.TempDir()
	content := make([]byte, 12<<20)
	for i := range content {
		content[i] = byte(i*7 + i>>13)
	}
	path := filepath.Join(dir, "data")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	for _, backend := range backends {
		t.Run(string(backend), func(t *testing.T) {
			h := recordingHandler{conns: make(chan Conn, 1)}
			s := startServer(t, Config{Backend: backend, Rings: 1}, h)
			c := dial(t, s)
			sc := <-h.conns
			var want []byte
			var dones atomic.Int64
			const sends = 40
			for i := range sends {
				off := int64(i) * 300_000
				n := 100_000 + i*1000
				head := []byte{byte(i), 1, 2, 3}
				ps := []Piece{Bytes(head), FileRange(fd, off, n), Bytes([]byte("tail")), FileRange(fd, off+7, 10)}
				want = append(want, head...)
				want = append(want, content[off:off+int64(n)]...)
				want = append(want, "tail"...)
				want = append(want, content[off+7:off+17]...)
				if err := sc.Send(ps, func() { dones.Add(1) }); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			time.Sleep(50 * time.Millisecond) // let the socket buffer fill
			got := make([]byte, len(want))
			if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("read %d bytes: %v", len(want), err)
			}
			if !bytes.Equal(got, want) {
				i := 0
				for i < len(got) && got[i] == want[i] {
					i++
				}
				t.Fatalf("received bytes differ from byte %d of %d", i, len(want))
			}
			waitFor(t, 5*time.Second, "every done", func() bool { return dones.Load() == sends })
			st := s.Stats()
			if st.DirectSends == 0 || st.DirectBlocked == 0 {
				t.Errorf("DirectSends=%d DirectBlocked=%d; want direct writes, some finished by the loop", st.DirectSends, st.DirectBlocked)
			}
		})
	}
}
