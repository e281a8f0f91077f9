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
		err := r.Feed(stream[:n], func(f []byte) error {
			got = append(got, bytes.Clone(f))
			return nil
		})
		if err != nil {
			t.Fatalf("feed step %d: %v", step, err)
		}
		stream = stream[n:]
	}
	return got
}

func TestFrameReaderSplits(t *testing.T) {
	frames, stream := frameStream(0, 1, 5, 8, 100, 70000, 0, 3)
	for _, step := range []int{1, 2, 3, 4, 5, 7, 9, 64, 4096, len(stream)} {
		r := NewFrameReader(0)
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

func TestFrameReaderZeroCopyWithinChunk(t *testing.T) {
	_, stream := frameStream(10, 20, 30)
	r := NewFrameReader(0)
	n := 0
	err := r.Feed(stream, func(f []byte) error {
		if !aliases(f, stream) {
			t.Errorf("frame %d was copied", n)
		}
		n++
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("feed: n=%d err=%v", n, err)
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
			r := NewFrameReader(tt.max)
			stream := binary.BigEndian.AppendUint32(nil, tt.size)
			stream = append(stream, 1, 2, 3)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := r.Feed(stream[:tt.split], func([]byte) error { return nil })
			if err == nil {
				err = r.Feed(stream[tt.split:], func([]byte) error {
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
			if err2 := r.Feed([]byte{0, 0, 0, 0}, func([]byte) error { return nil }); !errors.Is(err2, ErrFrameTooLarge) {
				t.Fatalf("error not sticky: %v", err2)
			}
		})
	}
}

func TestFrameReaderBuffered(t *testing.T) {
	_, stream := frameStream(10)
	r := NewFrameReader(0)
	prev := 0
	for _, cut := range []int{2, 4, 9} {
		if err := r.Feed(stream[prev:cut], func([]byte) error { return nil }); err != nil {
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
	r := NewFrameReader(1000)
	got := feedAll(t, r, stream, 333)
	if len(got) != 1 || !bytes.Equal(got[0], frames[0]) {
		t.Fatalf("frame at the limit not delivered intact")
	}
}

func TestFrameReaderEmitError(t *testing.T) {
	boom := errors.New("boom")
	for _, step := range []int{3, 1 << 20} {
		_, stream := frameStream(5, 5, 5)
		r := NewFrameReader(0)
		calls := 0
		var err error
		for len(stream) > 0 && err == nil {
			n := min(step, len(stream))
			err = r.Feed(stream[:n], func([]byte) error {
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
		if err := r.Feed([]byte{0, 0, 0, 0}, func([]byte) error { return nil }); !errors.Is(err, boom) {
			t.Fatalf("step %d: error not sticky: %v", step, err)
		}
	}
}

func TestFrameReaderDropsLargeBuffer(t *testing.T) {
	_, stream := frameStream(frameRetainBytes+10, 3)
	r := NewFrameReader(0)
	feedAll(t, r, stream, 1<<16)
	if cap(r.buf) > frameRetainBytes {
		t.Fatalf("kept a %d byte buffer after a large frame", cap(r.buf))
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
	r := NewFrameReader(0)
	var got [][]byte
	buf := make([]byte, 1500)
	for len(got) < len(frames) {
		n, err := conn.Read(buf)
		if ferr := r.Feed(buf[:n], func(f []byte) error {
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

// FuzzFrameReader feeds arbitrary bytes in arbitrary chunks; frames must
// stay within the limit, the reader must buffer no more than one frame,
// and the byte accounting must add up.
func FuzzFrameReader(f *testing.F) {
	_, s := frameStream(0, 3, 100)
	f.Add(s, uint8(1))
	f.Add(s, uint8(7))
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 1}, uint8(2))
	f.Add([]byte{0, 0, 4, 1, 1, 2}, uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		const max = 1024
		r := NewFrameReader(max)
		st := int(step%64) + 1
		consumed := 0
		var err error
		for rest := data; len(rest) > 0 && err == nil; {
			n := min(st, len(rest))
			err = r.Feed(rest[:n], func(fr []byte) error {
				if len(fr) > max {
					t.Fatalf("frame of %d bytes above max %d", len(fr), max)
				}
				consumed += 4 + len(fr)
				return nil
			})
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
	})
}
