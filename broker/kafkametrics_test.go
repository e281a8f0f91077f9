package broker

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/broker/meta"
)

// promSample is one sample of a scrape.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape is a parsed /metrics page.
type scrape []promSample

// get returns the value of the series of name with exactly labels (key, value, ...), and
// whether it is there.
func (s scrape) get(name string, labels ...string) (float64, bool) {
	for _, p := range s {
		if p.name != name || len(p.labels) != len(labels)/2 {
			continue
		}
		match := true
		for i := 0; i < len(labels); i += 2 {
			if p.labels[labels[i]] != labels[i+1] {
				match = false
			}
		}
		if match {
			return p.value, true
		}
	}
	return 0, false
}

// must is get that fails the test when the series is missing.
func (s scrape) must(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.get(name, labels...)
	if !ok {
		t.Fatalf("no series %s%v in the scrape", name, labels)
	}
	return v
}

// names returns the metric names of the scrape.
func (s scrape) names() map[string]bool {
	out := map[string]bool{}
	for _, p := range s {
		out[p.name] = true
	}
	return out
}

// parseExposition parses Prometheus's text format strictly: every line a comment or a sample
// with well-formed, escaped labels; no series twice; each family with a # TYPE line typed
// once, before its samples, which follow it without another family in between.
func parseExposition(text string) (scrape, error) {
	var out scrape
	typed := map[string]bool{}
	seen := map[string]bool{}
	var current string // the family of the last # TYPE line, while its samples follow
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || (f[1] != "counter" && f[1] != "gauge") {
				return nil, fmt.Errorf("line %d: bad TYPE line %q", n+1, line)
			}
			if typed[f[0]] {
				return nil, fmt.Errorf("line %d: family %s typed twice", n+1, f[0])
			}
			typed[f[0]], current = true, f[0]
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
		if typed[s.name] && s.name != current {
			return nil, fmt.Errorf("line %d: sample of %s apart from its family", n+1, s.name)
		}
		if s.name != current {
			current = ""
		}
		keys := make([]string, 0, len(s.labels))
		for k, v := range s.labels {
			keys = append(keys, k+"="+v)
		}
		slices.Sort(keys)
		id := s.name + "{" + strings.Join(keys, ",") + "}"
		if seen[id] {
			return nil, fmt.Errorf("line %d: series %s twice", n+1, id)
		}
		seen[id] = true
		out = append(out, s)
	}
	return out, nil
}

// parseSample parses `name{k="v",...} value`.
func parseSample(line string) (promSample, error) {
	s := promSample{labels: map[string]string{}}
	i := 0
	for i < len(line) && (line[i] == '_' || line[i] == ':' || line[i] >= 'a' && line[i] <= 'z' || line[i] >= 'A' && line[i] <= 'Z' || i > 0 && line[i] >= '0' && line[i] <= '9') {
		i++
	}
	if i == 0 {
		return s, fmt.Errorf("no metric name")
	}
	s.name, line = line[:i], line[i:]
	if strings.HasPrefix(line, "{") {
		line = line[1:]
		for !strings.HasPrefix(line, "}") {
			k, rest, ok := strings.Cut(line, `="`)
			if !ok || k == "" {
				return s, fmt.Errorf("bad label in %q", line)
			}
			var v strings.Builder
			j := 0
			for ; j < len(rest) && rest[j] != '"'; j++ {
				switch {
				case rest[j] == '\n':
					return s, fmt.Errorf("raw line feed in label %s", k)
				case rest[j] != '\\':
					v.WriteByte(rest[j])
				case j+1 < len(rest) && (rest[j+1] == '\\' || rest[j+1] == '"'):
					j++
					v.WriteByte(rest[j])
				case j+1 < len(rest) && rest[j+1] == 'n':
					j++
					v.WriteByte('\n')
				default:
					return s, fmt.Errorf("bad escape in label %s", k)
				}
			}
			if j == len(rest) {
				return s, fmt.Errorf("unterminated label %s", k)
			}
			if !utf8.ValidString(v.String()) {
				return s, fmt.Errorf("label %s is not UTF-8", k)
			}
			s.labels[k] = v.String()
			line = strings.TrimPrefix(rest[j+1:], ",")
		}
		line = line[1:]
	}
	v, ok := strings.CutPrefix(line, " ")
	if !ok {
		return s, fmt.Errorf("no value")
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return s, fmt.Errorf("value: %w", err)
	}
	s.value = f
	return s, nil
}

