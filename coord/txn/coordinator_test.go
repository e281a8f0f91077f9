package txn

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/coord"
)

// TestInitProducerIDEpochs walks InitProducerId through a new id, a plain bump, KIP-360's bump of
// the current epoch and its retry, and a fenced epoch.
func TestInitProducerIDEpochs(t *testing.T) {
	h := newHarness(t)
	pid, epoch, err := h.initPID("a", 60000, -1, -1)
	if err != nil || epoch != 0 {
		t.Fatalf("new id: producer %d epoch %d err %v; want epoch 0", pid, epoch, err)
	}
	if p, e, err := h.initPID("a", 60000, -1, -1); err != nil || p != pid || e != 1 {
		t.Fatalf("second init: %d/%d %v; want %d/1", p, e, err, pid)
	}
	if p, e, err := h.initPID("a", 60000, pid, 1); err != nil || p != pid || e != 2 {
		t.Fatalf("KIP-360 bump of epoch 1: %d/%d %v; want %d/2", p, e, err, pid)
	}
	if p, e, err := h.initPID("a", 60000, pid, 1); err != nil || p != pid || e != 2 {
		t.Fatalf("retry of the bump from epoch 1: %d/%d %v; want %d/2 again", p, e, err, pid)
	}
	if _, _, err := h.initPID("a", 60000, pid, 0); err != kerr.ProducerFenced {
		t.Fatalf("init with an old epoch: %v; want PRODUCER_FENCED", err)
	}
	if _, _, err := h.initPID("a", 60000, pid+99, 0); err != kerr.ProducerFenced {
		t.Fatalf("init with another producer id: %v; want PRODUCER_FENCED", err)
	}
	if _, _, err := h.initPID("a", int32((16 * time.Minute).Milliseconds()), -1, -1); err != kerr.InvalidTransactionTimeout {
		t.Fatalf("timeout above transaction.max.timeout.ms: %v; want INVALID_TRANSACTION_TIMEOUT", err)
	}
	got := h.store.states(t, PartitionFor("a", 4))
	if want := []string{"Empty", "Empty", "Empty"}; !slices.Equal(got, want) {
		t.Fatalf("records %v; want %v (one per bump, none for the retry)", got, want)
	}
}

