package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/internal/recordbatch"
)

// BatchHeader holds the header fields of a batch the broker writes itself
// (offset commits, transaction markers, group metadata). Length, magic,
// CRC, LastOffsetDelta and NumRecords are derived from the records.
type BatchHeader struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	// Attributes without the codec bits, which come from the codec.
	Attributes     int16
	FirstTimestamp int64
	MaxTimestamp   int64
	ProducerID     int64
	ProducerEpoch  int16
	BaseSequence   int32
}

// AppendRecord appends r in record v2 encoding: a varint length, then
// attributes, deltas, key, value and headers.
func AppendRecord(dst []byte, r *Record) []byte {
	var body [binary.MaxVarintLen64 * 3]byte
	n := 1
	body[0] = byte(r.Attributes)
	n += binary.PutVarint(body[n:], r.TimestampDelta)
	n += binary.PutVarint(body[n:], int64(r.OffsetDelta))
	size := n + varBytesLen(r.Key) + varBytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		size += varBytesLen(h.Key) + varBytesLen(h.Value)
	}
	dst = binary.AppendVarint(dst, int64(size))
	dst = append(dst, body[:n]...)
	dst = appendVarBytes(dst, r.Key)
	dst = appendVarBytes(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = appendVarBytes(dst, h.Key)
		dst = appendVarBytes(dst, h.Value)
	}
	return dst
}

func varintLen(v int64) int {
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutVarint(tmp[:], v)
}

// varBytesLen is the encoded size of a varint-length byte field; nil
// encodes as length -1.
func varBytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendVarBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}

// AppendBatch appends a complete record batch v2 holding recs, compressed
// with codec, and returns it. LastOffsetDelta is the last record's
// OffsetDelta; records must be given in offset order.
func (c *Codecs) AppendBatch(dst []byte, h BatchHeader, codec Codec, recs []Record) ([]byte, error) {
	return c.AppendBatchLevel(dst, h, codec, DefaultLevel, recs)
}

// AppendBatchLevel is AppendBatch compressing at level, a value of Kafka's
// compression.<codec>.level (DefaultLevel: the codec's default).
func (c *Codecs) AppendBatchLevel(dst []byte, h BatchHeader, codec Codec, level int, recs []Record) ([]byte, error) {
	if len(recs) == 0 {
		return dst, fmt.Errorf("append batch at offset %d: no records: %w", h.BaseOffset, kerr.InvalidRecord)
	}
	if !codec.Valid() {
		return dst, fmt.Errorf("append batch at offset %d: codec id %d: %w", h.BaseOffset, int8(codec), ErrUnknownCodec)
	}
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.BaseOffset))
	dst = append(dst, 0, 0, 0, 0) // length, set below
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.PartitionLeaderEpoch))
	dst = append(dst, 2, 0, 0, 0, 0) // magic, CRC set below
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Attributes&^recordbatch.AttrCompression|int16(codec)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(recs[len(recs)-1].OffsetDelta))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.FirstTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.MaxTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.ProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.ProducerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.BaseSequence))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(recs)))
	if codec == CodecNone {
		for i := range recs {
			dst = AppendRecord(dst, &recs[i])
		}
	} else {
		s := c.scratch.Get().(*recordScratch)
		raw := s.buf[:0]
		for i := range recs {
			raw = AppendRecord(raw, &recs[i])
		}
		var err error
		dst, err = c.codecs.CompressLevel(codec, level, raw, dst)
		s.buf = raw
		if cap(s.buf) > scratchRetainBytes {
			s.buf = nil
		}
		c.scratch.Put(s)
		if err != nil {
			return dst[:start], fmt.Errorf("append batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	b := Batch(dst[start:])
	binary.BigEndian.PutUint32(b[recordbatch.OffBatchLength:], uint32(len(b)-recordbatch.LogOverhead))
	b.updateCRC()
	return dst, nil
}

// ControlType is the type of a transaction control record.
type ControlType int16

// Control record types Kafka defines.
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

// AppendControlBatch appends a transaction marker: a transactional control
// batch with one record whose key is (version 0, typ) and whose value is
// (version 0, coordinatorEpoch), as Kafka's EndTxnMarker.
func (c *Codecs) AppendControlBatch(dst []byte, h BatchHeader, typ ControlType, coordinatorEpoch int32) ([]byte, error) {
	var key [4]byte
	binary.BigEndian.PutUint16(key[2:], uint16(typ))
	var value [6]byte
	binary.BigEndian.PutUint32(value[2:], uint32(coordinatorEpoch))
	h.Attributes |= recordbatch.AttrControl | recordbatch.AttrTransactional
	h.BaseSequence = -1
	rec := [1]Record{{Key: key[:], Value: value[:]}}
	return c.AppendBatch(dst, h, CodecNone, rec[:])
}

// ParseControlKey returns the type of a control record from its key,
// which holds an int16 version (0) and an int16 type.
func ParseControlKey(key []byte) (ControlType, error) {
	if len(key) < 4 {
		return 0, fmt.Errorf("control record key of %d bytes, want 4: %w", len(key), kerr.CorruptMessage)
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return 0, fmt.Errorf("control record key version %d: %w", v, kerr.CorruptMessage)
	}
	return ControlType(binary.BigEndian.Uint16(key[2:])), nil
}
