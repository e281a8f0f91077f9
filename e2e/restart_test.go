package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/internal/testutil"
)

const (
	restartRecords    = 20_000
	restartPartitions = 4
	// killAfterAcked is how many acknowledged records the producer reaches before SIGKILL.
	killAfterAcked = 20_000
)

// TestRestart checks durability across restarts on one broker: data produced before a
// clean shutdown (SIGTERM) is all there after restart; with acks=all producing under way
// while the broker is SIGKILLed, every acknowledged record is there after restart at its
// acknowledged offset, in order, and the broker serves produce and consume again.
func TestRestart(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t)

		t.Run("SIGTERM", func(t *testing.T) {
			const topic = "restart-clean"
			b.CreateTopic(t, topic, restartPartitions)
			cl := b.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			produceSeq(t, cl, topic, restartPartitions, restartRecords)
			cl.Close()

			b.Stop()
			b.Restart()
			consumeSeq(t, b, topic, restartPartitions, restartRecords)
		})

		t.Run("SIGKILL", func(t *testing.T) {
			const topic = "restart-kill"
			b.CreateTopic(t, topic, restartPartitions)
			acked := produceUntilKilled(t, b, topic)

			b.Restart()
			checkAcked(t, b, topic, acked)

			// The restarted broker takes new writes after the recovered data and serves them.
			cl := b.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for p := range int32(restartPartitions) {
				r := &kgo.Record{Topic: topic, Partition: p, Value: []byte("after-restart")}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatalf("produce to %s/%d after restart: %v", topic, p, err)
				}
				acked[p] = append(acked[p], ackedRecord{offset: r.Offset, value: r.Value})
			}
			checkAcked(t, b, topic, acked)
		})
	})
}

// ackedRecord is a record the broker acknowledged: where it said it stored it, and what.
type ackedRecord struct {
	offset int64
	value  []byte
}

// produceUntilKilled produces with acks=all to every partition of topic until
// killAfterAcked records are acknowledged, then SIGKILLs the broker while producing
// goes on, and returns the acknowledged records per partition in offset order.
func produceUntilKilled(t *testing.T, b *Broker, topic string) map[int32][]ackedRecord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(16<<10))
	if err != nil {
		t.Fatalf("new producer for %s: %v", b.Addr(), err)
	}
	var (
		mu    sync.Mutex
		acked = map[int32][]ackedRecord{}
		count atomic.Int64
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(0); ctx.Err() == nil; i++ {
			v := make([]byte, 8)
			binary.BigEndian.PutUint64(v, i)
			r := &kgo.Record{Topic: topic, Partition: int32(i % restartPartitions), Value: v}
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err != nil {
					return
				}
				mu.Lock()
				acked[r.Partition] = append(acked[r.Partition], ackedRecord{offset: r.Offset, value: r.Value})
				mu.Unlock()
				count.Add(1)
			})
		}
	}()
	testutil.WaitFor(t, 2*time.Minute, func() error {
		if n := count.Load(); n < killAfterAcked {
			return fmt.Errorf("%d of %d records acknowledged", n, killAfterAcked)
		}
		return nil
	})
	b.Kill()
	cancel()
	<-done
	cl.Close() // fails what is still buffered or in flight

	mu.Lock()
	defer mu.Unlock()
	var total int
	for p, recs := range acked {
		for i := 1; i < len(recs); i++ {
			if recs[i].offset <= recs[i-1].offset {
				t.Fatalf("%s/%d: acknowledgement %d at offset %d after offset %d", topic, p, i, recs[i].offset, recs[i-1].offset)
			}
		}
		total += len(recs)
	}
	t.Logf("%d records acknowledged before SIGKILL", total)
	return acked
}

// checkAcked reads every partition of topic up to its end offset and checks that each
// acknowledged record sits at its acknowledged offset with its value.
func checkAcked(t *testing.T, b *Broker, topic string, acked map[int32][]ackedRecord) {
	t.Helper()
	ends := b.EndOffsets(t, topic)
	assign := map[int32]kgo.Offset{}
	for p := range int32(restartPartitions) {
		recs := acked[p]
		if len(recs) == 0 {
			continue
		}
		if last := recs[len(recs)-1].offset; ends[p] <= last {
			t.Fatalf("%s/%d: end offset %d after restart, but offset %d was acknowledged", topic, p, ends[p], last)
		}
		assign[p] = kgo.NewOffset().AtStart()
	}
	cl := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}))
	got := map[int32]map[int64][]byte{}
	remaining := len(assign)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%d partitions of %s not read to their end offsets %v: %v", remaining, topic, ends, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if got[r.Partition] == nil {
				got[r.Partition] = map[int64][]byte{}
			}
			got[r.Partition][r.Offset] = r.Value
			if r.Offset == ends[r.Partition]-1 {
				remaining--
			}
		})
	}
	for p, recs := range acked {
		for _, a := range recs {
			v, ok := got[p][a.offset]
			if !ok {
				t.Fatalf("%s/%d: acknowledged offset %d missing after restart", topic, p, a.offset)
			}
			if string(v) != string(a.value) {
				t.Fatalf("%s/%d@%d: value %x after restart, acknowledged %x", topic, p, a.offset, v, a.value)
			}
		}
	}
}
