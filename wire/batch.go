package wire

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/internal/crc32c"
	"ringbroker/internal/recordbatch"
)

const (
	// BatchHeaderLen is the size of a v2 record batch header; records
	// start here.
	BatchHeaderLen = recordbatch.HeaderSize
	// minRecordLen is the smallest encoded record: length, attributes,
	// timestamp delta, offset delta, key length, value length and header
	// count, one byte each.
	minRecordLen = 7
)

// TimestampType says whether a batch's timestamps were set by the producer
// or by the broker on append.
type TimestampType int8

// Kafka's timestamp types, as attribute bit 3 encodes them.
const (
	CreateTime    TimestampType = 0
	LogAppendTime TimestampType = 1
)

// CRC32C returns the Castagnoli CRC of b, the checksum of record batch v2.
func CRC32C(b []byte) uint32 { return crc32c.Checksum(b) }

// Batch is a zero-copy view of one record batch v2: the whole batch from
// baseOffset to the end of its records. Accessors read the bytes in place;
// setters write them in place. A Batch must come from NextBatch or be known
// to hold at least BatchHeaderLen bytes.
type Batch []byte

// BaseOffset is the offset of the batch's first record.
func (b Batch) BaseOffset() int64 {
	return int64(binary.BigEndian.Uint64(b[recordbatch.OffBaseOffset:]))
}

// Length is the batch length field: the bytes after it.
func (b Batch) Length() int32 { return int32(binary.BigEndian.Uint32(b[recordbatch.OffBatchLength:])) }

// PartitionLeaderEpoch is the leader epoch the broker stamped on append.
func (b Batch) PartitionLeaderEpoch() int32 {
	return int32(binary.BigEndian.Uint32(b[recordbatch.OffLeaderEpoch:]))
}

// Magic is the format version; 2 for record batches.
func (b Batch) Magic() int8 { return int8(b[recordbatch.OffMagic]) }

// CRC is the stored CRC32C of attributes through the end of the batch.
func (b Batch) CRC() uint32 { return binary.BigEndian.Uint32(b[recordbatch.OffCRC:]) }

// ComputeCRC computes the CRC32C the CRC field should hold.
func (b Batch) ComputeCRC() uint32 { return CRC32C(b[recordbatch.OffAttributes:]) }

// Attributes is the raw attributes field.
func (b Batch) Attributes() int16 {
	return int16(binary.BigEndian.Uint16(b[recordbatch.OffAttributes:]))
}

// Codec is the compression codec of the records.
func (b Batch) Codec() Codec { return Codec(b.Attributes() & recordbatch.AttrCompression) }

// TimestampType reports whether MaxTimestamp is the producer's create time
// or the broker's log append time.
func (b Batch) TimestampType() TimestampType {
	if b.Attributes()&recordbatch.AttrLogAppendTime != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// IsTransactional reports whether the batch belongs to a transaction.
func (b Batch) IsTransactional() bool { return b.Attributes()&recordbatch.AttrTransactional != 0 }

// IsControl reports whether the batch holds a control record (commit or
// abort marker).
func (b Batch) IsControl() bool { return b.Attributes()&recordbatch.AttrControl != 0 }

// HasDeleteHorizon reports whether FirstTimestamp holds the compaction
// delete horizon (KIP-534).
func (b Batch) HasDeleteHorizon() bool { return b.Attributes()&recordbatch.AttrDeleteHorizon != 0 }

// LastOffsetDelta is the offset of the last record minus BaseOffset.
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[recordbatch.OffLastOffsetDelta:]))
}

// LastOffset is the offset of the batch's last record.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// FirstTimestamp is the timestamp records' deltas are relative to.
func (b Batch) FirstTimestamp() int64 {
	return int64(binary.BigEndian.Uint64(b[recordbatch.OffBaseTimestamp:]))
}

// MaxTimestamp is the largest record timestamp, or the log append time.
func (b Batch) MaxTimestamp() int64 {
	return int64(binary.BigEndian.Uint64(b[recordbatch.OffMaxTimestamp:]))
}

// ProducerID is the idempotent/transactional producer id, -1 if none.
func (b Batch) ProducerID() int64 {
	return int64(binary.BigEndian.Uint64(b[recordbatch.OffProducerID:]))
}

// ProducerEpoch is the producer's epoch, -1 if none.
func (b Batch) ProducerEpoch() int16 {
	return int16(binary.BigEndian.Uint16(b[recordbatch.OffProducerEpoch:]))
}

// BaseSequence is the sequence number of the first record, -1 if none.
func (b Batch) BaseSequence() int32 {
	return int32(binary.BigEndian.Uint32(b[recordbatch.OffBaseSequence:]))
}

// NumRecords is the record count field.
func (b Batch) NumRecords() int32 {
	return int32(binary.BigEndian.Uint32(b[recordbatch.OffNumRecords:]))
}

