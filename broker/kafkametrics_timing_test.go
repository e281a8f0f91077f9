package broker

import (
	"testing"
	"time"
)

// BenchmarkLatencyHistObserve times what each request adds for its Kafka request metrics, from
// every core at once.
func BenchmarkLatencyHistObserve(b *testing.B) {
	h := newLatencyHist(time.Now())
	b.RunParallel(func(pb *testing.PB) {
		d := 1500 * time.Microsecond
		for pb.Next() {
			h.observe(d)
		}
	})
}

// BenchmarkTopicStatsCountIn times what each appended batch adds for BytesIn and MessagesIn,
// from every core at once on one topic.
func BenchmarkTopicStatsCountIn(b *testing.B) {
	var set topicStatsSet
	p := &partition{topic: "t", stats: set.of("t")}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.countIn(16384, 16)
		}
	})
}

// BenchmarkRequestObserve times brokerMetrics.observe, which every answered request calls:
// ringbroker's counter and histogram and Kafka's request metrics.
func BenchmarkRequestObserve(b *testing.B) {
	m := newBrokerMetrics()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.observe(0, 1500*time.Microsecond)
		}
	})
}