// scrapeMetrics fetches b's /metrics page over HTTP and parses it.
func scrapeMetrics(t *testing.T, b *Broker) scrape {
	t.Helper()
	resp, err := http.Get("http://" + b.metricsLn.Addr().String() + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d, %v", resp.StatusCode, err)
	}
	s, err := parseExposition(string(body))
	if err != nil {
		t.Fatalf("scrape does not parse: %v", err)
	}
	return s
}

// metricsTraffic is what runMetricsTraffic did, to check the metrics against.
type metricsTraffic struct {
	topic, group string
	// produced are the records produced to each partition, committed the group's offsets.
	produced, committed [2]int64
	// consumedBytes is the size of the topic's logs when a consumer had read all of them.
	consumedBytes int64
}

// runMetricsTraffic produces to a two-partition topic that fsyncs every append, reads it all
// once with a consumer, commits offsets for a group and produces some more.
func runMetricsTraffic(t *testing.T, b *Broker) metricsTraffic {
	t.Helper()
	tr := metricsTraffic{topic: "metrics-t", group: "metrics-g", committed: [2]int64{12, 8}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	flush := "1"
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"flush.messages": &flush}, tr.topic); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, b, kgo.DefaultProduceTopic(tr.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(p int32, n int) {
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "value-%d-%d", p, i)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			tr.produced[p]++
		}
	}
	produce(0, 12)
	produce(1, 8)
	consumer := newClient(t, b, kgo.ConsumeTopics(tr.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for read := 0; read < 20; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		read += fs.NumRecords()
	}
	consumer.Close()
	for _, p := range b.parts.Load().byName[tr.topic] {
		tr.consumedBytes += p.log().Size()
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: tr.topic, Partition: 0, At: tr.committed[0], LeaderEpoch: -1})
	offsets.Add(kadm.Offset{Topic: tr.topic, Partition: 1, At: tr.committed[1], LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, tr.group, offsets); err != nil {
		t.Fatalf("commit: %v", err)
	}
	produce(0, 5)
	return tr
}

