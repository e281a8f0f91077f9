package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// frameStream returns frames of the given sizes with distinct contents and
// their concatenation with size prefixes.
func frameStream(sizes ...int) ([][]byte, []byte) {
	var frames [][]byte
	var stream []byte
	for i, n := range sizes {
		f := make([]byte, n)
		for j := range f {
			f[j] = byte(i*31 + j)
		}
		frames = append(frames, f)
		stream = binary.BigEndian.AppendUint32(stream, uint32(n))
		stream = append(stream, f...)
	}
	return frames, stream
}

// feedAll feeds stream in chunks of size step and returns copies of the
// emitted frames.
func feedAll(t *testing.T, r *FrameReader, stream []byte, step int) [][]byte {
	t.Helper()
	var got [][]byte
	for len(stream) > 0 {
		n := min(step, len(stream))
		used, err := r.Feed(stream[:n], func(f []byte) error {
			got = append(got, bytes.Clone(f))
			return nil
		})
		if err != nil || used != n {
			t.Fatalf("feed step %d: consumed %d of %d: %v", step, used, n, err)
		}
		stream = stream[n:]
	}
	return got
}

func TestFrameReaderSplits(t *testing.T) {
	frames, stream := frameStream(0, 1, 5, 8, 100, 70000, 0, 3)
	for _, step := range []int{1, 2, 3, 4, 5, 7, 9, 64, 4096, len(stream)} {
		r := NewFrameReader(0, nil)
		got := feedAll(t, r, stream, step)
		if len(got) != len(frames) {
			t.Fatalf("step %d: got %d frames, want %d", step, len(got), len(frames))
		}
		for i := range frames {
			if !bytes.Equal(got[i], frames[i]) {
				t.Fatalf("step %d: frame %d differs (len %d, want %d)", step, i, len(got[i]), len(frames[i]))
			}
		}
		if r.Buffered() != 0 {
			t.Fatalf("step %d: %d bytes left buffered", step, r.Buffered())
		}
	}
}

// TestFrameReaderExactBuffers checks that every frame lands in one buffer of exactly its size
// from the reader's allocator, asked for once per frame, also when the frame spans many chunks.
func TestFrameReaderExactBuffers(t *testing.T) {
	frames, stream := frameStream(10, 70000, 30, 5000)
	var asked []int
	alloc := func(n int) []byte {
		asked = append(asked, n)
		return make([]byte, n, n)
	}
	for _, step := range []int{1, 3, 1000, len(stream)} {
		asked = asked[:0]
		r := NewFrameReader(0, alloc)
		got := feedAll(t, r, stream, step)
		if len(asked) != len(frames) {
			t.Fatalf("step %d: %d allocations for %d frames", step, len(asked), len(frames))
		}
		for i, f := range frames {
			if asked[i] != len(f) || !bytes.Equal(got[i], f) {
				t.Fatalf("step %d: frame %d: allocated %d bytes for %d", step, i, asked[i], len(f))
			}
		}
	}
}

