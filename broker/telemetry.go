package broker

// Client telemetry (KIP-714), as Kafka's ClientMetricsManager: client instances, the
// subscriptions they match, the push interval each is held to, and the metrics they push,
// kept as their latest values and exported on /metrics in Prometheus form:
//
//	kafka_client_<metric name, dots as underscores>{client_instance_id=..., client_id=...,
//	    client_software_name=..., client_software_version=..., client_source_address=...,
//	    <the resource's and the data point's attributes>} <value>
//
// A gauge exports its latest value; a delta sum (clients are told to send deltas, as Kafka
// tells them) the sum of the deltas pushed, so that it is a counter; a cumulative sum its
// latest value. Memory is bounded: at most telemetryMaxInstances client instances (the least
// recently seen is dropped for a new one), telemetrySeriesPerClient series per instance and
// telemetrySeriesTotal over all (further series are dropped and counted), telemetryMaxPoints
// data points per push, telemetryMaxLabels attributes per series. A series not pushed for
// telemetrySeriesLifetime push intervals is removed, and an instance not heard from for
// Kafka's max(60 s, 3 push intervals) with all its series.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/broker/meta"
	"ringbroker/internal/codec"
	"ringbroker/internal/crc32c"
	"ringbroker/internal/otlp"
)

// The bounds of the telemetry state.
const (
	// telemetryMaxInstances is Kafka's CACHE_MAX_SIZE of client instances.
	telemetryMaxInstances = 16384
	// telemetryInstanceExpiry is Kafka's DEFAULT_CACHE_EXPIRY_MS: an instance lives at least
	// this long, and at least 3 push intervals, after its last request.
	telemetryInstanceExpiry = 60 * time.Second
	// telemetrySeriesPerClient and telemetrySeriesTotal bound the series kept.
	telemetrySeriesPerClient = 2000
	telemetrySeriesTotal     = 50000
	// telemetryMaxPoints bounds the data points decoded from one push.
	telemetryMaxPoints = 20000
	// telemetryMaxLabels bounds the attributes of one series, telemetryMaxLabelValue the bytes
	// of an attribute's value (longer ones are cut), telemetryMaxMetricName the bytes of a
	// metric's name (longer ones are dropped).
	telemetryMaxLabels     = 24
	telemetryMaxLabelValue = 256
	telemetryMaxMetricName = 200
	// telemetrySeriesLifetime is how many push intervals a series lives without a new point.
	telemetrySeriesLifetime = 3
	// telemetrySweepEvery bounds how often expired instances and series are looked for.
	telemetrySweepEvery = time.Second
)

// telemetryCompressions are the compression types pushes may use, in Kafka's order of
// preference (SUPPORTED_COMPRESSION_TYPES): a client takes the first it supports.
var telemetryCompressions = []int8{int8(codec.Zstd), int8(codec.LZ4), int8(codec.Gzip), int8(codec.Snappy)}

// clientSoftware is a client's name and version from its ApiVersions request (KIP-511).
type clientSoftware struct{ name, version string }

// clientInfo is what a subscription may match a client on, from its first request: Kafka's
// ClientMetricsInstanceMetadata.
type clientInfo struct {
	clientID        string
	softwareName    string
	softwareVersion string
	address, port   string
}

// unknownSoftware is Kafka's name and version of a client that sent no ApiVersions of v3 or later.
const unknownSoftware = "unknown"

// clientInfo is the request's client as a subscription sees it; its strings do not alias the frame.
func (rc *reqCtx) clientInfo() clientInfo {
	ci := clientInfo{clientID: strings.Clone(rc.hdr.ClientID), softwareName: unknownSoftware, softwareVersion: unknownSoftware,
		address: clientHost(rc.cs)}
	if sw := rc.cs.software.Load(); sw != nil {
		ci.softwareName, ci.softwareVersion = sw.name, sw.version
	}
	if ta, ok := rc.cs.c.RemoteAddr().(*net.TCPAddr); ok {
		ci.port = strconv.Itoa(ta.Port)
	}
	return ci
}

