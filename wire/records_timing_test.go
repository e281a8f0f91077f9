package wire

import "testing"

// BenchmarkDecodeRecords iterates the records of a 16-record batch per
// codec, decompressing into a pooled buffer.
func BenchmarkDecodeRecords(b *testing.B) {
	c := NewCodecs()
	for _, codec := range allCodecs {
		raw := Batch(buildBatch(b, c, plainSpec(codec), testRecords(16, 1000)))
		b.Run(codec.String(), func(b *testing.B) {
			b.SetBytes(16 * 1000)
			b.ReportAllocs()
			for b.Loop() {
				if err := c.DecodeRecords(raw, 1<<20, func(*Record) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
