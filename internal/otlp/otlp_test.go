package otlp

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"unicode/utf8"
)

var samplePoints = []Point{
	{Metric: "org.apache.kafka.producer.record.send.total", Kind: Sum, Temporality: Delta, Monotonic: true,
		Attributes: []Attribute{{"client_id", "p-1"}}, Value: 42, TimeUnixNano: 1_700_000_000_000_000_000},
	{Metric: "org.apache.kafka.producer.node.request.latency.avg", Kind: Gauge,
		Attributes: []Attribute{{"node_id", "1"}, {"topic", "t"}}, Value: 1.5, TimeUnixNano: 7},
	{Metric: "org.apache.kafka.producer.connection.creation.total", Kind: Sum, Temporality: Cumulative, Value: -3},
}

var sampleResource = []Attribute{{"client_rack", "r1"}, {"service.name", "app"}}

// TestDecodeRoundTrip: what AppendMetricsData writes, Decode reads back point for point,
// each with the resource's attributes.
func TestDecodeRoundTrip(t *testing.T) {
	got, err := Decode(AppendMetricsData(nil, sampleResource, samplePoints), 100)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]Point, len(samplePoints))
	for i, p := range samplePoints {
		p.Resource = sampleResource
		want[i] = p
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", got, want)
	}
}

