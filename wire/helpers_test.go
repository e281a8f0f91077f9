package wire

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// allCodecs lists every codec Kafka defines.
var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// testRecords returns n records with varied keys, values and headers;
// values are valueSize bytes of compressible text.
func testRecords(n, valueSize int) []kmsg.Record {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.TimestampDelta64 = int64(i * 3)
		switch i % 3 {
		case 0:
			r.Key = fmt.Appendf(nil, "key-%d", i)
		case 1:
			r.Key = nil
		case 2:
			r.Key = []byte{}
		}
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = "abcdefgh"[(i+j/7)%8]
		}
		r.Value = v
		if i%4 == 1 {
			r.Value = nil
		}
		if i%2 == 0 {
			r.Headers = []kmsg.Header{{Key: "h1", Value: []byte("v1")}, {Key: "h2", Value: nil}}
		}
		recs[i] = r
	}
	return recs
}

// batchSpec configures buildBatch.
type batchSpec struct {
	codec         Codec
	baseOffset    int64
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	attrs         int16
	firstTS       int64
}

// buildBatch encodes recs as a record batch v2 with kmsg.RecordBatch,
// compressing the payload with c, and fixes up length and CRC.
func buildBatch(t testing.TB, c *Codecs, spec batchSpec, recs []kmsg.Record) []byte {
	t.Helper()
	payload := testutil.EncodeRecords(recs...)
	if spec.codec != CodecNone {
		var err error
		payload, err = c.Compress(spec.codec, payload, nil)
		if err != nil {
			t.Fatalf("compress %s: %v", spec.codec, err)
		}
	}
	return testutil.SealBatch(kmsg.RecordBatch{
		FirstOffset:          spec.baseOffset,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           spec.attrs | int16(spec.codec),
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       spec.firstTS,
		MaxTimestamp:         spec.firstTS + int64(len(recs)*3),
		ProducerID:           spec.producerID,
		ProducerEpoch:        spec.producerEpoch,
		FirstSequence:        spec.baseSequence,
		NumRecords:           int32(len(recs)),
		Records:              payload,
	})
}

// plainSpec is an idempotent producer batch without compression.
func plainSpec(codec Codec) batchSpec {
	return batchSpec{codec: codec, producerID: 7, producerEpoch: 1, baseSequence: 0, firstTS: 1_700_000_000_000}
}

// aliases reports whether sub lies inside the memory of whole.
func aliases(sub, whole []byte) bool {
	if len(sub) == 0 || len(whole) == 0 {
		return false
	}
	s := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	w := uintptr(unsafe.Pointer(unsafe.SliceData(whole)))
	return s >= w && s+uintptr(len(sub)) <= w+uintptr(len(whole))
}
