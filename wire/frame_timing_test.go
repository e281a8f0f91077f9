package wire

import "testing"

// BenchmarkFrameReader feeds 64 KiB chunks holding 1 KiB frames that
// straddle chunk boundaries.
func BenchmarkFrameReader(b *testing.B) {
	sizes := make([]int, 1000)
	for i := range sizes {
		sizes[i] = 1020
	}
	_, stream := frameStream(sizes...)
	r := NewFrameReader(0)
	emit := func([]byte) error { return nil }
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		for rest := stream; len(rest) > 0; {
			n := min(64<<10, len(rest))
			if err := r.Feed(rest[:n], emit); err != nil {
				b.Fatal(err)
			}
			rest = rest[n:]
		}
	}
}
