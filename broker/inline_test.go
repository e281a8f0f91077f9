package broker

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestInlineProduce: with io.inline.requests on and off, idempotent acks=all producers write
// records to partitions whose small segments roll every few batches, and a consumer reads every
// record back once, in order. On io_uring with it on, Produce runs on the ring thread and hands
// the requests whose append would roll over to a worker (both counted); otherwise nothing runs
// inline.
func TestInlineProduce(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		for _, inline := range []bool{true, false} {
			t.Run(fmt.Sprintf("io.inline.requests=%v", inline), func(t *testing.T) {
				dir := t.TempDir()
				b := startBroker(t, io, dir, fmt.Sprintf("io.inline.requests=%v", inline))
				testInlineProduce(t, b, dir, io == "uring" && inline)
			})
		}
	})
}

func testInlineProduce(t *testing.T, b *Broker, dir string, wantInline bool) {
	const topic, partitions, producers, perProducer = "inline", 4, 3, 4000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.CreateTopic(ctx, partitions, 1, map[string]*string{
		"segment.bytes": kmsg.StringPtr("16384")}, topic); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 100)
	errs := make(chan error, producers)
	for p := range producers {
		cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.ProducerBatchMaxBytes(8192))
		go func() {
			var first error
			for i := range perProducer {
				r := &kgo.Record{Partition: int32(i % partitions), Value: fmt.Appendf(nil, "%d-%06d-%s", p, i, pad)}
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil && first == nil {
						first = err
					}
				})
			}
			if err := cl.Flush(ctx); err != nil && first == nil {
				first = err
			}
			errs <- first
		}()
	}
	for range producers {
		if err := <-errs; err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	cons := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	// next[p][q] is the index of producer q's next record in partition p.
	var next [partitions][producers]int
	read := 0
	for read < producers*perProducer {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", read, producers*perProducer, err)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			var q, i int
			if _, err := fmt.Sscanf(string(r.Value), "%d-%d", &q, &i); err != nil {
				t.Fatalf("record %q: %v", r.Value, err)
			}
			if want := next[r.Partition][q]*partitions + int(r.Partition); i != want {
				t.Fatalf("partition %d: producer %d's record %d; want %d", r.Partition, q, i, want)
			}
			next[r.Partition][q]++
			read++
		})
	}
	segments, err := filepath.Glob(filepath.Join(dir, topic+"-*", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(segments) < 8*partitions {
		t.Fatalf("%d segments over %d partitions; want rolls every few batches", len(segments), partitions)
	}
	inline, handedOff := b.metrics.inlineRequests.Get(), b.metrics.inlineHandedOff.Get()
	if wantInline && (inline == 0 || handedOff == 0) {
		t.Fatalf("%d requests ran on the ring, %d handed off; want both", inline, handedOff)
	}
	if !wantInline && inline != 0 {
		t.Fatalf("%d requests ran on the event loop; want none", inline)
	}
}
