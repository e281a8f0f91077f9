package otlp

import (
	"encoding/binary"
	"math"
)

// AppendMetricsData appends to dst a MetricsData message with one resource, holding resource
// as its attributes, and one metric per point (its name, kind, temporality and one data point
// with its attributes as strings, its value as a double and its time): what Decode reads back.
// It lets tests and load tools build the pushes a KIP-714 client sends.
func AppendMetricsData(dst []byte, resource []Attribute, points []Point) []byte {
	var res []byte
	for _, a := range resource {
		res = appendBytes(res, 1, appendKeyValue(nil, a))
	}
	var scope []byte
	for _, p := range points {
		var dp []byte
		dp = appendFixed64(dp, 3, p.TimeUnixNano)
		dp = appendFixed64(dp, 4, math.Float64bits(p.Value))
		for _, a := range p.Attributes {
			dp = appendBytes(dp, 7, appendKeyValue(nil, a))
		}
		data := appendBytes(nil, 1, dp)
		field := 5 // Metric.gauge
		if p.Kind == Sum {
			field = 7 // Metric.sum
			data = appendVarint(data, 2, uint64(p.Temporality))
			if p.Monotonic {
				data = appendVarint(data, 3, 1)
			}
		}
		m := appendBytes(nil, 1, []byte(p.Metric))
		m = appendBytes(m, field, data)
		scope = appendBytes(scope, 2, m)
	}
	rm := appendBytes(nil, 1, res)
	rm = appendBytes(rm, 2, scope)
	return appendBytes(dst, 1, rm)
}

// appendKeyValue appends the fields of a KeyValue with a string AnyValue.
func appendKeyValue(dst []byte, a Attribute) []byte {
	dst = appendBytes(dst, 1, []byte(a.Key))
	return appendBytes(dst, 2, appendBytes(nil, 1, []byte(a.Value)))
}

func appendKey(dst []byte, num, wt int) []byte {
	return binary.AppendUvarint(dst, uint64(num)<<3|uint64(wt))
}

func appendBytes(dst []byte, num int, b []byte) []byte {
	dst = appendKey(dst, num, wireBytes)
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendVarint(dst []byte, num int, v uint64) []byte {
	return binary.AppendUvarint(appendKey(dst, num, wireVarint), v)
}

func appendFixed64(dst []byte, num int, v uint64) []byte {
	return binary.LittleEndian.AppendUint64(appendKey(dst, num, wireFixed64), v)
}
