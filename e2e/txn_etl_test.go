package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/internal/testutil"
)

const (
	etlRecords    = 20_000
	etlKeys       = 500
	etlPartitions = 6
	// etlBatch is the most input records one member polls into one transaction.
	etlBatch = 200
	etlGroup = "txn-etl"
	etlIn    = "txn-etl-in"
	etlOut   = "txn-etl-out"
)

// TestTxnETL runs an exactly-once consume-transform-produce pipeline of franz-go
// GroupTransactSessions, each member with its own transactional id, over 20,000 keyed input
// records produced in three parts: two members take the first part, a third joins before the
// second, the first leaves before the third, so the group rebalances while transactions run.
// A read_committed read of the output then holds exactly the transformed input, each record
// once, in input order per key.
func TestTxnETL(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t, groupOverrides()...)
		b.CreateTopic(t, etlIn, etlPartitions)
		b.CreateTopic(t, etlOut, etlPartitions)
		producer := b.Client(t)
		adm := b.Admin(t)
		start := time.Now()

		m0, m1 := startETLMember(t, b, 0), startETLMember(t, b, 1)
		members := []*etlMember{m0, m1}
		waitETL(t, "the first two members share the input", members, func() error { return etlCover(m0, m1) })
		produceETL(t, producer, 0, etlRecords/3)
		waitETL(t, "processing under way", members, func() error { return etlProgress(adm, etlRecords/6) })

		m2 := startETLMember(t, b, 2)
		members = append(members, m2)
		waitETL(t, "the joining member takes a share", members, func() error { return etlCover(m0, m1, m2) })
		produceETL(t, producer, etlRecords/3, 2*etlRecords/3)
		waitETL(t, "processing under way", members, func() error { return etlProgress(adm, etlRecords/2) })

		m0.stop(t)
		waitETL(t, "the remaining members take the leaver's share", members, func() error { return etlCover(m1, m2) })
		produceETL(t, producer, 2*etlRecords/3, etlRecords)
		waitETL(t, "all input committed", members, func() error { return etlProgress(adm, etlRecords) })
		m1.stop(t)
		m2.stop(t)
		for _, m := range members {
			t.Logf("%s: %d records in committed transactions, %d transactions aborted", m.name, m.committed.Load(), m.aborted.Load())
			if m.committed.Load() == 0 {
				t.Fatalf("%s committed no transaction; each member should have had a share of the input", m.name)
			}
		}
		t.Logf("ETL of %d records in %v", etlRecords, time.Since(start).Round(time.Millisecond))

		appendSentinels(t, b, etlOut, etlPartitions)
		checkETLOutput(t, readToSentinels(t, b, etlOut, etlPartitions, kgo.ReadCommitted()))
	})
}

// etlKey and etlValue are input record i: key i%etlKeys, value its number among its key's records.
func etlKey(i int) string   { return fmt.Sprintf("key-%03d", i%etlKeys) }
func etlValue(i int) string { return strconv.Itoa(i / etlKeys) }

// etlTransform is what the pipeline makes of an input value.
func etlTransform(v []byte) []byte { return append([]byte("etl:"), v...) }

// produceETL produces input records from..to-1, partitioned by key.
func produceETL(t *testing.T, cl *kgo.Client, from, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), txnWait)
	defer cancel()
	rs := make([]*kgo.Record, 0, to-from)
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Topic: etlIn, Key: []byte(etlKey(i)), Value: []byte(etlValue(i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce input records %d..%d: %v", from, to-1, err)
	}
}

