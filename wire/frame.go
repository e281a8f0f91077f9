// Package wire is ringbroker's Kafka protocol layer: request framing and
// headers, response framing, record batch v2 views and validation, CRC32C,
// compression codecs and a zero-copy Fetch response writer. Message bodies
// are franz-go's kmsg types; error codes are franz-go's kerr values.
//
// Decoders slice their input instead of copying it; encoders append to a
// caller's buffer.
package wire

import (
	"encoding/binary"
	"fmt"
	"slices"
)

const (
	// DefaultMaxFrameBytes is Kafka's socket.request.max.bytes default.
	DefaultMaxFrameBytes = 100 << 20

	// frameRetainBytes is the largest assembly buffer a FrameReader keeps
	// between frames; larger ones are dropped so one big request does not
	// pin memory for the connection's lifetime.
	frameRetainBytes = 1 << 20

	// framePregrowBytes caps the buffer reserved when a frame starts to
	// span chunks. Beyond it the buffer grows with the bytes that actually
	// arrive, so a peer announcing a large frame and sending little cannot
	// make the reader reserve the announced size.
	framePregrowBytes = 256 << 10
)

// FrameReader splits a byte stream into Kafka frames: a 4-byte big-endian
// size, then that many bytes of request. It is fed chunks as they arrive
// from the network, in order, and is not safe for concurrent use.
type FrameReader struct {
	max int32

	// hdr holds a size prefix split across chunks; hdrN bytes are valid.
	hdr  [4]byte
	hdrN int
	// need is the size of the frame being assembled in buf; -1 when no
	// frame is in progress. Invariant: need >= 0 implies hdrN == 0.
	need int
	buf  []byte
	// err is sticky: once framing fails the stream is unusable.
	err error
}

// NewFrameReader returns a FrameReader rejecting frames above maxFrameBytes;
// maxFrameBytes <= 0 selects DefaultMaxFrameBytes.
func NewFrameReader(maxFrameBytes int32) *FrameReader {
	if maxFrameBytes <= 0 {
		maxFrameBytes = DefaultMaxFrameBytes
	}
	return &FrameReader{max: maxFrameBytes, need: -1}
}

// Buffered reports how many bytes of an incomplete frame (prefix included)
// the reader holds.
func (r *FrameReader) Buffered() int {
	if r.need >= 0 {
		return 4 + len(r.buf)
	}
	return r.hdrN
}

// Feed consumes chunk and calls emit for every frame it completes, in order.
// A frame lying wholly inside chunk is a subslice of chunk; a frame spanning
// chunks is assembled in a buffer owned by the reader. Either way the frame
// is valid only during emit. An error from emit stops Feed and is returned
// as is; a size prefix outside [0, max] returns an error wrapping
// ErrFrameTooLarge before anything is allocated for the frame. After an
// error every later Feed returns the same error.
func (r *FrameReader) Feed(chunk []byte, emit func(frame []byte) error) error {
	if r.err != nil {
		return r.err
	}
	for len(chunk) > 0 {
		if r.need >= 0 {
			n := min(r.need-len(r.buf), len(chunk))
			r.buf = append(r.buf, chunk[:n]...)
			chunk = chunk[n:]
			if len(r.buf) < r.need {
				return nil
			}
			err := emit(r.buf)
			r.need = -1
			if cap(r.buf) > frameRetainBytes {
				r.buf = nil
			} else {
				r.buf = r.buf[:0]
			}
			if err != nil {
				r.err = err
				return err
			}
			continue
		}
		var raw uint32
		if r.hdrN > 0 || len(chunk) < 4 {
			n := copy(r.hdr[r.hdrN:], chunk)
			r.hdrN += n
			chunk = chunk[n:]
			if r.hdrN < 4 {
				return nil
			}
			r.hdrN = 0
			raw = binary.BigEndian.Uint32(r.hdr[:])
		} else {
			raw = binary.BigEndian.Uint32(chunk)
			chunk = chunk[4:]
		}
		size := int32(raw)
		if size < 0 || size > r.max {
			r.err = fmt.Errorf("frame size %d, max %d: %w", size, r.max, ErrFrameTooLarge)
			return r.err
		}
		if len(chunk) >= int(size) {
			if err := emit(chunk[:size]); err != nil {
				r.err = err
				return err
			}
			chunk = chunk[size:]
			continue
		}
		r.need = int(size)
		r.buf = append(slices.Grow(r.buf[:0], min(int(size), framePregrowBytes)), chunk...)
		return nil
	}
	return nil
}
