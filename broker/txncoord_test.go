package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"ringbroker/internal/testutil"
)

// consumeAll reads topic from the start with isolation until it has seen want records or the
// context ends, and returns the values it saw.
func consumeAll(ctx context.Context, t *testing.T, b *Broker, topic string, isolation kgo.IsolationLevel, want int) []string {
	t.Helper()
	cl := newClient(t, b, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(isolation), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// produceTxn produces values in one transaction of cl and commits or aborts it.
func produceTxn(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, commit bool, values ...string) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	end := kgo.TryAbort
	if commit {
		end = kgo.TryCommit
	}
	if err := cl.EndTransaction(ctx, end); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

// TestTransactionsCommitAndAbort drives franz-go's transactional producer against one broker:
// committed records are read by read_committed and read_uncommitted consumers, aborted ones by
// read_uncommitted only, and the admin APIs describe and list the transactional id.
func TestTransactionsCommitAndAbort(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		b := startBroker(t, io, t.TempDir())
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		adm := kadm.NewClient(newClient(t, b))
		if _, err := adm.CreateTopic(ctx, 3, 1, nil, "tx"); err != nil {
			t.Fatal(err)
		}
		cl := newClient(t, b, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("tx"))
		produceTxn(ctx, t, cl, "tx", true, "c1", "c2")
		produceTxn(ctx, t, cl, "tx", false, "a1")
		produceTxn(ctx, t, cl, "tx", true, "c3")

		committed := consumeAll(ctx, t, b, "tx", kgo.ReadCommitted(), 3)
		slices.Sort(committed)
		if !slices.Equal(committed, []string{"c1", "c2", "c3"}) {
			t.Fatalf("read_committed saw %v; want c1 c2 c3", committed)
		}
		all := consumeAll(ctx, t, b, "tx", kgo.ReadUncommitted(), 4)
		slices.Sort(all)
		if !slices.Equal(all, []string{"a1", "c1", "c2", "c3"}) {
			t.Fatalf("read_uncommitted saw %v; want a1 c1 c2 c3", all)
		}

		// The last EndTxn returned at PrepareCommit; the coordinator moves to CompleteCommit
		// once the partitions' markers are written, as Kafka's does.
		var d kadm.DescribedTransaction
		testutil.WaitFor(t, 10*time.Second, func() error {
			described, err := adm.DescribeTransactions(ctx, "tx-1")
			if err != nil {
				return err
			}
			var ok bool
			if d, ok = described["tx-1"]; !ok || d.Err != nil || d.State != "CompleteCommit" {
				return fmt.Errorf("describe tx-1: %+v (ok %v); want CompleteCommit", d, ok)
			}
			return nil
		})
		listed, err := adm.ListTransactions(ctx, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l, ok := listed["tx-1"]; !ok || l.State != "CompleteCommit" || l.ProducerID != d.ProducerID {
			t.Fatalf("list: %+v; want tx-1 CompleteCommit with producer %d", listed, d.ProducerID)
		}
	})
}

// TestTransactionFencing opens a transaction with one producer and starts a second with the same
// transactional id: the coordinator aborts the first's transaction, and its next requests are
// fenced.
func TestTransactionFencing(t *testing.T) {
	b := startBroker(t, "netpoll", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "fence"); err != nil {
		t.Fatal(err)
	}
	old := newClient(t, b, kgo.TransactionalID("fenced"), kgo.DefaultProduceTopic("fence"))
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, kgo.StringRecord("old-1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	young := newClient(t, b, kgo.TransactionalID("fenced"), kgo.DefaultProduceTopic("fence"))
	produceTxn(ctx, t, young, "fence", true, "young-1")

	err := old.ProduceSync(ctx, kgo.StringRecord("old-2")).FirstErr()
	if err == nil {
		err = old.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer got %v; want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	got := consumeAll(ctx, t, b, "fence", kgo.ReadCommitted(), 1)
	if !slices.Equal(got, []string{"young-1"}) {
		t.Fatalf("read_committed saw %v; want young-1 only", got)
	}
}

// TestTransactionTimeout leaves a transaction open past its timeout: the coordinator aborts it,
// so the last stable offset moves past it and read_committed consumers never see its records.
func TestTransactionTimeout(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "netpoll", t.TempDir(), "transaction.abort.timed.out.transaction.cleanup.interval.ms=200")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "hung"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, b, kgo.TransactionalID("hung-1"), kgo.TransactionTimeout(time.Second), kgo.DefaultProduceTopic("hung"))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("hung")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := adm.DescribeTransactions(ctx, "hung-1")
		if err != nil {
			t.Fatal(err)
		}
		if s := d["hung-1"].State; s == "CompleteAbort" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("transaction still %s 20 s after its 1 s timeout", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	plain := newClient(t, b, kgo.DefaultProduceTopic("hung"))
	if err := plain.ProduceSync(ctx, kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consumeAll(ctx, t, b, "hung", kgo.ReadCommitted(), 1)
	if !slices.Equal(got, []string{"after"}) {
		t.Fatalf("read_committed saw %v; want only the record after the aborted transaction", got)
	}
}

// TestInitProducerIDErrors checks InitProducerId's validation of transactional requests.
func TestInitProducerIDErrors(t *testing.T) {
	b := startBroker(t, "netpoll", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b)
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorType = 1
	find.CoordinatorKey = "ids"
	if _, err := find.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id      string
		timeout int32
		want    *kerr.Error
	}{
		{"", 60000, kerr.InvalidRequest},
		{"ids", 0, kerr.InvalidTransactionTimeout},
		{"ids", 900001, kerr.InvalidTransactionTimeout},
	} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr(tc.id)
		req.TransactionTimeoutMillis = tc.timeout
		var resp *kmsg.InitProducerIDResponse
		err := fmt.Errorf("no response")
		for range 50 {
			resp, err = req.RequestWith(ctx, cl)
			if err != nil || resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != tc.want.Code {
			t.Errorf("id %q timeout %d: error %v; want %v", tc.id, tc.timeout, kerr.ErrorForCode(resp.ErrorCode), tc.want)
		}
	}
}

// TestTransactionsAcrossNodes commits transactions whose partitions are led by all three nodes of
// a cluster, so that markers go to other brokers, then shuts the transaction coordinator down in
// the middle of a transaction: the producer commits it through the node that takes over the
// coordinator's __transaction_state partition, and read_committed consumers see every committed
// record and none of an aborted transaction.
func TestTransactionsAcrossNodes(t *testing.T) {
	t.Parallel()
	bs, ctx, adm := replicatedCluster(t, "xt", 6, nil)
	const id = "across"
	cl := newClient(t, bs[0], clusterSeeds(bs), kgo.TransactionalID(id), kgo.DefaultProduceTopic("xt"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(60*time.Second))
	txn := func(prefix string) []*kgo.Record {
		var recs []*kgo.Record
		for p := range int32(6) {
			recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%s-%d", prefix, p)})
		}
		return recs
	}
	produce := func(recs []*kgo.Record) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	end := func(how kgo.TransactionEndTry) {
		t.Helper()
		if err := cl.EndTransaction(ctx, how); err != nil {
			t.Fatalf("end transaction: %v", err)
		}
	}
	start := time.Now()
	produce(txn("a"))
	end(kgo.TryCommit)
	produce(txn("x"))
	end(kgo.TryAbort)
	produce(txn("b"))
	t.Logf("three transactions over six partitions in %v", time.Since(start))

	coordinator := adm.FindTxnCoordinators(ctx, id)[id]
	if coordinator.Err != nil {
		t.Fatal(coordinator.Err)
	}
	var live []*Broker
	for _, b := range bs {
		if b.cfg.NodeID == coordinator.NodeID {
			b.Shutdown(context.Background())
			continue
		}
		live = append(live, b)
	}
	start = time.Now()
	end(kgo.TryCommit)
	t.Logf("committed through the new coordinator in %v", time.Since(start))

	var want []string
	for _, r := range append(txn("a"), txn("b")...) {
		want = append(want, string(r.Value))
	}
	slices.Sort(want)
	consumer := newClient(t, live[0], clusterSeeds(live), kgo.ConsumeTopics("xt"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < len(want) && ctx.Err() == nil {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v; want %v", got, want)
	}
}

// TestProduceVerifiesTransaction sends a transactional batch, with Produce v11 (a client of
// transaction version 1), to a partition its producer did not add to its transaction: the
// coordinator does not verify it and Produce refuses it with INVALID_TXN_STATE, writing nothing;
// once the partition is added, the same batch is written.
func TestProduceVerifiesTransaction(t *testing.T) {
	b := startBroker(t, "netpoll", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.MaxVersions(kversion.V3_6_0()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "verified"); err != nil {
		t.Fatal(err)
	}
	const id = "txn-test" // the transactional id produceRaw sends
	p := initTxnProducer(ctx, t, cl, id)
	if code, _ := produceRaw(ctx, t, b, cl, "verified", p, 0, txnWithID, "stray"); code != kerr.InvalidTxnState.Code {
		t.Fatalf("batch of a partition outside the transaction: %v; want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	if _, end := endOffsets(t, adm, "verified"); end != 0 {
		t.Fatalf("end offset %d after a refused batch; want 0", end)
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, p.id, p.epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "verified", []int32{0}
	add.Topics = append(add.Topics, at)
	resp, err := add.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add partition: %v %+v", err, resp)
	}
	if code, base := produceRaw(ctx, t, b, cl, "verified", p, 0, txnWithID, "added"); code != 0 || base != 0 {
		t.Fatalf("batch of an added partition: %v at %d; want written at 0", kerr.ErrorForCode(code), base)
	}
}

// TestProduceAddsPartitionForTV2 sends a transactional batch with Produce v12+ on a cluster at
// transaction.version 2: the leader adds the partition to the producer's transaction itself
// (KIP-890 part 2), and DescribeTransactions shows it Ongoing with that partition.
func TestProduceAddsPartitionForTV2(t *testing.T) {
	b := startBroker(t, "netpoll", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "implicit"); err != nil {
		t.Fatal(err)
	}
	const id = "txn-test"
	p := initTxnProducer(ctx, t, cl, id)
	if code, base := produceRaw(ctx, t, b, cl, "implicit", p, 0, txnWithID, "implicit"); code != 0 || base != 0 {
		t.Fatalf("batch of a transaction version 2 producer: %v at %d; want written at 0", kerr.ErrorForCode(code), base)
	}
	d, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	st := d[id]
	if st.State != "Ongoing" || len(st.Topics["implicit"]) != 1 {
		t.Fatalf("after the produce: %+v; want Ongoing with implicit-0", st)
	}
}

// initTxnProducer creates the transaction coordinator's topic with a FindCoordinator for id and
// returns the producer InitProducerId gives id once its partition is loaded.
func initTxnProducer(ctx context.Context, t *testing.T, cl *kgo.Client, id string) txnProducer {
	t.Helper()
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorType, find.CoordinatorKey = 1, id
	if _, err := find.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
	for {
		resp, err := init.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode == 0 {
			return txnProducer{resp.ProducerID, resp.ProducerEpoch}
		}
		if resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code || ctx.Err() != nil {
			t.Fatalf("init producer id: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