// TestInitProducerIDExhaustedEpoch moves an id whose epoch is exhausted to a new producer id.
func TestInitProducerIDExhaustedEpoch(t *testing.T) {
	h := newHarness(t)
	pid, _, err := h.initPID("x", 60000, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	h.c.onShardOf("x", func(s *shard, p int32) { s.parts[p].txns["x"].producerEpoch = maxProducerEpoch })
	p2, e2, err := h.initPID("x", 60000, pid, maxProducerEpoch)
	if err != nil || p2 == pid || e2 != 0 {
		t.Fatalf("init at an exhausted epoch: %d/%d %v; want a new producer id at epoch 0", p2, e2, err)
	}
}

// TestCommitWritesMarkers commits a transaction over two partitions and a group's offsets: the
// state goes Ongoing, PrepareCommit, CompleteCommit, and COMMIT markers with the coordinator
// epoch reach every partition, the group's __consumer_offsets partition included.
func TestCommitWritesMarkers(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.initPID("c", 60000, -1, -1)
	if err := h.addPartitions("c", pid, epoch, "t", 0, 1); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "c", pid, epoch, "g"
	if code := h.do(req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; code != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", errOf(code))
	}
	st, _ := h.describe("c")
	if st.State != "Ongoing" || len(st.Topics) != 2 {
		t.Fatalf("before the commit: %+v; want Ongoing over two topics", st)
	}
	if err := h.endTxn("c", pid, epoch, true); err != nil {
		t.Fatal(err)
	}
	h.waitState("c", "CompleteCommit")
	ms := h.markers.all()
	want := []TopicPartition{{offsetsTopic, coord.PartitionFor("g", 5)}, {"t", 0}, {"t", 1}}
	if len(ms) != 1 || !ms[0].Commit || ms[0].ProducerID != pid || ms[0].ProducerEpoch != epoch || ms[0].CoordinatorEpoch != 7 ||
		!slices.Equal(ms[0].Partitions, want) {
		t.Fatalf("markers %+v; want one COMMIT of %d/%d at coordinator epoch 7 to %v", ms, pid, epoch, want)
	}
	got := h.store.states(t, PartitionFor("c", 4))
	if want := []string{"Empty", "Ongoing", "Ongoing", "PrepareCommit", "CompleteCommit"}; !slices.Equal(got, want) {
		t.Fatalf("records %v; want %v", got, want)
	}
	if err := h.endTxn("c", pid, epoch, true); err != nil {
		t.Fatalf("retry of a completed commit: %v; want NONE", err)
	}
	if err := h.endTxn("c", pid, epoch, false); err != kerr.InvalidTxnState {
		t.Fatalf("abort after a completed commit: %v; want INVALID_TXN_STATE", err)
	}
}

// TestEndTxnErrors checks EndTxn's refusals.
func TestEndTxnErrors(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.initPID("e", 60000, -1, -1)
	for _, tc := range []struct {
		name  string
		pid   int64
		epoch int16
		want  *kerr.Error
	}{
		{"an Empty transaction", pid, epoch, kerr.InvalidTxnState},
		{"another producer id", pid + 1, epoch, kerr.InvalidProducerIDMapping},
		{"another epoch", pid, epoch + 1, kerr.ProducerFenced},
	} {
		if err := h.endTxn("e", tc.pid, tc.epoch, true); err != tc.want {
			t.Errorf("%s: %v; want %v", tc.name, err, tc.want)
		}
	}
	if err := h.endTxn("unknown", 1, 0, true); err != kerr.InvalidProducerIDMapping {
		t.Errorf("unknown id: %v; want INVALID_PRODUCER_ID_MAPPING", err)
	}
	if err := h.addPartitions("e", pid, epoch, "gone", 0); err != kerr.UnknownTopicOrPartition {
		t.Errorf("add a partition that does not exist: %v; want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if err := h.addPartitions("e", pid, epoch+1, "t", 0); err != kerr.ProducerFenced {
		t.Errorf("add with another epoch: %v; want PRODUCER_FENCED", err)
	}
}

// TestMarkersRetried fails one partition's marker once: it is sent again after the backoff,
// only to that partition, and the transaction completes.
func TestMarkersRetried(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.initPID("r", 60000, -1, -1)
	h.addPartitions("r", pid, epoch, "t", 0, 1)
	h.markers.mu.Lock()
	h.markers.failOnce[TopicPartition{"t", 1}] = true
	h.markers.mu.Unlock()
	if err := h.endTxn("r", pid, epoch, false); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if st, _ := h.describe("r"); st.State != "PrepareAbort" {
		t.Fatalf("with a marker failed: %s; want PrepareAbort", st.State)
	}
	h.clock.Advance(time.Second)
	h.waitState("r", "CompleteAbort")
	ms := h.markers.all()
	if len(ms) != 2 || ms[1].Commit || !slices.Equal(ms[1].Partitions, []TopicPartition{{"t", 1}}) {
		t.Fatalf("markers %+v; want the ABORT retried to t-1 only", ms)
	}
}

// TestTimedOutTransactionAborted leaves a transaction open past its timeout: the coordinator
// bumps the epoch, writes ABORT markers with it, and the producer that opened it is fenced.
func TestTimedOutTransactionAborted(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.initPID("slow", 5000, -1, -1)
	h.addPartitions("slow", pid, epoch, "t", 3)
	h.clock.Advance(4 * time.Second)
	h.settle()
	if st, _ := h.describe("slow"); st.State != "Ongoing" {
		t.Fatalf("4 s into a 5 s timeout: %s; want Ongoing", st.State)
	}
	h.clock.Advance(6 * time.Second)
	h.waitState("slow", "CompleteAbort")
	ms := h.markers.all()
	if len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != epoch+1 {
		t.Fatalf("markers %+v; want one ABORT at the bumped epoch %d", ms, epoch+1)
	}
	if err := h.endTxn("slow", pid, epoch, true); err != kerr.ProducerFenced {
		t.Fatalf("the timed-out producer's commit: %v; want PRODUCER_FENCED", err)
	}
}

// TestInitDuringTransaction starts a producer with the id of one whose transaction is open: the
// open transaction is aborted and the new producer, told CONCURRENT_TRANSACTIONS, gets a newer
// epoch once it retries.
func TestInitDuringTransaction(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.initPID("dup", 60000, -1, -1)
	h.addPartitions("dup", pid, epoch, "t", 0)
	if _, _, err := h.initPID("dup", 60000, -1, -1); err != kerr.ConcurrentTransactions {
		t.Fatalf("init during an open transaction: %v; want CONCURRENT_TRANSACTIONS", err)
	}
	h.waitState("dup", "CompleteAbort")
	p2, e2, err := h.initPID("dup", 60000, -1, -1)
	if err != nil || p2 != pid || e2 != epoch+2 {
		t.Fatalf("retried init: %d/%d %v; want %d/%d", p2, e2, err, pid, epoch+2)
	}
	if err := h.addPartitions("dup", pid, epoch, "t", 0); err != kerr.ProducerFenced {
		t.Fatalf("the old producer's add: %v; want PRODUCER_FENCED", err)
	}
}

// TestLoadCompletesPreparedTransaction reloads a partition whose log ends in PrepareCommit: the
// markers are written again and the transaction completes.
func TestLoadCompletesPreparedTransaction(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.initPID("p", 60000, -1, -1)
	h.addPartitions("p", pid, epoch, "t", 0)
	h.store.mu.Lock()
	h.store.fail = errors.Join(errors.New("disk full"), kerr.KafkaStorageError)
	h.store.mu.Unlock()
	if err := h.endTxn("p", pid, epoch, true); err != kerr.NotCoordinator {
		t.Fatalf("commit whose record fails: %v; want NOT_COORDINATOR", err)
	}
	h.store.mu.Lock()
	h.store.fail = nil
	part := PartitionFor("p", 4)
	m := &metadata{id: "p", producerID: pid, producerEpoch: epoch, timeoutMs: 60000, state: PrepareCommit,
		partitions: map[TopicPartition]struct{}{{"t", 0}: {}}, startMs: 1, updatedMs: 2}
	h.store.records[part] = append(h.store.records[part], m.record())
	h.store.mu.Unlock()
	if err := h.c.UnloadPartition(part); err != nil {
		t.Fatal(err)
	}
	if _, err := h.describe("p"); err != kerr.NotCoordinator {
		t.Fatalf("describe on an unloaded partition: %v; want NOT_COORDINATOR", err)
	}
	h.store.mu.Lock()
	h.store.hold = make(chan struct{})
	h.store.mu.Unlock()
	done := make(chan error, 1)
	h.c.LoadPartition(part, 8, func(err error) { done <- err })
	if _, err := h.describe("p"); err != kerr.CoordinatorLoadInProgress {
		t.Fatalf("describe while loading: %v; want COORDINATOR_LOAD_IN_PROGRESS", err)
	}
	close(h.store.hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.waitState("p", "CompleteCommit")
	ms := h.markers.all()
	if len(ms) != 1 || !ms[0].Commit || ms[0].CoordinatorEpoch != 8 {
		t.Fatalf("markers %+v; want one COMMIT at coordinator epoch 8", ms)
	}
}

// TestIDExpiration removes an id idle for transactional.id.expiration.ms with a tombstone.
func TestIDExpiration(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.IDExpiration = time.Hour
		c.RemoveExpiredInterval = time.Minute
		c.AbortTimedOutInterval = time.Hour
	})
	h.initPID("old", 60000, -1, -1)
	h.clock.Advance(59 * time.Minute)
	h.settle()
	if _, err := h.describe("old"); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	h.clock.Advance(2 * time.Minute)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := h.describe("old"); err == kerr.TransactionalIDNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("id not removed after its expiration")
		}
		time.Sleep(time.Millisecond)
	}
	got := h.store.states(t, PartitionFor("old", 4))
	if want := []string{"Empty", "tombstone"}; !slices.Equal(got, want) {
		t.Fatalf("records %v; want %v", got, want)
	}
}

