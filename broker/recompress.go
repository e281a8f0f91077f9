package broker

// Broker-side recompression: a topic whose compression.type is a codec (gzip, snappy, lz4,
// zstd) or uncompressed keeps its batches in that codec whatever the producer sent, as Kafka's
// LogValidator does. A batch already in the topic's codec, or any batch of a topic at
// compression.type=producer (the default), is appended as received, without a copy.

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/wire"
)

// topicCodecs maps compression.type values other than producer to the codec the topic's
// batches are stored in.
var topicCodecs = map[string]wire.Codec{
	"uncompressed": wire.CodecNone,
	"gzip":         wire.CodecGzip,
	"snappy":       wire.CodecSnappy,
	"lz4":          wire.CodecLZ4,
	"zstd":         wire.CodecZstd,
}

// storedCodec is the codec compression.type v asks batches to be stored in; ok is false for
// producer (keep the producer's).
func storedCodec(v string) (codec wire.Codec, ok bool) {
	codec, ok = topicCodecs[strings.ToLower(strings.TrimSpace(v))]
	return codec, ok
}

// recompressInitialRecords caps the records recompress allocates for before it has decoded any.
const recompressInitialRecords = 4096

// validCompressionType accepts Kafka's compression.type values: producer or a stored codec.
func validCompressionType(v string) error {
	if _, ok := storedCodec(v); ok || strings.EqualFold(strings.TrimSpace(v), "producer") {
		return nil
	}
	return fmt.Errorf("must be one of uncompressed, zstd, lz4, snappy, gzip, producer")
}

// recompress returns batch with its records compressed with codec at level (the topic's
// compression.<codec>.level), as Kafka rewrites a batch whose codec is not the topic's: the
// same records, producer id, epoch and sequence, timestamps and attributes (transactional,
// timestamp type) in a new batch v2. The result must fit maxBytes (MESSAGE_TOO_LARGE
// otherwise, as Kafka checks the rewritten batch).
func (b *Broker) recompress(batch wire.Batch, codec wire.Codec, level, maxBytes int) (wire.Batch, *kerr.Error, string) {
	// The count is the producer's say-so until the records decode: it only sizes the first
	// allocation, capped.
	recs := make([]wire.Record, 0, min(int(max(batch.NumRecords(), 0)), recompressInitialRecords))
	err := b.codecs.DecodeRecords(batch, compactedDecodeLimit, func(r *wire.Record) error {
		c := wire.Record{Attributes: r.Attributes, TimestampDelta: r.TimestampDelta, OffsetDelta: r.OffsetDelta,
			Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)}
		for _, h := range r.Headers {
			c.Headers = append(c.Headers, wire.RecordHeader{Key: bytes.Clone(h.Key), Value: bytes.Clone(h.Value)})
		}
		recs = append(recs, c)
		return nil
	})
	if err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return nil, ke, err.Error()
		}
		return nil, kerr.CorruptMessage, err.Error()
	}
	h := wire.BatchHeader{BaseOffset: batch.BaseOffset(), PartitionLeaderEpoch: batch.PartitionLeaderEpoch(),
		Attributes: batch.Attributes(), FirstTimestamp: batch.FirstTimestamp(), MaxTimestamp: batch.MaxTimestamp(),
		ProducerID: batch.ProducerID(), ProducerEpoch: batch.ProducerEpoch(), BaseSequence: batch.BaseSequence()}
	out, err := b.codecs.AppendBatchLevel(nil, h, codec, level, recs)
	if err != nil {
		return nil, kerr.CorruptMessage, fmt.Sprintf("recompress a batch of %d records with %v: %v", len(recs), codec, err)
	}
	if len(out) > maxBytes {
		return nil, kerr.MessageTooLarge, fmt.Sprintf("the batch recompressed with %v is %d bytes, larger than max.message.bytes %d", codec, len(out), maxBytes)
	}
	return out, nil, ""
}
