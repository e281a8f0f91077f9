package broker

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

// The metrics of this file carry Kafka's names as the Prometheus JMX exporter renders Kafka's
// MBeans with the rules of Strimzi's kafka-metrics.yaml (those of the exporter's
// kafka-2_0_0.yml example, plus its _percent rules), which the Strimzi Grafana dashboards read:
// kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions becomes
// kafka_server_replicamanager_underreplicatedpartitions, a ...PerSec meter's count
// kafka_<domain>_<type>_<name without PerSec>_total, a histogram's percentiles
// kafka_<domain>_<type>_<name>{quantile="0.99"} beside _count, and a ...Percent gauge
// kafka_<domain>_<type>_<name without Percent>_percent. Consumer lag takes kafka_exporter's
// names. docs/METRICS.md lists every metric and how ringbroker computes it.

const (
	// idleWindow is the shortest span RequestHandlerAvgIdlePercent is measured over.
	idleWindow = 30 * time.Second
	// lagTimeout bounds how long a scrape waits for the group coordinator's offsets.
	lagTimeout = 2 * time.Second
)

// topicStats are the BrokerTopicMetrics of one topic: counters its partitions add to on the
// produce and fetch paths. Each partition holds its topic's stats, so counting is a few atomic
// adds and no lookup.
type topicStats struct {
	bytesIn, messagesIn atomic.Uint64
	// bytesOut counts what consumers fetched, replBytesOut what followers fetched (Kafka's
	// BytesOutPerSec and ReplicationBytesOutPerSec).
	bytesOut, replBytesOut atomic.Uint64
	// all are the stats of every topic, which count everything this topic's count too; nil
	// in those.
	all *topicStats
}

// countIn counts an append of bytes holding messages records.
func (s *topicStats) countIn(bytes int, messages int64) {
	s.bytesIn.Add(uint64(bytes))
	s.messagesIn.Add(uint64(messages))
	s.all.bytesIn.Add(uint64(bytes))
	s.all.messagesIn.Add(uint64(messages))
}

// countOut counts bytes of record data fetched by a consumer, or by a follower.
func (s *topicStats) countOut(bytes int, follower bool) {
	if follower {
		s.replBytesOut.Add(uint64(bytes))
		s.all.replBytesOut.Add(uint64(bytes))
		return
	}
	s.bytesOut.Add(uint64(bytes))
	s.all.bytesOut.Add(uint64(bytes))
}

// countIn counts an append to p that Kafka's BytesInPerSec and MessagesInPerSec count.
func (p *partition) countIn(bytes int, messages int64) { p.stats.countIn(bytes, messages) }

// countOut counts record data read from p for a fetch, by a follower or a consumer.
func (p *partition) countOut(bytes int, follower bool) { p.stats.countOut(bytes, follower) }

// topicStatsSet holds the stats of every topic and of each topic this broker has a replica of.
type topicStatsSet struct {
	all    topicStats
	mu     sync.Mutex
	byName map[string]*topicStats
}

// of returns topic's stats, made on first use; partitions take them when they open.
func (s *topicStatsSet) of(topic string) *topicStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ts := s.byName[topic]; ts != nil {
		return ts
	}
	if s.byName == nil {
		s.byName = map[string]*topicStats{}
	}
	ts := &topicStats{all: &s.all}
	s.byName[topic] = ts
	return ts
}

// namedStats are one topic's stats with its name.
type namedStats struct {
	topic string
	stats *topicStats
}

// live returns the stats of the topics in im, sorted by name, and forgets those of topics im
// no longer has, as Kafka removes a deleted topic's metrics.
func (s *topicStatsSet) live(im *meta.Image) []namedStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]namedStats, 0, len(s.byName))
	for name, ts := range s.byName {
		if _, ok := im.Topics[name]; !ok {
			delete(s.byName, name)
			continue
		}
		out = append(out, namedStats{name, ts})
	}
	slices.SortFunc(out, func(a, b namedStats) int { return cmp.Compare(a.topic, b.topic) })
	return out
}