// TestListTransactionsFilters lists transactions by state, producer id and id pattern.
func TestListTransactionsFilters(t *testing.T) {
	h := newHarness(t)
	pa, ea, _ := h.initPID("list-a", 60000, -1, -1)
	h.addPartitions("list-a", pa, ea, "t", 0)
	pb, _, _ := h.initPID("list-b", 60000, -1, -1)
	list := func(mod func(*kmsg.ListTransactionsRequest)) ([]string, []string) {
		req := kmsg.NewPtrListTransactionsRequest()
		req.Version = 2
		mod(req)
		resp := h.do(req).(*kmsg.ListTransactionsResponse)
		var ids []string
		for _, s := range resp.TransactionStates {
			ids = append(ids, s.TransactionalID)
		}
		return ids, resp.UnknownStateFilters
	}
	if ids, _ := list(func(*kmsg.ListTransactionsRequest) {}); !slices.Equal(ids, []string{"list-a", "list-b"}) {
		t.Errorf("all: %v", ids)
	}
	if ids, unknown := list(func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Ongoing", "Bogus"} }); !slices.Equal(ids, []string{"list-a"}) || !slices.Equal(unknown, []string{"Bogus"}) {
		t.Errorf("Ongoing: %v, unknown %v", ids, unknown)
	}
	if ids, _ := list(func(r *kmsg.ListTransactionsRequest) { r.ProducerIDFilters = []int64{pb} }); !slices.Equal(ids, []string{"list-b"}) {
		t.Errorf("producer %d: %v", pb, ids)
	}
	if ids, _ := list(func(r *kmsg.ListTransactionsRequest) { r.TransactionalIDPattern = kmsg.StringPtr("-b$") }); !slices.Equal(ids, []string{"list-b"}) {
		t.Errorf("pattern -b$: %v", ids)
	}
	if ids, _ := list(func(r *kmsg.ListTransactionsRequest) { r.DurationFilterMillis = 1000 }); len(ids) != 0 {
		t.Errorf("running over 1 s at once: %v", ids)
	}
	h.clock.Advance(2 * time.Second)
	if ids, _ := list(func(r *kmsg.ListTransactionsRequest) { r.DurationFilterMillis = 1000 }); !slices.Equal(ids, []string{"list-a"}) {
		t.Errorf("running over 1 s after 2 s: %v", ids)
	}
}

