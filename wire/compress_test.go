package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// testPayload returns n bytes mixing text and noise, so every codec both
// compresses and has literal runs.
func testPayload(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		if i%64 < 48 {
			b[i] = "the quick brown fox "[i%20]
		} else {
			b[i] = byte(rng.Uint32())
		}
	}
	return b
}

// kgoDefaultCompressor returns franz-go's compressor for codec.
func kgoDefaultCompressor(codec Codec) (kgo.Compressor, error) {
	switch codec {
	case CodecGzip:
		return kgo.DefaultCompressor(kgo.GzipCompression())
	case CodecSnappy:
		return kgo.DefaultCompressor(kgo.SnappyCompression())
	case CodecLZ4:
		return kgo.DefaultCompressor(kgo.Lz4Compression())
	case CodecZstd:
		return kgo.DefaultCompressor(kgo.ZstdCompression())
	}
	return kgo.DefaultCompressor(kgo.NoCompression())
}

// TestCodecsDelegate checks that wire's Codecs round-trips through internal/codec (whose own
// tests cover the codecs in depth) and that the error sentinels match under both names.
func TestCodecsDelegate(t *testing.T) {
	c := NewCodecs()
	src := testPayload(10000, 7)
	for _, codec := range allCodecs {
		comp, err := c.Compress(codec, src, nil)
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		out, err := c.Decompress(codec, comp, nil, len(src))
		if err != nil || !bytes.Equal(out, src) {
			t.Fatalf("%s: round trip: err=%v equal=%v", codec, err, bytes.Equal(out, src))
		}
		if codec != CodecNone {
			if _, err := c.Decompress(codec, comp, nil, len(src)-1); !errors.Is(err, ErrDecompressedTooLarge) {
				t.Fatalf("%s: limit below size: err = %v; want ErrDecompressedTooLarge", codec, err)
			}
		}
	}
	if _, err := c.Compress(9, src, nil); !errors.Is(err, ErrUnknownCodec) {
		t.Fatalf("codec 9: err = %v; want ErrUnknownCodec", err)
	}
}