// TestDecodeFields covers what AppendMetricsData does not write: integer values, attribute
// values of every scalar type and non-scalar ones left out, a resource after its scopes,
// unknown fields of every wire type skipped, histograms and points without a value left out,
// and invalid UTF-8 replaced.
func TestDecodeFields(t *testing.T) {
	anyValue := func(num int, wt int, v uint64, s string) []byte {
		switch wt {
		case wireBytes:
			return appendBytes(nil, num, []byte(s))
		case wireFixed64:
			return appendFixed64(nil, num, v)
		}
		return appendVarint(nil, num, v)
	}
	kv := func(key string, value []byte) []byte {
		return appendBytes(appendBytes(nil, 1, []byte(key)), 2, value)
	}
	var dp []byte
	minus7, minus12 := int64(-7), int64(-12)
	dp = appendFixed64(dp, 6, uint64(minus7)) // as_int
	dp = appendBytes(dp, 7, kv("s", anyValue(1, wireBytes, 0, "x\xffy")))
	dp = appendBytes(dp, 7, kv("b", anyValue(2, wireVarint, 1, "")))
	dp = appendBytes(dp, 7, kv("i", anyValue(3, wireVarint, uint64(minus12), "")))
	dp = appendBytes(dp, 7, kv("d", anyValue(4, wireFixed64, math.Float64bits(0.25), "")))
	dp = appendBytes(dp, 7, kv("arr", anyValue(5, wireBytes, 0, "")))     // array_value: left out
	dp = appendBytes(dp, 7, kv("raw", anyValue(7, wireBytes, 0, "\x00"))) // bytes_value: left out
	dp = appendKey(dp, 15, wireFixed32)
	dp = append(dp, 1, 2, 3, 4) // unknown fixed32
	dp = appendVarint(dp, 8, 0) // flags
	noValue := appendFixed64(nil, 3, 1)
	flagged := appendVarint(appendFixed64(nil, 4, math.Float64bits(9)), 8, noRecordedValue)

	sum := appendBytes(nil, 1, dp)
	sum = appendBytes(sum, 1, noValue)
	sum = appendBytes(sum, 1, flagged)
	sum = appendVarint(sum, 2, uint64(Cumulative))
	sum = appendVarint(sum, 3, 1)
	metric := appendBytes(nil, 7, sum)
	metric = appendBytes(metric, 2, []byte("a description"))
	metric = appendBytes(metric, 1, []byte("m\xc3"))
	histogram := appendBytes(appendBytes(nil, 1, []byte("h")), 9, appendBytes(nil, 1, nil))
	scope := appendBytes(nil, 1, appendBytes(nil, 1, []byte("scope name")))
	scope = appendBytes(scope, 2, metric)
	scope = appendBytes(scope, 2, histogram)
	rm := appendBytes(nil, 2, scope)
	rm = appendBytes(rm, 3, []byte("schema url"))
	rm = appendBytes(rm, 1, appendVarint(appendBytes(nil, 1, kv("host", anyValue(1, wireBytes, 0, "h1"))), 2, 0))
	data := appendVarint(nil, 99, 5) // unknown varint before the resource metrics
	data = appendBytes(data, 1, rm)

	got, err := Decode(data, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []Point{{
		Metric: "m\uFFFD", Kind: Sum, Temporality: Cumulative, Monotonic: true,
		Resource:   []Attribute{{"host", "h1"}},
		Attributes: []Attribute{{"s", "x\uFFFDy"}, {"b", "true"}, {"i", "-12"}, {"d", "0.25"}},
		Value:      -7,
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", got, want)
	}
}

// TestDecodeErrors: malformed bytes and too many points are errors of their kind, never a
// panic or a partial result.
func TestDecodeErrors(t *testing.T) {
	good := AppendMetricsData(nil, sampleResource, samplePoints)
	for _, c := range []struct {
		name  string
		data  []byte
		limit int
		want  error
	}{
		{"truncated", good[:len(good)-3], 100, ErrMalformed},
		{"length past the end", []byte{0x0a, 0x05, 0x00}, 100, ErrMalformed},
		{"field number zero", []byte{0x02, 0x00}, 100, ErrMalformed},
		{"group wire type", []byte{0x0b}, 100, ErrMalformed},
		{"resource metrics as a varint", []byte{0x08, 0x01}, 100, ErrMalformed},
		{"unterminated varint", []byte{0x08, 0xff}, 100, ErrMalformed},
		{"fixed64 cut short", []byte{0x09, 1, 2, 3}, 100, ErrMalformed},
		{"too many points", good, 2, ErrTooManyPoints},
	} {
		got, err := Decode(c.data, c.limit)
		if !errors.Is(err, c.want) || got != nil {
			t.Errorf("%s: %d points, error %v; want %v", c.name, len(got), err, c.want)
		}
	}
	if got, err := Decode(nil, 1); err != nil || len(got) != 0 {
		t.Errorf("empty message: %v, %v; want no points", got, err)
	}
}

// FuzzDecode: any input decodes or fails with ErrMalformed or ErrTooManyPoints, never
// panicking, within the point limit, with valid UTF-8 strings and known kinds; a successful
// decode is stable when encoded again.
func FuzzDecode(f *testing.F) {
	f.Add(AppendMetricsData(nil, sampleResource, samplePoints))
	f.Add(AppendMetricsData(nil, nil, samplePoints[:1]))
	f.Add([]byte{0x0a, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 64
		points, err := Decode(data, limit)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooManyPoints) {
				t.Fatalf("error of no known kind: %v", err)
			}
			return
		}
		if len(points) > limit {
			t.Fatalf("%d points past the limit %d", len(points), limit)
		}
		for _, p := range points {
			if p.Kind != Gauge && p.Kind != Sum {
				t.Fatalf("point of kind %d", p.Kind)
			}
			for _, s := range append([]Attribute{{p.Metric, ""}}, append(p.Attributes, p.Resource...)...) {
				if !utf8.ValidString(s.Key) || !utf8.ValidString(s.Value) {
					t.Fatalf("invalid UTF-8 in %q=%q", s.Key, s.Value)
				}
			}
		}
		// Per point, re-encoding and decoding again gives the same point (NaN aside).
		for _, p := range points {
			if math.IsNaN(p.Value) {
				continue
			}
			again, err := Decode(AppendMetricsData(nil, p.Resource, []Point{p}), 1)
			if err != nil || len(again) != 1 {
				t.Fatalf("re-encoded point %+v: %v, %d points", p, err, len(again))
			}
			p.Resource, again[0].Resource = nil, nil
			if p.Kind == Gauge {
				p.Temporality, p.Monotonic = 0, false
			}
			if p.Attributes == nil && again[0].Attributes != nil || !reflect.DeepEqual(p, again[0]) {
				t.Fatalf("re-encoded point %+v decodes as %+v", p, again[0])
			}
		}
	})
}
