package broker

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"ringbroker/coord"
	"ringbroker/internal/testutil"
)

// txnOffsetsGroup is the group TestTxnOffsetCommit commits for; with one __consumer_offsets
// partition its coordinator partition is 0.
const txnOffsetsGroup = "txn-offsets"

// txnCommitOffsets sends TxnOffsetCommit for txnOffsetsGroup from producer p and returns the
// partition error codes by topic and partition.
func txnCommitOffsets(ctx context.Context, t *testing.T, cl *kgo.Client, p txnProducer, offsets map[string]map[int32]int64) map[string]map[int32]int16 {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID = fmt.Sprintf("txn-%d", p.id)
	req.Group = txnOffsetsGroup
	req.ProducerID, req.ProducerEpoch = p.id, p.epoch
	for topic, parts := range offsets {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		for part, off := range parts {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = part, off
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("txn offset commit: %v", err)
	}
	codes := map[string]map[int32]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = map[int32]int16{}
		for _, rp := range rt.Partitions {
			codes[rt.Topic][rp.Partition] = rp.ErrorCode
		}
	}
	return codes
}

// mustTxnCommit commits offsets of topic src from p and fails unless every partition is OK.
func mustTxnCommit(ctx context.Context, t *testing.T, cl *kgo.Client, p txnProducer, offsets map[int32]int64) {
	t.Helper()
	codes := txnCommitOffsets(ctx, t, cl, p, map[string]map[int32]int64{"src": offsets})
	for part, code := range codes["src"] {
		if code != 0 {
			t.Fatalf("txn offset commit of src-%d by producer %d: %v", part, p.id, kerr.ErrorForCode(code))
		}
	}
}

// fetchGroupOffsets answers OffsetFetch v9 for partitions 0 and 1 of src, as offsets or, for a
// partition with an error, the error's negated code.
func fetchGroupOffsets(ctx context.Context, t *testing.T, cl *kgo.Client, requireStable bool) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = requireStable
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = txnOffsetsGroup
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = "src", []int32{0, 1}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 {
		t.Fatalf("offset fetch: %+v", resp.Groups)
	}
	got := map[int32]int64{}
	for _, rp := range resp.Groups[0].Topics[0].Partitions {
		got[rp.Partition] = rp.Offset
		if rp.ErrorCode != 0 {
			got[rp.Partition] = -int64(rp.ErrorCode)
		}
	}
	return got
}

// unstable is what fetchGroupOffsets reports for UNSTABLE_OFFSET_COMMIT.
var unstable = -int64(kerr.UnstableOffsetCommit.Code)

// expectOffsets fails unless fetchGroupOffsets answers want, read_committed style and with
// require_stable.
func expectOffsets(ctx context.Context, t *testing.T, cl *kgo.Client, what string, want, wantStable map[int32]int64) {
	t.Helper()
	if got := fetchGroupOffsets(ctx, t, cl, false); !maps.Equal(got, want) {
		t.Fatalf("%s: OffsetFetch = %v; want %v", what, got, want)
	}
	if got := fetchGroupOffsets(ctx, t, cl, true); !maps.Equal(got, wantStable) {
		t.Fatalf("%s: OffsetFetch require_stable = %v; want %v", what, got, wantStable)
	}
}

// waitGroupCoordinator waits until b leads __consumer_offsets partition part and serves group.
func waitGroupCoordinator(ctx context.Context, t *testing.T, b *Broker, cl *kgo.Client, group string, part int32) {
	t.Helper()
	testutil.WaitFor(t, 20*time.Second, func() error {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = group
		resp, err := fc.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		if b.parts.Load().leader(offsetsTopic, part) == nil {
			return fmt.Errorf("%s-%d not led by node %d yet", offsetsTopic, part, b.cfg.NodeID)
		}
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		req.Groups = append(req.Groups, rg)
		fr, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(fr.Groups[0].ErrorCode)
	})
}

