package e2e

import (
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"ringbroker/bench"
)

const (
	// ringbenchRate and ringbenchDuration make the workload: 1 KiB records on
	// 16 partitions at a fixed rate, no warmup, so every record the broker holds
	// was scheduled in the measured period.
	ringbenchRate     = 2000
	ringbenchDuration = 10 * time.Second
	// ringbenchTimeout bounds the whole CLI run: setup, the workload and draining.
	ringbenchTimeout = 2 * time.Minute
)

// TestRingbench runs a 10-second fixed-rate workload with bin/ringbench (the
// load generator's CLI, built from this tree) against the broker, then checks
// that the JSON result is complete and that its counts are what the broker
// holds: every scheduled record acknowledged, consumed and stored once.
func TestRingbench(t *testing.T) {
	bin := buildRingbench(t)
	workload := filepath.Join(repoRoot(), "bench", "workloads", "1kb-fixed-rate-16p.yaml")

	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t)
		pid := b.current().cmd.Process.Pid
		out := filepath.Join(t.TempDir(), "result.json")
		label := "e2e-" + tg.name
		res := runCmd(t, ringbenchTimeout, nil, bin, "run",
			"--bootstrap", b.Addr(), "--workload", workload, "--label", label,
			"--rate", strconv.Itoa(ringbenchRate), "--duration", ringbenchDuration.String(), "--warmup", "0s",
			"--broker-pid", strconv.Itoa(pid), "--json", out,
			"--topic-prefix", "e2e-bench", "--keep-topics", "--progress-interval", "1s")
		t.Logf("ringbench output:\n%s", res.stdout)
		if n := strings.Count(res.stdout, "\nrun "); n < 5 {
			t.Errorf("%d progress lines of the measured period in the output; want one a second", n)
		}

		r, err := bench.ReadResult(out)
		if err != nil {
			t.Fatal(err)
		}
		checkRingbenchResult(t, r, label, b.Addr(), pid)

		// The broker holds exactly the acknowledged records: one topic, offsets
		// from 0 to the publish count over its partitions.
		name, partitions, held := runTopicOffsets(t, b, "e2e-bench-")
		if partitions != r.Workload.PartitionsPerTopic {
			t.Fatalf("%s has %d partitions; want %d", name, partitions, r.Workload.PartitionsPerTopic)
		}
		if held != int64(r.Publish.Records) {
			t.Fatalf("broker holds %d records in %s; the result says %d were published", held, name, r.Publish.Records)
		}
	})
}

// runTopicOffsets finds the one topic a ringbench run left on b, its name starting with
// prefix, and returns its name, its partition count and the offsets it holds: end offsets
// less start offsets, over its partitions.
func runTopicOffsets(t *testing.T, b *Broker, prefix string) (name string, partitions int, held int64) {
	t.Helper()
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	var names []string
	for _, n := range topics.Names() {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	if len(names) != 1 {
		t.Fatalf("run topics %q; want exactly one %s* topic", names, prefix)
	}
	starts, err := adm.ListStartOffsets(ctx, names[0])
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("list start offsets of %s: %v", names[0], err)
	}
	ends := b.EndOffsets(t, names[0])
	starts.Each(func(o kadm.ListedOffset) { held += ends[o.Partition] - o.Offset })
	return names[0], len(ends), held
}

// buildRingbench builds bin/ringbench from this tree into a temporary directory.
func buildRingbench(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ringbench")
	build := exec.Command("go", "build", "-ldflags=-checklinkname=0", "-o", bin, "./cmd/ringbench")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", bin, err, out)
	}
	return bin
}

