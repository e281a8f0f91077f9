package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkDecodeProduce decodes a Produce v9 request carrying 16
// partitions with one 16 KiB batch (21 records, 16 of them with a
// 1000-byte value) each; the validate case also checks every batch.
func BenchmarkDecodeProduce(b *testing.B) {
	frame, _ := produceFrame(b, 9, 16, 21, 1000)
	for _, validate := range []bool{false, true} {
		name := "decode"
		if validate {
			name = "decode+validate"
		}
		b.Run(name, func(b *testing.B) {
			req := new(kmsg.ProduceRequest)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				h, body, err := ParseRequestHeader(frame)
				if err != nil {
					b.Fatal(err)
				}
				if err := DecodeProduce(req, body, h.APIVersion); err != nil {
					b.Fatal(err)
				}
				if !validate {
					continue
				}
				for _, p := range req.Topics[0].Partitions {
					if _, err := ValidateProduce(p.Records, h.APIVersion, 1<<20); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