// Records is the record payload, compressed when Codec is not CodecNone.
func (b Batch) Records() []byte { return b[BatchHeaderLen:] }

// SetBaseOffset assigns the batch's base offset. The field is outside the
// CRC, so the CRC stays valid.
func (b Batch) SetBaseOffset(offset int64) {
	binary.BigEndian.PutUint64(b[recordbatch.OffBaseOffset:], uint64(offset))
}

// SetPartitionLeaderEpoch stamps the leader epoch. The field is outside the
// CRC, so the CRC stays valid.
func (b Batch) SetPartitionLeaderEpoch(epoch int32) {
	binary.BigEndian.PutUint32(b[recordbatch.OffLeaderEpoch:], uint32(epoch))
}

// SetMaxTimestamp sets MaxTimestamp (keeping the timestamp type) and
// recomputes the CRC, which covers it.
func (b Batch) SetMaxTimestamp(ts int64) {
	if b.MaxTimestamp() == ts {
		return
	}
	binary.BigEndian.PutUint64(b[recordbatch.OffMaxTimestamp:], uint64(ts))
	b.updateCRC()
}

// SetLogAppendTime marks the batch's timestamps as log append time ts, as
// a broker does for topics with message.timestamp.type=LogAppendTime, and
// recomputes the CRC.
func (b Batch) SetLogAppendTime(ts int64) {
	attrs := b.Attributes()
	if attrs&recordbatch.AttrLogAppendTime != 0 && b.MaxTimestamp() == ts {
		return
	}
	binary.BigEndian.PutUint16(b[recordbatch.OffAttributes:], uint16(attrs|recordbatch.AttrLogAppendTime))
	binary.BigEndian.PutUint64(b[recordbatch.OffMaxTimestamp:], uint64(ts))
	b.updateCRC()
}

func (b Batch) updateCRC() { binary.BigEndian.PutUint32(b[recordbatch.OffCRC:], b.ComputeCRC()) }

// BatchInfo is the producer state of one batch, what idempotence and
// transactions need.
type BatchInfo struct {
	BaseOffset      int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	LastOffsetDelta int32
	Transactional   bool
	Control         bool
}

func (b Batch) info() BatchInfo {
	return BatchInfo{
		BaseOffset:      b.BaseOffset(),
		ProducerID:      b.ProducerID(),
		ProducerEpoch:   b.ProducerEpoch(),
		BaseSequence:    b.BaseSequence(),
		LastOffsetDelta: b.LastOffsetDelta(),
		Transactional:   b.IsTransactional(),
		Control:         b.IsControl(),
	}
}

// BatchSummary describes a validated record set.
type BatchSummary struct {
	// Batches is the number of batches.
	Batches int
	// Records is the sum of the batches' record counts.
	Records int64
	// Bytes is the size of the record set.
	Bytes int
	// First and Last describe the first and last batch; equal for one.
	First, Last BatchInfo
	// MaxTimestamp is the largest MaxTimestamp of the batches.
	MaxTimestamp int64
	// Codec is the first batch's codec; MixedCodecs is set when another
	// batch uses a different one.
	Codec       Codec
	MixedCodecs bool
}

// batchErr builds the error for batch index at pos.
func batchErr(index, pos int, code *kerr.Error, reason string, got, want int64) error {
	return &BatchError{Index: index, Pos: pos, Code: code, Reason: reason, Got: got, Want: want}
}