// endTxn writes producer p's COMMIT or ABORT marker to __consumer_offsets partition part.
func endTxn(ctx context.Context, t *testing.T, b *Broker, cl *kgo.Client, p txnProducer, commit bool, part int32) {
	t.Helper()
	codes := writeMarkers(ctx, t, b, cl, txnMarker{p: p, commit: commit, coordEpoch: 1, topic: offsetsTopic, partitions: []int32{part}})
	if code := codes[0][offsetsTopic][part]; code != 0 {
		t.Fatalf("marker (commit %t) of producer %d: %v", commit, p.id, kerr.ErrorForCode(code))
	}
}

// TestTxnOffsetCommit drives transactional offset commits through a real broker without its
// transaction coordinator (verification off): TxnOffsetCommit by kmsg, the transaction's end by WriteTxnMarkers to
// the group's __consumer_offsets partition, and OffsetFetch with and without require_stable.
// Pending offsets are invisible until the COMMIT marker, dropped by ABORT, and survive broker
// restarts both pending and committed.
func TestTxnOffsetCommit(t *testing.T) {
	dir := t.TempDir()
	overrides := []string{"offsets.topic.num.partitions=1", noTxnVerification}
	b := startBroker(t, "netpoll", dir, overrides...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.OffsetFetch.Int16(), 9) // v10 addresses topics by id
	cl := newClient(t, b, kgo.MaxVersions(versions))
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "src"); err != nil {
		t.Fatal(err)
	}
	waitGroupCoordinator(ctx, t, b, cl, txnOffsetsGroup, 0)
	a, c := initProducer(ctx, t, cl), initProducer(ctx, t, cl)

	// a commits in a transaction: pending until its COMMIT marker; an unknown topic fails alone.
	codes := txnCommitOffsets(ctx, t, cl, a, map[string]map[int32]int64{"src": {0: 5, 1: 7}, "nope": {0: 1}})
	if codes["src"][0] != 0 || codes["src"][1] != 0 || codes["nope"][0] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("txn offset commit: %v; want src OK, nope UNKNOWN_TOPIC_OR_PARTITION", codes)
	}
	expectOffsets(ctx, t, cl, "pending", map[int32]int64{0: -1, 1: -1}, map[int32]int64{0: unstable, 1: unstable})
	endTxn(ctx, t, b, cl, a, true, 0)
	expectOffsets(ctx, t, cl, "committed", map[int32]int64{0: 5, 1: 7}, map[int32]int64{0: 5, 1: 7})

	// c commits twice in one transaction (equal batches, which the log must not take for
	// duplicates) and aborts: nothing changes. Its next transaction, same epoch, commits.
	mustTxnCommit(ctx, t, cl, c, map[int32]int64{0: 50})
	mustTxnCommit(ctx, t, cl, c, map[int32]int64{1: 51})
	expectOffsets(ctx, t, cl, "c pending", map[int32]int64{0: 5, 1: 7}, map[int32]int64{0: unstable, 1: unstable})
	endTxn(ctx, t, b, cl, c, false, 0)
	expectOffsets(ctx, t, cl, "c aborted", map[int32]int64{0: 5, 1: 7}, map[int32]int64{0: 5, 1: 7})
	mustTxnCommit(ctx, t, cl, c, map[int32]int64{1: 52})
	endTxn(ctx, t, b, cl, c, true, 0)
	expectOffsets(ctx, t, cl, "c committed", map[int32]int64{0: 5, 1: 52}, map[int32]int64{0: 5, 1: 52})

	// A producer epoch older than the partition's is fenced by the log.
	bumped := txnProducer{a.id, a.epoch + 1}
	mustTxnCommit(ctx, t, cl, bumped, map[int32]int64{0: 6})
	if codes := txnCommitOffsets(ctx, t, cl, a, map[string]map[int32]int64{"src": {0: 4}}); codes["src"][0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("txn offset commit with an old producer epoch: %v; want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(codes["src"][0]))
	}

	// Across a restart, a's pending offset stays pending and its marker then commits it.
	restart := func() {
		t.Helper()
		if err := b.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		b = startBroker(t, "netpoll", dir, overrides...)
		cl = newClient(t, b, kgo.MaxVersions(versions))
		waitGroupCoordinator(ctx, t, b, cl, txnOffsetsGroup, 0)
	}
	restart()
	expectOffsets(ctx, t, cl, "pending after restart", map[int32]int64{0: 5, 1: 52}, map[int32]int64{0: unstable, 1: 52})
	endTxn(ctx, t, b, cl, bumped, true, 0)
	expectOffsets(ctx, t, cl, "committed after restart", map[int32]int64{0: 6, 1: 52}, map[int32]int64{0: 6, 1: 52})

	// c's next transaction is aborted after a restart; a last restart replays everything.
	mustTxnCommit(ctx, t, cl, c, map[int32]int64{0: 60, 1: 61})
	restart()
	expectOffsets(ctx, t, cl, "c pending after restart", map[int32]int64{0: 6, 1: 52}, map[int32]int64{0: unstable, 1: unstable})
	endTxn(ctx, t, b, cl, c, false, 0)
	restart()
	expectOffsets(ctx, t, cl, "replayed", map[int32]int64{0: 6, 1: 52}, map[int32]int64{0: 6, 1: 52})
}

