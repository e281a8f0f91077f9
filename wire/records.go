package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// scratchRetainBytes is the largest decompression buffer kept for reuse.
const scratchRetainBytes = 4 << 20

// RecordHeader is one record header; Key and Value alias the batch or its
// decompressed payload. Value is nil for a null value.
type RecordHeader struct {
	Key   []byte
	Value []byte
}

// Record is one record of a batch. Slices alias the batch or a
// decompression buffer and are valid only during the callback that
// receives the record.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	// Key and Value are nil when null.
	Key     []byte
	Value   []byte
	Headers []RecordHeader
}

// recordScratch is per-call decoding state, pooled in Codecs.
type recordScratch struct {
	buf     []byte
	headers []RecordHeader
	rec     Record
}

// DecodeRecords decompresses b's payload when needed (at most limit bytes)
// and calls fn for each record in order with a *Record valid only during the
// call. The record count must equal NumRecords, every record must fill
// exactly its declared length, and no bytes may follow the last record;
// violations are errors wrapping kerr.InvalidRecord (or kerr.CorruptMessage
// when decompression fails). An error from fn stops decoding and is
// returned as is.
func (c *Codecs) DecodeRecords(b Batch, limit int, fn func(*Record) error) error {
	s := c.scratch.Get().(*recordScratch)
	defer func() {
		if cap(s.buf) > scratchRetainBytes {
			s.buf = nil
		}
		s.rec = Record{}
		clear(s.headers)
		c.scratch.Put(s)
	}()
	payload := b.Records()
	if codec := b.Codec(); codec != CodecNone {
		var err error
		s.buf, err = c.Decompress(codec, payload, s.buf[:0], limit)
		if err != nil {
			code := kerr.CorruptMessage
			if errors.Is(err, ErrDecompressedTooLarge) {
				code = kerr.MessageTooLarge
			}
			return fmt.Errorf("batch at offset %d: %w: %w", b.BaseOffset(), err, code)
		}
		payload = s.buf
	}
	n := b.NumRecords()
	pos := 0
	for i := int32(0); i < n; i++ {
		used, err := s.decodeRecord(payload[pos:])
		if err != nil {
			return fmt.Errorf("batch at offset %d record %d of %d at byte %d: %w", b.BaseOffset(), i, n, pos, err)
		}
		pos += used
		if err := fn(&s.rec); err != nil {
			return err
		}
	}
	if pos != len(payload) {
		return fmt.Errorf("batch at offset %d: %d bytes after %d records: %w", b.BaseOffset(), len(payload)-pos, n, kerr.InvalidRecord)
	}
	return nil
}

// recordReader reads Kafka's zigzag varints and varint-length bytes.
type recordReader struct {
	b   []byte
	err error
}

func (r *recordReader) varlong(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%s: bad varint (status %d, %d bytes left): %w", what, n, len(r.b), kerr.InvalidRecord)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) varint(what string) int32 {
	v := r.varlong(what)
	if v < math.MinInt32 || v > math.MaxInt32 {
		if r.err == nil {
			r.err = fmt.Errorf("%s: %d overflows int32: %w", what, v, kerr.InvalidRecord)
		}
		return 0
	}
	return int32(v)
}

// bytes reads a varint length and that many bytes; length -1 is nil when
// nullable.
func (r *recordReader) bytes(what string, nullable bool) []byte {
	n := r.varint(what)
	if r.err != nil {
		return nil
	}
	if n == -1 && nullable {
		return nil
	}
	if n < 0 || int(n) > len(r.b) {
		r.err = fmt.Errorf("%s: length %d, %d bytes left: %w", what, n, len(r.b), kerr.InvalidRecord)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// decodeRecord decodes the record at the start of p into s.rec and returns
// its encoded size.
func (s *recordScratch) decodeRecord(p []byte) (int, error) {
	r := recordReader{b: p}
	length := r.varint("record length")
	if r.err != nil {
		return 0, r.err
	}
	lenBytes := len(p) - len(r.b)
	if length < 0 || int(length) > len(r.b) {
		return 0, fmt.Errorf("record length %d, %d bytes left: %w", length, len(r.b), kerr.InvalidRecord)
	}
	r.b = r.b[:length]
	if len(r.b) < 1 {
		return 0, fmt.Errorf("record length %d: no attributes: %w", length, kerr.InvalidRecord)
	}
	rec := &s.rec
	rec.Attributes = int8(r.b[0])
	r.b = r.b[1:]
	rec.TimestampDelta = r.varlong("timestamp delta")
	rec.OffsetDelta = r.varint("offset delta")
	rec.Key = r.bytes("key", true)
	rec.Value = r.bytes("value", true)
	nh := r.varint("header count")
	if r.err == nil && (nh < 0 || int(nh) > len(r.b)/2) {
		r.err = fmt.Errorf("header count %d, %d bytes left: %w", nh, len(r.b), kerr.InvalidRecord)
	}
	s.headers = s.headers[:0]
	for i := int32(0); i < nh && r.err == nil; i++ {
		k := r.bytes("header key", false)
		v := r.bytes("header value", true)
		s.headers = append(s.headers, RecordHeader{Key: k, Value: v})
	}
	if r.err != nil {
		return 0, r.err
	}
	if len(r.b) != 0 {
		return 0, fmt.Errorf("record length %d: %d bytes unread: %w", length, len(r.b), kerr.InvalidRecord)
	}
	rec.Headers = s.headers
	return lenBytes + int(length), nil
}
