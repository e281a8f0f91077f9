package bench

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactional workloads (Workload.TransactionSize > 0): every producer client has a
// transactional.id of its own and runs its transactions one after the other. A transaction
// begins before its first record, takes TransactionSize records as the schedule hands them
// out, spread round-robin over the topic's partitions, is flushed (every record acknowledged)
// and then committed. Only committed records count as published, their latency running to the
// end of the commit; the commit's round trip (EndTransaction) is measured on its own.
// Consumers read committed, so end-to-end latency ends when a record became visible.

// txnRetryBackoff is the wait before a transactional produce answered CONCURRENT_TRANSACTIONS is
// retried: the Java producer's retry.backoff.ms. Under KIP-890 a broker answers so while the
// markers of the producer's previous transaction are still being written. kgo retries such a
// produce only after a metadata refresh, which it spaces by MetadataMinAge (5 s by default):
// a stall of seconds that the Java client does not have and would swamp the commit latency.
const txnRetryBackoff = 100 * time.Millisecond

// transactionalOpts are the client options of producer index of topic in a transactional
// workload: a transactional.id unique to the run, partitions chosen by the runner, and the
// retry backoff of the Java client.
func transactionalOpts(topic string, index int) []kgo.Opt {
	return []kgo.Opt{
		kgo.TransactionalID(fmt.Sprintf("%s-txn-%d", topic, index)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(txnRetryBackoff),
	}
}

// initTransactional has cl's transactional.id initialized (InitProducerId through its
// transaction coordinator) within timeout, so that a cluster without transactions fails the
// run during setup rather than every record.
func initTransactional(ctx context.Context, cl *kgo.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return fmt.Errorf("init transactional producer: %w", err)
	}
	return nil
}

// txnProducer is the state of one producer's transaction in progress, reused from one
// transaction to the next.
type txnProducer struct {
	p        producer
	recs     []kgo.Record
	values   [][]byte
	intended []time.Time
	// failed counts the records of the transaction whose produce failed; promises add to it.
	failed atomic.Uint64
	// next is the partition of the next record.
	next int32
	lat  batch
}

// produceTxns sends p's records on its schedule in transactions until the next intended time
// is past the measured period, sendCtx ends or the client cannot go on. A transaction cut
// short by the end of the schedule is committed with the records it has. Records carry
// abortCtx, which also bounds the flushes and commits.
func (r *runner) produceTxns(sendCtx, abortCtx context.Context, p producer) {
	w := r.w
	pacer, clock, err := r.pacerFor(p)
	if err != nil {
		r.noteErr("pacer", err)
		return
	}
	defer clock.Close()
	tp := &txnProducer{p: p, recs: make([]kgo.Record, w.TransactionSize), intended: make([]time.Time, w.TransactionSize),
		next: int32(p.index % w.PartitionsPerTopic)}
	for range w.TransactionSize {
		tp.values = append(tp.values, slices.Clone(r.payload))
	}
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			tp.failed.Add(1)
			r.noteErr("transactional produce", err)
		}
	}
	var sent uint64
	for more := true; more; {
		n := 0
		for n < w.TransactionSize {
			intended, err := pacer.Next(sendCtx)
			if err != nil || !intended.Before(r.end) {
				more = false
				break
			}
			if n == 0 {
				if err := p.cl.BeginTransaction(); err != nil {
					r.noteErr("begin transaction", err)
					more = false
					break
				}
			}
			tp.intended[n] = intended
			PutStamp(tp.values[n], intended)
			tp.recs[n] = kgo.Record{Topic: p.topic, Partition: tp.next, Value: tp.values[n]}
			tp.next = (tp.next + 1) % int32(w.PartitionsPerTopic)
			p.cl.Produce(abortCtx, &tp.recs[n], promise)
			n++
			sent++
		}
		if n > 0 && !r.endTxn(abortCtx, tp, n) {
			break
		}
	}
	if w.ProducerRate > 0 {
		if due := pacer.Due(r.end); due > sent {
			r.unsent.Add(due - sent)
		}
	}
}

// endTxn ends tp's transaction of n records: flushed, then committed, or aborted when a record
// failed. A committed transaction's records count as published and its commit's round trip is
// recorded; a failed one counts as aborted and its records as publish errors. It reports
// whether the producer can go on with another transaction.
func (r *runner) endTxn(ctx context.Context, tp *txnProducer, n int) bool {
	cl := tp.p.cl
	flushErr := cl.Flush(ctx)
	if flushErr != nil {
		r.noteErr("flush transaction", flushErr)
	}
	failed := tp.failed.Swap(0)
	commit := flushErr == nil && failed == 0
	began := time.Now()
	err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	ended := time.Now()
	if commit && err == nil {
		r.txn.record(r.inWindow(tp.intended[0]), ended.Sub(began), 0)
		for _, intended := range tp.intended[:n] {
			tp.lat.add(r.inWindow(intended), ended.Sub(intended), len(r.payload))
		}
		r.pub.recordBatch(&tp.lat)
		return true
	}
	r.txn.errors.Add(1)
	r.pub.errors.Add(uint64(n))
	if err == nil {
		return ctx.Err() == nil
	}
	r.noteErr("end transaction", err)
	if !commit {
		return false
	}
	// A commit refused or of unknown outcome is aborted, as kgo's EndTransaction asks.
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		r.noteErr("abort transaction", err)
		return false
	}
	return ctx.Err() == nil
}