// TestTxnOffsetCommitFailover: in a 3-node cluster, transactional offsets and their markers
// replicate with __consumer_offsets (RF 3). The coordinator completes a transaction once the
// ISR has its marker; when the coordinator's node stops, the next leader replays a commit still
// pending, and a marker written to it then aborts that.
func TestTxnOffsetCommitFailover(t *testing.T) {
	t.Parallel()
	bs, ctx, adm := replicatedCluster(t, "src", 2, nil, func(c *Config) { c.TxnPartitionVerification = false })
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.OffsetFetch.Int16(), 9) // v10 addresses topics by id
	// coordinator returns the live node coordinating the group, once its partition has an
	// in-sync follower to fail over to, and a client seeded with it.
	coordinator := func(nodes []*Broker) (*Broker, int32, *kgo.Client) {
		t.Helper()
		var b *Broker
		var part int32
		testutil.WaitFor(t, 30*time.Second, func() error {
			b = nil
			c := adm.FindGroupCoordinators(ctx, txnOffsetsGroup)[txnOffsetsGroup]
			if c.Err != nil {
				return c.Err
			}
			for _, n := range nodes {
				if n.cfg.NodeID == c.NodeID {
					b = n
				}
			}
			if b == nil {
				return fmt.Errorf("coordinator %d is not among the live nodes", c.NodeID)
			}
			ot := b.meta.Image().Topics[offsetsTopic]
			part = coord.PartitionFor(txnOffsetsGroup, len(ot.Partitions))
			if isr := ot.Partitions[part].ISR; len(isr) < 2 {
				return fmt.Errorf("%s-%d has ISR %v; want a member besides the leader", offsetsTopic, part, isr)
			}
			return nil
		})
		cl := newClient(t, b, clusterSeeds(nodes), kgo.MaxVersions(versions))
		waitGroupCoordinator(ctx, t, b, cl, txnOffsetsGroup, part)
		return b, part, cl
	}
	first, part, cl := coordinator(bs)
	a, c := initProducer(ctx, t, cl), initProducer(ctx, t, cl)
	mustTxnCommit(ctx, t, cl, a, map[int32]int64{0: 5})
	endTxn(ctx, t, first, cl, a, true, part)
	expectOffsets(ctx, t, cl, "committed", map[int32]int64{0: 5, 1: -1}, map[int32]int64{0: 5, 1: -1})
	mustTxnCommit(ctx, t, cl, c, map[int32]int64{1: 9})
	expectOffsets(ctx, t, cl, "pending", map[int32]int64{0: 5, 1: -1}, map[int32]int64{0: 5, 1: unstable})

	rest := stopOne(ctx, t, bs, first)
	adm = newAdmin(t, clusterSeeds(rest))
	second, part, cl := coordinator(rest)
	if second == first {
		t.Fatalf("coordinator still the stopped node %d", first.cfg.NodeID)
	}
	expectOffsets(ctx, t, cl, "pending after failover", map[int32]int64{0: 5, 1: -1}, map[int32]int64{0: 5, 1: unstable})
	endTxn(ctx, t, second, cl, c, false, part)
	expectOffsets(ctx, t, cl, "aborted after failover", map[int32]int64{0: 5, 1: -1}, map[int32]int64{0: 5, 1: -1})
}