// TestKafkaMetrics checks the metrics with Kafka's names against the traffic that made them,
// scraped over HTTP from a real broker.
func TestKafkaMetrics(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		b := startBroker(t, io, t.TempDir(), "metrics.listen=127.0.0.1:0")
		tr := runMetricsTraffic(t, b)
		s := scrapeMetrics(t, b)

		var topicBytes int64
		for _, p := range b.parts.Load().byName[tr.topic] {
			topicBytes += p.log().Size()
		}
		if got := s.must(t, "kafka_server_brokertopicmetrics_bytesin_total", "topic", tr.topic); got != float64(topicBytes) {
			t.Errorf("bytesin{topic=%s} = %v; want the %d bytes of its logs", tr.topic, got, topicBytes)
		}
		if got := s.must(t, "ringbroker_topic_bytes_in_total", "topic", tr.topic); got != float64(topicBytes) {
			t.Errorf("ringbroker_topic_bytes_in_total = %v; want %d", got, topicBytes)
		}
		var allTopics float64
		for _, p := range s {
			if p.name == "kafka_server_brokertopicmetrics_bytesin_total" && p.labels["topic"] != "" {
				allTopics += p.value
			}
		}
		if got := s.must(t, "kafka_server_brokertopicmetrics_bytesin_total"); got != allTopics {
			t.Errorf("bytesin of every topic = %v; want the sum of the topics' %v", got, allTopics)
		}
		if got := s.must(t, "kafka_server_brokertopicmetrics_messagesin_total", "topic", tr.topic); got != float64(tr.produced[0]+tr.produced[1]) {
			t.Errorf("messagesin = %v; want %d", got, tr.produced[0]+tr.produced[1])
		}
		if got := s.must(t, "kafka_server_brokertopicmetrics_bytesout_total", "topic", tr.topic); got != float64(tr.consumedBytes) {
			t.Errorf("bytesout = %v; want the %d bytes the consumer read", got, tr.consumedBytes)
		}
		if got := s.must(t, "kafka_server_brokertopicmetrics_replicationbytesout_total"); got != 0 {
			t.Errorf("replicationbytesout = %v without followers; want 0", got)
		}

		for p := range 2 {
			part := strconv.Itoa(p)
			if got := s.must(t, "kafka_consumergroup_current_offset", "consumergroup", tr.group, "topic", tr.topic, "partition", part); got != float64(tr.committed[p]) {
				t.Errorf("current_offset of partition %d = %v; want %d", p, got, tr.committed[p])
			}
			if got := s.must(t, "kafka_consumergroup_lag", "consumergroup", tr.group, "topic", tr.topic, "partition", part); got != float64(tr.produced[p]-tr.committed[p]) {
				t.Errorf("lag of partition %d = %v; want %d", p, got, tr.produced[p]-tr.committed[p])
			}
			if got := s.must(t, "kafka_topic_partition_current_offset", "topic", tr.topic, "partition", part); got != float64(tr.produced[p]) {
				t.Errorf("current offset of partition %d = %v; want %d", p, got, tr.produced[p])
			}
		}

		if got := s.must(t, "kafka_controller_kafkacontroller_activecontrollercount"); got != 1 {
			t.Errorf("activecontrollercount = %v on a single node; want 1", got)
		}
		for _, name := range []string{"kafka_controller_kafkacontroller_offlinepartitionscount", "kafka_server_replicamanager_underreplicatedpartitions", "kafka_server_replicamanager_underminisrpartitioncount"} {
			if got := s.must(t, name); got != 0 {
				t.Errorf("%s = %v on a healthy single node; want 0", name, got)
			}
		}
		parts, leaders := s.must(t, "kafka_server_replicamanager_partitioncount"), s.must(t, "kafka_server_replicamanager_leadercount")
		if want := float64(len(b.parts.Load().byName[tr.topic]) + len(b.parts.Load().byName[offsetsTopic])); parts != want || leaders != want {
			t.Errorf("partitioncount %v, leadercount %v; want both %v", parts, leaders, want)
		}

		produce := s.must(t, "kafka_network_requestmetrics_requests_total", "request", "Produce")
		if produce < 25 || s.must(t, "kafka_network_requestmetrics_totaltimems_count", "request", "Produce") != produce {
			t.Errorf("Produce requests %v; want at least 25, and as many in totaltimems_count", produce)
		}
		if p99 := s.must(t, "kafka_network_requestmetrics_totaltimems", "request", "Produce", "quantile", "0.99"); p99 <= 0 || p99 > 30000 {
			t.Errorf("Produce p99 total time %v ms; want a positive time within the test's", p99)
		}
		consumerFetches := s.must(t, "kafka_network_requestmetrics_requests_total", "request", "FetchConsumer")
		if consumerFetches < 1 || s.must(t, "kafka_network_requestmetrics_requests_total", "request", "Fetch") < consumerFetches {
			t.Errorf("FetchConsumer requests %v; want at least 1 and no more than Fetch", consumerFetches)
		}
		if got := s.must(t, "kafka_network_requestmetrics_requests_total", "request", "FetchFollower"); got != 0 {
			t.Errorf("FetchFollower requests %v without followers; want 0", got)
		}
		if got := s.must(t, "kafka_log_logflushstats_logflushrateandtimems_count"); got < 25 {
			t.Errorf("log flushes %v with flush.messages=1 after 25 appends; want at least 25", got)
		}

		idle := s.must(t, "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent")
		if idle <= 0 || idle > 1 {
			t.Errorf("request handler idle %v; want in (0, 1]", idle)
		}
		if got := s.must(t, "ringbroker_handler_workers"); got != float64(len(b.handlers.all)) {
			t.Errorf("ringbroker_handler_workers %v; want %d", got, len(b.handlers.all))
		}
		if idle := s.must(t, "kafka_network_socketserver_networkprocessoravgidle_percent"); idle <= 0 || idle > 1 {
			t.Errorf("network processor idle %v; want in (0, 1]", idle)
		}
		for i := range len(b.servers[0].RingStats()) {
			if idle := s.must(t, "kafka_network_processor_idle_percent", "listener", b.cfg.Listeners[0].Name, "networkProcessor", strconv.Itoa(i)); idle <= 0 || idle > 1 {
				t.Errorf("network processor %d idle %v; want in (0, 1]", i, idle)
			}
		}
	})
}