// kafkaAPIName is the name Kafka's request metrics give an API (ApiKeys' name), where it
// differs from franz-go's spelling of the message name.
func kafkaAPIName(key int16) string {
	switch n := kmsg.NameForKey(key); n {
	case "LeaderAndISR":
		return "LeaderAndIsr"
	case "SASLHandshake":
		return "SaslHandshake"
	case "SASLAuthenticate":
		return "SaslAuthenticate"
	case "InitProducerID":
		return "InitProducerId"
	case "AllocateProducerIDs":
		return "AllocateProducerIds"
	case "DescribeACLs", "CreateACLs", "DeleteACLs":
		return strings.TrimSuffix(n, "ACLs") + "Acls"
	case "DescribeUserSCRAMCredentials", "AlterUserSCRAMCredentials":
		return strings.TrimSuffix(n, "SCRAMCredentials") + "ScramCredentials"
	default:
		return n
	}
}

// requestHist returns the latency histogram of API key, made on first use.
func (m *brokerMetrics) requestHist(key int16) *latencyHist {
	if h := m.reqHists[key].Load(); h != nil {
		return h
	}
	m.reqHists[key].CompareAndSwap(nil, newLatencyHist(time.Now()))
	return m.reqHists[key].Load()
}

// fetchServed counts a Fetch answered after waiting since start as Kafka's FetchConsumer or
// FetchFollower request metrics, besides Fetch.
func (m *brokerMetrics) fetchServed(follower bool, start time.Time) {
	h := m.fetchConsumer
	if follower {
		h = m.fetchFollower
	}
	h.observe(time.Since(start))
}

// flushed times one log flush (LogFlushRateAndTimeMs); logs call it through Options.OnFlush.
func (m *brokerMetrics) flushed(d time.Duration) { m.flush.observe(d) }

// idleGauge turns the handler workers' idle time into Kafka's RequestHandlerAvgIdlePercent:
// the fraction of the workers' time spent waiting for work over the last idleWindow or more.
type idleGauge struct {
	mu sync.Mutex
	// reported is the largest idle total reported: a wait that ends between a scrape's reads
	// may be missed once, and the counter must not go back for it.
	reported time.Duration
	// at and idleAt are the start of the current window and the idle total then; value is the
	// fraction of the last complete window, valid once full.
	at     time.Time
	idleAt time.Duration
	value  float64
	full   bool
}

// sample takes the workers' idle total at now (workers of them, started at start) and
// returns the idle total to report and the idle fraction.
func (g *idleGauge) sample(now, start time.Time, idle time.Duration, workers int) (time.Duration, float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reported = max(g.reported, idle)
	if g.at.IsZero() {
		g.at = start
	}
	frac := func() float64 {
		span := now.Sub(g.at) * time.Duration(workers)
		if span <= 0 {
			return 1
		}
		return min(max(float64(g.reported-g.idleAt)/float64(span), 0), 1)
	}
	switch {
	case now.Sub(g.at) >= idleWindow:
		g.value, g.full = frac(), true
		g.at, g.idleAt = now, g.reported
	case !g.full:
		g.value = frac()
	}
	return g.reported, g.value
}

// idleTime returns how long the pool's workers have waited for work in all, counting waits in
// progress, and how many workers there are.
func (p *handlerPool) idleTime() (time.Duration, int) {
	now := int64(time.Since(p.epoch))
	var idle int64
	for _, w := range p.all {
		idle += w.idleNanos.Load()
		if since := w.idleSince.Load(); since > 0 && now > since {
			idle += now - since
		}
	}
	return time.Duration(idle), len(p.all)
}