// checkRingbenchResult checks that every field of a fixed-rate result with
// consumers and broker sampling is present and consistent.
func checkRingbenchResult(t *testing.T, r *bench.Result, label, addr string, pid int) {
	t.Helper()
	const want = ringbenchRate * uint64(ringbenchDuration/time.Second)
	w := r.Workload
	switch {
	case r.Schema != bench.ResultSchema || r.Label != label || r.Bootstrap != addr:
		t.Fatalf("schema %d, label %q, bootstrap %q; want %d, %q, %q", r.Schema, r.Label, r.Bootstrap, bench.ResultSchema, label, addr)
	case w.Name != "1kb-fixed-rate-16p" || w.ProducerRate != ringbenchRate || w.MessageSize != 1024 || w.PartitionsPerTopic != 16:
		t.Fatalf("workload %+v; want 1kb-fixed-rate-16p at %d rec/s, 1024 B, 16 partitions", w, ringbenchRate)
	case time.Duration(r.Duration) != ringbenchDuration || r.Warmup != 0 || time.Since(r.Start) > 10*time.Minute:
		t.Fatalf("measured %v after %v warmup, started %v; want %v, 0s, just now", time.Duration(r.Duration), time.Duration(r.Warmup), r.Start, ringbenchDuration)
	case r.Unsent != 0:
		t.Fatalf("unsent %d; the broker did not keep %d rec/s", r.Unsent, ringbenchRate)
	case r.E2E == nil:
		t.Fatal("no end-to-end stats from a workload with a consumer")
	}
	for name, s := range map[string]*bench.Stats{"publish": &r.Publish, "e2e": r.E2E} {
		if s.Records != want || s.Errors != 0 || s.Bytes != want*1024 {
			t.Errorf("%s records/errors/bytes = %d/%d/%d; want %d/0/%d", name, s.Records, s.Errors, s.Bytes, want, want*1024)
		}
		if s.RecordsPerSec != ringbenchRate || math.Abs(s.MBPerSec-ringbenchRate*1024/1e6) > 1e-3 {
			t.Errorf("%s %v rec/s, %v MB/s; want %d and %.3f", name, s.RecordsPerSec, s.MBPerSec, ringbenchRate, ringbenchRate*1024/1e6)
		}
		l := s.Latency
		ordered := []float64{l.MinMs, l.P50Ms, l.P90Ms, l.P99Ms, l.P999Ms, l.P9999Ms, l.MaxMs}
		for i := 1; i < len(ordered); i++ {
			if ordered[i] < ordered[i-1] {
				t.Errorf("%s latency percentiles not ordered: %+v", name, ordered)
				break
			}
		}
		if l.MinMs <= 0 || l.MeanMs < l.MinMs || l.MeanMs > l.MaxMs || l.Overflow != 0 {
			t.Errorf("%s latency min %v, mean %v, max %v, overflow %d; want 0 < min <= mean <= max, no overflow", name, l.MinMs, l.MeanMs, l.MaxMs, l.Overflow)
		}
		// 20,000 samples reach 99.99 % on the curve, which ends at the max.
		if n := len(l.Curve); n < 40 || l.Curve[0].Percentile != 0 || l.Curve[n-1] != (bench.Point{Percentile: 100, Ms: l.MaxMs}) {
			t.Errorf("%s curve has %d points from %+v; want 0..99.99 %% and the max at 100", name, n, l.Curve)
		}
	}
	if e := r.E2E.Latency; e.P50Ms < r.Publish.Latency.MinMs {
		t.Errorf("e2e p50 %v ms below the publish min %v ms", e.P50Ms, r.Publish.Latency.MinMs)
	}
	u := r.Broker
	if u == nil || u.PID != pid || u.PeakRSSBytes == nil || u.CPUSeconds == nil || u.CPUPercent == nil {
		t.Fatalf("broker usage %+v; want pid %d with RSS and CPU", u, pid)
	}
	if rss := *u.PeakRSSBytes; rss < 1<<20 || rss > 64<<30 {
		t.Errorf("broker peak RSS %d B; want a plausible size", rss)
	}
	if u.PeakAnonRSSBytes == nil || *u.PeakAnonRSSBytes == 0 || *u.PeakAnonRSSBytes > *u.PeakRSSBytes {
		t.Errorf("broker peak anonymous RSS %v; want between 0 and the peak RSS %d B", u.PeakAnonRSSBytes, *u.PeakRSSBytes)
	}
	if *u.CPUSeconds <= 0 || *u.CPUPercent <= 0 {
		t.Errorf("broker CPU %v s (%v %%) while taking %d rec/s; want > 0", *u.CPUSeconds, *u.CPUPercent, ringbenchRate)
	}
	t.Logf("%s: publish p50/p99/p99.9 %v/%v/%v ms, e2e %v/%v/%v ms, broker RSS %.1f MiB, CPU %.2f s",
		label, r.Publish.Latency.P50Ms, r.Publish.Latency.P99Ms, r.Publish.Latency.P999Ms,
		r.E2E.Latency.P50Ms, r.E2E.Latency.P99Ms, r.E2E.Latency.P999Ms, float64(*u.PeakRSSBytes)/(1<<20), *u.CPUSeconds)
}