// TestFrameReaderStall checks that an allocator without memory stops the reader at the frame
// whose buffer it could not give, and that feeding the rest again later resumes exactly there.
func TestFrameReaderStall(t *testing.T) {
	frames, stream := frameStream(5, 6, 7)
	refuse := true
	alloc := func(n int) []byte {
		if n == 6 && refuse {
			return nil
		}
		return make([]byte, n)
	}
	r := NewFrameReader(0, alloc)
	var got [][]byte
	emit := func(f []byte) error { got = append(got, bytes.Clone(f)); return nil }
	n, err := r.Feed(stream, emit)
	if err != nil || len(got) != 1 || !r.Stalled() || n != 4+5+4 {
		t.Fatalf("first feed: consumed %d, %d frames, stalled %v, err %v; want 13, 1, true", n, len(got), r.Stalled(), err)
	}
	if m, err := r.Feed(stream[n:], emit); err != nil || m != 0 {
		t.Fatalf("feed while still refused: consumed %d, err %v", m, err)
	}
	refuse = false
	m, err := r.Feed(stream[n:], emit)
	if err != nil || m != len(stream)-n || r.Stalled() || len(got) != 3 {
		t.Fatalf("resumed feed: consumed %d of %d, %d frames, err %v", m, len(stream)-n, len(got), err)
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
	// A stall right at the end of a chunk resumes with a nil feed.
	refuse = true
	r = NewFrameReader(0, alloc)
	got = nil
	if n, err := r.Feed(stream[:4+5+4], emit); err != nil || n != 13 || !r.Stalled() {
		t.Fatalf("feed up to the stalled prefix: %d, %v, stalled %v", n, err, r.Stalled())
	}
	refuse = false
	if n, err := r.Feed(nil, emit); err != nil || n != 0 || r.Stalled() || len(r.Tail()) != 6 {
		t.Fatalf("nil feed after memory came back: %d, %v, stalled %v, tail %d", n, err, r.Stalled(), len(r.Tail()))
	}
}

// TestFrameReaderStopFeed stops after a frame and resumes with the rest of the chunk.
func TestFrameReaderStopFeed(t *testing.T) {
	frames, stream := frameStream(3, 4, 5)
	r := NewFrameReader(0, nil)
	var got [][]byte
	n, err := r.Feed(stream, func(f []byte) error {
		got = append(got, bytes.Clone(f))
		if len(got) == 1 {
			return ErrStopFeed
		}
		return nil
	})
	if err != nil || n != 7 || len(got) != 1 {
		t.Fatalf("first feed: consumed %d, %d frames, %v; want 7, 1, nil", n, len(got), err)
	}
	got = append(got, feedAll(t, r, stream[n:], len(stream))...)
	if len(got) != 3 {
		t.Fatalf("%d frames after the rest", len(got))
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
}

// TestFrameReaderTailFill receives a frame's rest straight into Tail, as the I/O backends do.
func TestFrameReaderTailFill(t *testing.T) {
	frames, stream := frameStream(100, 50000, 3)
	r := NewFrameReader(0, nil)
	var got [][]byte
	emit := func(f []byte) error { got = append(got, bytes.Clone(f)); return nil }
	// The first chunk holds frame 0 and the start of frame 1.
	first := 4 + 100 + 4 + 1000
	if n, err := r.Feed(stream[:first], emit); err != nil || n != first {
		t.Fatalf("feed: %d, %v", n, err)
	}
	tail := r.Tail()
	if len(tail) != 49000 {
		t.Fatalf("tail of %d bytes, want 49000", len(tail))
	}
	rest := stream[first:]
	copy(tail[:20000], rest)
	if err := r.Filled(20000, emit); err != nil || len(got) != 1 {
		t.Fatalf("partial fill: %v, %d frames", err, len(got))
	}
	copy(r.Tail(), rest[20000:49000])
	if err := r.Filled(29000, emit); err != nil || len(got) != 2 || r.Tail() != nil {
		t.Fatalf("final fill: %v, %d frames", err, len(got))
	}
	if err := r.Filled(1, emit); err == nil {
		t.Fatal("Filled past the tail accepted")
	}
	got = append(got, feedAll(t, r, rest[49000:], 2)...)
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
}

// TestFrameReaderRelease returns a partly received frame's buffer when the stream ends.
func TestFrameReaderRelease(t *testing.T) {
	_, stream := frameStream(1000)
	r := NewFrameReader(0, nil)
	if _, err := r.Feed(stream[:500], func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var freed []byte
	r.Release(func(b []byte) { freed = b })
	if len(freed) != 1000 || r.Buffered() != 0 || r.Tail() != nil {
		t.Fatalf("released %d bytes, %d still buffered", len(freed), r.Buffered())
	}
}

func TestFrameReaderRejectsSize(t *testing.T) {
	tests := []struct {
		name  string
		max   int32
		size  uint32
		split int
	}{
		{"negative", 0, 0xFFFFFFFF, 4},
		{"above default", 0, DefaultMaxFrameBytes + 1, 4},
		{"above custom", 1000, 1001, 4},
		{"above custom split prefix", 1000, 1001, 2},
		{"min int32", 0, 0x80000000, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewFrameReader(tt.max, nil)
			stream := binary.BigEndian.AppendUint32(nil, tt.size)
			stream = append(stream, 1, 2, 3)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := r.Feed(stream[:tt.split], func([]byte) error { return nil })
			if err == nil {
				_, err = r.Feed(stream[tt.split:], func([]byte) error {
					t.Fatal("emitted an oversized frame")
					return nil
				})
			}
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("err = %v, want ErrFrameTooLarge", err)
			}
			// Only the error is allocated, nothing sized by the prefix.
			if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
				t.Fatalf("%d bytes allocated rejecting the frame", n)
			}
			if _, err2 := r.Feed([]byte{0, 0, 0, 0}, func([]byte) error { return nil }); !errors.Is(err2, ErrFrameTooLarge) {
				t.Fatalf("error not sticky: %v", err2)
			}
		})
	}
}

