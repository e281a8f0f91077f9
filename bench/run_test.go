package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/internal/brokertest"
)

// TestRunRingbroker drives the load generator against a real ringbroker
// process, built from this module and shared by the subtests (one build).
func TestRunRingbroker(t *testing.T) {
	bin := brokertest.Build(t, t.TempDir())
	b := brokertest.Start(t, bin, "auto")
	t.Run("FixedRate", func(t *testing.T) { testRunFixedRate(t, b) })
	t.Run("MaxRate", func(t *testing.T) { testRunMaxRate(t, b) })
	t.Run("StallShowsInLatency", func(t *testing.T) { testRunStallShowsInLatency(t, b) })
	b.Stop()
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

func testRunFixedRate(t *testing.T, b *brokertest.Broker) {
	var progress bytes.Buffer
	w := testWorkload(1000)
	res, err := Run(context.Background(), Options{
		Bootstrap:  []string{b.Addr},
		Workload:   w,
		Label:      "ringbroker",
		Progress:   &progress,
		BrokerPIDs: []int{b.PID},
		// Every 10 ms through the 1.5 s measured period.
		ProbeInterval: 10 * time.Millisecond,
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
	u := res.Broker
	if u == nil || u.PID != b.PID || u.PeakRSSBytes == nil || u.PeakAnonRSSBytes == nil || u.CPUSeconds == nil {
		t.Fatalf("broker pid %d usage not sampled: %+v", b.PID, u)
	}
	if *u.PeakAnonRSSBytes == 0 || *u.PeakAnonRSSBytes > *u.PeakRSSBytes {
		t.Fatalf("broker peak anonymous RSS %d B, peak RSS %d B; want 0 < anonymous <= RSS", *u.PeakAnonRSSBytes, *u.PeakRSSBytes)
	}
	if m := res.Machine; m == nil || m.Cores < 1 || !(m.ClientCores > 0 && m.ClientCores <= m.BusyCores+0.1 && m.BusyCores <= float64(m.Cores)+0.01) {
		t.Fatalf("machine usage = %+v, want 0 < ringbench's cores <= busy cores <= cores", m)
	}
	if p := res.Probe; p == nil || p.Requests < 100 || p.Requests > 151 || p.Errors != 0 ||
		!(p.Latency.MinMs > 0 && p.Latency.P50Ms <= p.Latency.MaxMs) {
		t.Fatalf("probe = %+v, want 100-151 round trips in 1.5 s at one per 10 ms, no errors, ordered latencies", p)
	}
	if !strings.Contains(progress.String(), "run ") || !strings.Contains(progress.String(), "rec/s") {
		t.Fatalf("no progress lines in %q", progress.String())
	}

	// The run's topics are gone.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
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
	for _, want := range []string{"publish", "end-to-end", "1500", "broker pid", "probe (rtt)"} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, report.String())
		}
	}
}