// NextBatch checks the framing of the batch at the start of records and
// returns it and the bytes after it. It checks the length, magic, CRC32C,
// codec and record count; index and pos only label errors. Errors are
// *BatchError with the Kafka code Kafka uses for the failure:
// CORRUPT_MESSAGE for bad length, magic or CRC, UNSUPPORTED_FOR_MESSAGE_FORMAT
// for magic 0 and 1, UNSUPPORTED_COMPRESSION_TYPE for codec ids above 4,
// INVALID_RECORD for inconsistent counts.
func NextBatch(records []byte, index, pos int) (Batch, []byte, error) {
	if len(records) < recordbatch.LogOverhead {
		return nil, nil, batchErr(index, pos, kerr.CorruptMessage, "truncated batch length", int64(len(records)), recordbatch.LogOverhead)
	}
	length := int64(int32(binary.BigEndian.Uint32(records[recordbatch.OffBatchLength:])))
	if len(records) > recordbatch.OffMagic {
		switch magic := int8(records[recordbatch.OffMagic]); {
		case magic == 0 || magic == 1:
			return nil, nil, batchErr(index, pos, kerr.UnsupportedForMessageFormat, "legacy message format magic", int64(magic), 2)
		case magic != 2:
			return nil, nil, batchErr(index, pos, kerr.CorruptMessage, "invalid magic", int64(magic), 2)
		}
	}
	if length < BatchHeaderLen-recordbatch.LogOverhead {
		return nil, nil, batchErr(index, pos, kerr.CorruptMessage, "batch length below header size", length, BatchHeaderLen-recordbatch.LogOverhead)
	}
	total := recordbatch.LogOverhead + length
	if total > int64(len(records)) {
		return nil, nil, batchErr(index, pos, kerr.CorruptMessage, "batch length beyond record set", total, int64(len(records)))
	}
	b := Batch(records[:total])
	if got, want := b.ComputeCRC(), b.CRC(); got != want {
		return nil, nil, batchErr(index, pos, kerr.CorruptMessage, "crc32c mismatch", int64(got), int64(want))
	}
	if c := b.Codec(); !c.Valid() {
		return nil, nil, batchErr(index, pos, kerr.UnsupportedCompressionType, "unknown codec id", int64(c), int64(CodecZstd))
	}
	n := b.NumRecords()
	if n < 0 {
		return nil, nil, batchErr(index, pos, kerr.InvalidRecord, "negative record count", int64(n), 0)
	}
	if n > 0 && int64(b.LastOffsetDelta())+1 != int64(n) {
		return nil, nil, batchErr(index, pos, kerr.InvalidRecord, "record count differs from lastOffsetDelta+1", int64(n), int64(b.LastOffsetDelta())+1)
	}
	if b.Codec() == CodecNone && int64(n)*minRecordLen > int64(len(b.Records())) {
		return nil, nil, batchErr(index, pos, kerr.CorruptMessage, "record count exceeds payload", int64(n), int64(len(b.Records())/minRecordLen))
	}
	return b, records[total:], nil
}

// ValidateBatches walks every batch of a record set (a Produce partition's
// records, or a span of a segment) with NextBatch and summarises them.
// Empty batches (zero records, left by compaction) are allowed; an empty
// record set yields a zero summary. It does not allocate on success.
func ValidateBatches(records []byte) (BatchSummary, error) {
	var s BatchSummary
	s.Bytes = len(records)
	for rest, pos := records, 0; len(rest) > 0; {
		b, next, err := NextBatch(rest, s.Batches, pos)
		if err != nil {
			return s, err
		}
		info := b.info()
		if s.Batches == 0 {
			s.First, s.Codec, s.MaxTimestamp = info, b.Codec(), b.MaxTimestamp()
		} else if b.Codec() != s.Codec {
			s.MixedCodecs = true
		}
		s.Last = info
		s.MaxTimestamp = max(s.MaxTimestamp, b.MaxTimestamp())
		s.Records += int64(b.NumRecords())
		s.Batches++
		pos += len(b)
		rest = next
	}
	return s, nil
}

// ValidateProduce applies ValidateBatches and the rules Kafka applies to a
// partition's records in a Produce request of the given version (v3+):
// exactly one batch, magic 2, at least one record, no control batches, no
// zstd before v7, a base sequence with every producer id, and at most
// maxBatchBytes per batch (message.max.bytes; <= 0 disables). Failures use
// Kafka's codes: INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE,
// MESSAGE_TOO_LARGE, or those of NextBatch.
func ValidateProduce(records []byte, version int16, maxBatchBytes int) (BatchSummary, error) {
	if len(records) == 0 {
		return BatchSummary{}, batchErr(0, 0, kerr.InvalidRecord, "produce needs one record batch", 0, 1)
	}
	if len(records) > recordbatch.OffMagic {
		if magic := int8(records[recordbatch.OffMagic]); magic != 2 {
			return BatchSummary{}, batchErr(0, 0, kerr.InvalidRecord, "produce v3+ needs magic 2", int64(magic), 2)
		}
	}
	s, err := ValidateBatches(records)
	if err != nil {
		return s, err
	}
	switch {
	case s.Batches != 1:
		return s, batchErr(1, recordbatch.LogOverhead+int(Batch(records).Length()), kerr.InvalidRecord, "produce allows exactly one batch per partition", int64(s.Batches), 1)
	case maxBatchBytes > 0 && len(records) > maxBatchBytes:
		return s, batchErr(0, 0, kerr.MessageTooLarge, "batch larger than message.max.bytes", int64(len(records)), int64(maxBatchBytes))
	case s.Codec == CodecZstd && version < 7:
		return s, batchErr(0, 0, kerr.UnsupportedCompressionType, "zstd needs produce v7", int64(version), 7)
	case s.Records <= 0:
		return s, batchErr(0, 0, kerr.InvalidRecord, "produce batch without records", s.Records, 1)
	case s.First.Control:
		return s, batchErr(0, 0, kerr.InvalidRecord, "clients may not write control batches", 1, 0)
	case s.First.ProducerID >= 0 && s.First.BaseSequence < 0:
		return s, batchErr(0, 0, kerr.InvalidRecord, "producer id without base sequence", int64(s.First.BaseSequence), 0)
	}
	return s, nil
}
