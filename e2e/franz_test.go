package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	millionRecords    = 1_000_000
	millionPartitions = 16
	// millionTimeout bounds producing or consuming the million records.
	millionTimeout = 5 * time.Minute
)

// TestFranzGoMillion produces 1,000,000 records over 16 partitions with acks=all and
// consumes them with direct partition assignment: none lost, none duplicated, and each
// partition in produce order at contiguous offsets.
func TestFranzGoMillion(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t)
		const topic = "franz-million"
		b.CreateTopic(t, topic, millionPartitions)

		start := time.Now()
		produceSeq(t, b.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner())),
			topic, millionPartitions, millionRecords)
		t.Logf("produced %d records in %v", millionRecords, time.Since(start).Round(time.Millisecond))

		start = time.Now()
		consumeSeq(t, b, topic, millionPartitions, millionRecords)
		t.Logf("consumed %d records in %v", millionRecords, time.Since(start).Round(time.Millisecond))
	})
}

// seqValue encodes record number seq as its value: 8 bytes big-endian, then padding.
func seqValue(seq uint64) []byte {
	v := make([]byte, 8, 24)
	binary.BigEndian.PutUint64(v, seq)
	return append(v, "ringbroker-e2e-1"...)
}

// produceSeq produces records 0..n-1, record i to partition i%partitions, and fails the
// test if any is not acknowledged.
func produceSeq(t *testing.T, cl *kgo.Client, topic string, partitions int32, n int) {
	t.Helper()
	produceSeqRange(t, cl, topic, partitions, 0, n)
}

// produceSeqRange produces records from..to-1 as produceSeq does.
func produceSeqRange(t *testing.T, cl *kgo.Client, topic string, partitions int32, from, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), millionTimeout)
	defer cancel()
	var (
		failed   atomic.Int64
		firstErr sync.Once
		errMsg   atomic.Value
	)
	for i := from; i < to; i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: seqValue(uint64(i))}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				firstErr.Do(func() { errMsg.Store(fmt.Sprintf("partition %d: %v", r.Partition, err)) })
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush records %d..%d: %v", from, to-1, err)
	}
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of records %d..%d failed; first: %v", f, from, to-1, errMsg.Load())
	}
}

// seqChecker checks consumed records against produceSeq's: partition p holds records p,
// p+partitions, p+2*partitions, ..., in that order, at offsets 0, 1, 2, ...
type seqChecker struct {
	partitions int32
	next       []uint64 // next expected record number per partition
	got        int
}

func newSeqChecker(partitions int32) *seqChecker {
	c := &seqChecker{partitions: partitions, next: make([]uint64, partitions)}
	for p := range partitions {
		c.next[p] = uint64(p)
	}
	return c
}

// check fails the test unless r is the next record of its partition.
func (c *seqChecker) check(t *testing.T, r *kgo.Record) {
	t.Helper()
	c.got++
	p := r.Partition
	if len(r.Value) < 8 {
		t.Fatalf("%s/%d@%d: value of %d bytes", r.Topic, p, r.Offset, len(r.Value))
	}
	seq := binary.BigEndian.Uint64(r.Value)
	wantOffset := int64(c.next[p] / uint64(c.partitions))
	if seq != c.next[p] || r.Offset != wantOffset {
		t.Fatalf("%s/%d@%d: record %d; want record %d at offset %d", r.Topic, p, r.Offset, seq, c.next[p], wantOffset)
	}
	c.next[p] += uint64(c.partitions)
}

// consumeSeq reads every partition of topic from the start with direct assignment and
// checks that partition p holds exactly records p, p+partitions, p+2*partitions, ... of
// the n produced by produceSeq, in that order, at offsets 0, 1, 2, ...
func consumeSeq(t *testing.T, b *Broker, topic string, partitions int32, n int) {
	t.Helper()
	assign := map[int32]kgo.Offset{}
	for p := range partitions {
		assign[p] = kgo.NewOffset().AtStart()
	}
	cl := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchMaxBytes(16<<20))
	seq := newSeqChecker(partitions)
	ctx, cancel := context.WithTimeout(context.Background(), millionTimeout)
	defer cancel()
	for seq.got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", seq.got, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) { seq.check(t, r) })
	}
	for p, o := range b.EndOffsets(t, topic) {
		if want := int64((n - int(p) + int(partitions) - 1) / int(partitions)); o != want {
			t.Fatalf("%s/%d: end offset %d, want %d", topic, p, o, want)
		}
	}
}

const (
	retryRecords    = 50_000
	retryPartitions = 4
	// retryCutEvery and retryCuts: cut the connection after every 5th Produce request,
	// 8 times, half before and half after the broker answered.
	retryCutEvery = 5
	retryCuts     = 8
)

// TestIdempotentRetry produces through a proxy that cuts the connection after some
// Produce requests reached the broker but before their responses reached the client.
// The idempotent producer retries those batches; the broker must keep each record once.
func TestIdempotentRetry(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t)
		const topic = "franz-retry"
		b.CreateTopic(t, topic, retryPartitions)

		proxy := startCutProxy(t, b.Addr(), retryCutEvery, retryCuts)
		var dialer net.Dialer
		cl := b.Client(t,
			kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, proxy.Addr())
			}),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchMaxBytes(8<<10),
			kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }),
			kgo.MetadataMinAge(50*time.Millisecond),
		)
		start := time.Now()
		produceSeq(t, cl, topic, retryPartitions, retryRecords)
		t.Logf("produced %d records through %d cuts in %v", retryRecords, retryCuts, time.Since(start).Round(time.Millisecond))
		if got := proxy.Cuts(); got != retryCuts {
			t.Fatalf("proxy cut %d connections, want %d: too few Produce requests to test retries", got, retryCuts)
		}
		start = time.Now()
		consumeSeq(t, b, topic, retryPartitions, retryRecords)
		t.Logf("consumed in %v", time.Since(start).Round(time.Millisecond))
	})
}
