package log

import (
	"fmt"
	"log/slog"
	"testing"

	"ringbroker/internal/recordbatch"
	"ringbroker/internal/testutil"
)

// benchBatch is a 16 KiB batch of 1 KiB records.
func benchBatch(tb testing.TB) []byte {
	return makeBatch(tb, plain(16, 1000, 1))
}

func benchConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 64 << 20
	return c
}

// BenchmarkAppend appends 16 KiB batches (no fsync per write, Kafka's default) and reports
// MB/s; segments roll every 64 MiB.
func BenchmarkAppend(b *testing.B) {
	l, err := Open(b.TempDir(), benchConfig(), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := benchBatch(b)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendIdempotent is BenchmarkAppend with an idempotent producer, exercising the
// sequence checks.
func BenchmarkAppendIdempotent(b *testing.B) {
	l, err := Open(b.TempDir(), benchConfig(), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	spec := plain(16, 1000, 1)
	spec.producerID, spec.epoch, spec.seq = 1, 0, 0
	batch := makeBatch(b, spec)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	seq := int32(0)
	for b.Loop() {
		putSequence(batch, seq) // the sequence lies inside the CRC; the log does not check it
		if _, err := l.Append(batch); err != nil {
			b.Fatal(err)
		}
		seq = incrementSequence(seq, 16)
	}
}

func putSequence(b []byte, seq int32) {
	b[recordbatch.OffBaseSequence] = byte(seq >> 24)
	b[recordbatch.OffBaseSequence+1] = byte(seq >> 16)
	b[recordbatch.OffBaseSequence+2] = byte(seq >> 8)
	b[recordbatch.OffBaseSequence+3] = byte(seq)
}

// BenchmarkRead fetches one 16 KiB batch per Read from a log of 64 MiB over several segments;
// allocs/op is allocations per fetched batch.
func BenchmarkRead(b *testing.B) {
	l, end, size := benchLog(b)
	defer l.Close()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var offset int64
	for b.Loop() {
		r, err := l.Read(offset, size, -1, true)
		if err != nil || len(r.Data) != size {
			b.Fatalf("Read(%d) = %d bytes, %v", offset, len(r.Data), err)
		}
		r.Release()
		if offset += 16; offset >= end {
			offset = 0
		}
	}
}

// BenchmarkReadMiB fetches 1 MiB per Read (64 batches), as a consumer with default fetch
// sizes does.
func BenchmarkReadMiB(b *testing.B) {
	l, end, size := benchLog(b)
	defer l.Close()
	b.ReportAllocs()
	var offset, total int64
	for b.Loop() {
		r, err := l.Read(offset, 1<<20, -1, true)
		if err != nil || len(r.Data) == 0 {
			b.Fatalf("Read(%d) = %d bytes, %v", offset, len(r.Data), err)
		}
		total += int64(len(r.Data))
		offset += int64(len(r.Data) / size * 16)
		r.Release()
		if offset >= end {
			offset = 0
		}
	}
	b.ReportMetric(float64(total)/float64(b.N), "bytes/op")
}

// BenchmarkRecoverSegment reopens a 64 MiB log without the clean-shutdown marker: every batch
// is CRC-checked and the indexes rebuilt. MB/s is recovery speed.
func BenchmarkRecoverSegment(b *testing.B) {
	dir := b.TempDir()
	cfg := benchConfig()
	cfg.SegmentBytes = 128 << 20
	l, err := Open(dir, cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	batch := benchBatch(b)
	for range (64 << 20) / len(batch) {
		if _, err := l.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
	size := l.Size()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	for b.Loop() {
		l, err := Open(dir, cfg, Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchLog fills a log with 64 MiB of 16 KiB batches and returns it, its end offset and the
// batch size.
func benchLog(b *testing.B) (*Log, int64, int) {
	l, err := Open(b.TempDir(), benchConfig(), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	batch := benchBatch(b)
	for range (64 << 20) / len(batch) {
		if _, err := l.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
	return l, l.LogEndOffset(), len(batch)
}

// BenchmarkAppendWriteback appends 16 KiB batches round-robin to 16 logs, as a broker's
// partitions receive them, without and with a Writeback of a 16 MiB window per log, and
// reports the process CPU per byte written. Run it over several GiB
// (-benchtime=262144x is 4 GiB) to see the page cache reach its steady state.
func BenchmarkAppendWriteback(b *testing.B) {
	for _, window := range []int64{0, 16 << 20} {
		b.Run(fmt.Sprintf("window=%dMiB", window>>20), func(b *testing.B) {
			opts := Options{Logger: slog.New(slog.DiscardHandler)}
			if window > 0 {
				opts.Writeback = NewWriteback(window, opts.Logger)
				opts.Writeback.Start()
				defer opts.Writeback.Stop()
			}
			logs := make([]*Log, 16)
			for i := range logs {
				l, err := Open(b.TempDir(), benchConfig(), opts)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				logs[i] = l
			}
			batch := benchBatch(b)
			b.SetBytes(int64(len(batch)))
			start := testutil.ProcessCPU(b)
			i := 0
			for b.Loop() {
				if _, err := logs[i%len(logs)].Append(batch); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(testutil.ProcessCPU(b)-start)/float64(b.N*len(batch)), "cpu-ns/B")
		})
	}
}