// telemetry is the broker's client telemetry state. Its methods are safe for concurrent use.
type telemetry struct {
	// maxBytes is telemetry.max.bytes: the largest push, compressed or not.
	maxBytes int32
	// now is the clock; tests replace it before the broker serves.
	now    func() time.Time
	codecs *codec.Codecs
	logger *slog.Logger

	mu sync.Mutex
	// subs are the subscriptions of the image's ClientMetrics at subsEpoch (its
	// ClientMetricsEpoch; -1 before the first look), by name.
	subs      []subscription
	subsEpoch int64
	instances map[meta.UUID]*clientInstance
	// series counts the series of every instance (at most telemetrySeriesTotal).
	series    int
	lastSweep time.Time
	// Counters for /metrics, after Kafka's client-metrics sensors.
	throttled, unknownSubscription, exportErrors, seriesDropped uint64
}

// clientInstance is one client instance: its subscription as last evaluated, the times of its
// requests and the series it pushed.
type clientInstance struct {
	id   meta.UUID
	info clientInfo
	// epoch is the subsEpoch the subscription was evaluated at; a newer one re-evaluates it.
	epoch          int64
	subscriptionID int32
	metrics        []string
	interval       time.Duration
	// lastGet and lastPush are the times of the last accepted requests; zero before one.
	lastGet, lastPush time.Time
	terminating       bool
	// lastErr is the error of the last request (nil: none), which decides whether a
	// GetTelemetrySubscriptions before the interval is throttled.
	lastErr *kerr.Error
	// seen is the time of the last request, from which the instance expires.
	seen time.Time
	// labels are the rendered labels every series of the instance starts with.
	labels string
	series map[string]*telemetrySeries
}

// telemetrySeries is the latest value of one metric and attribute set of an instance.
type telemetrySeries struct {
	name    string // the exported name
	labels  string // the rendered labels, without braces
	value   float64
	updated time.Time
}

func newTelemetry(maxBytes int32, logger *slog.Logger) *telemetry {
	return &telemetry{maxBytes: maxBytes, now: time.Now, codecs: codec.New(), logger: logger, subsEpoch: -1,
		instances: map[meta.UUID]*clientInstance{}}
}

// subscriptionAnswer is what GetTelemetrySubscriptions tells a client, or the error it gets.
type subscriptionAnswer struct {
	err            *kerr.Error
	id             meta.UUID
	subscriptionID int32
	metrics        []string
	intervalMs     int32
}

// subscribe answers GetTelemetrySubscriptions of client instance id (zero: a new one is
// assigned) as Kafka's processGetTelemetrySubscriptionRequest: its subscription, or
// THROTTLING_QUOTA_EXCEEDED when it asks again within its push interval (unless its last
// push failed with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE).
func (t *telemetry) subscribe(im *meta.Image, id meta.UUID, info clientInfo) subscriptionAnswer {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.refresh(im)
	t.sweep(now)
	if id.IsZero() {
		id = t.newInstanceID()
	}
	inst := t.instance(id, info, now)
	if now.Sub(later(inst.lastGet, inst.lastPush)) >= inst.interval {
		inst.lastGet = now
	} else if inst.lastErr != kerr.UnknownSubscriptionID && inst.lastErr != kerr.UnsupportedCompressionType {
		t.throttled++
		return subscriptionAnswer{err: kerr.ThrottlingQuotaExceeded}
	}
	inst.lastErr = nil
	return subscriptionAnswer{id: id, subscriptionID: inst.subscriptionID, metrics: inst.metrics, intervalMs: int32(inst.interval / time.Millisecond)}
}

// pushRequest is a PushTelemetry request's fields.
type pushRequest struct {
	id             meta.UUID
	subscriptionID int32
	terminating    bool
	compression    int8
	metrics        []byte
}

// push handles PushTelemetry as Kafka's processPushTelemetryRequest: it refuses a push of a
// reserved instance id (INVALID_REQUEST), after a terminating one (INVALID_REQUEST), within
// the push interval unless terminating (THROTTLING_QUOTA_EXCEEDED), of another subscription
// (UNKNOWN_SUBSCRIPTION_ID), of an unknown compression type (UNSUPPORTED_COMPRESSION_TYPE) or
// above telemetry.max.bytes (TELEMETRY_TOO_LARGE); the metrics of an admitted push are
// decompressed and decoded (INVALID_RECORD when they cannot be, TELEMETRY_TOO_LARGE when they
// grow past telemetry.max.bytes or telemetryMaxPoints) and recorded.
func (t *telemetry) push(im *meta.Image, req pushRequest, info clientInfo) *kerr.Error {
	if req.id.IsZero() || req.id == (meta.UUID{15: 1}) {
		t.logger.Debug("push telemetry refused: invalid client instance id", "client_instance_id", req.id)
		return kerr.InvalidRequest
	}
	if code := t.admit(im, req, info); code != nil {
		return code
	}
	if len(req.metrics) == 0 {
		return nil
	}
	points, code := t.decode(req.compression, req.metrics)
	t.mu.Lock()
	defer t.mu.Unlock()
	inst := t.instances[req.id]
	if code != nil {
		t.exportErrors++
		if inst != nil {
			inst.lastErr = code
		}
		return code
	}
	if inst != nil {
		t.record(inst, points, t.now())
	}
	return nil
}

