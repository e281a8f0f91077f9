package broker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduceThroughput produces 1 KiB records with acks=all through a real client over
// loopback into an in-process broker, on each I/O backend; compare the backends' MB/s within one
// run.
func BenchmarkProduceThroughput(b *testing.B) {
	for _, io := range backends {
		b.Run(io, func(b *testing.B) {
			dir := b.TempDir()
			br := startBenchBroker(b, io, dir)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr().String()), kgo.DefaultProduceTopic("bench"),
				kgo.ProducerLinger(time.Millisecond), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 16, 1, nil, "bench"); err != nil {
				b.Fatal(err)
			}
			value := make([]byte, 1024)
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						b.Error(err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// benchOverridesEnv names broker config overrides (space-separated key=value) that the
// benchmarks apply, to compare knobs: RINGBROKER_BENCH_OVERRIDES="io.uring.wait=syscall".
const benchOverridesEnv = "RINGBROKER_BENCH_OVERRIDES"

func startBenchBroker(b *testing.B, backend, dir string) *Broker {
	cfg := DefaultConfig()
	cfg.Listeners = []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 0}}
	cfg.LogDirs = []string{dir}
	cfg.MetricsListen = ""
	cfg.IO = backend
	for _, kv := range strings.Fields(os.Getenv(benchOverridesEnv)) {
		if err := cfg.Override(kv); err != nil {
			b.Fatalf("%s: %v", benchOverridesEnv, err)
		}
	}
	br, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Shutdown(context.Background()) })
	return br
}
