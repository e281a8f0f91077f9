package raft

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkCommitLatency measures one proposal at a time on a 3-voter quorum over loopback
// TCP with real fdatasync on every node: the time from Propose to applied at the leader.
func BenchmarkCommitLatency(b *testing.B) {
	c := newTestCluster(b, 3, benchNodeConfig())
	lead := c.leader()
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	data := make([]byte, 100)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := lead.Propose(ctx, data); err != nil {
			b.Fatalf("propose %d: %v", i, err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkProposalThroughput measures proposals/s with many concurrent proposers (batched
// into shared appends and fsyncs) on the same 3-voter quorum.
func BenchmarkProposalThroughput(b *testing.B) {
	for _, par := range []int{16, 256} {
		b.Run(fmt.Sprintf("proposers=%d", par), func(b *testing.B) {
			c := newTestCluster(b, 3, benchNodeConfig())
			lead := c.leader()
			ctx := context.Background()
			data := make([]byte, 100)
			b.SetParallelism(max(1, par/max(1, testingProcs())))
			start := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := lead.Propose(ctx, data); err != nil {
						b.Errorf("propose: %v", err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "proposals/s")
		})
	}
}

func testingProcs() int { return runtime.GOMAXPROCS(0) }

// benchNodeConfig keeps elections out of the measurement: a 1s election timeout survives
// fsync stalls on a loaded machine.
func benchNodeConfig() NodeConfig {
	return NodeConfig{TickInterval: 100 * time.Millisecond, ElectionTick: 10, HeartbeatTick: 1}
}
