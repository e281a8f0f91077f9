package broker

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerMetrics holds the Prometheus metrics of one broker in its own set (no global registry).
type brokerMetrics struct {
	set       *metrics.Set
	requests  [apiKeyLimit]*metrics.Counter
	latency   [apiKeyLimit]*metrics.Histogram
	connsOpen atomic.Int64
	accepted  *metrics.Counter
	paused    *metrics.Counter
	// inlineRequests counts requests run on an io_uring thread (io.inline.requests),
	// inlineHandedOff those of them that went on on a handler worker, by API key; nil for the
	// APIs that never run there.
	inlineRequests, inlineHandedOff [apiKeyLimit]*metrics.Counter
	// fetchRetriesInline counts retries of parked fetches run on the io_uring thread whose
	// append woke them (connState.runWoken).
	fetchRetriesInline *metrics.Counter
	// authOK and authFailed count SASL authentications, as Kafka's successful-authentication-total
	// and failed-authentication-total.
	authOK, authFailedC *metrics.Counter
	bytesOutC           *metrics.Counter
	backend             atomic.Value // string

	// The metrics with Kafka's names (kafkametrics.go): the BrokerTopicMetrics of each topic,
	// each API's latencies, those of Fetch by consumers and by followers, log flush times and
	// the handler workers' idle time.
	topics                       topicStatsSet
	reqHists                     [apiKeyLimit]atomic.Pointer[latencyHist]
	fetchConsumer, fetchFollower *latencyHist
	flush                        *latencyHist
	handlerIdle                  idleGauge
	// networkIdle is the event loops' idle share over all listeners, processorIdle each
	// loop's (by its networkProcessor number).
	networkIdle   idleGauge
	processorIdle processorIdleGauges
}

// countInline adds the counters of requests run on an io_uring thread for the APIs of apis
// that may run there.
func (m *brokerMetrics) countInline(apis *apiTable) {
	for k, a := range apis {
		if a == nil || !a.inline {
			continue
		}
		name := kmsg.NameForKey(int16(k))
		m.inlineRequests[k] = m.set.NewCounter(fmt.Sprintf(`ringbroker_requests_inline_total{api=%q}`, name))
		m.inlineHandedOff[k] = m.set.NewCounter(fmt.Sprintf(`ringbroker_requests_inline_handed_off_total{api=%q}`, name))
	}
}

func newBrokerMetrics() *brokerMetrics {
	now := time.Now()
	m := &brokerMetrics{set: metrics.NewSet(), fetchConsumer: newLatencyHist(now), fetchFollower: newLatencyHist(now), flush: newLatencyHist(now)}
	for k := int16(0); k < apiKeyLimit; k++ {
		name := kmsg.NameForKey(k)
		if name == "" || name == "Unknown" {
			continue
		}
		m.requests[k] = m.set.NewCounter(fmt.Sprintf(`ringbroker_requests_total{api=%q}`, name))
		m.latency[k] = m.set.NewHistogram(fmt.Sprintf(`ringbroker_request_duration_seconds{api=%q}`, name))
	}
	m.accepted = m.set.NewCounter("ringbroker_connections_accepted_total")
	m.fetchRetriesInline = m.set.NewCounter("ringbroker_fetch_retries_inline_total")
	m.paused = m.set.NewCounter("ringbroker_connection_pauses_total")
	m.authOK = m.set.NewCounter("ringbroker_successful_authentication_total")
	m.authFailedC = m.set.NewCounter("ringbroker_failed_authentication_total")
	m.set.NewGauge("ringbroker_connections", func() float64 { return float64(m.connsOpen.Load()) })
	m.bytesOutC = m.set.NewCounter("ringbroker_bytes_out_total")
	m.backend.Store("")
	return m
}

func (m *brokerMetrics) observe(key int16, d time.Duration) {
	if key < 0 || int(key) >= len(m.requests) || m.requests[key] == nil {
		return
	}
	m.requests[key].Inc()
	m.latency[key].Update(d.Seconds())
	m.requestHist(key).observe(d)
}