// admit checks a push against its instance, in Kafka's order, and takes its time as the last
// push when it is accepted. The instance takes the request's terminating flag whatever the
// outcome, as Kafka's does.
func (t *telemetry) admit(im *meta.Image, req pushRequest, info clientInfo) *kerr.Error {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.refresh(im)
	t.sweep(now)
	inst := t.instance(req.id, info, now)
	defer func() { inst.terminating = req.terminating }()
	var code *kerr.Error
	var why string
	// A push right after GetTelemetrySubscriptions is taken whenever it comes: clients jitter
	// their first push between 0.5 and 1.5 intervals.
	inTime := inst.lastGet.After(inst.lastPush) || now.Sub(inst.lastPush) >= inst.interval
	switch {
	case inst.terminating:
		code, why = kerr.InvalidRequest, "the previous push was terminating"
	case !inTime && !req.terminating:
		t.throttled++
		code, why = kerr.ThrottlingQuotaExceeded, "the push arrived before the next push interval"
	}
	if code == nil {
		if inTime {
			inst.lastPush = now
		}
		switch {
		case req.subscriptionID != inst.subscriptionID:
			t.unknownSubscription++
			code, why = kerr.UnknownSubscriptionID, fmt.Sprintf("subscription id %d, the client's is %d", req.subscriptionID, inst.subscriptionID)
		case !codec.Codec(req.compression).Valid():
			code, why = kerr.UnsupportedCompressionType, fmt.Sprintf("compression type %d", req.compression)
		case len(req.metrics) > int(t.maxBytes):
			code, why = kerr.TelemetryTooLarge, fmt.Sprintf("%d bytes of metrics, telemetry.max.bytes is %d", len(req.metrics), t.maxBytes)
		}
	}
	if code != nil {
		inst.lastErr = code
		t.logger.Debug("push telemetry refused", "client_instance_id", req.id, "error", code.Message, "why", why)
	}
	return code
}

// decode decompresses and decodes pushed metrics, without the lock.
func (t *telemetry) decode(compression int8, data []byte) ([]otlp.Point, *kerr.Error) {
	raw, err := t.codecs.Decompress(codec.Codec(compression), data, nil, int(t.maxBytes))
	if err == nil {
		var points []otlp.Point
		if points, err = otlp.Decode(raw, telemetryMaxPoints); err == nil {
			return points, nil
		}
	}
	t.logger.Debug("pushed client metrics refused", "bytes", len(data), "compression", codec.Codec(compression).String(), "err", err)
	if errors.Is(err, codec.ErrDecompressedTooLarge) || errors.Is(err, otlp.ErrTooManyPoints) {
		return nil, kerr.TelemetryTooLarge
	}
	return nil, kerr.InvalidRecord
}

// refresh parses the image's subscriptions when they changed since the last look.
func (t *telemetry) refresh(im *meta.Image) {
	if im.ClientMetricsEpoch == t.subsEpoch {
		return
	}
	t.subs = t.subs[:0]
	for _, name := range slices.Sorted(maps.Keys(im.ClientMetrics)) {
		s, code, msg := parseSubscription(name, im.ClientMetrics[name])
		if code != nil {
			t.logger.Warn("client metrics subscription ignored", "name", name, "error", code.Message, "why", msg)
			continue
		}
		t.subs = append(t.subs, s)
	}
	t.subsEpoch = im.ClientMetricsEpoch
}

// newInstanceID is a new random client instance id, neither reserved nor in use.
func (t *telemetry) newInstanceID() meta.UUID {
	for {
		id := meta.NewUUID()
		if _, used := t.instances[id]; !used {
			return id
		}
	}
}

