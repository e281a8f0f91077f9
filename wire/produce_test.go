package wire

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceFrame builds a Produce request of version with one topic and a
// batch of recordsPer records per partition, framed by kmsg's formatter
// (size prefix stripped). It returns the frame and the batches.
func produceFrame(t testing.TB, version int16, partitions, recordsPer, valueSize int) ([]byte, [][]byte) {
	c := NewCodecs()
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks, req.TimeoutMillis = -1, 30000
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic, topic.TopicID = "events", [16]byte{1, 2, 3, 4}
	var batches [][]byte
	for p := range partitions {
		b := buildBatch(t, c, plainSpec(CodecNone), testRecords(recordsPer, valueSize))
		batches = append(batches, b)
		part := kmsg.NewProduceRequestTopicPartition()
		part.Partition, part.Records = int32(p), b
		topic.Partitions = append(topic.Partitions, part)
	}
	req.Topics = append(req.Topics, topic)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("producer")).AppendRequest(nil, req, 7)[4:]
	return frame, batches
}

// TestDecodeProduceAliasesFrame shows UnsafeReadFrom leaves every
// partition's Records pointing into the received frame: no copy.
func TestDecodeProduceAliasesFrame(t *testing.T) {
	for _, v := range []int16{3, 7, 8, 9, 12, 13} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			frame, batches := produceFrame(t, v, 4, 5, 100)
			h, body, err := ParseRequestHeader(frame)
			if err != nil || h.APIKey != 0 || h.APIVersion != v || h.Flexible != (v >= 9) {
				t.Fatalf("header %+v: %v", h, err)
			}
			req := new(kmsg.ProduceRequest)
			if err := DecodeProduce(req, body, h.APIVersion); err != nil {
				t.Fatal(err)
			}
			if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 4 {
				t.Fatalf("decoded %+v", req)
			}
			for i, p := range req.Topics[0].Partitions {
				if !bytes.Equal(p.Records, batches[i]) {
					t.Fatalf("partition %d records differ", i)
				}
				if !aliases(p.Records, frame) {
					t.Fatalf("partition %d records were copied", i)
				}
				if _, err := ValidateProduce(p.Records, v, 1<<20); err != nil {
					t.Fatalf("partition %d: %v", i, err)
				}
				// Offsets are assigned in place, in the frame itself.
				Batch(p.Records).SetBaseOffset(int64(100 * i))
			}
			_, body2, _ := ParseRequestHeader(frame)
			again := new(kmsg.ProduceRequest)
			if err := DecodeProduce(again, body2, v); err != nil || Batch(again.Topics[0].Partitions[3].Records).BaseOffset() != 300 {
				t.Fatalf("in-place offset assignment not visible: %v", err)
			}
		})
	}
}

func TestDecodeProduceTruncated(t *testing.T) {
	frame, _ := produceFrame(t, 9, 2, 3, 10)
	_, body, err := ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 5, len(body) / 2, len(body) - 1} {
		if err := DecodeProduce(new(kmsg.ProduceRequest), body[:n], 9); err == nil {
			t.Fatalf("truncated body of %d/%d bytes accepted", n, len(body))
		}
	}
}

