package bench

import (
	"math"
	"math/bits"
	"time"
)

// Histogram layout. Values are counted in microsecond units. Units below
// subBucketCount fall into one bucket each (exact to 1 µs); above that every
// power of two is split into subBucketHalf linear buckets, so a bucket is at
// most 1/128 of its lower bound wide (0.78 %), and its midpoint, which is what
// a percentile reports, is within 0.4 % of every value in it.
const (
	subBucketBits  = 8
	subBucketCount = 1 << subBucketBits // 256 exact buckets for 0..255 µs
	subBucketHalf  = subBucketCount / 2 // linear buckets per power of two above that

	// HistogramMin is the lowest discernible latency: values below it share one bucket.
	HistogramMin = time.Microsecond
	// HistogramMax is the highest trackable latency: larger values are
	// counted as HistogramMax and in Saturated.
	HistogramMax = 60 * time.Second

	histMaxUnits = uint64(HistogramMax / HistogramMin)
	// numBuckets is bucketIndex(histMaxUnits)+1; TestHistogramLayout checks it.
	numBuckets = 2533
)

// Histogram is a log-linear latency histogram in the style of HdrHistogram:
// fixed memory, about 1 % precision from 1 µs to 60 s, constant-time Record,
// and mergeable, so per-producer histograms add up to a run's histogram.
// The zero value is empty and ready to use. It is not safe for concurrent use.
type Histogram struct {
	counts [numBuckets]uint64
	total  uint64
	sumNs  float64
	// minNs and maxNs are exact (after clamping to HistogramMax); minNs <= maxNs when total > 0.
	minNs, maxNs int64
	saturated    uint64
}

// bucketIndex maps a value in microsecond units to its bucket.
func bucketIndex(units uint64) int {
	n := bits.Len64(units)
	if n <= subBucketBits {
		return int(units)
	}
	shift := n - subBucketBits
	return shift*subBucketHalf + int(units>>uint(shift))
}

// bucketBounds returns the lowest unit value of bucket i and the bucket's width in units.
func bucketBounds(i int) (lower, width uint64) {
	if i < subBucketCount {
		return uint64(i), 1
	}
	shift := uint(i/subBucketHalf - 1)
	m := uint64(i%subBucketHalf + subBucketHalf)
	return m << shift, 1 << shift
}

// Record adds one latency. Negative values count as zero; values above
// HistogramMax count as HistogramMax and in Saturated.
func (h *Histogram) Record(d time.Duration) {
	h.RecordN(d, 1)
}

// RecordN adds n observations of the same latency.
func (h *Histogram) RecordN(d time.Duration, n uint64) {
	if n == 0 {
		return
	}
	if d < 0 {
		d = 0
	}
	if d > HistogramMax {
		d = HistogramMax
		h.saturated += n
	}
	ns := int64(d)
	h.counts[bucketIndex(uint64(d/HistogramMin))] += n
	if h.total == 0 || ns < h.minNs {
		h.minNs = ns
	}
	if h.total == 0 || ns > h.maxNs {
		h.maxNs = ns
	}
	h.total += n
	h.sumNs += float64(ns) * float64(n)
}

// Merge adds every observation of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.total == 0 || o.minNs < h.minNs {
		h.minNs = o.minNs
	}
	if h.total == 0 || o.maxNs > h.maxNs {
		h.maxNs = o.maxNs
	}
	h.total += o.total
	h.sumNs += o.sumNs
	h.saturated += o.saturated
}

// Reset empties h.
func (h *Histogram) Reset() {
	*h = Histogram{}
}

// Count returns the number of recorded values.
func (h *Histogram) Count() uint64 { return h.total }

// Saturated returns how many values exceeded HistogramMax.
func (h *Histogram) Saturated() uint64 { return h.saturated }

// Min returns the smallest recorded value exactly, or 0 when empty.
func (h *Histogram) Min() time.Duration { return time.Duration(h.minNs) }

// Max returns the largest recorded value exactly, or 0 when empty.
func (h *Histogram) Max() time.Duration { return time.Duration(h.maxNs) }

// Mean returns the arithmetic mean of the recorded values, or 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.sumNs / float64(h.total))
}

// Percentile returns the value at percentile p (0..100): the value below or
// at which p percent of the observations fall, as the midpoint of its bucket,
// clamped to the exact min and max. Percentile(100) is the exact max. An
// empty histogram returns 0; p outside 0..100 is clamped.
func (h *Histogram) Percentile(p float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	if math.IsNaN(p) || p <= 0 {
		return h.Min()
	}
	if p >= 100 {
		return h.Max()
	}
	rank := uint64(math.Ceil(p / 100 * float64(h.total)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lower, width := bucketBounds(i)
			mid := time.Duration(lower)*HistogramMin + time.Duration(width)*HistogramMin/2
			return min(max(mid, h.Min()), h.Max())
		}
	}
	return h.Max()
}
