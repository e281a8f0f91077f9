package testutil

import (
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Payload returns n bytes mixing text and noise, the same for the same seed, so that every
// codec both compresses them and meets literal runs.
func Payload(n int, seed uint64) []byte {
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

// KgoCompressor returns franz-go's compressor for Kafka's compression codec id (the attribute
// bits of a record batch: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd), to check ringbroker's codecs
// against an independent implementation. It takes the id rather than internal/codec's type so
// that internal/codec's own tests may use it.
func KgoCompressor(id int8) (kgo.Compressor, error) {
	c := kgo.NoCompression()
	switch id {
	case 1:
		c = kgo.GzipCompression()
	case 2:
		c = kgo.SnappyCompression()
	case 3:
		c = kgo.Lz4Compression()
	case 4:
		c = kgo.ZstdCompression()
	}
	return kgo.DefaultCompressor(c)
}