func (m *brokerMetrics) connOpened()         { m.connsOpen.Add(1); m.accepted.Inc() }
func (m *brokerMetrics) connClosed()         { m.connsOpen.Add(-1) }
func (m *brokerMetrics) connPaused()         { m.paused.Inc() }
func (m *brokerMetrics) authSucceeded()      { m.authOK.Inc() }
func (m *brokerMetrics) authFailed()         { m.authFailedC.Inc() }
func (m *brokerMetrics) bytesOut(n int)      { m.bytesOutC.Add(n) }
func (m *brokerMetrics) setBackend(b string) { m.backend.Store(b) }

// watchFetchSessions exports the fetch session cache's size as Kafka's FetchSessionCache
// metrics do: sessions (NumIncrementalFetchSessions), partitions cached in them
// (NumIncrementalFetchPartitionsCached) and evictions (IncrementalFetchSessionEvictionsPerSec,
// here a counter).
func (m *brokerMetrics) watchFetchSessions(c *fetchSessionCache) {
	m.set.NewGauge("ringbroker_incremental_fetch_sessions", func() float64 {
		n, _, _ := c.stats()
		return float64(n)
	})
	m.set.NewGauge("ringbroker_incremental_fetch_partitions_cached", func() float64 {
		_, n, _ := c.stats()
		return float64(n)
	})
	m.set.NewGauge("ringbroker_incremental_fetch_session_evictions_total", func() float64 {
		_, _, n := c.stats()
		return float64(n)
	})
}

// handler serves /metrics in the Prometheus text format.
func (m *brokerMetrics) handler(b *Broker) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		m.set.WritePrometheus(w)
		if err := writeKafkaMetrics(w, b); err != nil {
			b.logger.Debug("metrics: write", "err", err)
			return
		}
		writeRingMetrics(w, b)
		b.telemetry.writePrometheus(w)
		metrics.WriteProcessMetrics(w)
		// Open descriptors against the limit: one per segment and per connection.
		metrics.WriteFDMetrics(w)
	})
	return mux
}

// writeRingMetrics writes the I/O backend in use and the ring counters of every listener.
func writeRingMetrics(w io.Writer, b *Broker) {
	fmt.Fprintf(w, "ringbroker_io_backend{backend=%q} 1\n", b.metrics.backend.Load().(string))
	for i, s := range b.servers {
		st := s.Stats()
		fmt.Fprintf(w, "ringbroker_ring_accepted_total{listener=\"%d\"} %d\n", i, st.Accepted)
		fmt.Fprintf(w, "ringbroker_ring_bytes_in_total{listener=\"%d\"} %d\n", i, st.BytesIn)
		fmt.Fprintf(w, "ringbroker_ring_bytes_out_total{listener=\"%d\"} %d\n", i, st.BytesOut)
		fmt.Fprintf(w, "ringbroker_ring_sends_total{listener=\"%d\"} %d\n", i, st.Sends)
		fmt.Fprintf(w, "ringbroker_ring_zc_sends_total{listener=\"%d\"} %d\n", i, st.ZCSends)
		fmt.Fprintf(w, "ringbroker_ring_cqes_total{listener=\"%d\"} %d\n", i, st.CQEs)
		fmt.Fprintf(w, "ringbroker_ring_direct_sends_total{listener=\"%d\"} %d\n", i, st.DirectSends)
		fmt.Fprintf(w, "ringbroker_ring_direct_sends_blocked_total{listener=\"%d\"} %d\n", i, st.DirectBlocked)
		fmt.Fprintf(w, "ringbroker_ring_fills_total{listener=\"%d\"} %d\n", i, st.Fills)
		fmt.Fprintf(w, "ringbroker_ring_pauses_total{listener=\"%d\"} %d\n", i, st.Pauses)
	}
	ps := b.reqPool.Stats()
	fmt.Fprintf(w, "ringbroker_request_memory_limit_bytes %d\n", ps.Limit)
	fmt.Fprintf(w, "ringbroker_request_memory_in_use_bytes %d\n", ps.InUse)
	fmt.Fprintf(w, "ringbroker_request_memory_peak_bytes %d\n", ps.PeakInUse)
	fmt.Fprintf(w, "ringbroker_request_memory_free_bytes %d\n", ps.Free)
	fmt.Fprintf(w, "ringbroker_request_memory_refused_total %d\n", ps.Refused)
	fmt.Fprintf(w, "ringbroker_request_memory_waiting %d\n", ps.Waiting)
}