func testRunMaxRate(t *testing.T, b *brokertest.Broker) {
	w := testWorkload(0)
	w.ConsumerPerSubscription = 1
	w.KeyDistribution = KeyRandomNano
	w.Acks = "1"
	w.Compression = "lz4"
	w.WarmupDuration = 0
	w.TestDuration = Duration(4 * time.Second)
	res, err := Run(context.Background(), Options{Bootstrap: []string{b.Addr}, Workload: w, Label: "ringbroker"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Publish.Records < 100 || res.Publish.Errors != 0 {
		t.Fatalf("max-rate publish records/errors = %d/%d, want >= 100/0", res.Publish.Records, res.Publish.Errors)
	}
	if res.E2E.Records != res.Publish.Records {
		t.Fatalf("consumed %d of %d published records", res.E2E.Records, res.Publish.Records)
	}
	if res.Probe != nil {
		t.Fatalf("probe %+v reported without ProbeInterval", res.Probe)
	}
	// The search set a target a second from the consumers' first records on, and the
	// producers followed the targets.
	s := res.RateSearch
	if s == nil || time.Duration(s.Period) != ratePeriod || len(s.Steps) < 2 {
		t.Fatalf("rate search %+v, want a step every %v, at least 2 in 4 s", s, ratePeriod)
	}
	lo, hi := float64(InitialSearchRate), float64(InitialSearchRate)
	for _, st := range s.Steps {
		if st.Target < minSearchRate || st.Published <= 0 || st.Consumed <= 0 {
			t.Fatalf("step %+v: want a target not under the floor %v, records published and consumed: %+v",
				st, minSearchRate, s.Steps)
		}
		lo, hi = min(lo, st.Target), max(hi, st.Target)
	}
	if got := res.Publish.RecordsPerSec; got < 0.5*lo || got > 1.1*hi {
		t.Fatalf("published %.0f rec/s, outside the targets %.0f-%.0f: %+v", got, lo, hi, s.Steps)
	}

	// Unthrottled: no search, the producers as fast as they can.
	w.TestDuration = Duration(time.Second)
	res, err = Run(context.Background(), Options{Bootstrap: []string{b.Addr}, Workload: w, Label: "ringbroker", Unthrottled: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.RateSearch != nil || res.Publish.Records < 100 || res.Publish.Errors != 0 || res.E2E.Records != res.Publish.Records {
		t.Fatalf("unthrottled: search %+v, published %d (errors %d), consumed %d; want no search, >= 100 published, all consumed",
			res.RateSearch, res.Publish.Records, res.Publish.Errors, res.E2E.Records)
	}
}

// testRunStallShowsInLatency stops the broker process for a moment inside
// the measured period. With open-loop pacing the records scheduled during the
// stall carry their intended times, so the publish max is at least the stall.
func testRunStallShowsInLatency(t *testing.T, b *brokertest.Broker) {
	const stall = 300 * time.Millisecond
	w := testWorkload(500)
	w.ProducersPerTopic = 1
	w.ConsumerPerSubscription = 0
	type outcome struct {
		res *Result
		err error
	}
	measuring := &phaseWatch{prefix: "run ", seen: make(chan struct{})}
	done := make(chan outcome, 1)
	go func() {
		res, err := Run(context.Background(), Options{
			Bootstrap:        []string{b.Addr},
			Workload:         w,
			Label:            "ringbroker",
			Progress:         measuring,
			ProgressInterval: 50 * time.Millisecond,
			ProbeInterval:    10 * time.Millisecond,
		})
		done <- outcome{res, err}
	}()

	// The first progress line of the measured period comes within 50 ms of
	// its start; the period lasts 1.5 s, so the stall is well inside it.
	select {
	case <-measuring.seen:
	case out := <-done:
		t.Fatalf("run ended before its measured period was reported: %+v, %v", out.res, out.err)
	}
	b.Pause(stall)

	out := <-done
	if out.err != nil {
		t.Fatal(out.err)
	}
	res := out.res
	if res.E2E != nil {
		t.Fatalf("e2e reported without consumers: %+v", res.E2E)
	}
	if res.Publish.Errors != 0 || res.Publish.Records != 750 {
		t.Fatalf("publish records/errors = %d/%d, want 750/0", res.Publish.Records, res.Publish.Errors)
	}
	// The latency histogram keeps three significant digits: a max recorded at the stall may
	// read up to 0.1 % below it.
	if got := res.Publish.Latency.MaxMs; got < 0.99*float64(stall.Milliseconds()) {
		t.Fatalf("publish max %v ms, want >= the %v stall", got, stall)
	}
	// About stall*rate records waited behind the stall: well over 1 % of 750.
	if got := res.Publish.Latency.P99Ms; got < float64(stall.Milliseconds())/2 {
		t.Fatalf("publish p99 %v ms does not show the stall", got)
	}
	// A probe goes out within 10 ms of the stall's start and waits out the rest of it.
	if p := res.Probe; p == nil || p.Latency.MaxMs < float64((stall-50*time.Millisecond).Milliseconds()) {
		t.Fatalf("probe %+v does not show the %v stall", p, stall)
	}
}

// phaseWatch is a progress writer that closes seen at the first line that
// starts with prefix. Progress lines come from one goroutine.
type phaseWatch struct {
	prefix string
	seen   chan struct{}
	closed bool
}

func (w *phaseWatch) Write(p []byte) (int, error) {
	if !w.closed && bytes.HasPrefix(p, []byte(w.prefix)) {
		w.closed = true
		close(w.seen)
	}
	return len(p), nil
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
