package bench

import (
	"math/rand/v2"
	"testing"
	"time"
)

func BenchmarkHistogramRecord(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	vals := make([]time.Duration, 4096)
	for i := range vals {
		vals[i] = time.Duration(r.ExpFloat64() * float64(time.Millisecond))
	}
	var h Histogram
	b.ResetTimer()
	for i := range b.N {
		h.Record(vals[i&4095])
	}
}

func BenchmarkHistogramPercentile(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	var h Histogram
	for range 1_000_000 {
		h.Record(time.Duration(r.ExpFloat64() * float64(time.Millisecond)))
	}
	b.ResetTimer()
	for range b.N {
		h.Percentile(99.99)
	}
}

func BenchmarkHistogramMerge(b *testing.B) {
	var h, o Histogram
	o.Record(time.Millisecond)
	for range b.N {
		h.Merge(&o)
	}
}
