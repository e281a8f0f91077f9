package broker

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
	"ringbroker/internal/codec"
	"ringbroker/internal/otlp"
	"ringbroker/internal/testutil"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// useClock makes the broker's telemetry run on clk.
func useClock(b *Broker, clk *fakeClock) {
	b.telemetry.mu.Lock()
	b.telemetry.now = clk.Now
	b.telemetry.mu.Unlock()
}

// metricsPage returns the broker's /metrics page.
func metricsPage(t *testing.T, b *Broker) string {
	t.Helper()
	rec := httptest.NewRecorder()
	b.metrics.handler(b).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// telemetryClient is a raw client with a client id and software name of the test's, which
// does not push metrics of its own.
func telemetryClient(t *testing.T, b *Broker, clientID string) *kgo.Client {
	t.Helper()
	return newClient(t, b, kgo.ClientID(clientID), kgo.SoftwareNameAndVersion("test-client", "1.0"), kgo.DisableClientMetrics())
}

func getSubscriptions(ctx context.Context, t *testing.T, cl *kgo.Client, id [16]byte) *kmsg.GetTelemetrySubscriptionsResponse {
	t.Helper()
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	req.ClientInstanceID = id
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func pushTelemetry(ctx context.Context, t *testing.T, cl *kgo.Client, id [16]byte, sub int32, compression codec.Codec, terminating bool, metrics []byte) int16 {
	t.Helper()
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID, req.SubscriptionID, req.CompressionType, req.Terminating, req.Metrics = id, sub, int8(compression), terminating, metrics
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.ErrorCode
}

// otlpPush is an OTLP payload with a delta counter and a gauge, as a Java producer pushes
// them.
func otlpPush(sent, latency float64) []byte {
	return otlp.AppendMetricsData(nil, []otlp.Attribute{{Key: "client_rack", Value: "r1"}}, []otlp.Point{
		{Metric: "org.apache.kafka.producer.record.send.total", Kind: otlp.Sum, Temporality: otlp.Delta, Monotonic: true, Value: sent},
		{Metric: "org.apache.kafka.producer.node.request.latency.avg", Kind: otlp.Gauge, Value: latency,
			Attributes: []otlp.Attribute{{Key: "node_id", Value: "1"}}},
	})
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).(*kerr.Error).Message
}

// TestTelemetrySubscriptions: GetTelemetrySubscriptions assigns instance ids and answers each
// client the subscriptions it matches (by client id and software name here), with Kafka's
// interval, compression types, limit and temporality; a new subscription changes the
// subscription id at once; asking again within the interval is throttled. Without
// metrics.listen neither telemetry API is advertised.
func TestTelemetrySubscriptions(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		b := startBroker(t, backend, t.TempDir(), "metrics.listen=127.0.0.1:0")
		clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
		useClock(b, clk)
		admin, ctx := configResourcesClient(t, b)
		if code, msg := alterClientMetricsReq(ctx, t, admin, "apps", false, cmOp(opSet, "metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator"),
			cmOp(opSet, "interval.ms", "1000"), cmOp(opSet, "match", "client_id=app-.*")); code != 0 {
			t.Fatalf("create subscription: %d %s", code, msg)
		}
		app, other := telemetryClient(t, b, "app-1"), telemetryClient(t, b, "other")

		resp := getSubscriptions(ctx, t, app, [16]byte{})
		if resp.ErrorCode != 0 || resp.ClientInstanceID == ([16]byte{}) {
			t.Fatalf("first GetTelemetrySubscriptions: error %s, instance id %x", errName(resp.ErrorCode), resp.ClientInstanceID)
		}
		appID, appSub := resp.ClientInstanceID, resp.SubscriptionID
		if !slices.Equal(resp.RequestedMetrics, []string{"org.apache.kafka.consumer.coordinator", "org.apache.kafka.producer."}) ||
			resp.PushIntervalMillis != 1000 || !slices.Equal(resp.AcceptedCompressionTypes, []int8{4, 3, 1, 2}) ||
			resp.TelemetryMaxBytes != 1<<20 || !resp.DeltaTemporality {
			t.Fatalf("subscription of app-1: %+v", resp)
		}
		if want := subscriptionID(resp.RequestedMetrics, 1000, meta.UUID(appID)); appSub != want {
			t.Fatalf("subscription id %d, want %d", appSub, want)
		}

		resp = getSubscriptions(ctx, t, other, [16]byte{})
		if resp.ErrorCode != 0 || len(resp.RequestedMetrics) != 0 || resp.PushIntervalMillis != 300000 {
			t.Fatalf("subscription of a client no subscription matches: %+v", resp)
		}
		otherID := resp.ClientInstanceID
		if otherID == appID {
			t.Fatal("two clients were given the same instance id")
		}

		// Within the interval, a client asking again is throttled.
		if resp = getSubscriptions(ctx, t, app, appID); resp.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
			t.Fatalf("GetTelemetrySubscriptions within the interval: %s", errName(resp.ErrorCode))
		}
		clk.advance(time.Second)
		if resp = getSubscriptions(ctx, t, app, appID); resp.ErrorCode != 0 || resp.SubscriptionID != appSub {
			t.Fatalf("GetTelemetrySubscriptions after the interval: %s, subscription %d (was %d)", errName(resp.ErrorCode), resp.SubscriptionID, appSub)
		}

		// A new subscription for every test-client is answered at once, with "*" alone and the
		// shortest interval; the subscription id changes.
		if code, msg := alterClientMetricsReq(ctx, t, admin, "everyone", false, cmOp(opSet, "metrics", "*"),
			cmOp(opSet, "interval.ms", "500"), cmOp(opSet, "match", "client_software_name=test-client,client_software_version=1\\..*")); code != 0 {
			t.Fatalf("create subscription: %d %s", code, msg)
		}
		resp = getSubscriptions(ctx, t, app, appID)
		if resp.ErrorCode != 0 || !slices.Equal(resp.RequestedMetrics, []string{"*"}) || resp.PushIntervalMillis != 500 || resp.SubscriptionID == appSub {
			t.Fatalf("after a new subscription: %+v (subscription id was %d)", resp, appSub)
		}
		resp = getSubscriptions(ctx, t, other, otherID)
		if resp.ErrorCode != 0 || !slices.Equal(resp.RequestedMetrics, []string{"*"}) || resp.PushIntervalMillis != 500 {
			t.Fatalf("other after a new subscription: %+v", resp)
		}

		versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		quiet := startBroker(t, backend, t.TempDir())
		qv, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, newClient(t, quiet))
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []int16{kmsg.GetTelemetrySubscriptions.Int16(), kmsg.PushTelemetry.Int16()} {
			has := func(r *kmsg.ApiVersionsResponse) bool {
				return slices.ContainsFunc(r.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == key })
			}
			if !has(versions) || has(qv) {
				t.Errorf("key %d advertised with metrics.listen: %v, without: %v; want true, false", key, has(versions), has(qv))
			}
		}
	})
}