// TestDecodeProduceReusesSlices decodes requests of one shape, and then of a smaller and a
// larger one, into the same request: the steady shape allocates nothing and no field of an
// earlier request survives into a later one.
func TestDecodeProduceReusesSlices(t *testing.T) {
	req := new(kmsg.ProduceRequest)
	decode := func(frame []byte) {
		t.Helper()
		h, body, err := ParseRequestHeader(frame)
		if err != nil {
			t.Fatal(err)
		}
		if err := DecodeProduce(req, body, h.APIVersion); err != nil {
			t.Fatal(err)
		}
	}
	big, _ := produceFrame(t, 9, 8, 2, 10)
	decode(big)
	if n := testing.AllocsPerRun(100, func() { decode(big) }); n != 0 {
		t.Fatalf("steady-state decode allocates %.1f times per request", n)
	}
	small, batches := produceFrame(t, 9, 2, 1, 5)
	decode(small)
	if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 2 {
		t.Fatalf("after a smaller request: %d topics, %d partitions", len(req.Topics), len(req.Topics[0].Partitions))
	}
	for i, p := range req.Topics[0].Partitions {
		if p.Partition != int32(i) || !bytes.Equal(p.Records, batches[i]) {
			t.Fatalf("partition %d: index %d, records from another request", i, p.Partition)
		}
	}
	huge, _ := produceFrame(t, 9, 20, 1, 5)
	decode(huge)
	if len(req.Topics[0].Partitions) != 20 {
		t.Fatalf("after a larger request: %d partitions", len(req.Topics[0].Partitions))
	}
}

// FuzzDecodeProduce checks DecodeProduce against kmsg's reader on arbitrary bodies: both
// refuse the same bodies and decode the same fields from the rest, also when the request
// decoded into holds an earlier one.
func FuzzDecodeProduce(f *testing.F) {
	for _, v := range []int16{3, 8, 9, 12, 13} {
		frame, _ := produceFrame(f, v, 3, 2, 20)
		_, body, err := ParseRequestHeader(frame)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v, body)
	}
	f.Add(int16(9), []byte{0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 1, 1, 0})
	f.Add(int16(11), []byte{1, 0, 1, 0, 0, 0, 100, 0x82, 0x80, 0x80, 0x80, 0x08})
	earlier, _ := produceFrame(f, 9, 4, 1, 3)
	_, earlierBody, _ := ParseRequestHeader(earlier)
	f.Fuzz(func(t *testing.T, version int16, body []byte) {
		if version < 3 || version > 13 {
			return
		}
		want := kmsg.NewPtrProduceRequest()
		want.Version = version
		wantErr := want.UnsafeReadFrom(body)
		for _, got := range []*kmsg.ProduceRequest{new(kmsg.ProduceRequest), reused(t, earlierBody)} {
			err := DecodeProduce(got, body, version)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("v%d: DecodeProduce error %v, kmsg error %v", version, err, wantErr)
			}
			if err == nil {
				sameProduce(t, got, want)
			}
		}
	})
}

// reused is a request that already holds body's topics and partitions.
func reused(t *testing.T, body []byte) *kmsg.ProduceRequest {
	req := new(kmsg.ProduceRequest)
	if err := DecodeProduce(req, body, 9); err != nil {
		t.Fatal(err)
	}
	return req
}

// sameProduce fails unless got and want carry the same fields (a nil and an empty slice are
// the same; unknown tags are not compared: DecodeProduce skips them).
func sameProduce(t *testing.T, got, want *kmsg.ProduceRequest) {
	t.Helper()
	if (got.TransactionID == nil) != (want.TransactionID == nil) ||
		got.TransactionID != nil && *got.TransactionID != *want.TransactionID ||
		got.Acks != want.Acks || got.TimeoutMillis != want.TimeoutMillis || len(got.Topics) != len(want.Topics) {
		t.Fatalf("request fields differ: got %+v, want %+v", got, want)
	}
	for i := range want.Topics {
		g, w := &got.Topics[i], &want.Topics[i]
		if g.Topic != w.Topic || g.TopicID != w.TopicID || len(g.Partitions) != len(w.Partitions) {
			t.Fatalf("topic %d differs: got %+v, want %+v", i, g, w)
		}
		for j := range w.Partitions {
			gp, wp := &g.Partitions[j], &w.Partitions[j]
			if gp.Partition != wp.Partition || (gp.Records == nil) != (wp.Records == nil) || !bytes.Equal(gp.Records, wp.Records) {
				t.Fatalf("topic %d partition %d differs: got %+v, want %+v", i, j, gp, wp)
			}
		}
	}
}
