package log

import (
	"fmt"
	"testing"

	"ringbroker/internal/codec"
)

// BenchmarkCleaner measures cleaning throughput (MB/s of segment bytes read and rewritten):
// 16 MiB of 1 KiB records in 16-record batches over 1000 keys, so most records are superseded,
// uncompressed and with lz4. Each iteration rebuilds the log so every cleaning does full work.
func BenchmarkCleaner(b *testing.B) {
	for _, id := range []codec.Codec{codec.None, codec.LZ4} {
		b.Run(id.String(), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.SegmentBytes = 4 << 20
			value := make([]byte, 1024) // half text, half noise: compresses about 2:1
			rng := uint32(1)
			for i := range value {
				rng = rng*1664525 + 1013904223
				value[i] = "the quick brown fox "[i%20]
				if i%2 == 1 {
					value[i] = byte(rng >> 24)
				}
			}
			var batches [][]byte
			var total int64
			for i := 0; total < 16<<20; i++ {
				recs := make([]kv, 16)
				for j := range recs {
					recs[j] = kv{key: fmt.Sprintf("key-%04d", (i*16+j)%1000), value: string(value)}
				}
				batch := keyedBatch(b, plainOpts(id, int64(i)), recs...)
				batches = append(batches, batch)
				total += int64(len(batch))
			}
			var read int64
			for b.Loop() {
				b.StopTimer()
				f := newCleanerFixture(b, cfg, DefaultCompactionConfig())
				for _, batch := range batches {
					if _, err := f.l.Append(append([]byte(nil), batch...)); err != nil {
						b.Fatal(err)
					}
				}
				f.roll(b)
				b.StartTimer()
				st := f.clean(b)
				read += st.BytesRead
			}
			b.ReportMetric(float64(read)/b.Elapsed().Seconds()/1e6, "MB/s")
		})
	}
}