// promLabel escapes s for a label value of Prometheus's text format: backslash, double quote
// and line feed escaped, invalid UTF-8 replaced. Group ids are any bytes a client sent.
func promLabel(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// promWriter writes metric families of the Prometheus text format, each with its # TYPE line.
type promWriter struct {
	w   io.Writer
	err error
}

// family starts the metric family name of type typ (counter or gauge).
func (pw *promWriter) family(name, typ string) {
	pw.printf("# TYPE %s %s\n", name, typ)
}

// sample writes one sample of a family: labels is "" or `{a="b",...}` with escaped values.
func (pw *promWriter) sample(name, labels string, v float64) {
	pw.printf("%s%s %s\n", name, labels, strconv.FormatFloat(v, 'g', -1, 64))
}

// gauge writes a family of one unlabelled gauge.
func (pw *promWriter) gauge(name string, v float64) {
	pw.family(name, "gauge")
	pw.sample(name, "", v)
}

func (pw *promWriter) printf(format string, args ...any) {
	if pw.err == nil {
		_, pw.err = fmt.Fprintf(pw.w, format, args...)
	}
}

// writeKafkaMetrics writes the metrics with Kafka's names, and ringbroker's per-topic byte
// counters, from b's current state.
func writeKafkaMetrics(w io.Writer, b *Broker) error {
	pw := &promWriter{w: w}
	now := time.Now()
	im := b.meta.Image()
	if b.cfg.hasRole("controller") {
		writeControllerMetrics(pw, b, im)
	}
	if b.cfg.hasRole("broker") {
		writeReplicaManagerMetrics(pw, b, im)
	}
	writeTopicMetrics(pw, &b.metrics.topics, im)
	writeRequestMetrics(pw, b.metrics, now)
	writeQuantiles(pw, "kafka_log_logflushstats_logflushrateandtimems", []latencySeries{{"", b.metrics.flush}}, now)
	writeLogDirMetrics(pw, b)
	if b.handlers != nil {
		idle, workers := b.handlers.idleTime()
		total, frac := b.metrics.handlerIdle.sample(now, b.handlers.epoch, idle, workers)
		pw.gauge("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent", frac)
		pw.family("ringbroker_handler_idle_seconds_total", "counter")
		pw.sample("ringbroker_handler_idle_seconds_total", "", total.Seconds())
		pw.gauge("ringbroker_handler_workers", float64(workers))
	}
	writeNetworkIdle(pw, b, now)
	if b.groups != nil {
		writeConsumerLag(pw, b)
	}
	return pw.err
}

// writeLogDirMetrics writes Kafka's LogManager gauges of the log dirs: how many are offline,
// and per dir 1 when offline, else 0.
func writeLogDirMetrics(pw *promWriter, b *Broker) {
	offline := 0
	for _, d := range b.dirs {
		if d.offline() {
			offline++
		}
	}
	pw.gauge("kafka_log_logmanager_offlinelogdirectorycount", float64(offline))
	pw.family("kafka_log_logmanager_logdirectoryoffline", "gauge")
	for _, d := range b.dirs {
		v := 0.0
		if d.offline() {
			v = 1
		}
		pw.sample("kafka_log_logmanager_logdirectoryoffline", fmt.Sprintf(`{logDirectory="%s"}`, promLabel(d.path)), v)
	}
}

// processorIdleGauges are the idle gauges of the event loops, made at their first scrape.
type processorIdleGauges struct {
	mu     sync.Mutex
	gauges []*idleGauge
}

// at returns the gauge of processor i.
func (p *processorIdleGauges) at(i int) *idleGauge {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.gauges) <= i {
		p.gauges = append(p.gauges, &idleGauge{})
	}
	return p.gauges[i]
}

