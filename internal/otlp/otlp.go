// Package otlp decodes the part of OpenTelemetry's OTLP metrics protobuf (MetricsData of
// opentelemetry-proto's metrics/v1) that KIP-714 clients push in PushTelemetry: resource
// attributes, metric names, and the data points of gauges and sums with their attributes,
// values and times. Everything else (scopes, descriptions, units, histograms, summaries,
// exemplars) is skipped as unknown fields are.
//
// It is a hand-written decoder of the protobuf wire format for these few messages, rather
// than the generated go.opentelemetry.io/proto/otlp with google.golang.org/protobuf behind
// it: the broker needs a dozen fields and a bound on what a peer's bytes may cost.
package otlp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind is the type of a metric's data.
type Kind uint8

// The metric kinds decoded; other kinds' points are skipped.
const (
	// Gauge is a value sampled at a time.
	Gauge Kind = iota + 1
	// Sum is a sum over time: a counter when monotonic.
	Sum
)

// Temporality is a Sum's AggregationTemporality.
type Temporality int32

// The aggregation temporalities of OTLP.
const (
	TemporalityUnspecified Temporality = 0
	// Delta points carry the change since the previous point of the series.
	Delta Temporality = 1
	// Cumulative points carry the total since the series' start time.
	Cumulative Temporality = 2
)

// Attribute is one key and value of a resource or a data point. Values that are not scalars
// (arrays, key-value lists, bytes) are not decoded: such attributes are left out.
type Attribute struct {
	Key, Value string
}

// Point is one data point of a gauge or a sum, with what it needs from the messages around it.
// Strings are valid UTF-8 (invalid bytes replaced) and do not alias the input.
type Point struct {
	// Metric is the metric's name.
	Metric string
	Kind   Kind
	// Temporality and Monotonic describe a Sum; zero for a Gauge.
	Temporality Temporality
	Monotonic   bool
	// Resource are the attributes of the resource the point belongs to, shared by the points
	// of one ResourceMetrics (callers must not modify them).
	Resource []Attribute
	// Attributes are the point's own attributes.
	Attributes []Attribute
	// Value is the point's value; an integer point's is converted.
	Value float64
	// TimeUnixNano is when the value was recorded.
	TimeUnixNano uint64
}

// Errors Decode wraps with the position and field where it stopped.
var (
	// ErrMalformed says the bytes are not a valid encoding of MetricsData.
	ErrMalformed = errors.New("malformed OTLP metrics")
	// ErrTooManyPoints says the message holds more data points than the caller allows.
	ErrTooManyPoints = errors.New("too many OTLP data points")
)

// The wire types of the protobuf encoding.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// noRecordedValue is DataPointFlags.FLAG_NO_RECORDED_VALUE: the point has no value.
const noRecordedValue = 1

// Decode parses an OTLP MetricsData message and returns its gauge and sum data points, at
// most maxPoints of them (ErrTooManyPoints past that). Points that carry no value are left out.
func Decode(data []byte, maxPoints int) ([]Point, error) {
	d := decoder{limit: maxPoints}
	err := eachField(data, func(num int, wt int, v uint64, b []byte) error {
		if num != 1 { // MetricsData.resource_metrics
			return nil
		}
		if err := want(num, wt, wireBytes); err != nil {
			return err
		}
		return d.resourceMetrics(b)
	})
	if err != nil {
		return nil, fmt.Errorf("decode OTLP MetricsData (%d bytes): %w", len(data), err)
	}
	return d.points, nil
}

// decoder collects the points of one message.
type decoder struct {
	limit  int
	points []Point
}

