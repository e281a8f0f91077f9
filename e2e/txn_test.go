package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Transaction tests (issue 12): franz-go's transactional producer and GroupTransactSession,
// read_committed and read_uncommitted consumers, and confluent-kafka-python, on every target.

const (
	// txnWait bounds each phase of a transaction test: producing and ending transactions,
	// reading a topic back, waiting for a group to catch up.
	txnWait = 60 * time.Second
	// txnSentinel is the value of the record appended, outside any transaction, to every
	// partition once a test's transactions ended: a reader that met it in every partition
	// has read all that came before.
	txnSentinel = "sentinel"
)

// startTxnTopic starts the target and creates topic with one partition; the context it
// returns bounds the test's transactions.
func startTxnTopic(t *testing.T, tg target, topic string) (*Broker, context.Context) {
	t.Helper()
	b := tg.start(t)
	b.CreateTopic(t, topic, 1)
	ctx, cancel := context.WithTimeout(context.Background(), txnWait)
	t.Cleanup(cancel)
	return b, ctx
}

// txnClient is a franz-go client with a transactional id that produces to the partition each
// record names.
func txnClient(t *testing.T, b *Broker, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return b.Client(t, append([]kgo.Opt{kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// produceValues produces prefix0..prefix(n-1) to partition 0 of topic and waits for every
// acknowledgement.
func produceValues(ctx context.Context, t *testing.T, cl *kgo.Client, topic, prefix string, n int) {
	t.Helper()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s%d", prefix, i)}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce %s0..%s%d to %s in a transaction: %v", prefix, prefix, n-1, topic, err)
	}
}

// runTxn begins a transaction, produces prefix0..prefix(n-1) in it (to the log, so an abort
// has data to hide) and ends it with end.
func runTxn(ctx context.Context, t *testing.T, cl *kgo.Client, topic, prefix string, n int, end kgo.TransactionEndTry) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin transaction for %s*: %v", prefix, err)
	}
	produceValues(ctx, t, cl, topic, prefix, n)
	if err := cl.EndTransaction(ctx, end); err != nil {
		t.Fatalf("end transaction of %s* (commit %v): %v", prefix, end, err)
	}
}

// seqValues is prefix0..prefix(n-1).
func seqValues(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// valuesOf is the values of rs, in order.
func valuesOf(rs []*kgo.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value)
	}
	return out
}

// isolationName names a fetch isolation level as Kafka's consumer setting does.
func isolationName(level kgo.IsolationLevel) string {
	if level == kgo.ReadCommitted() {
		return "read_committed"
	}
	return "read_uncommitted"
}

// appendSentinels writes one txnSentinel record to each partition of topic, outside any
// transaction; the test's transactions must have ended.
func appendSentinels(t *testing.T, b *Broker, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), txnWait)
	defer cancel()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	rs := make([]*kgo.Record, partitions)
	for p := range rs {
		rs[p] = &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(txnSentinel)}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("append sentinels to %s: %v", topic, err)
	}
}

// readToSentinels reads every partition of topic from its start at the given isolation level
// up to the sentinel appendSentinels wrote, and returns the records before it by partition,
// in offset order.
func readToSentinels(t *testing.T, b *Broker, topic string, partitions int32, level kgo.IsolationLevel) map[int32][]*kgo.Record {
	t.Helper()
	starts := map[int32]kgo.Offset{}
	for p := range partitions {
		starts[p] = kgo.NewOffset().AtStart()
	}
	cl := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}), kgo.FetchIsolationLevel(level))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), txnWait)
	defer cancel()
	out := map[int32][]*kgo.Record{}
	ended := map[int32]bool{}
	for len(ended) < int(partitions) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s at %s: %d of %d partitions reached their sentinel within %v (%d records read)",
				topic, isolationName(level), len(ended), partitions, txnWait, countRecords(out))
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("read %s at %s: %v", topic, isolationName(level), err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case ended[r.Partition]:
				t.Fatalf("read %s at %s: partition %d has %q at offset %d after its sentinel", topic, isolationName(level), r.Partition, r.Value, r.Offset)
			case string(r.Value) == txnSentinel:
				ended[r.Partition] = true
			default:
				out[r.Partition] = append(out[r.Partition], r)
			}
		})
	}
	return out
}

func countRecords(m map[int32][]*kgo.Record) int {
	n := 0
	for _, rs := range m {
		n += len(rs)
	}
	return n
}

