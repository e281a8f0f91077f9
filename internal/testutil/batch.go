package testutil

import (
	"encoding/binary"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/crc32c"
	"ringbroker/internal/recordbatch"
)

// EncodeRecords encodes recs as the records of a batch v2, each with its length computed
// (whatever its Length field held).
func EncodeRecords(recs ...kmsg.Record) []byte {
	var out []byte
	for _, r := range recs {
		r.Length = 0
		r.Length = int32(len(r.AppendTo(nil)) - 1) // a zero length is one varint byte
		out = r.AppendTo(out)
	}
	return out
}

// NewBatch returns the header of an uncompressed record batch v2 of recs, as a plain producer
// sends it: no producer id, leader epoch -1, first timestamp ts and the max timestamp of the
// records' deltas. Record i gets offset delta i. Tests set other fields (attributes, producer
// state, compressed Records) before SealBatch.
func NewBatch(ts int64, recs ...kmsg.Record) kmsg.RecordBatch {
	recs = slices.Clone(recs)
	maxDelta := int64(0)
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
		maxDelta = max(maxDelta, recs[i].TimestampDelta64)
	}
	return kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                recordbatch.Magic,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       ts,
		MaxTimestamp:         ts + maxDelta,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              EncodeRecords(recs...),
	}
}

// SealBatch encodes rb with its batch length and CRC32C computed from the bytes, as a client
// would send it (whatever rb's Length and CRC fields held).
func SealBatch(rb kmsg.RecordBatch) []byte {
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[recordbatch.OffBatchLength:], uint32(len(b)-recordbatch.LogOverhead))
	binary.BigEndian.PutUint32(b[recordbatch.OffCRC:], crc32c.Checksum(b[recordbatch.OffAttributes:]))
	return b
}
