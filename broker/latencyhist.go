package broker

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Kafka's timers and histograms (Yammer metrics) are exported by the Prometheus JMX exporter as
// a gauge per percentile, labelled quantile="0.50" ... "0.999", beside a _count. latencyHist
// gives the same: lock-free counts in log-spaced buckets on the request path, and percentiles
// computed at scrape time over a recent window, as Kafka's exponentially decaying reservoirs
// favour the last few minutes.

const (
	// histSubBuckets is how many buckets each power of two of microseconds is split into: a
	// value is reported within 1/(2*histSubBuckets) = 12.5% of itself at worst, 6% typically.
	histSubBuckets = 4
	// histMaxExp bounds the buckets: durations of 2^histMaxExp µs (19 hours) and more share the
	// last one.
	histMaxExp = 36
	// histBuckets is the number of buckets: values below histSubBuckets µs one each, then
	// histSubBuckets per power of two up to histMaxExp, then one for the rest.
	histBuckets = (histMaxExp-1)*histSubBuckets + 1
	// histWindow is how often the percentile window moves on: percentiles cover the last
	// histWindow to 2*histWindow of observations.
	histWindow = 150 * time.Second
)

// kafkaQuantiles are the percentiles Kafka's histograms expose (50thPercentile ...
// 999thPercentile), with the label values the JMX exporter gives them.
var kafkaQuantiles = [...]struct {
	q     float64
	label string
}{{0.50, "0.50"}, {0.75, "0.75"}, {0.95, "0.95"}, {0.98, "0.98"}, {0.99, "0.99"}, {0.999, "0.999"}}

// latencyHist counts durations. observe is safe for concurrent use and takes no lock;
// quantiles takes a lock shared only with other scrapes.
type latencyHist struct {
	count   atomic.Uint64
	buckets [histBuckets]atomic.Uint64

	// mu guards the window: older and newer are counts taken at scrapes, newer.at at least
	// histWindow after older.at; quantiles are computed over what came after older.
	mu           sync.Mutex
	older, newer histSnapshot
}

// histSnapshot is a copy of a latencyHist's counts at one time.
type histSnapshot struct {
	at     time.Time
	counts [histBuckets]uint64
}

// newLatencyHist returns an empty histogram whose first window starts at now.
func newLatencyHist(now time.Time) *latencyHist {
	h := &latencyHist{}
	h.older.at, h.newer.at = now, now
	return h
}

// histBucket is the bucket of a duration of us microseconds.
func histBucket(us uint64) int {
	if us < histSubBuckets {
		return int(us)
	}
	exp := bits.Len64(us) - 1 // us is in [2^exp, 2^(exp+1)), exp >= 2
	if exp >= histMaxExp {
		return histBuckets - 1
	}
	sub := int(us>>(exp-2)) & (histSubBuckets - 1)
	return (exp-1)*histSubBuckets + sub
}

// histBounds are the smallest and the first value past bucket i, in microseconds.
func histBounds(i int) (lo, hi float64) {
	if i < histSubBuckets {
		return float64(i), float64(i + 1)
	}
	exp, sub := i/histSubBuckets+1, i%histSubBuckets
	step := float64(uint64(1) << (exp - 2))
	return float64(histSubBuckets+sub) * step, float64(histSubBuckets+sub+1) * step
}

// observe counts one duration; a negative one counts as zero.
func (h *latencyHist) observe(d time.Duration) {
	h.buckets[histBucket(uint64(max(d.Microseconds(), 0)))].Add(1)
	h.count.Add(1)
}

// quantiles returns the count of every observation so far and, in milliseconds, the
// kafkaQuantiles of those of the current window (zeros when it has none).
func (h *latencyHist) quantiles(now time.Time) (count uint64, ms [len(kafkaQuantiles)]float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	count = h.count.Load()
	var cur histSnapshot
	cur.at = now
	for i := range h.buckets {
		cur.counts[i] = h.buckets[i].Load()
	}
	if now.Sub(h.newer.at) >= histWindow {
		h.older, h.newer = h.newer, cur
	}
	var inWindow [histBuckets]uint64
	var total uint64
	for i := range inWindow {
		inWindow[i] = cur.counts[i] - h.older.counts[i]
		total += inWindow[i]
	}
	if total == 0 {
		return count, ms
	}
	for qi, q := range kafkaQuantiles {
		ms[qi] = quantileOf(&inWindow, total, q.q) / 1000
	}
	return count, ms
}

// quantileOf estimates the q-quantile, in microseconds, of total values counted in buckets,
// interpolating linearly inside the bucket that holds it.
func quantileOf(buckets *[histBuckets]uint64, total uint64, q float64) float64 {
	rank := q * float64(total)
	var below float64
	for i, n := range buckets {
		if n == 0 {
			continue
		}
		if below+float64(n) >= rank {
			lo, hi := histBounds(i)
			return lo + (hi-lo)*(rank-below)/float64(n)
		}
		below += float64(n)
	}
	_, hi := histBounds(histBuckets - 1)
	return hi
}