// resourceMetrics decodes ResourceMetrics { Resource resource = 1; repeated ScopeMetrics
// scope_metrics = 2; }. The resource may follow the scopes on the wire, so the scopes are
// decoded after it is known.
func (d *decoder) resourceMetrics(b []byte) error {
	var resource []Attribute
	var scopes [][]byte
	err := eachField(b, func(num int, wt int, v uint64, f []byte) error {
		switch num {
		case 1:
			if err := want(num, wt, wireBytes); err != nil {
				return err
			}
			return eachField(f, func(num int, wt int, v uint64, kv []byte) error {
				if num != 1 { // Resource.attributes
					return nil
				}
				if err := want(num, wt, wireBytes); err != nil {
					return err
				}
				a, ok, err := keyValue(kv)
				if ok {
					resource = append(resource, a)
				}
				return err
			})
		case 2:
			if err := want(num, wt, wireBytes); err != nil {
				return err
			}
			scopes = append(scopes, f)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("resource metrics: %w", err)
	}
	for _, s := range scopes {
		err := eachField(s, func(num int, wt int, v uint64, m []byte) error {
			if num != 2 { // ScopeMetrics.metrics
				return nil
			}
			if err := want(num, wt, wireBytes); err != nil {
				return err
			}
			return d.metric(m, resource)
		})
		if err != nil {
			return fmt.Errorf("scope metrics: %w", err)
		}
	}
	return nil
}

// metric decodes Metric { string name = 1; Gauge gauge = 5; Sum sum = 7; }, the name and the
// data in whichever order they come.
func (d *decoder) metric(b []byte, resource []Attribute) error {
	var name string
	var kind Kind
	var data []byte
	err := eachField(b, func(num int, wt int, v uint64, f []byte) error {
		switch num {
		case 1:
			if err := want(num, wt, wireBytes); err != nil {
				return err
			}
			name = text(f)
		case 5, 7:
			if err := want(num, wt, wireBytes); err != nil {
				return err
			}
			kind, data = Gauge, f
			if num == 7 {
				kind = Sum
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("metric: %w", err)
	}
	if kind == 0 {
		return nil
	}
	// Gauge { repeated NumberDataPoint data_points = 1; } and Sum { repeated NumberDataPoint
	// data_points = 1; AggregationTemporality aggregation_temporality = 2; bool is_monotonic = 3; }
	var temporality Temporality
	var monotonic bool
	var dataPoints [][]byte
	err = eachField(data, func(num int, wt int, v uint64, f []byte) error {
		switch {
		case num == 1:
			if err := want(num, wt, wireBytes); err != nil {
				return err
			}
			dataPoints = append(dataPoints, f)
		case num == 2 && kind == Sum:
			if err := want(num, wt, wireVarint); err != nil {
				return err
			}
			temporality = Temporality(int32(v))
		case num == 3 && kind == Sum:
			if err := want(num, wt, wireVarint); err != nil {
				return err
			}
			monotonic = v != 0
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("metric %q: %w", name, err)
	}
	for _, dp := range dataPoints {
		p, ok, err := numberDataPoint(dp)
		if err != nil {
			return fmt.Errorf("metric %q: %w", name, err)
		}
		if !ok {
			continue
		}
		if len(d.points) >= d.limit {
			return fmt.Errorf("%w: more than %d", ErrTooManyPoints, d.limit)
		}
		p.Metric, p.Kind, p.Resource = name, kind, resource
		if kind == Sum {
			p.Temporality, p.Monotonic = temporality, monotonic
		}
		d.points = append(d.points, p)
	}
	return nil
}

// numberDataPoint decodes NumberDataPoint { fixed64 time_unix_nano = 3; double as_double = 4;
// sfixed64 as_int = 6; repeated KeyValue attributes = 7; uint32 flags = 8; }; ok is false for
// a point without a value.
func numberDataPoint(b []byte) (p Point, ok bool, err error) {
	var flags uint64
	err = eachField(b, func(num int, wt int, v uint64, f []byte) error {
		switch num {
		case 3:
			if err := want(num, wt, wireFixed64); err != nil {
				return err
			}
			p.TimeUnixNano = v
		case 4:
			if err := want(num, wt, wireFixed64); err != nil {
				return err
			}
			p.Value, ok = math.Float64frombits(v), true
		case 6:
			if err := want(num, wt, wireFixed64); err != nil {
				return err
			}
			p.Value, ok = float64(int64(v)), true
		case 7:
			if err := want(num, wt, wireBytes); err != nil {
				return err
			}
			a, has, err := keyValue(f)
			if has {
				p.Attributes = append(p.Attributes, a)
			}
			return err
		case 8:
			if err := want(num, wt, wireVarint); err != nil {
				return err
			}
			flags = v
		}
		return nil
	})
	if err != nil {
		return Point{}, false, fmt.Errorf("data point: %w", err)
	}
	return p, ok && flags&noRecordedValue == 0, nil
}

// keyValue decodes KeyValue { string key = 1; AnyValue value = 2; } with AnyValue { string
// string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; ... };
// ok is false when the value is not one of those scalars.
func keyValue(b []byte) (a Attribute, ok bool, err error) {
	err = eachField(b, func(num int, wt int, v uint64, f []byte) error {
		switch num {
		case 1:
			if err := want(num, wt, wireBytes); err != nil {
				return err
			}
			a.Key = text(f)
		case 2:
			if err := want(num, wt, wireBytes); err != nil {
				return err
			}
			return eachField(f, func(num int, wt int, v uint64, s []byte) error {
				var err error
				switch num {
				case 1:
					if err = want(num, wt, wireBytes); err == nil {
						a.Value, ok = text(s), true
					}
				case 2:
					if err = want(num, wt, wireVarint); err == nil {
						a.Value, ok = strconv.FormatBool(v != 0), true
					}
				case 3:
					if err = want(num, wt, wireVarint); err == nil {
						a.Value, ok = strconv.FormatInt(int64(v), 10), true
					}
				case 4:
					if err = want(num, wt, wireFixed64); err == nil {
						a.Value, ok = strconv.FormatFloat(math.Float64frombits(v), 'g', -1, 64), true
					}
				case 5, 6, 7: // array_value, kvlist_value, bytes_value: the oneof's last field wins
					a.Value, ok = "", false
				}
				return err
			})
		}
		return nil
	})
	if err != nil {
		return Attribute{}, false, fmt.Errorf("attribute: %w", err)
	}
	return a, ok, nil
}

// text copies a protobuf string, replacing bytes that are not UTF-8.
func text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// want checks a known field's wire type.
func want(num, got, wt int) error {
	if got != wt {
		return fmt.Errorf("%w: field %d has wire type %d, want %d", ErrMalformed, num, got, wt)
	}
	return nil
}

// eachField calls fn with every field of the message in b, in order: its number, wire type, and
// its value (varint and fixed ones in v, length-delimited ones in f, which aliases b).
func eachField(b []byte, fn func(num int, wt int, v uint64, f []byte) error) error {
	for off := 0; off < len(b); {
		key, n := binary.Uvarint(b[off:])
		if n <= 0 {
			return fmt.Errorf("%w: bad field key at offset %d", ErrMalformed, off)
		}
		off += n
		num, wt := key>>3, int(key&7)
		if num == 0 || num > math.MaxInt32 {
			return fmt.Errorf("%w: field number %d at offset %d", ErrMalformed, num, off-n)
		}
		var v uint64
		var f []byte
		switch wt {
		case wireVarint:
			v, n = binary.Uvarint(b[off:])
			if n <= 0 {
				return fmt.Errorf("%w: bad varint of field %d at offset %d", ErrMalformed, num, off)
			}
			off += n
		case wireFixed64:
			if len(b)-off < 8 {
				return fmt.Errorf("%w: field %d at offset %d needs 8 bytes, %d left", ErrMalformed, num, off, len(b)-off)
			}
			v = binary.LittleEndian.Uint64(b[off:])
			off += 8
		case wireFixed32:
			if len(b)-off < 4 {
				return fmt.Errorf("%w: field %d at offset %d needs 4 bytes, %d left", ErrMalformed, num, off, len(b)-off)
			}
			v = uint64(binary.LittleEndian.Uint32(b[off:]))
			off += 4
		case wireBytes:
			l, n := binary.Uvarint(b[off:])
			if n <= 0 {
				return fmt.Errorf("%w: bad length of field %d at offset %d", ErrMalformed, num, off)
			}
			off += n
			if l > uint64(len(b)-off) {
				return fmt.Errorf("%w: field %d at offset %d is %d bytes, %d left", ErrMalformed, num, off, l, len(b)-off)
			}
			f = b[off : off+int(l)]
			off += int(l)
		default:
			return fmt.Errorf("%w: field %d has wire type %d at offset %d", ErrMalformed, num, wt, off-n)
		}
		if err := fn(int(num), wt, v, f); err != nil {
			return err
		}
	}
	return nil
}