func TestFrameReaderBuffered(t *testing.T) {
	_, stream := frameStream(10)
	r := NewFrameReader(0, nil)
	prev := 0
	for _, cut := range []int{2, 4, 9} {
		if _, err := r.Feed(stream[prev:cut], func([]byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if r.Buffered() != cut {
			t.Fatalf("after %d bytes Buffered = %d", cut, r.Buffered())
		}
		prev = cut
	}
}

func TestFrameReaderMaxAccepted(t *testing.T) {
	frames, stream := frameStream(1000)
	r := NewFrameReader(1000, nil)
	got := feedAll(t, r, stream, 333)
	if len(got) != 1 || !bytes.Equal(got[0], frames[0]) {
		t.Fatalf("frame at the limit not delivered intact")
	}
}

func TestFrameReaderEmitError(t *testing.T) {
	boom := errors.New("boom")
	for _, step := range []int{3, 1 << 20} {
		_, stream := frameStream(5, 5, 5)
		r := NewFrameReader(0, nil)
		calls := 0
		var err error
		for len(stream) > 0 && err == nil {
			n := min(step, len(stream))
			_, err = r.Feed(stream[:n], func([]byte) error {
				calls++
				if calls == 2 {
					return boom
				}
				return nil
			})
			stream = stream[n:]
		}
		if !errors.Is(err, boom) || calls != 2 {
			t.Fatalf("step %d: err=%v calls=%d", step, err, calls)
		}
		if _, err := r.Feed([]byte{0, 0, 0, 0}, func([]byte) error { return nil }); !errors.Is(err, boom) {
			t.Fatalf("step %d: error not sticky: %v", step, err)
		}
	}
}

// TestFrameReaderTCP sends frames over a real loopback connection in
// irregular writes and reassembles them from small reads.
func TestFrameReaderTCP(t *testing.T) {
	frames, stream := frameStream(1, 300, 0, 9000, 17, 65536, 2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		defer c.Close()
		for i, rest := 0, stream; len(rest) > 0; i++ {
			n := min(1+(i*977)%5000, len(rest))
			if _, err := c.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
		}
	}()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatalf("deadline: %v", err)
	}
	r := NewFrameReader(0, nil)
	var got [][]byte
	buf := make([]byte, 1500)
	for len(got) < len(frames) {
		n, err := conn.Read(buf)
		if _, ferr := r.Feed(buf[:n], func(f []byte) error {
			got = append(got, bytes.Clone(f))
			return nil
		}); ferr != nil {
			t.Fatalf("feed: %v", ferr)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
	}
	if len(got) != len(frames) {
		t.Fatalf("got %d frames, want %d", len(got), len(frames))
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
}

// FuzzFrameReader feeds arbitrary bytes in arbitrary chunks, with an
// allocator that refuses now and then and direct fills of the tail; frames
// must stay within the limit, no frame buffer may be asked for twice or
// above the limit, and the byte accounting must add up.
func FuzzFrameReader(f *testing.F) {
	_, s := frameStream(0, 3, 100)
	f.Add(s, uint8(1), uint8(0))
	f.Add(s, uint8(7), uint8(3))
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 1}, uint8(2), uint8(1))
	f.Add([]byte{0, 0, 4, 1, 1, 2}, uint8(3), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, step, refuseEvery uint8) {
		const max = 1024
		calls, allocated := 0, 0
		alloc := func(n int) []byte {
			calls++
			if n > max {
				t.Fatalf("asked for %d bytes above max %d", n, max)
			}
			// At most every second call is refused: a stalled reader is fed again once memory
			// may be free, and a pool that never frees would leave it stalled for good.
			if refuseEvery > 0 && calls%int(refuseEvery%7+2) == 0 {
				return nil
			}
			allocated++
			return make([]byte, n)
		}
		r := NewFrameReader(max, alloc)
		st := int(step%64) + 1
		consumed, frames := 0, 0
		emit := func(fr []byte) error {
			if len(fr) > max {
				t.Fatalf("frame of %d bytes above max %d", len(fr), max)
			}
			consumed += 4 + len(fr)
			frames++
			return nil
		}
		var err error
		for rest, i := data, 0; len(rest) > 0 && err == nil; i++ {
			if i > 4*len(data)+16 {
				t.Fatalf("no progress after %d calls with %d of %d bytes left", i, len(rest), len(data))
			}
			if tail := r.Tail(); len(tail) > 0 && i%3 == 0 {
				n := copy(tail, rest[:min(len(rest), st)])
				rest = rest[n:]
				err = r.Filled(n, emit)
				continue
			}
			var n int
			n, err = r.Feed(rest[:min(st, len(rest))], emit)
			rest = rest[n:]
		}
		if err != nil {
			if !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if r.Buffered() > 4+max {
			t.Fatalf("buffered %d bytes", r.Buffered())
		}
		if consumed+r.Buffered() != len(data) {
			t.Fatalf("consumed %d + buffered %d != %d", consumed, r.Buffered(), len(data))
		}
		if allocated > frames+1 {
			t.Fatalf("%d buffers allocated for %d frames", allocated, frames)
		}
	})
}
