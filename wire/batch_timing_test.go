package wire

import (
	"fmt"
	"testing"

	"ringbroker/internal/testutil"
)

// BenchmarkValidateBatches validates record sets: one 16 KiB batch, and
// sixteen 1 KiB batches.
func BenchmarkValidateBatches(b *testing.B) {
	c := NewCodecs()
	for _, tc := range []struct{ batches, records, value int }{{1, 21, 1000}, {16, 1, 1000}} {
		var set []byte
		for range tc.batches {
			set = append(set, buildBatch(b, c, plainSpec(CodecNone), testRecords(tc.records, tc.value))...)
		}
		b.Run(fmt.Sprintf("%dx%dB", tc.batches, len(set)/tc.batches), func(b *testing.B) {
			b.SetBytes(int64(len(set)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ValidateBatches(set); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCRC32C checksums a 16 KiB batch body.
func BenchmarkCRC32C(b *testing.B) {
	buf := testutil.Payload(16<<10, 1)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		CRC32C(buf)
	}
}
