// Package wire is ringbroker's Kafka protocol layer: request framing
// (FrameReader, into buffers of exactly each frame's size) and headers,
// response framing, record batch v2 views, validation and building, record
// decoding, and a zero-copy Fetch response writer whose record data are
// slices of the caller's (mapped) memory. Message bodies are franz-go's kmsg
// types; error codes are franz-go's kerr values. The batch header layout,
// the CRC32C table and the compression codecs come from internal/
// (recordbatch, crc32c, codec), shared with log.
//
// Decoders slice their input instead of copying it; encoders append to a
// caller's buffer.
package wire

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
)

const (
	// DefaultMaxFrameBytes is Kafka's socket.request.max.bytes default.
	DefaultMaxFrameBytes = 100 << 20
)

// FrameAlloc returns a buffer of len n for a frame, or nil when memory is
// short for now; the frame's receiver owns the buffer.
type FrameAlloc func(n int) []byte

// FrameReader splits a byte stream into Kafka frames: a 4-byte big-endian
// size, then that many bytes of request. Every frame is delivered in a buffer
// of exactly its size from the reader's FrameAlloc, filled once: bytes are
// copied into it from the chunks fed, or received into it directly by the
// caller through Tail and Filled. Nothing is ever reallocated or copied
// twice, and no memory is taken for a frame before its size is known and
// checked. It is not safe for concurrent use, but for SetMaxFrameBytes.
type FrameReader struct {
	// max is the largest frame accepted; atomic, so that SetMaxFrameBytes may raise it from
	// another goroutine (a connection that has just authenticated).
	max   atomic.Int32
	alloc FrameAlloc

	// hdr holds a size prefix split across chunks; hdrN bytes are valid.
	hdr  [4]byte
	hdrN int
	// need is the size of the frame in progress; -1 when none. Invariant:
	// need >= 0 implies hdrN == 0, and buf == nil means its memory is still
	// to be allocated.
	need int
	buf  []byte
	have int // bytes of buf filled
	// err is sticky: once framing fails the stream is unusable.
	err error
}

// NewFrameReader returns a FrameReader rejecting frames above maxFrameBytes
// (<= 0 selects DefaultMaxFrameBytes) that takes frame buffers from alloc
// (nil: the Go heap).
func NewFrameReader(maxFrameBytes int32, alloc FrameAlloc) *FrameReader {
	if maxFrameBytes <= 0 {
		maxFrameBytes = DefaultMaxFrameBytes
	}
	if alloc == nil {
		alloc = func(n int) []byte { return make([]byte, n) }
	}
	r := &FrameReader{alloc: alloc, need: -1}
	r.max.Store(maxFrameBytes)
	return r
}

// SetMaxFrameBytes changes the largest frame accepted from the next size prefix read on. A
// SASL listener reads small frames until a connection has authenticated (Kafka's
// sasl.server.max.receive.size), then the broker's limit.
func (r *FrameReader) SetMaxFrameBytes(n int32) {
	if n <= 0 {
		n = DefaultMaxFrameBytes
	}
	r.max.Store(n)
}

// Buffered reports how many bytes of an incomplete frame (prefix included)
// the reader holds.
func (r *FrameReader) Buffered() int {
	if r.need >= 0 {
		return 4 + r.have
	}
	return r.hdrN
}

// Feed consumes chunk and calls emit for every frame it completes, in order;
// emit owns the frame buffer. It returns how many bytes of chunk it
// consumed: fewer than len(chunk) only when the reader's FrameAlloc had no
// memory for the next frame (Stalled), in which case the caller feeds
// chunk[n:] again once memory may be free. The buffer of a frame is taken as
// soon as its size prefix is read, so Tail is ready for a direct receive even
// when the chunk ends there. An error from emit stops Feed and is returned as
// is (but ErrStopFeed only stops it: see there); a size prefix outside [0, max] returns an error wrapping
// ErrFrameTooLarge before anything is allocated for the frame. After an
// error every later call returns the same error.
func (r *FrameReader) Feed(chunk []byte, emit func(frame []byte) error) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	total := len(chunk)
	for len(chunk) > 0 || r.need >= 0 {
		if r.need >= 0 {
			if r.buf == nil {
				if r.buf = r.alloc(r.need); r.buf == nil {
					return total - len(chunk), nil
				}
			}
			if len(chunk) == 0 && r.have < r.need {
				return total, nil
			}
			n := copy(r.buf[r.have:], chunk)
			r.have += n
			chunk = chunk[n:]
			if r.have < r.need {
				return total, nil
			}
			if err := r.complete(emit); err != nil {
				if err == ErrStopFeed {
					return total - len(chunk), nil
				}
				return total - len(chunk), err
			}
			continue
		}
		var raw uint32
		if r.hdrN > 0 || len(chunk) < 4 {
			n := copy(r.hdr[r.hdrN:], chunk)
			r.hdrN += n
			chunk = chunk[n:]
			if r.hdrN < 4 {
				return total, nil
			}
			r.hdrN = 0
			raw = binary.BigEndian.Uint32(r.hdr[:])
		} else {
			raw = binary.BigEndian.Uint32(chunk)
			chunk = chunk[4:]
		}
		size := int32(raw)
		if max := r.max.Load(); size < 0 || size > max {
			r.err = fmt.Errorf("frame size %d, max %d: %w", size, max, ErrFrameTooLarge)
			return total - len(chunk), r.err
		}
		r.need, r.have = int(size), 0
		if size == 0 {
			r.buf = []byte{}
		}
	}
	return total, nil
}

// complete hands the finished frame to emit and resets for the next one.
func (r *FrameReader) complete(emit func([]byte) error) error {
	frame := r.buf
	r.need, r.buf, r.have = -1, nil, 0
	if err := emit(frame); err != nil {
		if err != ErrStopFeed {
			r.err = err
		}
		return err
	}
	return nil
}

// Stalled reports that a frame's size is known but FrameAlloc had no memory
// for it yet: the caller stops reading and feeds again (the rest of its chunk,
// or nil) once memory may be free.
func (r *FrameReader) Stalled() bool { return r.need > 0 && r.buf == nil && r.err == nil }

// Tail returns the unfilled rest of the frame in progress, for the caller to
// receive into directly (reporting with Filled), or nil when no frame buffer
// is partly filled.
func (r *FrameReader) Tail() []byte {
	if r.need < 0 || r.buf == nil || r.err != nil {
		return nil
	}
	return r.buf[r.have:]
}

// Filled reports n bytes received into Tail and emits the frame once it is
// complete.
func (r *FrameReader) Filled(n int, emit func(frame []byte) error) error {
	if r.err != nil {
		return r.err
	}
	if t := r.Tail(); n < 0 || n > len(t) {
		return fmt.Errorf("frame reader: Filled(%d) with %d bytes of tail", n, len(t))
	}
	r.have += n
	if r.have < r.need {
		return nil
	}
	if err := r.complete(emit); err != ErrStopFeed {
		return err
	}
	return nil
}

// Release gives the buffer of a partly received frame to free (the stream
// ended): nothing is kept afterwards.
func (r *FrameReader) Release(free func([]byte)) {
	if r.buf != nil && len(r.buf) > 0 {
		free(r.buf)
	}
	r.need, r.buf, r.have = -1, nil, 0
}