// listOffsets returns partition 0's last stable offset (ListOffsets at read_committed) and
// high watermark (at read_uncommitted).
func listOffsets(t *testing.T, b *Broker, topic string) (lso, hwm int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), txnWait)
	defer cancel()
	adm := b.Admin(t)
	committed, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		t.Fatalf("list %s offsets at read_committed: %v", topic, err)
	}
	end, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = end.Error()
	}
	if err != nil {
		t.Fatalf("list %s offsets at read_uncommitted: %v", topic, err)
	}
	c, ok1 := committed.Lookup(topic, 0)
	e, ok2 := end.Lookup(topic, 0)
	if !ok1 || !ok2 {
		t.Fatalf("list %s offsets: partition 0 missing (read_committed %v, read_uncommitted %v)", topic, ok1, ok2)
	}
	return c.Offset, e.Offset
}

// readOpenTxn reads partition 0 of topic at read_committed for a while as a transaction is
// open: every fetch that returns records reports lso as the last stable offset and hwm as the
// high watermark, and no record at or after lso comes back. It returns the values read.
func readOpenTxn(t *testing.T, b *Broker, topic string, lso, hwm int64, observe time.Duration) []string {
	t.Helper()
	cl := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), observe)
	defer cancel()
	var got []string
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("read %s/%d at read_committed: %v", tp, p, err)
			}
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			if p.LastStableOffset != lso || p.HighWatermark != hwm {
				t.Fatalf("read_committed fetch of %s/%d during an open transaction: last stable offset %d, high watermark %d; want %d, %d",
					topic, p.Partition, p.LastStableOffset, p.HighWatermark, lso, hwm)
			}
			for _, r := range p.Records {
				if r.Offset >= lso {
					t.Fatalf("read_committed fetch of %s/%d returned %q at offset %d, past the last stable offset %d", topic, p.Partition, r.Value, r.Offset, lso)
				}
				got = append(got, string(r.Value))
			}
		})
	}
	return got
}

// TestTxnAbortVisibility commits, aborts and commits a transaction of ten records each on
// one partition, and checks what each isolation level shows: read_committed never the
// aborted records, read_uncommitted all of them; while the last transaction is open,
// ListOffsets at read_committed and every read_committed fetch stop at its first offset.
func TestTxnAbortVisibility(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		const topic = "txn-visibility"
		b, ctx := startTxnTopic(t, tg, topic)
		pr := txnClient(t, b, "txn-visibility")

		// Offsets: committed 0-9 and its marker 10, aborted 11-20 and marker 21, open 22-31.
		runTxn(ctx, t, pr, topic, "commit1-", 10, kgo.TryCommit)
		runTxn(ctx, t, pr, topic, "abort-", 10, kgo.TryAbort)
		if err := pr.BeginTransaction(); err != nil {
			t.Fatalf("begin the third transaction: %v", err)
		}
		produceValues(ctx, t, pr, topic, "commit2-", 10)

		if lso, hwm := listOffsets(t, b, topic); lso != 22 || hwm != 32 {
			t.Fatalf("ListOffsets during the open transaction: read_committed %d, read_uncommitted %d; want 22, 32", lso, hwm)
		}
		if got, want := readOpenTxn(t, b, topic, 22, 32, 2*time.Second), seqValues("commit1-", 10); !slices.Equal(got, want) {
			t.Fatalf("read_committed during the open transaction read %q; want %q", got, want)
		}

		if err := pr.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit the third transaction: %v", err)
		}
		if lso, hwm := listOffsets(t, b, topic); lso != 33 || hwm != 33 {
			t.Fatalf("ListOffsets after the last commit: read_committed %d, read_uncommitted %d; want 33, 33", lso, hwm)
		}
		appendSentinels(t, b, topic, 1)
		committed := valuesOf(readToSentinels(t, b, topic, 1, kgo.ReadCommitted())[0])
		if want := append(seqValues("commit1-", 10), seqValues("commit2-", 10)...); !slices.Equal(committed, want) {
			t.Fatalf("read_committed read %q; want %q", committed, want)
		}
		uncommitted := valuesOf(readToSentinels(t, b, topic, 1, kgo.ReadUncommitted())[0])
		want := slices.Concat(seqValues("commit1-", 10), seqValues("abort-", 10), seqValues("commit2-", 10))
		if !slices.Equal(uncommitted, want) {
			t.Fatalf("read_uncommitted read %q; want %q", uncommitted, want)
		}
	})
}
