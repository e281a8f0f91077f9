package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/recordbatch"
	"ringbroker/internal/testutil"
)

// toRecords converts kmsg records to this package's Record.
func toRecords(in []kmsg.Record) []Record {
	out := make([]Record, len(in))
	for i, r := range in {
		out[i] = Record{Attributes: r.Attributes, TimestampDelta: r.TimestampDelta64, OffsetDelta: r.OffsetDelta,
			Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			out[i].Headers = append(out[i].Headers, RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
	}
	return out
}

func TestAppendRecordMatchesKmsg(t *testing.T) {
	krecs := testRecords(30, 300)
	var got []byte
	for _, r := range toRecords(krecs) {
		got = AppendRecord(got, &r)
	}
	if !bytes.Equal(got, testutil.EncodeRecords(krecs...)) {
		t.Fatal("record encoding differs from kmsg")
	}
}

func TestAppendBatchRoundTrip(t *testing.T) {
	c := NewCodecs()
	krecs := testRecords(12, 500)
	h := BatchHeader{BaseOffset: 500, PartitionLeaderEpoch: 4, Attributes: recordbatch.AttrTransactional | recordbatch.AttrCompression,
		FirstTimestamp: 1000, MaxTimestamp: 1033, ProducerID: 9, ProducerEpoch: 2, BaseSequence: 40}
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			out, err := c.AppendBatch([]byte("pre"), h, codec, toRecords(krecs))
			if err != nil {
				t.Fatal(err)
			}
			raw := out[3:]
			s, err := ValidateBatches(raw)
			if err != nil || s.Records != 12 || s.Codec != codec || s.First.ProducerID != 9 || !s.First.Transactional {
				t.Fatalf("summary %+v: %v", s, err)
			}
			var k kmsg.RecordBatch
			if err := k.ReadFrom(raw); err != nil {
				t.Fatal(err)
			}
			if k.FirstOffset != 500 || k.PartitionLeaderEpoch != 4 || k.LastOffsetDelta != 11 || k.FirstTimestamp != 1000 ||
				k.MaxTimestamp != 1033 || k.ProducerEpoch != 2 || k.FirstSequence != 40 || k.Attributes != int16(codec)|recordbatch.AttrTransactional {
				t.Fatalf("kmsg sees %+v", k)
			}
			checkRecords(t, c, Batch(raw), krecs)
		})
	}
	if _, err := c.AppendBatch(nil, h, CodecNone, nil); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("empty batch: %v", err)
	}
	if _, err := c.AppendBatch(nil, h, 6, toRecords(krecs)); !errors.Is(err, ErrUnknownCodec) {
		t.Fatalf("bad codec: %v", err)
	}
}

func TestAppendControlBatch(t *testing.T) {
	c := NewCodecs()
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		raw, err := c.AppendControlBatch(nil, BatchHeader{BaseOffset: 77, ProducerID: 5, ProducerEpoch: 1,
			FirstTimestamp: 10, MaxTimestamp: 10}, typ, 33)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := NextBatch(raw, 0, 0)
		if err != nil || !b.IsControl() || !b.IsTransactional() || b.NumRecords() != 1 || b.BaseSequence() != -1 {
			t.Fatalf("control batch: %v", err)
		}
		n := 0
		err = c.DecodeRecords(b, 1<<10, func(r *Record) error {
			n++
			got, err := ParseControlKey(r.Key)
			if err != nil || got != typ {
				t.Fatalf("control type %d, want %d: %v", got, typ, err)
			}
			if len(r.Value) != 6 || int32(binary.BigEndian.Uint32(r.Value[2:])) != 33 {
				t.Fatalf("marker value %x", r.Value)
			}
			return nil
		})
		if err != nil || n != 1 {
			t.Fatalf("decode: %v (%d records)", err, n)
		}
		if _, err := ValidateProduce(raw, 9, 0); !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("clients must not produce control batches: %v", err)
		}
	}
	for _, key := range [][]byte{nil, {0, 0, 1}, {0xFF, 0xFF, 0, 1}} {
		if _, err := ParseControlKey(key); !errors.Is(err, kerr.CorruptMessage) {
			t.Fatalf("key %x: %v", key, err)
		}
	}
}