// writeNetworkIdle writes Kafka's network processor idle gauges: each event loop of each
// listener is a processor, numbered in listener order as Kafka numbers its processors, and
// NetworkProcessorAvgIdlePercent is their mean. An io_uring loop is idle while it waits in
// io_uring_enter; netpoll, without loop threads, counts its readers' time outside the
// request decoder (ring.Stats.Idle).
func writeNetworkIdle(pw *promWriter, b *Broker, now time.Time) {
	const (
		avg  = "kafka_network_socketserver_networkprocessoravgidle_percent"
		proc = "kafka_network_processor_idle_percent"
	)
	type sample struct {
		listener string
		frac     float64
	}
	var (
		samples    []sample
		idle, up   time.Duration
		loops, num int
	)
	for i, s := range b.servers {
		name := ""
		if i < len(b.cfg.Listeners) {
			name = b.cfg.Listeners[i].Name
		}
		for _, st := range s.RingStats() {
			_, frac := b.metrics.processorIdle.at(num).sample(now, now.Add(-st.Uptime), st.Idle, 1)
			samples = append(samples, sample{name, frac})
			idle, up = idle+st.Idle, max(up, st.Uptime)
			loops++
			num++
		}
	}
	if loops == 0 {
		return
	}
	_, frac := b.metrics.networkIdle.sample(now, now.Add(-up), idle, loops)
	pw.gauge(avg, frac)
	pw.family(proc, "gauge")
	for i, s := range samples {
		pw.sample(proc, fmt.Sprintf(`{listener="%s",networkProcessor="%d"}`, promLabel(s.listener), i), s.frac)
	}
}

// controllerCounts are the counts of ControllerMetadataMetrics, taken from a metadata image.
type controllerCounts struct {
	topics, partitions int
	// offline partitions have no leader; imbalanced ones are not led by their first replica.
	offline, imbalanced        int
	liveBrokers, fencedBrokers int
}

// countImage counts im as Kafka's ControllerMetadataMetricsPublisher does: a partition is
// offline without a leader (leader -1), imbalanced when its leader is not its preferred
// replica, the first of its replicas.
func countImage(im *meta.Image) controllerCounts {
	c := controllerCounts{topics: len(im.Topics)}
	for _, t := range im.Topics {
		for _, p := range t.Partitions {
			c.partitions++
			if p.Leader < 0 {
				c.offline++
			}
			if len(p.Replicas) == 0 || p.Leader != p.Replicas[0] {
				c.imbalanced++
			}
		}
	}
	for _, br := range im.Brokers {
		if br.Fenced {
			c.fencedBrokers++
		} else {
			c.liveBrokers++
		}
	}
	return c
}

// writeControllerMetrics writes the controller's metrics (QuorumControllerMetrics and
// ControllerMetadataMetrics) from the metadata image, as every Kafka controller does.
func writeControllerMetrics(pw *promWriter, b *Broker, im *meta.Image) {
	active := 0.0
	if b.meta.IsLeader() {
		active = 1
	}
	c := countImage(im)
	pw.gauge("kafka_controller_kafkacontroller_activecontrollercount", active)
	pw.gauge("kafka_controller_kafkacontroller_offlinepartitionscount", float64(c.offline))
	pw.gauge("kafka_controller_kafkacontroller_preferredreplicaimbalancecount", float64(c.imbalanced))
	pw.gauge("kafka_controller_kafkacontroller_globaltopiccount", float64(c.topics))
	pw.gauge("kafka_controller_kafkacontroller_globalpartitioncount", float64(c.partitions))
	pw.gauge("kafka_controller_kafkacontroller_activebrokercount", float64(c.liveBrokers))
	pw.gauge("kafka_controller_kafkacontroller_fencedbrokercount", float64(c.fencedBrokers))
}

// replicaCounts are ReplicaManager's partition counts on one broker.
type replicaCounts struct {
	partitions, leaders              int
	underReplicated, underMin, atMin int
}

// countReplicas counts the partitions of tbl as Kafka's Partition does: under-replicated when
// this broker leads it and the ISR is smaller than the replicas (less those a reassignment is
// adding, which im names), under (at) min ISR when this broker leads it and the ISR is smaller
// than (equal to) min.insync.replicas.
func countReplicas(tbl *partitionTable, im *meta.Image) replicaCounts {
	var c replicaCounts
	for name, ps := range tbl.byName {
		t := im.Topics[name]
		for _, p := range ps {
			if p == nil {
				continue
			}
			c.partitions++
			st := p.state()
			if st == nil || !st.leader {
				continue
			}
			c.leaders++
			rf := len(st.replicas)
			if t != nil && t.ID == p.topicID && int(p.index) < len(t.Partitions) {
				rf -= len(t.Partitions[p.index].AddingReplicas)
			}
			if len(st.isr) < rf {
				c.underReplicated++
			}
			switch {
			case len(st.isr) < st.minISR:
				c.underMin++
			case len(st.isr) == st.minISR:
				c.atMin++
			}
		}
	}
	return c
}