// instance returns client instance id, created with info when new and with its subscription
// evaluated again (its request times and state reset, as Kafka makes a new instance) when the
// subscriptions changed since; it is seen now.
func (t *telemetry) instance(id meta.UUID, info clientInfo, now time.Time) *clientInstance {
	inst := t.instances[id]
	if inst == nil {
		if len(t.instances) >= telemetryMaxInstances {
			t.sweep(now.Add(telemetrySweepEvery)) // force a sweep
			if len(t.instances) >= telemetryMaxInstances {
				t.evictOldest()
			}
		}
		inst = &clientInstance{id: id, info: info, epoch: -1, series: map[string]*telemetrySeries{}}
		inst.labels = string(renderLabels(nil, [][2]string{
			{selInstanceID, id.String()}, {selClientID, info.clientID}, {selSoftwareName, info.softwareName},
			{selSoftwareVersion, info.softwareVersion}, {selSourceAddress, info.address},
		}))
		t.instances[id] = inst
	}
	if inst.epoch != t.subsEpoch {
		t.evaluate(inst)
	}
	inst.seen = now
	return inst
}

// evaluate computes inst's subscription from the subscriptions it matches, as Kafka's
// createClientInstance: the union of their metrics ("*" alone when one has it), the shortest
// of their intervals and Kafka's default, and the subscription id derived from both.
func (t *telemetry) evaluate(inst *clientInstance) {
	attrs := map[string]string{
		selInstanceID: inst.id.String(), selClientID: inst.info.clientID, selSoftwareName: inst.info.softwareName,
		selSoftwareVersion: inst.info.softwareVersion, selSourceAddress: inst.info.address, selSourcePort: inst.info.port,
	}
	interval := int32(cmIntervalDefault)
	metrics := map[string]bool{}
	for _, s := range t.subs {
		if !s.matches(attrs) {
			continue
		}
		for _, m := range s.metrics {
			metrics[m] = true
		}
		interval = min(interval, s.interval)
	}
	list := slices.Sorted(maps.Keys(metrics))
	if metrics[cmAllMetrics] {
		list = []string{cmAllMetrics}
	}
	inst.epoch, inst.metrics, inst.interval = t.subsEpoch, list, time.Duration(interval)*time.Millisecond
	inst.subscriptionID = subscriptionID(list, interval, inst.id)
	inst.lastGet, inst.lastPush, inst.terminating, inst.lastErr = time.Time{}, time.Time{}, false, nil
}

