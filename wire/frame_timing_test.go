package wire

import (
	"testing"

	"ringbroker/internal/mempool"
)

// BenchmarkFrameReader feeds 64 KiB chunks holding 1 KiB frames that
// straddle chunk boundaries, with frame buffers from the request pool and
// returned after each frame, as the broker does: no allocation per frame.
func BenchmarkFrameReader(b *testing.B) {
	sizes := make([]int, 1000)
	for i := range sizes {
		sizes[i] = 1020
	}
	_, stream := frameStream(sizes...)
	pool := mempool.New(64<<20, -1)
	defer pool.Close()
	r := NewFrameReader(0, pool.Get)
	emit := func(f []byte) error { pool.Put(f); return nil }
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		for rest := stream; len(rest) > 0; {
			n := min(64<<10, len(rest))
			if _, err := r.Feed(rest[:n], emit); err != nil {
				b.Fatal(err)
			}
			rest = rest[n:]
		}
	}
}
