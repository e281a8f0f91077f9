package codec

import (
	"testing"

	"ringbroker/internal/testutil"
)

// BenchmarkCompress compresses 64 KiB of mixed data per codec.
func BenchmarkCompress(b *testing.B) {
	c := New()
	src := testutil.Payload(64<<10, 1)
	for _, codec := range allCodecs[1:] {
		b.Run(codec.String(), func(b *testing.B) {
			var dst []byte
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = c.Compress(codec, src, dst[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
