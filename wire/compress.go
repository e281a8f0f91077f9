package wire

import (
	"sync"

	"ringbroker/internal/codec"
)

// Codec is a record batch compression codec: attributes & 7. The implementation lives in
// internal/codec, shared with the log cleaner.
type Codec = codec.Codec

// The codecs Kafka defines.
const (
	CodecNone   = codec.None
	CodecGzip   = codec.Gzip
	CodecSnappy = codec.Snappy
	CodecLZ4    = codec.LZ4
	CodecZstd   = codec.Zstd
)

// DefaultLevel asks AppendBatchLevel for the codec's default compression level.
const DefaultLevel = codec.DefaultLevel

// ZstdMaxWindow is the largest zstd window accepted when decoding. The zstd format recommends
// decoders support 8 MiB; a frame asking for more is rejected so one batch cannot make the
// decoder reserve an arbitrarily large history.
const ZstdMaxWindow = codec.ZstdMaxWindow

// Codecs compresses and decompresses record payloads, reusing decoder and encoder state across
// calls through pools it owns. It is safe for concurrent use; share one per process or per
// core.
type Codecs struct {
	codecs  *codec.Codecs
	scratch sync.Pool // *recordScratch
}

// NewCodecs returns a Codecs with empty pools.
func NewCodecs() *Codecs {
	c := &Codecs{codecs: codec.New()}
	c.scratch.New = func() any { return new(recordScratch) }
	return c
}

// Decompress appends the decompression of src to dst and returns the result. More than limit
// decompressed bytes is an error wrapping ErrDecompressedTooLarge, detected before more than
// about limit bytes are allocated. Snappy input may be xerial-framed (Java client) or raw.
// CodecNone copies src.
func (c *Codecs) Decompress(id Codec, src, dst []byte, limit int) ([]byte, error) {
	return c.codecs.Decompress(id, src, dst, limit)
}

// Compress appends the compression of src with id to dst. Snappy output is xerial-framed like
// the Java client's; LZ4 is the LZ4 frame format with 64 KiB blocks, as Kafka writes it.
// CodecNone copies src.
func (c *Codecs) Compress(id Codec, src, dst []byte) ([]byte, error) {
	return c.codecs.Compress(id, src, dst)
}
