// Package recordbatch holds the fixed layout of Kafka's record batch v2 (magic 2): the byte
// offset of each header field, the header's size and the attribute bits. wire, which encodes and
// decodes batches for the protocol, and log, which stores them byte-identical to the wire, both
// read and write headers in place; they take the layout from here so it is written once.
//
// All integers are big-endian. The CRC (CRC32C, internal/crc32c) covers the bytes from
// OffAttributes to the end of the batch, so baseOffset and partitionLeaderEpoch, which the broker
// writes on append, lie outside it.
package recordbatch

// Byte offsets of the header fields.
const (
	OffBaseOffset      = 0  // int64
	OffBatchLength     = 8  // int32: the bytes after this field
	OffLeaderEpoch     = 12 // int32: partitionLeaderEpoch
	OffMagic           = 16 // int8
	OffCRC             = 17 // uint32: CRC32C of the bytes from OffAttributes on
	OffAttributes      = 21 // int16
	OffLastOffsetDelta = 23 // int32
	OffBaseTimestamp   = 27 // int64: firstTimestamp, or the delete horizon (AttrDeleteHorizon)
	OffMaxTimestamp    = 35 // int64
	OffProducerID      = 43 // int64
	OffProducerEpoch   = 51 // int16
	OffBaseSequence    = 53 // int32
	OffNumRecords      = 57 // int32
)

// Sizes.
const (
	// HeaderSize is the size of the header; the first record starts here.
	HeaderSize = 61
	// LogOverhead is baseOffset and batchLength, which batchLength does not count.
	LogOverhead = 12
	// MinBatchLength is the batchLength of a batch without records.
	MinBatchLength = HeaderSize - LogOverhead
	// Magic is the format version of record batch v2, the only one ringbroker stores.
	Magic = 2
)

// Attribute bits.
const (
	AttrCompression   = 0x07 // codec bits; 0 is uncompressed
	AttrLogAppendTime = 0x08 // timestamp type: set by the broker on append
	AttrTransactional = 0x10 // the batch belongs to a transaction
	AttrControl       = 0x20 // a control batch (transaction marker)
	AttrDeleteHorizon = 0x40 // KIP-534: baseTimestamp holds the delete horizon
)