// TestPushTelemetry: pushes of every compression type are taken and their metrics appear on
// /metrics, delta sums added up and gauges at their latest value; pushes are refused with
// Kafka's errors when early, of an old subscription, of an unknown compression, too large
// (compressed or once decompressed), not OTLP, after a terminating push, or of a reserved
// instance id; a client's series expire once it stops pushing.
func TestPushTelemetry(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		b := startBroker(t, backend, t.TempDir(), "metrics.listen=127.0.0.1:0", "telemetry.max.bytes=4096")
		clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
		useClock(b, clk)
		admin, ctx := configResourcesClient(t, b)
		if code, msg := alterClientMetricsReq(ctx, t, admin, "producers", false, cmOp(opSet, "metrics", "org.apache.kafka.producer."),
			cmOp(opSet, "interval.ms", "1000"), cmOp(opSet, "match", "client_id=app-.*")); code != 0 {
			t.Fatalf("create subscription: %d %s", code, msg)
		}
		cl := telemetryClient(t, b, "app-1")
		resp := getSubscriptions(ctx, t, cl, [16]byte{})
		id, sub := resp.ClientInstanceID, resp.SubscriptionID
		push := func(sub int32, c codec.Codec, terminating bool, metrics []byte) string {
			t.Helper()
			if c != codec.None {
				var err error
				if metrics, err = codec.New().Compress(c, metrics, nil); err != nil {
					t.Fatal(err)
				}
			}
			return errName(pushTelemetry(ctx, t, cl, id, sub, c, terminating, metrics))
		}
		expect := func(what, got, want string) {
			t.Helper()
			if got != want {
				t.Fatalf("%s: %s, want %s", what, got, want)
			}
		}

		labels := fmt.Sprintf(`client_instance_id=%q,client_id="app-1",client_software_name="test-client",client_software_version="1.0",client_source_address="127.0.0.1",client_rack="r1"`,
			meta.UUID(id).String())
		sendTotal := "kafka_client_org_apache_kafka_producer_record_send_total{" + labels + "} "
		latency := "kafka_client_org_apache_kafka_producer_node_request_latency_avg{" + labels + `,node_id="1"} `
		var total float64
		for i, c := range []codec.Codec{codec.Zstd, codec.None, codec.Gzip, codec.Snappy, codec.LZ4} {
			// The first push right after GetTelemetrySubscriptions is taken at once; later ones
			// once the interval passed.
			if i > 0 {
				expect("push within the interval", push(sub, c, false, otlpPush(1, 0)), "THROTTLING_QUOTA_EXCEEDED")
				clk.advance(time.Second)
			}
			total += float64(i + 1)
			expect(c.String()+" push", push(sub, c, false, otlpPush(float64(i+1), float64(10*i))), "NONE")
			page := metricsPage(t, b)
			if !strings.Contains(page, fmt.Sprintf("%s%g\n", sendTotal, total)) || !strings.Contains(page, fmt.Sprintf("%s%g\n", latency, float64(10*i))) {
				t.Fatalf("after the %s push, /metrics lacks %s%g and %s%d:\n%s", c, sendTotal, total, latency, 10*i, telemetryLines(page))
			}
		}

		clk.advance(time.Second)
		expect("push of an old subscription", push(sub+1, codec.None, false, otlpPush(1, 1)), "UNKNOWN_SUBSCRIPTION_ID")
		// After UNKNOWN_SUBSCRIPTION_ID, the client may ask for its subscription at once.
		if r := getSubscriptions(ctx, t, cl, id); r.ErrorCode != 0 || r.SubscriptionID != sub {
			t.Fatalf("GetTelemetrySubscriptions after UNKNOWN_SUBSCRIPTION_ID: %s, subscription %d", errName(r.ErrorCode), r.SubscriptionID)
		}
		clk.advance(time.Second)
		expect("push of compression type 9", errName(pushTelemetry(ctx, t, cl, id, sub, 9, false, otlpPush(1, 1))), "UNSUPPORTED_COMPRESSION_TYPE")
		clk.advance(time.Second)
		expect("push of 4097 bytes", push(sub, codec.None, false, make([]byte, 4097)), "TELEMETRY_TOO_LARGE")
		clk.advance(time.Second)
		big := otlp.AppendMetricsData(nil, []otlp.Attribute{{Key: "pad", Value: strings.Repeat("x", 8000)}}, nil)
		expect("push of 8 KiB compressed to less than 4 KiB", push(sub, codec.Gzip, false, big), "TELEMETRY_TOO_LARGE")
		clk.advance(time.Second)
		expect("push of bytes that are not OTLP", push(sub, codec.None, false, []byte{0x0b, 1, 2}), "INVALID_RECORD")
		clk.advance(time.Second)
		expect("push of bytes that are not gzip", errName(pushTelemetry(ctx, t, cl, id, sub, codec.Gzip, false, []byte("plain"))), "INVALID_RECORD")

		// A terminating push is taken within the interval; nothing is after it.
		expect("terminating push", push(sub, codec.None, true, otlpPush(1, 99)), "NONE")
		expect("push after the terminating one", push(sub, codec.None, true, otlpPush(1, 99)), "INVALID_REQUEST")
		expect("push of the zero instance id", errName(pushTelemetry(ctx, t, cl, [16]byte{}, sub, codec.None, false, nil)), "INVALID_REQUEST")
		// The refused pushes took five intervals: the series expired and start again.
		if page := metricsPage(t, b); !strings.Contains(page, sendTotal+"1\n") || !strings.Contains(page, latency+"99\n") {
			t.Fatalf("the terminating push's metrics are not on /metrics:\n%s", telemetryLines(page))
		}

		// Three intervals without a push and the series are gone; a minute and the instance.
		clk.advance(3*time.Second + time.Millisecond)
		if page := metricsPage(t, b); strings.Contains(page, "kafka_client_") || !strings.Contains(page, "ringbroker_client_telemetry_instances 1\n") {
			t.Fatalf("after three intervals without a push:\n%s", telemetryLines(page))
		}
		clk.advance(time.Minute)
		if page := metricsPage(t, b); !strings.Contains(page, "ringbroker_client_telemetry_instances 0\n") {
			t.Fatalf("after a minute without a request:\n%s", telemetryLines(page))
		}
	})
}