// subscriptionID is Kafka's computeSubscriptionId: the CRC32C of the metrics as Java prints a
// set ("[a, b]", here in sorted order) followed by the interval, XOR the instance id's Java hash.
func subscriptionID(metrics []string, intervalMs int32, id meta.UUID) int32 {
	crc := crc32c.Checksum([]byte("[" + strings.Join(metrics, ", ") + "]" + strconv.Itoa(int(intervalMs))))
	h := binary.BigEndian.Uint64(id[:8]) ^ binary.BigEndian.Uint64(id[8:])
	return int32(crc) ^ int32(h>>32) ^ int32(h)
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// evictOldest drops the instance seen least recently, for a new one when the cache is full.
func (t *telemetry) evictOldest() {
	var oldest *clientInstance
	for _, inst := range t.instances {
		if oldest == nil || inst.seen.Before(oldest.seen) {
			oldest = inst
		}
	}
	if oldest != nil {
		t.drop(oldest)
	}
}

func (t *telemetry) drop(inst *clientInstance) {
	t.series -= len(inst.series)
	delete(t.instances, inst.id)
}

// sweep removes the instances and series that expired by now, at most once per
// telemetrySweepEvery.
func (t *telemetry) sweep(now time.Time) {
	if now.Sub(t.lastSweep) < telemetrySweepEvery {
		return
	}
	t.lastSweep = now
	for _, inst := range t.instances {
		if now.Sub(inst.seen) > max(telemetryInstanceExpiry, 3*inst.interval) {
			t.drop(inst)
			continue
		}
		for k, s := range inst.series {
			if now.Sub(s.updated) > telemetrySeriesLifetime*inst.interval {
				delete(inst.series, k)
				t.series--
			}
		}
	}
}

// record keeps the latest value of each pushed point's series.
func (t *telemetry) record(inst *clientInstance, points []otlp.Point, now time.Time) {
	var pairs [][2]string
	var key []byte
	for i := range points {
		p := &points[i]
		if len(p.Metric) > telemetryMaxMetricName || p.Metric == "" {
			t.seriesDropped++
			continue
		}
		name := "kafka_client_" + promName(p.Metric)
		pairs = attributePairs(pairs[:0], p)
		rendered := renderLabels(nil, pairs)
		key = append(append(append(key[:0], name...), '{'), rendered...)
		s := inst.series[string(key)]
		if s == nil {
			if len(inst.series) >= telemetrySeriesPerClient || t.series >= telemetrySeriesTotal {
				t.seriesDropped++
				continue
			}
			labels := inst.labels
			if len(rendered) > 0 {
				labels += "," + string(rendered)
			}
			s = &telemetrySeries{name: name, labels: labels}
			inst.series[string(key)] = s
			t.series++
		}
		if p.Kind == otlp.Sum && p.Temporality == otlp.Delta {
			s.value += p.Value
		} else {
			s.value = p.Value
		}
		s.updated = now
	}
}

// attributePairs appends the point's label pairs: the resource's attributes, then the
// point's, by sanitised name, the first of a name kept and the client labels never
// overridden, at most telemetryMaxLabels, sorted by name so that the order they came in does
// not make another series.
func attributePairs(dst [][2]string, p *otlp.Point) [][2]string {
	seen := map[string]bool{selInstanceID: true, selClientID: true, selSoftwareName: true, selSoftwareVersion: true, selSourceAddress: true}
	for _, attrs := range [][]otlp.Attribute{p.Resource, p.Attributes} {
		for _, a := range attrs {
			n := promLabelName(a.Key)
			if seen[n] || len(dst) >= telemetryMaxLabels {
				continue
			}
			seen[n] = true
			dst = append(dst, [2]string{n, cut(a.Value, telemetryMaxLabelValue)})
		}
	}
	slices.SortFunc(dst, func(a, b [2]string) int { return cmp.Compare(a[0], b[0]) })
	return dst
}

// promName is a metric name as Prometheus allows it: every character other than a letter, a
// digit, '_' or ':' becomes '_'.
func promName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == ':' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

// promLabelName is a label name as Prometheus allows it: promName without ':', not starting with
// a digit, and not with "__", which Prometheus reserves.
func promLabelName(s string) string {
	n := strings.ReplaceAll(promName(s), ":", "_")
	if n == "" || n[0] >= '0' && n[0] <= '9' || strings.HasPrefix(n, "__") {
		n = "attr_" + n
	}
	return n
}

// cut shortens s to at most n bytes at a character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// renderLabels appends name="value" pairs, comma-separated, values escaped as Prometheus'
// text format wants them.
func renderLabels(dst []byte, pairs [][2]string) []byte {
	for i, p := range pairs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(append(dst, p[0]...), '=', '"')
		for j := 0; j < len(p[1]); j++ {
			switch c := p[1][j]; c {
			case '\\':
				dst = append(dst, `\\`...)
			case '"':
				dst = append(dst, `\"`...)
			case '\n':
				dst = append(dst, `\n`...)
			default:
				dst = append(dst, c)
			}
		}
		dst = append(dst, '"')
	}
	return dst
}

// writePrometheus writes the pushed client metrics, sorted by name and labels so that each
// metric's series are together, and the state's own counters. It renders under the lock and
// writes after, so a slow scrape holds no push.
func (t *telemetry) writePrometheus(w io.Writer) {
	t.mu.Lock()
	t.sweep(t.now())
	all := make([]*telemetrySeries, 0, t.series)
	for _, inst := range t.instances {
		for _, s := range inst.series {
			all = append(all, s)
		}
	}
	slices.SortFunc(all, func(a, b *telemetrySeries) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.labels, b.labels))
	})
	var buf bytes.Buffer
	for _, s := range all {
		buf.WriteString(s.name)
		buf.WriteByte('{')
		buf.WriteString(s.labels)
		buf.WriteString("} ")
		buf.WriteString(strconv.FormatFloat(s.value, 'g', -1, 64))
		buf.WriteByte('\n')
	}
	fmt.Fprintf(&buf, "ringbroker_client_telemetry_instances %d\n", len(t.instances))
	fmt.Fprintf(&buf, "ringbroker_client_telemetry_series %d\n", t.series)
	fmt.Fprintf(&buf, "ringbroker_client_telemetry_series_dropped_total %d\n", t.seriesDropped)
	fmt.Fprintf(&buf, "ringbroker_client_telemetry_throttled_total %d\n", t.throttled)
	fmt.Fprintf(&buf, "ringbroker_client_telemetry_unknown_subscription_total %d\n", t.unknownSubscription)
	fmt.Fprintf(&buf, "ringbroker_client_telemetry_export_errors_total %d\n", t.exportErrors)
	t.mu.Unlock()
	_, _ = w.Write(buf.Bytes()) // a scrape that went away is not ours to report
}