// writeReplicaManagerMetrics writes ReplicaManager's gauges over the partitions this broker
// has a replica of.
func writeReplicaManagerMetrics(pw *promWriter, b *Broker, im *meta.Image) {
	c := countReplicas(b.parts.Load(), im)
	pw.gauge("kafka_server_replicamanager_partitioncount", float64(c.partitions))
	pw.gauge("kafka_server_replicamanager_leadercount", float64(c.leaders))
	pw.gauge("kafka_server_replicamanager_underreplicatedpartitions", float64(c.underReplicated))
	pw.gauge("kafka_server_replicamanager_underminisrpartitioncount", float64(c.underMin))
	pw.gauge("kafka_server_replicamanager_atminisrpartitioncount", float64(c.atMin))
}

// writeTopicMetrics writes BrokerTopicMetrics, of every topic (no topic label) and of each,
// and ringbroker's own per-topic byte counters, which count follower fetches out too.
func writeTopicMetrics(pw *promWriter, set *topicStatsSet, im *meta.Image) {
	topics := set.live(im)
	perTopic := func(name string, all *atomic.Uint64, of func(*topicStats) *atomic.Uint64) {
		pw.family(name, "counter")
		if all != nil {
			pw.sample(name, "", float64(all.Load()))
		}
		for _, t := range topics {
			pw.sample(name, `{topic="`+promLabel(t.topic)+`"}`, float64(of(t.stats).Load()))
		}
	}
	perTopic("kafka_server_brokertopicmetrics_bytesin_total", &set.all.bytesIn, func(s *topicStats) *atomic.Uint64 { return &s.bytesIn })
	perTopic("kafka_server_brokertopicmetrics_bytesout_total", &set.all.bytesOut, func(s *topicStats) *atomic.Uint64 { return &s.bytesOut })
	perTopic("kafka_server_brokertopicmetrics_messagesin_total", &set.all.messagesIn, func(s *topicStats) *atomic.Uint64 { return &s.messagesIn })
	pw.family("kafka_server_brokertopicmetrics_replicationbytesout_total", "counter")
	pw.sample("kafka_server_brokertopicmetrics_replicationbytesout_total", "", float64(set.all.replBytesOut.Load()))

	pw.family("ringbroker_bytes_in_total", "counter")
	pw.sample("ringbroker_bytes_in_total", "", float64(set.all.bytesIn.Load()))
	perTopic("ringbroker_topic_bytes_in_total", nil, func(s *topicStats) *atomic.Uint64 { return &s.bytesIn })
	pw.family("ringbroker_topic_bytes_out_total", "counter")
	for _, t := range topics {
		pw.sample("ringbroker_topic_bytes_out_total", `{topic="`+promLabel(t.topic)+`"}`, float64(t.stats.bytesOut.Load()+t.stats.replBytesOut.Load()))
	}
}

// latencySeries is one histogram of a family with its labels ("" or `request="Produce"`).
type latencySeries struct {
	labels string
	hist   *latencyHist
}

