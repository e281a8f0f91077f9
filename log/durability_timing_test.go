package log

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkAppendVsRawWrite writes 64 MiB per iteration twice on the same disk: raw 16 KiB
// sequential pwrites to a plain file, then Log.Append of 16 KiB batches of 1 KiB records; each
// ends with one fdatasync so the disk, not the page cache, is measured. ratio is raw time over
// append time (the goal is >= 0.8).
func BenchmarkAppendVsRawWrite(b *testing.B) {
	const total = 64 << 20
	dir := b.TempDir()
	batch := benchBatch(b)
	chunks := total / len(batch)
	cfg := benchConfig()
	cfg.SegmentBytes = 256 << 20
	var raw, app time.Duration
	i := 0
	for b.Loop() {
		f, err := os.Create(filepath.Join(dir, "raw"))
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for c := range chunks {
			if _, err := f.WriteAt(batch, int64(c*len(batch))); err != nil {
				b.Fatal(err)
			}
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		raw += time.Since(start)
		f.Close()
		os.Remove(f.Name())

		l, err := Open(filepath.Join(dir, "log", "p-"+string(rune('a'+i%26))), cfg, Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		for range chunks {
			if _, err := l.Append(batch); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Flush(); err != nil {
			b.Fatal(err)
		}
		app += time.Since(start)
		if err := l.Delete(); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.SetBytes(total)
	b.ReportMetric(float64(total)*float64(i)/raw.Seconds()/1e6, "raw-MB/s")
	b.ReportMetric(float64(total)*float64(i)/app.Seconds()/1e6, "append-MB/s")
	b.ReportMetric(raw.Seconds()/app.Seconds(), "ratio")
}

// BenchmarkDurableAppend compares acknowledgement latency for 16 writers appending 1 KiB
// batches that must be on disk before they are acknowledged: group commit (one shared fsync
// per round, SyncAsync) against an fsync per append (flush.messages=1). Reports p50 and p99
// latency per append and fsyncs per append.
func BenchmarkDurableAppend(b *testing.B) {
	for _, mode := range []string{"group-commit", "fsync-per-append"} {
		b.Run(mode, func(b *testing.B) {
			cfg := benchConfig()
			if mode == "group-commit" {
				cfg.GroupCommit = true
			} else {
				cfg.FlushMessages = 1
			}
			l, err := Open(b.TempDir(), cfg, Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batch := makeBatch(b, plain(1, 1000, 1))
			const writers = 16
			var mu sync.Mutex
			var lat []time.Duration
			b.SetParallelism(writers)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				own := make([]byte, len(batch))
				var mine []time.Duration
				done := make(chan error, 1)
				for pb.Next() {
					copy(own, batch)
					start := time.Now()
					res, err := l.Append(own)
					if err != nil {
						b.Error(err)
						return
					}
					if cfg.GroupCommit {
						l.SyncAsync(res.LastOffset+1, func(err error) { done <- err })
						if err := <-done; err != nil {
							b.Error(err)
							return
						}
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
			if len(lat) == 0 {
				return
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			if cfg.GroupCommit {
				b.ReportMetric(float64(l.GroupCommitRounds())/float64(len(lat)), "fsyncs/append")
			} else {
				b.ReportMetric(1, "fsyncs/append")
			}
		})
	}
}

// BenchmarkRecoverAfterCrash builds a log of RINGBROKER_BENCH_RECOVERY_BYTES (default 512 MiB;
// the storage issue's figure is 10 GiB: RINGBROKER_BENCH_RECOVERY_BYTES=10737418240) in Kafka's
// default 1 GiB segments, crashes it (no clean-shutdown marker), and times Open. "checkpointed"
// opens with the recovery point at the active segment, as after a crash with the broker's
// recovery-point checkpoint, so only the unflushed tail is CRC-scanned; "no-checkpoint" opens with
// recovery point 0 and scans everything.
func BenchmarkRecoverAfterCrash(b *testing.B) {
	total := int64(512 << 20)
	if v := os.Getenv("RINGBROKER_BENCH_RECOVERY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("RINGBROKER_BENCH_RECOVERY_BYTES=%q: want a positive byte count", v)
		}
		total = n
	}
	dir := b.TempDir()
	cfg := DefaultConfig()
	l, err := Open(dir, cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	batch := benchBatch(b)
	for range total / int64(len(batch)) {
		if _, err := l.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
	segs := *l.segs.Load()
	activeBase := segs[len(segs)-1].base
	tail := segs[len(segs)-1].size.Load()
	size := l.Size()
	crash(l)
	for _, tc := range []struct {
		name    string
		rp      int64
		scanned int64
	}{
		{"checkpointed", activeBase, tail},
		{"no-checkpoint", 0, size},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				l, err := Open(dir, cfg, Options{RecoveryPoint: tc.rp, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				crash(l)
			}
			b.ReportMetric(float64(size)/(1<<20), "log-MiB")
			b.ReportMetric(float64(tc.scanned)/(1<<20), "scanned-MiB")
		})
	}
}