// waitETL waits for cond, failing at once with a member's error if one stopped on one.
func waitETL(t *testing.T, what string, members []*etlMember, cond func() error) {
	t.Helper()
	testutil.WaitFor(t, txnWait, func() error {
		for _, m := range members {
			if err := m.failure(); err != nil {
				t.Fatalf("%s, waiting for %s: %v", m.name, what, err)
			}
		}
		if err := cond(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

// etlProgress is nil once the group's committed offsets on the input add up to at least want.
func etlProgress(adm *kadm.Client, want int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, etlGroup)
	if err != nil {
		return fmt.Errorf("fetch the offsets of group %s: %w", etlGroup, err)
	}
	var n int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == etlIn && o.Err == nil && o.At > 0 {
			n += o.At
		}
	})
	if n < int64(want) {
		return fmt.Errorf("group %s committed %d input offsets, want %d", etlGroup, n, want)
	}
	return nil
}

// etlCover is nil when the members own every input partition between them, each at least
// one and none a partition another owns.
func etlCover(members ...*etlMember) error {
	owner := map[int32]string{}
	for _, m := range members {
		ps := m.owned()
		if len(ps) == 0 {
			return fmt.Errorf("%s owns no partition", m.name)
		}
		for _, p := range ps {
			if o, ok := owner[p]; ok {
				return fmt.Errorf("partition %d owned by %s and %s", p, o, m.name)
			}
			owner[p] = m.name
		}
	}
	if len(owner) != etlPartitions {
		return fmt.Errorf("%d of %d partitions owned: %v", len(owner), etlPartitions, owner)
	}
	return nil
}

// checkETLOutput checks that out, the output by partition, holds each input record's
// transform once, and each key's records in input order.
func checkETLOutput(t *testing.T, out map[int32][]*kgo.Record) {
	t.Helper()
	next := map[string]int{} // per key, the number the next record of the key must carry
	for p, rs := range out {
		for _, r := range rs {
			v, ok := strings.CutPrefix(string(r.Value), "etl:")
			n, err := strconv.Atoi(v)
			if !ok || err != nil {
				t.Fatalf("output %d@%d: value %q is no transform of an input value", p, r.Offset, r.Value)
			}
			key := string(r.Key)
			if n != next[key] {
				t.Fatalf("output %d@%d: key %s record %d after %d of the key; a duplicate, gap or reorder", p, r.Offset, key, n, next[key])
			}
			next[key]++
		}
	}
	if len(next) != etlKeys {
		t.Fatalf("output has %d keys, want %d", len(next), etlKeys)
	}
	for _, key := range slices.Sorted(maps.Keys(next)) {
		if next[key] != etlRecords/etlKeys {
			t.Fatalf("output has %d records of %s, want %d", next[key], key, etlRecords/etlKeys)
		}
	}
}

// etlMember is one member of the ETL group: a GroupTransactSession that polls up to etlBatch
// input records, produces their transforms and commits their offsets in one transaction.
type etlMember struct {
	name   string
	sess   *kgo.GroupTransactSession
	cancel context.CancelFunc // stops polling
	done   chan struct{}      // closed when the poll loop returned
	closed sync.Once

	committed atomic.Int64 // input records whose transaction committed
	aborted   atomic.Int64 // transactions that aborted, as a rebalance began during them

	mu  sync.Mutex
	own map[int32]bool // input partitions assigned now
	err error          // why the poll loop stopped early
}

// startETLMember joins member i to the ETL group and starts its poll loop.
func startETLMember(t *testing.T, b *Broker, i int) *etlMember {
	t.Helper()
	m := &etlMember{name: fmt.Sprintf("etl-%d", i), done: make(chan struct{}), own: map[int32]bool{}}
	track := func(ps map[string][]int32, owned bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range ps[etlIn] {
			if owned {
				m.own[p] = true
			} else {
				delete(m.own, p)
			}
		}
	}
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(b.Addr()), kgo.ClientID(m.name), kgo.TransactionalID(m.name),
		kgo.ConsumerGroup(etlGroup), kgo.ConsumeTopics(etlIn),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(groupSession), kgo.HeartbeatInterval(groupHeartbeat),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { track(a, true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { track(r, false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) { track(l, false) }),
	)
	if err != nil {
		t.Fatalf("%s: new group transact session: %v", m.name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.sess, m.cancel = sess, cancel
	go m.run(ctx)
	t.Cleanup(func() { m.stop(t) })
	return m
}

func (m *etlMember) run(ctx context.Context) {
	defer close(m.done)
	for {
		fs := m.sess.PollRecords(ctx, etlBatch)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		if err := fs.Err(); err != nil {
			m.fail(fmt.Errorf("poll: %w", err))
			return
		}
		if fs.Empty() {
			continue
		}
		if err := m.transact(fs); err != nil {
			m.fail(err)
			return
		}
	}
}

// transact produces the transforms of fs's records and commits them with their offsets in
// one transaction; the session aborts instead if the group rebalanced meanwhile.
func (m *etlMember) transact(fs kgo.Fetches) error {
	ctx, cancel := context.WithTimeout(context.Background(), txnWait)
	defer cancel()
	if err := m.sess.Begin(); err != nil {
		return fmt.Errorf("begin a transaction: %w", err)
	}
	promise := kgo.AbortingFirstErrPromise(m.sess.Client())
	n := 0
	fs.EachRecord(func(r *kgo.Record) {
		m.sess.Produce(ctx, &kgo.Record{Topic: etlOut, Key: r.Key, Value: etlTransform(r.Value)}, promise.Promise())
		n++
	})
	produceErr := promise.Err()
	committed, err := m.sess.End(ctx, kgo.TransactionEndTry(produceErr == nil))
	switch {
	case err != nil:
		return fmt.Errorf("end a transaction of %d records (produce error %v): %w", n, produceErr, err)
	case produceErr != nil:
		return fmt.Errorf("produce %d records in a transaction: %w", n, produceErr)
	case committed:
		m.committed.Add(int64(n))
	default:
		m.aborted.Add(1)
	}
	return nil
}

func (m *etlMember) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.err = err
}

// failure is why the poll loop stopped early, nil while it runs or after a clean stop.
func (m *etlMember) failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// owned is the input partitions assigned to the member now, sorted.
func (m *etlMember) owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.own))
}

// stop ends the poll loop after its current transaction and leaves the group, and fails a
// test that has not failed yet if the loop stopped on an error; a second call does nothing.
func (m *etlMember) stop(t *testing.T) {
	t.Helper()
	m.closed.Do(func() {
		m.cancel()
		select {
		case <-m.done:
		case <-time.After(txnWait):
			t.Errorf("%s: poll loop still running %v after stop", m.name, txnWait)
		}
		m.sess.Close()
		if err := m.failure(); err != nil && !t.Failed() {
			t.Errorf("%s: %v", m.name, err)
		}
	})
}