// writeRequestMetrics writes RequestMetrics' RequestsPerSec and TotalTimeMs of every API
// that has served a request, by Kafka's API name, with FetchConsumer and FetchFollower.
func writeRequestMetrics(pw *promWriter, m *brokerMetrics, now time.Time) {
	var series []latencySeries
	for key := range m.reqHists {
		if h := m.reqHists[key].Load(); h != nil {
			series = append(series, latencySeries{`request="` + kafkaAPIName(int16(key)) + `"`, h})
		}
	}
	series = append(series, latencySeries{`request="FetchConsumer"`, m.fetchConsumer}, latencySeries{`request="FetchFollower"`, m.fetchFollower})
	pw.family("kafka_network_requestmetrics_requests_total", "counter")
	for _, s := range series {
		pw.sample("kafka_network_requestmetrics_requests_total", "{"+s.labels+"}", float64(s.hist.count.Load()))
	}
	writeQuantiles(pw, "kafka_network_requestmetrics_totaltimems", series, now)
}

// writeQuantiles writes a histogram family as the JMX exporter renders Kafka's: a gauge per
// percentile, in milliseconds, and name_count.
func writeQuantiles(pw *promWriter, name string, series []latencySeries, now time.Time) {
	counts := make([]uint64, len(series))
	pw.family(name, "gauge")
	for i, s := range series {
		n, ms := s.hist.quantiles(now)
		counts[i] = n
		sep := ""
		if s.labels != "" {
			sep = ","
		}
		for qi, q := range kafkaQuantiles {
			// Microseconds are as fine as the histogram's buckets tell apart.
			pw.sample(name, "{"+s.labels+sep+`quantile="`+q.label+`"}`, math.Round(ms[qi]*1000)/1000)
		}
	}
	pw.family(name+"_count", "counter")
	for i, s := range series {
		labels := ""
		if s.labels != "" {
			labels = "{" + s.labels + "}"
		}
		pw.sample(name+"_count", labels, float64(counts[i]))
	}
}

// writeConsumerLag writes, with kafka_exporter's names, the newest and oldest offsets of the
// partitions this broker leads, and the committed offset and lag of each group this broker
// coordinates: lag is the high watermark of a partition this broker has a replica of less
// the committed offset, at least 0 (a follower's high watermark may trail the leader's).
func writeConsumerLag(pw *promWriter, b *Broker) {
	tbl := b.parts.Load()
	type leadPart struct {
		topic        string
		index        int32
		hw, logStart int64
	}
	var led []leadPart
	for name, ps := range tbl.byName {
		for _, p := range ps {
			if p != nil && p.isLeader() {
				led = append(led, leadPart{name, p.index, p.highWatermark(), p.log().LogStartOffset()})
			}
		}
	}
	slices.SortFunc(led, func(a, b leadPart) int { return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.index, b.index)) })
	pw.family("kafka_topic_partition_current_offset", "gauge")
	for _, p := range led {
		pw.sample("kafka_topic_partition_current_offset", `{topic="`+promLabel(p.topic)+`",partition="`+strconv.Itoa(int(p.index))+`"}`, float64(p.hw))
	}
	pw.family("kafka_topic_partition_oldest_offset", "gauge")
	for _, p := range led {
		pw.sample("kafka_topic_partition_oldest_offset", `{topic="`+promLabel(p.topic)+`",partition="`+strconv.Itoa(int(p.index))+`"}`, float64(p.logStart))
	}

	ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
	defer cancel()
	offsets, err := b.groups.CommittedOffsets(ctx)
	if err != nil {
		b.logger.Warn("metrics: consumer group offsets unavailable", "err", err)
	}
	labels := make([]string, len(offsets))
	for i, o := range offsets {
		labels[i] = `{consumergroup="` + promLabel(o.Group) + `",topic="` + promLabel(o.Topic) + `",partition="` + strconv.Itoa(int(o.Partition)) + `"}`
	}
	pw.family("kafka_consumergroup_current_offset", "gauge")
	for i, o := range offsets {
		pw.sample("kafka_consumergroup_current_offset", labels[i], float64(o.Offset))
	}
	pw.family("kafka_consumergroup_lag", "gauge")
	for i, o := range offsets {
		if p := tbl.lookup(o.Topic, o.Partition); p != nil {
			pw.sample("kafka_consumergroup_lag", labels[i], float64(max(p.highWatermark()-o.Offset, 0)))
		}
	}
}
