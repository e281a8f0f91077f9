package log

import (
	"encoding/binary"
	"fmt"
	"math"

	"ringbroker/internal/crc32c"
	"ringbroker/internal/recordbatch"
)

// batchHeader is the fixed part of a record batch v2.
type batchHeader struct {
	baseOffset      int64
	length          int32
	leaderEpoch     int32
	magic           int8
	crc             uint32
	attributes      int16
	lastOffsetDelta int32
	baseTimestamp   int64
	maxTimestamp    int64
	producerID      int64
	producerEpoch   int16
	baseSequence    int32
	numRecords      int32
}

// parseHeader decodes the header at the start of b; len(b) must be at least recordbatch.HeaderSize.
func parseHeader(b []byte) batchHeader {
	_ = b[recordbatch.HeaderSize-1]
	be := binary.BigEndian
	return batchHeader{
		baseOffset:      int64(be.Uint64(b[recordbatch.OffBaseOffset:])),
		length:          int32(be.Uint32(b[recordbatch.OffBatchLength:])),
		leaderEpoch:     int32(be.Uint32(b[recordbatch.OffLeaderEpoch:])),
		magic:           int8(b[recordbatch.OffMagic]),
		crc:             be.Uint32(b[recordbatch.OffCRC:]),
		attributes:      int16(be.Uint16(b[recordbatch.OffAttributes:])),
		lastOffsetDelta: int32(be.Uint32(b[recordbatch.OffLastOffsetDelta:])),
		baseTimestamp:   int64(be.Uint64(b[recordbatch.OffBaseTimestamp:])),
		maxTimestamp:    int64(be.Uint64(b[recordbatch.OffMaxTimestamp:])),
		producerID:      int64(be.Uint64(b[recordbatch.OffProducerID:])),
		producerEpoch:   int16(be.Uint16(b[recordbatch.OffProducerEpoch:])),
		baseSequence:    int32(be.Uint32(b[recordbatch.OffBaseSequence:])),
		numRecords:      int32(be.Uint32(b[recordbatch.OffNumRecords:])),
	}
}

// size is the batch's total length in bytes.
func (h *batchHeader) size() int64 { return recordbatch.LogOverhead + int64(h.length) }

// lastOffset is the offset of the batch's last record.
func (h *batchHeader) lastOffset() int64 { return h.baseOffset + int64(h.lastOffsetDelta) }

// lastSequence is the sequence number of the batch's last record, wrapping past MaxInt32 to 0
// as Kafka's DefaultRecordBatch.incrementSequence does.
func (h *batchHeader) lastSequence() int32 {
	return incrementSequence(h.baseSequence, h.lastOffsetDelta)
}

func (h *batchHeader) isControl() bool { return h.attributes&recordbatch.AttrControl != 0 }

func (h *batchHeader) isTransactional() bool {
	return h.attributes&recordbatch.AttrTransactional != 0
}

// incrementSequence adds delta (>= 0) to seq, wrapping from MaxInt32 to 0.
func incrementSequence(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

// checkBatch validates the batch at the start of b: enough bytes for the header and the stated
// length, magic 2, a non-negative lastOffsetDelta and, when verifyCRC, its CRC32C. It never
// reads outside b.
func checkBatch(b []byte, verifyCRC bool) (batchHeader, error) {
	if len(b) < recordbatch.HeaderSize {
		return batchHeader{}, fmt.Errorf("truncated header: %d bytes left, want at least %d", len(b), recordbatch.HeaderSize)
	}
	h := parseHeader(b)
	switch {
	case h.length < recordbatch.MinBatchLength:
		return h, fmt.Errorf("batchLength=%d; want at least %d", h.length, recordbatch.MinBatchLength)
	case h.size() > int64(len(b)):
		return h, fmt.Errorf("truncated batch: batchLength=%d needs %d bytes, %d left", h.length, h.size(), len(b))
	case h.magic != recordbatch.Magic:
		return h, fmt.Errorf("magic=%d; want %d", h.magic, recordbatch.Magic)
	case h.lastOffsetDelta < 0:
		return h, fmt.Errorf("lastOffsetDelta=%d; want >= 0", h.lastOffsetDelta)
	}
	if verifyCRC {
		if got := crc32c.Checksum(b[recordbatch.OffAttributes:h.size()]); got != h.crc {
			return h, fmt.Errorf("crc mismatch: stored %#08x, computed %#08x", h.crc, got)
		}
	}
	return h, nil
}

// firstRecordAtOrAfter finds, in the uncompressed batch b, the first record whose timestamp is
// at least ts and whose offset is at least minOffset. ok is false when the records cannot be
// walked (compressed or malformed) or none qualifies; callers then fall back to the batch.
func firstRecordAtOrAfter(b []byte, ts, minOffset int64) (offset, timestamp int64, ok bool) {
	h := parseHeader(b)
	if h.attributes&recordbatch.AttrCompression != 0 {
		return 0, 0, false
	}
	logAppend := h.attributes&recordbatch.AttrLogAppendTime != 0
	p := recordbatch.HeaderSize
	for range h.numRecords {
		length, n := binary.Varint(b[p:])
		if n <= 0 || length < 1 || int64(len(b)-p-n) < length {
			return 0, 0, false
		}
		body := b[p+n : p+n+int(length)]
		tsDelta, n1 := binary.Varint(body[1:])
		if n1 <= 0 {
			return 0, 0, false
		}
		offDelta, n2 := binary.Varint(body[1+n1:])
		if n2 <= 0 {
			return 0, 0, false
		}
		rts := h.baseTimestamp + tsDelta
		if logAppend {
			rts = h.maxTimestamp
		}
		if off := h.baseOffset + offDelta; rts >= ts && off >= minOffset {
			return off, rts, true
		}
		p += n + int(length)
	}
	return 0, 0, false
}

func beUint32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }
func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
