package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramLayout(t *testing.T) {
	if got := bucketIndex(histMaxUnits) + 1; got != numBuckets {
		t.Fatalf("numBuckets = %d, want bucketIndex(max)+1 = %d", numBuckets, got)
	}
	// Buckets tile the unit range without gaps or overlaps, and stay within 1/128 width.
	next := uint64(0)
	for i := range numBuckets {
		lower, width := bucketBounds(i)
		if lower != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, lower, next)
		}
		if bucketIndex(lower) != i || bucketIndex(lower+width-1) != i {
			t.Fatalf("bucket %d [%d,%d) does not map back to itself", i, lower, lower+width)
		}
		if lower >= subBucketCount && float64(width)/float64(lower) > 1.0/subBucketHalf {
			t.Fatalf("bucket %d relative width %v > 1/%d", i, float64(width)/float64(lower), subBucketHalf)
		}
		next = lower + width
	}
}

// exactPercentile is the nearest-rank percentile of sorted values.
func exactPercentile(sorted []time.Duration, p float64) time.Duration {
	if p >= 100 {
		return sorted[len(sorted)-1]
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func TestHistogramPercentiles(t *testing.T) {
	const n = 200_000
	tests := []struct {
		name string
		gen  func(r *rand.Rand) time.Duration
	}{
		{"uniform 1us..10ms", func(r *rand.Rand) time.Duration {
			return time.Microsecond + time.Duration(r.Int64N(int64(10*time.Millisecond)))
		}},
		{"lognormal around 500us", func(r *rand.Rand) time.Duration {
			return time.Duration(500e3 * math.Exp(r.NormFloat64()))
		}},
		{"pareto tail up to seconds", func(r *rand.Rand) time.Duration {
			return time.Duration(float64(200*time.Microsecond) / math.Pow(1-r.Float64(), 1/1.2))
		}},
		{"bimodal 100us and 40ms", func(r *rand.Rand) time.Duration {
			if r.IntN(1000) == 0 {
				return 40*time.Millisecond + time.Duration(r.Int64N(int64(time.Millisecond)))
			}
			return 100*time.Microsecond + time.Duration(r.Int64N(int64(20*time.Microsecond)))
		}},
	}
	percentiles := []float64{0, 1, 10, 50, 90, 99, 99.9, 99.99, 99.999, 100}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			vals := make([]time.Duration, n)
			var h Histogram
			for i := range vals {
				v := min(tt.gen(r), HistogramMax)
				vals[i] = v
				h.Record(v)
			}
			slices.Sort(vals)
			if h.Count() != n {
				t.Fatalf("Count = %d, want %d", h.Count(), n)
			}
			if h.Min() != vals[0] || h.Max() != vals[n-1] {
				t.Fatalf("Min/Max = %v/%v, want %v/%v", h.Min(), h.Max(), vals[0], vals[n-1])
			}
			for _, p := range percentiles {
				want := exactPercentile(vals, p)
				got := h.Percentile(p)
				tol := max(time.Duration(float64(want)*0.01), time.Microsecond)
				if diff := got - want; diff > tol || diff < -tol {
					t.Errorf("p%v = %v, exact %v, off by %v > %v", p, got, want, diff, tol)
				}
			}
			var sum float64
			for _, v := range vals {
				sum += float64(v)
			}
			if want := time.Duration(sum / n); (h.Mean() - want).Abs() > time.Microsecond {
				t.Errorf("Mean = %v, want %v", h.Mean(), want)
			}
		})
	}
}

func TestHistogramMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var a, b, all Histogram
	for i := range 50_000 {
		v := time.Duration(r.ExpFloat64() * float64(time.Millisecond))
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	var merged Histogram
	merged.Merge(&a)
	merged.Merge(&b)
	merged.Merge(&Histogram{})
	if merged.counts != all.counts || merged.Count() != all.Count() || merged.Min() != all.Min() || merged.Max() != all.Max() {
		t.Fatalf("merged histogram differs from the one that recorded everything")
	}
	if d := (merged.Mean() - all.Mean()).Abs(); d > time.Nanosecond {
		t.Fatalf("merged Mean %v, want %v", merged.Mean(), all.Mean())
	}
}

func TestHistogramEdges(t *testing.T) {
	var h Histogram
	if h.Percentile(50) != 0 || h.Mean() != 0 || h.Max() != 0 {
		t.Fatalf("empty histogram reports nonzero values")
	}
	h.Record(-time.Second)
	h.Record(500 * time.Nanosecond)
	h.Record(2 * time.Minute)
	h.RecordN(time.Millisecond, 0)
	if h.Count() != 3 || h.Saturated() != 1 {
		t.Fatalf("Count/Saturated = %d/%d, want 3/1", h.Count(), h.Saturated())
	}
	if h.Min() != 0 || h.Max() != HistogramMax {
		t.Fatalf("Min/Max = %v/%v, want 0/%v", h.Min(), h.Max(), HistogramMax)
	}
	if got := h.Percentile(100); got != HistogramMax {
		t.Fatalf("p100 = %v, want %v", got, HistogramMax)
	}
	if got := h.Percentile(math.NaN()); got != 0 {
		t.Fatalf("pNaN = %v, want min 0", got)
	}
	h.Reset()
	if h.Count() != 0 {
		t.Fatalf("Count after Reset = %d", h.Count())
	}
}
