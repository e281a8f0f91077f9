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
			req, err := DecodeProduce(body, h.APIVersion)
			if err != nil {
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
			again, err := DecodeProduce(body2, v)
			if err != nil || Batch(again.Topics[0].Partitions[3].Records).BaseOffset() != 300 {
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
		if _, err := DecodeProduce(body[:n], 9); err == nil {
			t.Fatalf("truncated body of %d/%d bytes accepted", n, len(body))
		}
	}
}
