package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
	"ringbroker/wire"
)

const (
	// crashRounds is how many times the broker is SIGKILLed under load.
	crashRounds = 20
	// crashPartitions is the partition count of the crash test topic.
	crashPartitions = 2
)

// TestCrashGroupCommit SIGKILLs a broker in group-commit mode (flush.group.commit; Apache Kafka
// gets its nearest equivalent, an fsync per append with log.flush.interval.messages=1) at random
// points while an acks=all idempotent producer runs, crashRounds times in a row. After each
// restart every record acknowledged so far must be at its acknowledged offset exactly once,
// no record may appear twice, and every fetched batch must pass its CRC check (read raw with
// Fetch, since franz-go does not verify CRCs).
func TestCrashGroupCommit(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		override := "log.flush.group.commit=true"
		if brokerKind() == "kafka" {
			override = "log.flush.interval.messages=1"
		}
		b := tg.start(t, override)
		const topic = "crash"
		b.CreateTopic(t, topic, crashPartitions)
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
		acked := map[int32][]ackedRecord{}
		start := time.Now()
		for round := range crashRounds {
			target := 20 + rng.IntN(1000)
			got := produceAndKill(t, b, topic, round, target, time.Duration(rng.IntN(50))*time.Millisecond)
			for p, recs := range got {
				acked[p] = append(acked[p], recs...)
			}
			b.Restart()
			checkCrashLog(t, b, topic, acked)
		}
		t.Logf("%d kill/restart rounds in %v", crashRounds, time.Since(start).Round(time.Millisecond))
	})
}

// produceAndKill produces to every partition with acks=all until target records are
// acknowledged, lets it run on for extra, SIGKILLs the broker while producing continues and
// returns the acknowledged records per partition in offset order. Values are the round and a
// sequence number, unique across the test.
func produceAndKill(t *testing.T, b *Broker, topic string, round, target int, extra time.Duration) map[int32][]ackedRecord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0))
	if err != nil {
		t.Fatalf("new producer for %s: %v", b.Addr(), err)
	}
	var (
		mu    sync.Mutex
		acked = map[int32][]ackedRecord{}
		count int
		// taken is set once the acknowledgements are handed back: promises franz-go completes
		// after Close returns are not checked.
		taken bool
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(0); ctx.Err() == nil; i++ {
			v := make([]byte, 16)
			binary.BigEndian.PutUint64(v, uint64(round))
			binary.BigEndian.PutUint64(v[8:], i)
			r := &kgo.Record{Topic: topic, Partition: int32(i % crashPartitions), Value: v}
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err != nil {
					return
				}
				mu.Lock()
				if !taken {
					acked[r.Partition] = append(acked[r.Partition], ackedRecord{offset: r.Offset, value: r.Value})
					count++
				}
				mu.Unlock()
			})
		}
	}()
	testutil.WaitFor(t, time.Minute, func() error {
		mu.Lock()
		defer mu.Unlock()
		if count < target {
			return fmt.Errorf("round %d: %d of %d records acknowledged", round, count, target)
		}
		return nil
	})
	time.Sleep(extra) // a random point in the stream, not a moment of quiet
	b.Kill()
	cancel()
	<-done
	cl.Close()
	mu.Lock()
	defer mu.Unlock()
	taken = true
	for p, recs := range acked {
		for i := 1; i < len(recs); i++ {
			if recs[i].offset <= recs[i-1].offset {
				t.Fatalf("round %d: %s/%d acknowledged offset %d after %d", round, topic, p, recs[i].offset, recs[i-1].offset)
			}
		}
	}
	return acked
}

// checkCrashLog reads every partition of topic raw from its start to its high watermark,
// validating each batch, and checks that each acknowledged record is at its offset and that no
// value appears twice.
func checkCrashLog(t *testing.T, b *Broker, topic string, acked map[int32][]ackedRecord) {
	t.Helper()
	cl := b.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	id := md.Topics[topic].ID
	for p := range int32(crashPartitions) {
		got := map[int64]string{}
		seen := map[string]int64{}
		for offset, hw := int64(0), int64(1); offset < hw; {
			fp := fetchRaw(ctx, t, cl, topic, id, p, offset)
			hw = fp.HighWatermark
			if fp.ErrorCode != 0 {
				t.Fatalf("fetch %s/%d at %d: error %d", topic, p, offset, fp.ErrorCode)
			}
			if offset >= hw {
				break
			}
			if len(fp.RecordBatches) == 0 {
				t.Fatalf("fetch %s/%d at %d below high watermark %d returned nothing", topic, p, offset, hw)
			}
			for rest := fp.RecordBatches; len(rest) > 0; {
				if len(rest) < 12 {
					t.Fatalf("%s/%d: %d trailing bytes after the batches at %d", topic, p, len(rest), offset)
				}
				n := 12 + int(binary.BigEndian.Uint32(rest[8:]))
				if n > len(rest) {
					break // a partial batch at the end of the response
				}
				if _, err := wire.ValidateBatches(rest[:n]); err != nil {
					t.Fatalf("%s/%d: batch at offset %d fails validation after restart: %v", topic, p, offset, err)
				}
				var rb kmsg.RecordBatch
				if err := rb.ReadFrom(rest[:n]); err != nil {
					t.Fatalf("%s/%d: decode batch at %d: %v", topic, p, offset, err)
				}
				for i, v := range batchValues(t, &rb) {
					off := rb.FirstOffset + int64(i)
					if prev, dup := seen[v]; dup {
						t.Fatalf("%s/%d: value %x at offset %d and again at %d", topic, p, v, prev, off)
					}
					seen[v], got[off] = off, v
				}
				offset = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
				rest = rest[n:]
			}
		}
		for _, a := range acked[p] {
			if v, ok := got[a.offset]; !ok || v != string(a.value) {
				t.Fatalf("%s/%d: acknowledged %x at offset %d; found %x after restart", topic, p, a.value, a.offset, v)
			}
		}
	}
}

// fetchRaw sends one Fetch for a single partition.
func fetchRaw(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, id [16]byte, p int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch %s/%d at %d: %v", topic, p, offset, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch %s/%d at %d: %d topics in the response", topic, p, offset, len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// batchValues decodes the record values of an uncompressed batch.
func batchValues(t *testing.T, rb *kmsg.RecordBatch) []string {
	t.Helper()
	if rb.Attributes&0x7 != 0 {
		t.Fatalf("batch at %d is compressed (attributes %#x); the producer disabled compression", rb.FirstOffset, rb.Attributes)
	}
	out := make([]string, 0, rb.NumRecords)
	for rest := rb.Records; len(rest) > 0; {
		length, n := binary.Varint(rest)
		if n <= 0 || int(length) > len(rest)-n {
			t.Fatalf("batch at %d: bad record length", rb.FirstOffset)
		}
		var r kmsg.Record
		if err := r.ReadFrom(rest[:n+int(length)]); err != nil {
			t.Fatalf("batch at %d: decode record: %v", rb.FirstOffset, err)
		}
		out = append(out, string(r.Value))
		rest = rest[n+int(length):]
	}
	if len(out) != int(rb.NumRecords) {
		t.Fatalf("batch at %d holds %d records; header says %d", rb.FirstOffset, len(out), rb.NumRecords)
	}
	return out
}