// TestCountReplicas counts ReplicaManager's gauges over partitions in every state they tell
// apart.
func TestCountReplicas(t *testing.T) {
	id := meta.UUID{1}
	leader := func(replicas, isr []int32, minISR int) *replicaState {
		return &replicaState{leader: true, leaderID: 1, replicas: replicas, isr: isr, minISR: minISR}
	}
	states := []*replicaState{
		leader([]int32{1, 2, 3}, []int32{1, 2, 3}, 2),                         // healthy
		leader([]int32{1, 2, 3}, []int32{1, 2}, 2),                            // under-replicated, at min ISR
		leader([]int32{1, 2, 3}, []int32{1}, 2),                               // under-replicated, under min ISR
		leader([]int32{1, 2, 4}, []int32{1, 2}, 1),                            // replica 4 being added: not under-replicated
		{leaderID: 2, replicas: []int32{1, 2, 3}, isr: []int32{2}, minISR: 2}, // follower: not counted
	}
	tm := &meta.Topic{Name: "t", ID: id}
	tbl := &partitionTable{byName: map[string][]*partition{}}
	for i, st := range states {
		p := &partition{topic: "t", topicID: id, index: int32(i)}
		p.st.Store(st)
		tbl.byName["t"] = append(tbl.byName["t"], p)
		pm := meta.Partition{Index: int32(i), Leader: st.leaderID, Replicas: st.replicas, ISR: st.isr}
		if i == 3 {
			pm.AddingReplicas = []int32{4}
		}
		tm.Partitions = append(tm.Partitions, pm)
	}
	tbl.byName["t"] = append(tbl.byName["t"], nil) // a partition without a replica here
	im := &meta.Image{Topics: map[string]*meta.Topic{"t": tm}}
	want := replicaCounts{partitions: 5, leaders: 4, underReplicated: 2, underMin: 1, atMin: 1}
	if got := countReplicas(tbl, im); got != want {
		t.Fatalf("countReplicas = %+v; want %+v", got, want)
	}
}

// TestCountImage counts the controller's gauges: a partition without a leader is offline and
// imbalanced, one led by another than its first replica imbalanced.
func TestCountImage(t *testing.T) {
	im := &meta.Image{
		Topics: map[string]*meta.Topic{
			"a": {Name: "a", Partitions: []meta.Partition{{Leader: 1, Replicas: []int32{1, 2}}, {Leader: -1, Replicas: []int32{2, 1}}}},
			"b": {Name: "b", Partitions: []meta.Partition{{Leader: 1, Replicas: []int32{2, 1}}}},
		},
		Brokers: map[int32]meta.Broker{1: {NodeID: 1}, 2: {NodeID: 2, Fenced: true}},
	}
	want := controllerCounts{topics: 2, partitions: 3, offline: 1, imbalanced: 2, liveBrokers: 1, fencedBrokers: 1}
	if got := countImage(im); got != want {
		t.Fatalf("countImage = %+v; want %+v", got, want)
	}
}

// TestLatencyHistBuckets checks that every value lies in its bucket's bounds, and that the
// buckets are in order.
func TestLatencyHistBuckets(t *testing.T) {
	values := []uint64{0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 1000, 1023, 1024, 1 << 20, 1<<35 - 1, 1 << 35}
	for exp := range 36 {
		values = append(values, 1<<exp, 1<<exp+1, 1<<(exp+1)-1)
	}
	for _, us := range values {
		i := histBucket(us)
		lo, hi := histBounds(i)
		if i < 0 || i >= histBuckets || float64(us) < lo || float64(us) >= hi {
			t.Errorf("%d µs: bucket %d [%v, %v)", us, i, lo, hi)
		}
	}
	if i := histBucket(math.MaxUint64); i != histBuckets-1 {
		t.Errorf("the largest value: bucket %d; want the last, %d", i, histBuckets-1)
	}
	for i := 1; i < histBuckets; i++ {
		plo, phi := histBounds(i - 1)
		lo, _ := histBounds(i)
		if phi != lo || plo >= lo {
			t.Errorf("bucket %d starts at %v after bucket %d [%v, %v)", i, lo, i-1, plo, phi)
		}
	}
}