// TestEndTxnV5BumpsEpoch ends transactions with EndTxn v5 (transaction version 2): each decision
// bumps the epoch, its markers carry the new one, a retry with the old epoch gets the same
// answer, an abort with no transaction open bumps the epoch too, and an exhausted epoch moves
// the producer to a new id once the transaction completes.
func TestEndTxnV5BumpsEpoch(t *testing.T) {
	h := newHarness(t)
	end := func(pid int64, epoch int16, commit bool) (int64, int16, *kerr.Error) {
		t.Helper()
		req := kmsg.NewPtrEndTxnRequest()
		req.Version = 5
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "v5", pid, epoch, commit
		resp := h.do(req).(*kmsg.EndTxnResponse)
		return resp.ProducerID, resp.ProducerEpoch, errOf(resp.ErrorCode)
	}
	pid, epoch, _ := h.initPID("v5", 60000, -1, -1)
	h.addPartitions("v5", pid, epoch, "t", 0)
	p2, e2, err := end(pid, epoch, true)
	if err != nil || p2 != pid || e2 != epoch+1 {
		t.Fatalf("commit: %d/%d %v; want %d/%d", p2, e2, err, pid, epoch+1)
	}
	h.waitState("v5", "CompleteCommit")
	if ms := h.markers.all(); len(ms) != 1 || ms[0].ProducerEpoch != epoch+1 || !ms[0].Commit {
		t.Fatalf("markers %+v; want one COMMIT at the bumped epoch %d", ms, epoch+1)
	}
	if p, e, err := end(pid, epoch, true); err != nil || p != pid || e != epoch+1 {
		t.Fatalf("retry with the old epoch: %d/%d %v; want %d/%d", p, e, err, pid, epoch+1)
	}
	if p, e, err := end(pid, epoch+1, false); err != nil || p != pid || e != epoch+2 {
		t.Fatalf("abort with nothing open: %d/%d %v; want %d/%d", p, e, err, pid, epoch+2)
	}
	if _, _, err := end(pid, epoch, true); err != kerr.ProducerFenced {
		t.Fatalf("an epoch two bumps old: %v; want PRODUCER_FENCED", err)
	}

	h.c.onShardOf("v5", func(s *shard, p int32) { s.parts[p].txns["v5"].producerEpoch = maxProducerEpoch })
	h.settle()
	h.addPartitions("v5", pid, maxProducerEpoch, "t", 1)
	p3, e3, err := end(pid, maxProducerEpoch, true)
	if err != nil || p3 == pid || e3 != 0 {
		t.Fatalf("commit at the exhausted epoch: %d/%d %v; want a new producer id at epoch 0", p3, e3, err)
	}
	h.waitState("v5", "CompleteCommit")
	ms := h.markers.all()
	if last := ms[len(ms)-1]; last.ProducerID != pid || last.ProducerEpoch != maxProducerEpoch {
		t.Fatalf("markers of the exhausted epoch's transaction: %+v; want the old id and epoch", last)
	}
	if err := h.addPartitions("v5", p3, 0, "t", 2); err != nil {
		t.Fatalf("the new producer id's first transaction: %v", err)
	}
}

