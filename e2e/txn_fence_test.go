package e2e

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnFencing runs two franz-go producers with one transactional id, twice: the older one
// opens a transaction and writes to it, the newer one initializes (which fences the older and
// aborts its transaction) and commits a transaction of its own. Then the older one's next
// call fails as Kafka fails it: a produce, then the abort after it, in the first round; the
// commit straight away in the second. read_committed shows only the newer producers'
// records; read_uncommitted shows the older ones' too, as they were written and aborted.
func TestTxnFencing(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		const topic = "txn-fencing"
		b, ctx := startTxnTopic(t, tg, topic)

		older := fence(ctx, t, b, topic, "txn-fence-produce", "older1-", "newer1-")
		err := older.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("older1-late")}).FirstErr()
		wantFenced(t, "the fenced producer's produce", err, kerr.InvalidProducerEpoch)
		// franz-go does not send a commit after a failed produce; the abort it asks for
		// instead reaches the coordinator, which fences it.
		err = older.EndTransaction(ctx, kgo.TryCommit)
		wantFenced(t, "the fenced producer's commit after its failed produce", err, kerr.OperationNotAttempted)
		err = older.EndTransaction(ctx, kgo.TryAbort)
		wantFenced(t, "the fenced producer's abort after its failed produce", err, kerr.ProducerFenced)

		older = fence(ctx, t, b, topic, "txn-fence-end", "older2-", "newer2-")
		err = older.EndTransaction(ctx, kgo.TryCommit)
		wantFenced(t, "the fenced producer's commit", err, kerr.ProducerFenced)

		appendSentinels(t, b, topic, 1)
		committed := valuesOf(readToSentinels(t, b, topic, 1, kgo.ReadCommitted())[0])
		if want := slices.Concat(seqValues("newer1-", 5), seqValues("newer2-", 5)); !slices.Equal(committed, want) {
			t.Fatalf("read_committed read %q; want %q", committed, want)
		}
		uncommitted := valuesOf(readToSentinels(t, b, topic, 1, kgo.ReadUncommitted())[0])
		want := slices.Concat(seqValues("older1-", 5), seqValues("newer1-", 5), seqValues("older2-", 5), seqValues("newer2-", 5))
		if !slices.Equal(uncommitted, want) {
			t.Fatalf("read_uncommitted read %q; want %q", uncommitted, want)
		}
	})
}

// fence opens a transaction of five records with one producer, then starts a second producer
// with the same transactional id that commits five records of its own, and returns the older.
func fence(ctx context.Context, t *testing.T, b *Broker, topic, id, olderPrefix, newerPrefix string) *kgo.Client {
	t.Helper()
	older := txnClient(t, b, id)
	if err := older.BeginTransaction(); err != nil {
		t.Fatalf("%s: begin the older producer's transaction: %v", id, err)
	}
	produceValues(ctx, t, older, topic, olderPrefix, 5)
	runTxn(ctx, t, txnClient(t, b, id), topic, newerPrefix, 5, kgo.TryCommit)
	return older
}

// wantFenced fails the test unless err is the Kafka error want.
func wantFenced(t *testing.T, what string, err error, want *kerr.Error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v; want %s", what, err, want.Message)
	}
	t.Logf("%s: %v", what, err)
}