// telemetryLines is the telemetry part of a /metrics page, for failure messages.
func telemetryLines(page string) string {
	var out []string
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "kafka_client_") || strings.HasPrefix(l, "ringbroker_client_telemetry") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestFranzGoPushesTelemetry: franz-go's own KIP-714 pusher, another encoder of OTLP than the
// test's, gets its subscription and pushes metrics that appear on /metrics under its client id.
func TestFranzGoPushesTelemetry(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "netpoll", t.TempDir(), "metrics.listen=127.0.0.1:0")
	admin, ctx := configResourcesClient(t, b)
	// franz-go takes "*", which Kafka and Java use for every metric, as a literal prefix.
	if code, msg := alterClientMetricsReq(ctx, t, admin, "producers", false, cmOp(opSet, "metrics", "org.apache.kafka.producer."), cmOp(opSet, "interval.ms", "100")); code != 0 {
		t.Fatalf("create subscription: %d %s", code, msg)
	}
	cl := newClient(t, b, kgo.ClientID("franz-pusher"), kgo.DefaultProduceTopic("telemetry"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	series := regexp.MustCompile(`(?m)^kafka_client_org_apache_kafka_producer_connection_creation_total\{[^}]*client_id="franz-pusher"[^}]*\} [1-9]`)
	testutil.WaitFor(t, 20*time.Second, func() error {
		if page := metricsPage(t, b); !series.MatchString(page) {
			return fmt.Errorf("no producer connection creation total of franz-pusher on /metrics:\n%s", telemetryLines(page))
		}
		return nil
	})
}

// TestTelemetryBounds: the state keeps at most telemetrySeriesPerClient series per client and
// telemetrySeriesTotal over all, counting what it drops, turns names and attributes into valid
// Prometheus names and escaped values without letting a client's attributes replace the
// broker's labels, and keeps at most telemetryMaxInstances instances, dropping the least
// recently seen.
func TestTelemetryBounds(t *testing.T) {
	tel := newTelemetry(1<<20, slog.New(slog.DiscardHandler))
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	tel.now = clk.Now
	info := clientInfo{clientID: "c", softwareName: "s", softwareVersion: "1", address: "10.0.0.1", port: "5000"}

	points := func(n int, prefix string) []otlp.Point {
		out := make([]otlp.Point, n)
		for i := range out {
			out[i] = otlp.Point{Metric: "m", Kind: otlp.Gauge, Value: float64(i), Attributes: []otlp.Attribute{{Key: "i", Value: fmt.Sprint(prefix, i)}}}
		}
		return out
	}
	tel.mu.Lock()
	for i := range telemetrySeriesTotal/telemetrySeriesPerClient + 1 {
		inst := tel.instance(meta.NewUUID(), info, clk.Now())
		tel.record(inst, points(telemetrySeriesPerClient+10, fmt.Sprint(i, "-")), clk.Now())
		if len(inst.series) > telemetrySeriesPerClient {
			t.Fatalf("instance %d keeps %d series", i, len(inst.series))
		}
	}
	if tel.series != telemetrySeriesTotal {
		t.Fatalf("%d series kept, want the cap %d", tel.series, telemetrySeriesTotal)
	}
	wantDropped := uint64((telemetrySeriesTotal/telemetrySeriesPerClient)*10 + telemetrySeriesPerClient + 10)
	if tel.seriesDropped != wantDropped {
		t.Fatalf("%d series dropped, want %d", tel.seriesDropped, wantDropped)
	}
	tel.mu.Unlock()

	tel = newTelemetry(1<<20, slog.New(slog.DiscardHandler))
	tel.now = clk.Now
	tel.mu.Lock()
	id := meta.NewUUID()
	inst := tel.instance(id, info, clk.Now())
	tel.record(inst, []otlp.Point{{Metric: "org.apache.kafka/client-x:y", Kind: otlp.Gauge, Value: 2,
		Resource: []otlp.Attribute{{Key: "client_id", Value: "forged"}, {Key: "9lives", Value: "a\"b\\c\nd"}, {Key: "__name__", Value: "x"}}}}, clk.Now())
	tel.mu.Unlock()
	var page bytes.Buffer
	tel.writePrometheus(&page)
	want := fmt.Sprintf(`kafka_client_org_apache_kafka_client_x:y{client_instance_id=%q,client_id="c",client_software_name="s",client_software_version="1",client_source_address="10.0.0.1",attr_9lives="a\"b\\c\nd",attr___name__="x"} 2`+"\n", id.String())
	if !strings.HasPrefix(page.String(), want) {
		t.Fatalf("/metrics starts\n%s\nwant\n%s", page.String(), want)
	}

	tel.mu.Lock()
	defer tel.mu.Unlock()
	first := meta.NewUUID()
	tel.instance(first, info, clk.Now())
	for range telemetryMaxInstances - len(tel.instances) {
		clk.advance(time.Millisecond)
		tel.instance(meta.NewUUID(), info, clk.Now())
	}
	if len(tel.instances) != telemetryMaxInstances {
		t.Fatalf("%d instances, want %d", len(tel.instances), telemetryMaxInstances)
	}
	tel.instance(id, info, clk.Now()) // seen again: no longer the oldest
	tel.instance(meta.NewUUID(), info, clk.Now())
	if _, ok := tel.instances[first]; ok || len(tel.instances) != telemetryMaxInstances {
		t.Fatalf("a new instance past the cap: %d instances, the least recently seen kept: %v", len(tel.instances), ok)
	}
}

// promLine is a sample line of the Prometheus text format with labels.
var promLine = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*")*\} \S+$`)

// FuzzTelemetryRecord: whatever OTLP a client pushes, the series recorded from it render as
// valid Prometheus sample lines, with no label name twice and none starting with "__", and
// stay within the bounds.
func FuzzTelemetryRecord(f *testing.F) {
	f.Add(otlpPush(3, 1.5))
	f.Add(otlp.AppendMetricsData(nil, []otlp.Attribute{{Key: "a\"b", Value: "x\\y\nz"}, {Key: "", Value: ""}, {Key: "client_id", Value: "x"}},
		[]otlp.Point{{Metric: "é.ü/1", Kind: otlp.Gauge, Value: 1, Attributes: []otlp.Attribute{{Key: "__x", Value: "\xff"}, {Key: "1", Value: "2"}}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		points, err := otlp.Decode(data, telemetryMaxPoints)
		if err != nil {
			return
		}
		tel := newTelemetry(1<<20, slog.New(slog.DiscardHandler))
		tel.mu.Lock()
		inst := tel.instance(meta.NewUUID(), clientInfo{clientID: "c\"1", softwareName: "s", softwareVersion: "1", address: "::1"}, time.Unix(1, 0))
		tel.record(inst, points, time.Unix(1, 0))
		if tel.series > telemetrySeriesPerClient || tel.series != len(inst.series) {
			t.Fatalf("%d series counted, %d kept", tel.series, len(inst.series))
		}
		tel.mu.Unlock()
		var page bytes.Buffer
		tel.writePrometheus(&page)
		for _, l := range strings.Split(strings.TrimSuffix(page.String(), "\n"), "\n") {
			if strings.HasPrefix(l, "ringbroker_") {
				continue
			}
			if !promLine.MatchString(l) {
				t.Fatalf("not a Prometheus sample line: %q", l)
			}
			seen := map[string]bool{}
			for _, name := range labelNames(l[strings.IndexByte(l, '{')+1:]) {
				if seen[name] || strings.HasPrefix(name, "__") {
					t.Fatalf("label %q twice or reserved in %q", name, l)
				}
				seen[name] = true
			}
		}
	})
}

// labelNames returns the label names of a well-formed label set (after its '{').
func labelNames(s string) []string {
	var names []string
	for len(s) > 0 && s[0] != '}' {
		eq := strings.Index(s, "=\"")
		names = append(names, strings.TrimPrefix(s[:eq], ","))
		i := eq + 2
		for s[i] != '"' {
			if s[i] == '\\' {
				i++
			}
			i++
		}
		s = s[i+1:]
	}
	return names
}