// TestLentShard checks that a request finding its shard idle runs on the caller (answered
// before Handle returns, its append tried there), that an EndTxn whose append would block there
// is handed to the shard's goroutine and still answered and completed, and that InitProducerId,
// which may wait for a producer id, never allocates one on the caller.
func TestLentShard(t *testing.T) {
	h := newHarness(t)
	// waitIdle waits until the shard's goroutine waits with nothing queued; nothing else wakes it
	// here (the clock is manual), so the next request finds it idle.
	waitIdle := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !h.c.shards[0].loop.Lend(func() {}) {
			if time.Now().After(deadline) {
				t.Fatal("the shard was not idle within 10 s")
			}
			time.Sleep(time.Millisecond)
		}
	}
	// handleNow sends req to the idle shard and returns its response if Handle answered it
	// before returning, else nil once the shard's goroutine has answered it.
	handleNow := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		waitIdle()
		ch := make(chan kmsg.Response, 1)
		if err := h.c.Handle(req, func(r kmsg.Response) { ch <- r }); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-ch:
			return r
		default:
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no response", kmsg.NameForKey(req.Key()))
		}
		return nil
	}

	if handleNow(kmsg.NewPtrDescribeTransactionsRequest()) == nil {
		t.Fatal("DescribeTransactions on an idle shard was not answered on the caller")
	}
	pid, epoch, _ := h.initPID("l", 60000, -1, -1)
	if n := h.lentPIDs.Load(); n != 0 {
		t.Fatalf("%d producer ids allocated on the caller; want none", n)
	}
	if err := h.addPartitions("l", pid, epoch, "t", 0); err != nil {
		t.Fatal(err)
	}
	end := func(commit bool) kmsg.Response {
		req := kmsg.NewPtrEndTxnRequest()
		req.Version = 3
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "l", pid, epoch, commit
		return handleNow(req)
	}

	tries := h.store.tries.Load()
	r := end(true)
	if r == nil || h.store.tries.Load() != tries+1 {
		t.Fatalf("EndTxn on an idle shard: answered on the caller %v, appends tried %d; want true, 1", r != nil, h.store.tries.Load()-tries)
	}
	if code := r.(*kmsg.EndTxnResponse).ErrorCode; code != 0 {
		t.Fatalf("lent EndTxn: %v", errOf(code))
	}
	h.waitState("l", "CompleteCommit")

	if err := h.addPartitions("l", pid, epoch, "t", 1); err != nil {
		t.Fatal(err)
	}
	h.store.wouldBlock.Store(true)
	tries = h.store.tries.Load()
	end(false)
	if n := h.store.tries.Load() - tries; n != 1 {
		t.Fatalf("EndTxn whose append would block tried %d appends on the caller; want 1", n)
	}
	// TryAppend wrote nothing: the shard's goroutine appended PrepareAbort and CompleteAbort.
	h.waitState("l", "CompleteAbort")
	got := h.store.states(t, PartitionFor("l", 4))
	if want := []string{"Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort", "CompleteAbort"}; !slices.Equal(got, want) {
		t.Fatalf("records %v; want %v", got, want)
	}
}
