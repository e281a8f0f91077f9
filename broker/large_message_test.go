package broker

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTopicMaxMessageBytes produces one 5 MiB record to a topic whose max.message.bytes
// (10 MiB) is above the broker's message.max.bytes, as Apache Kafka accepts, and consumes it
// with fetch limits smaller than the record: the first batch is returned whole (KIP-74).
func TestTopicMaxMessageBytes(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		b := startBroker(t, io, t.TempDir())
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		maxBytes := "10485760"
		adm := kadm.NewClient(newClient(t, b))
		if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &maxBytes}, "big"); err != nil {
			t.Fatal(err)
		}
		value := make([]byte, 5<<20)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range value {
			value[i] = byte(rng.Uint32()) // incompressible, so the batch stays above 5 MiB
		}
		producer := newClient(t, b, kgo.ProducerBatchMaxBytes(8<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: value}).FirstErr(); err != nil {
			t.Fatalf("produce a 5 MiB record to a topic with max.message.bytes=%s: %v", maxBytes, err)
		}
		consumer := newClient(t, b, kgo.ConsumeTopics("big"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxBytes(1<<20), kgo.FetchMaxPartitionBytes(1<<20))
		for {
			fs := consumer.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("poll: %v", err)
			}
			recs := fs.Records()
			if len(recs) == 0 {
				continue
			}
			if r := recs[0]; r.Offset != 0 || !bytes.Equal(r.Value, value) {
				t.Fatalf("consumed offset %d with %d bytes; want offset 0 with the 5 MiB produced", r.Offset, len(r.Value))
			}
			return
		}
	})
}
