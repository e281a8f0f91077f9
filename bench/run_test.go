package bench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newCluster starts franz-go's in-process Kafka-protocol cluster on a real
// loopback socket. The broker proper is tested by the e2e suite; this one
// lets the load generator's wiring be tested on its own.
func newCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testWorkload(rate float64) Workload {
	w := DefaultWorkload()
	w.Name = "test"
	w.PartitionsPerTopic = 4
	w.MessageSize = 64
	w.ProducersPerTopic = 2
	w.ConsumerPerSubscription = 3
	w.ProducerRate = rate
	w.KeyDistribution = KeyRoundRobin
	w.WarmupDuration = Duration(300 * time.Millisecond)
	w.TestDuration = Duration(1500 * time.Millisecond)
	return w
}

func TestRunFixedRate(t *testing.T) {
	c := newCluster(t)
	var progress bytes.Buffer
	w := testWorkload(1000)
	res, err := Run(context.Background(), Options{
		Bootstrap: c.ListenAddrs(),
		Workload:  w,
		Label:     "kfake",
		Progress:  &progress,
		BrokerPID: os.Getpid(), // kfake runs in this process
	})
	if err != nil {
		t.Fatal(err)
	}
	// 1000 rec/s for 1.5 s, two producers staggered: exactly 1500 are scheduled.
	if res.Publish.Records != 1500 || res.Publish.Errors != 0 || res.Unsent != 0 {
		t.Fatalf("publish records/errors/unsent = %d/%d/%d, want 1500/0/0", res.Publish.Records, res.Publish.Errors, res.Unsent)
	}
	if res.E2E == nil || res.E2E.Records != 1500 || res.E2E.Errors != 0 {
		t.Fatalf("e2e = %+v, want 1500 records and no errors", res.E2E)
	}
	if got := res.Publish.RecordsPerSec; got != 1000 {
		t.Fatalf("publish rate %v, want 1000", got)
	}
	if want := 1500 * 64 / 1.5 / 1e6; res.Publish.MBPerSec != want {
		t.Fatalf("publish MB/s %v, want %v", res.Publish.MBPerSec, want)
	}
	l := res.Publish.Latency
	if !(l.MinMs > 0 && l.MinMs <= l.P50Ms && l.P50Ms <= l.P99Ms && l.P99Ms <= l.MaxMs) {
		t.Fatalf("publish latency not ordered: %+v", l)
	}
	if e := res.E2E.Latency; e.P50Ms < l.MinMs {
		t.Fatalf("e2e p50 %v below publish min %v", e.P50Ms, l.MinMs)
	}
	if res.Broker == nil || res.Broker.PeakRSSBytes == nil || *res.Broker.PeakRSSBytes == 0 || res.Broker.CPUSeconds == nil {
		t.Fatalf("broker usage not sampled: %+v", res.Broker)
	}
	if !strings.Contains(progress.String(), "run ") || !strings.Contains(progress.String(), "rec/s") {
		t.Fatalf("no progress lines in %q", progress.String())
	}

	// The run's topics are gone.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range topics.Names() {
		if strings.HasPrefix(name, "ringbench-") {
			t.Fatalf("topic %s left behind", name)
		}
	}

	var report bytes.Buffer
	if err := WriteReport(&report, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"publish", "end-to-end", "1500", "broker pid"} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, report.String())
		}
	}
}

func TestRunMaxRate(t *testing.T) {
	c := newCluster(t)
	w := testWorkload(0)
	w.ConsumerPerSubscription = 1
	w.KeyDistribution = KeyRandomNano
	w.Acks = "1"
	w.Compression = "lz4"
	w.WarmupDuration = 0
	w.TestDuration = Duration(time.Second)
	res, err := Run(context.Background(), Options{Bootstrap: c.ListenAddrs(), Workload: w, Label: "kfake"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Publish.Records < 100 || res.Publish.Errors != 0 {
		t.Fatalf("max-rate publish records/errors = %d/%d, want >= 100/0", res.Publish.Records, res.Publish.Errors)
	}
	if res.E2E.Records != res.Publish.Records {
		t.Fatalf("consumed %d of %d published records", res.E2E.Records, res.Publish.Records)
	}
}

// TestRunStallShowsInLatency stalls one produce request on the broker side.
// With open-loop pacing the records scheduled during the stall carry their
// intended times, so the publish max is at least the stall.
func TestRunStallShowsInLatency(t *testing.T) {
	const stall = 300 * time.Millisecond
	c := newCluster(t)
	w := testWorkload(500)
	w.ProducersPerTopic = 1
	w.ConsumerPerSubscription = 0
	var (
		firstProduce time.Time // only touched by control functions, which run serially
		stalled      atomic.Bool
	)
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if firstProduce.IsZero() {
			firstProduce = time.Now()
		}
		// Stall once, well inside the measured period: load starts with the
		// first produce, warmup is 300 ms and the measured period 1.5 s.
		if time.Since(firstProduce) > 600*time.Millisecond && stalled.CompareAndSwap(false, true) {
			c.SleepControl(func() { <-time.After(stall) })
		}
		return nil, nil, false
	})
	res, err := Run(context.Background(), Options{Bootstrap: c.ListenAddrs(), Workload: w, Label: "kfake"})
	if err != nil {
		t.Fatal(err)
	}
	if !stalled.Load() {
		t.Fatal("the stall was never injected")
	}
	if res.E2E != nil {
		t.Fatalf("e2e reported without consumers: %+v", res.E2E)
	}
	if got := res.Publish.Latency.MaxMs; got < float64(stall.Milliseconds()) {
		t.Fatalf("publish max %v ms, want >= the %v stall", got, stall)
	}
	// About stall*rate records waited behind the stall: well over 1 % of 750.
	if got := res.Publish.Latency.P99Ms; got < float64(stall.Milliseconds())/2 {
		t.Fatalf("publish p99 %v ms does not show the stall", got)
	}
}

func TestRunErrors(t *testing.T) {
	w := testWorkload(10)
	if _, err := Run(context.Background(), Options{Workload: w}); err == nil || !strings.Contains(err.Error(), "no bootstrap") {
		t.Fatalf("Run without bootstrap = %v", err)
	}
	w.Topics = 0
	if _, err := Run(context.Background(), Options{Bootstrap: []string{"127.0.0.1:1"}, Workload: w}); err == nil || !strings.Contains(err.Error(), "topics=0") {
		t.Fatalf("Run with a bad workload = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w.Topics = 1
	if _, err := Run(ctx, Options{Bootstrap: []string{"127.0.0.1:1"}, Workload: w, SetupTimeout: time.Second}); err == nil {
		t.Fatal("Run with a cancelled context succeeded")
	}
}