// TestLatencyHistQuantiles checks the percentiles of known observations, within the buckets'
// 12.5%, and that the window forgets what is older than two windows.
func TestLatencyHistQuantiles(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := newLatencyHist(t0)
	for ms := 1; ms <= 1000; ms++ {
		h.observe(time.Duration(ms) * time.Millisecond)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= want/8 }
	count, q := h.quantiles(t0.Add(time.Second))
	if count != 1000 {
		t.Fatalf("count %d; want 1000", count)
	}
	for i, want := range []float64{500, 750, 950, 980, 990, 999} {
		if !near(q[i], want) {
			t.Errorf("quantile %s = %v ms; want %v ± 12.5%%", kafkaQuantiles[i].label, q[i], want)
		}
	}
	// One window on, the old observations are still in it; two windows on, only newer ones.
	if _, q := h.quantiles(t0.Add(histWindow)); !near(q[0], 500) {
		t.Errorf("median one window on = %v; want 500 still", q[0])
	}
	for range 100 {
		h.observe(5 * time.Second)
	}
	count, q = h.quantiles(t0.Add(2 * histWindow))
	if count != 1100 || !near(q[0], 5000) || !near(q[5], 5000) {
		t.Errorf("two windows on: count %d, median %v, p999 %v; want 1100, 5000, 5000", count, q[0], q[5])
	}
	if _, q := h.quantiles(t0.Add(4 * histWindow)); q[0] != 0 {
		t.Errorf("median after two empty windows = %v; want 0", q[0])
	}
}

// TestIdleGauge checks the idle fraction over the first span, then over windows of at least
// idleWindow, and that the idle total never goes back.
func TestIdleGauge(t *testing.T) {
	var g idleGauge
	start := time.Unix(1000, 0)
	total, frac := g.sample(start.Add(10*time.Second), start, 15*time.Second, 2)
	if total != 15*time.Second || frac != 0.75 {
		t.Fatalf("after 10s of 2 workers idle 15s: total %v, fraction %v; want 15s, 0.75", total, frac)
	}
	// A window completes at 30s: 2 workers, 30s idle of 60s.
	if _, frac := g.sample(start.Add(idleWindow), start, 30*time.Second, 2); frac != 0.5 {
		t.Fatalf("first window: fraction %v; want 0.5", frac)
	}
	// Within the next window the last complete one holds.
	if _, frac := g.sample(start.Add(idleWindow+time.Second), start, 30*time.Second, 2); frac != 0.5 {
		t.Fatalf("inside the second window: fraction %v; want 0.5", frac)
	}
	// A total read lower than before (a wait missed) reports the higher one.
	if total, frac := g.sample(start.Add(2*idleWindow), start, 29*time.Second, 2); total != 30*time.Second || frac != 0 {
		t.Fatalf("a lower total: %v, fraction %v; want 30s and 0", total, frac)
	}
}

// TestKafkaAPIName checks the names whose spelling differs between franz-go and Kafka's
// ApiKeys, and a few that do not.
func TestKafkaAPIName(t *testing.T) {
	for key, want := range map[int16]string{0: "Produce", 1: "Fetch", 4: "LeaderAndIsr", 17: "SaslHandshake",
		22: "InitProducerId", 29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 36: "SaslAuthenticate",
		50: "DescribeUserScramCredentials", 51: "AlterUserScramCredentials", 67: "AllocateProducerIds", 68: "ConsumerGroupHeartbeat"} {
		if got := kafkaAPIName(key); got != want {
			t.Errorf("kafkaAPIName(%d) = %q; want %q", key, got, want)
		}
	}
}

// unescapeLabel undoes promLabel, for the tests.
func unescapeLabel(s string) (string, error) {
	sample, err := parseSample(`m{l="` + s + `"} 1`)
	if err != nil {
		return "", err
	}
	return sample.labels["l"], nil
}

func TestPromLabel(t *testing.T) {
	for in, want := range map[string]string{"plain": "plain", `a"b`: `a\"b`, `a\b`: `a\\b`, "a\nb": `a\nb`, "a\xffb": "a\uFFFDb"} {
		if got := promLabel(in); got != want {
			t.Errorf("promLabel(%q) = %q; want %q", in, got, want)
		}
	}
}

// FuzzPromLabel checks that any group id a client sends becomes a label value that parses
// back to it (invalid UTF-8 replaced).
func FuzzPromLabel(f *testing.F) {
	for _, s := range []string{"", "g", `a"b\c`, "x\ny", "\xff\xfe", `\n`, `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := unescapeLabel(promLabel(s))
		if err != nil {
			t.Fatalf("promLabel(%q) = %q does not parse: %v", s, promLabel(s), err)
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); got != want {
			t.Fatalf("promLabel(%q) parses back to %q; want %q", s, got, want)
		}
	})
}
