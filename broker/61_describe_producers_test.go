package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// describeProducersRaw sends DescribeProducers for topics (name to partitions) to broker b
// itself and returns the answered partitions by topic and partition.
func describeProducersRaw(ctx context.Context, t *testing.T, b *Broker, cl *kgo.Client, topics map[string][]int32) map[string]map[int32]kmsg.DescribeProducersResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	for name, parts := range topics {
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = name, parts
		req.Topics = append(req.Topics, rt)
	}
	// Sent to the broker directly: the client would shard the request by partition leader and
	// fail unknown topics itself.
	raw, err := cl.Broker(int(b.cfg.NodeID)).Request(ctx, req)
	if err != nil {
		t.Fatalf("describe producers on node %d: %v", b.cfg.NodeID, err)
	}
	out := map[string]map[int32]kmsg.DescribeProducersResponseTopicPartition{}
	for _, rt := range raw.(*kmsg.DescribeProducersResponse).Topics {
		out[rt.Topic] = map[int32]kmsg.DescribeProducersResponseTopicPartition{}
		for _, rp := range rt.Partitions {
			out[rt.Topic][rp.Partition] = rp
		}
	}
	return out
}

// TestDescribeProducers writes partition 0 of a topic as an idempotent producer, a transactional
// one whose transaction stays open and one whose transaction a marker aborts, then reads their
// state with kadm.DescribeProducers; errors are checked with raw requests.
func TestDescribeProducers(t *testing.T) {
	b := startBroker(t, "netpoll", t.TempDir(), noTxnVerification)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "dp"); err != nil {
		t.Fatal(err)
	}
	idem, open, aborted := initProducer(ctx, t, cl), initProducer(ctx, t, cl), initProducer(ctx, t, cl)
	before := time.Now().UnixMilli()
	produce := func(p txnProducer, kind produceKind, wantBase int64, values ...string) {
		t.Helper()
		if code, base := produceRaw(ctx, t, b, cl, "dp", p, 0, kind, values...); code != 0 || base != wantBase {
			t.Fatalf("produce %v: %v at %d; want offset %d", values, kerr.ErrorForCode(code), base, wantBase)
		}
	}
	produce(idem, nonTxn, 0, "i0", "i1", "i2")
	produce(open, txnWithID, 3, "o0", "o1")
	produce(aborted, txnWithID, 5, "a0")
	if codes := writeMarkers(ctx, t, b, cl, txnMarker{p: aborted, coordEpoch: 7, topic: "dp", partitions: []int32{0}}); codes[0]["dp"][0] != 0 {
		t.Fatalf("abort marker: %v", kerr.ErrorForCode(codes[0]["dp"][0]))
	}
	after := time.Now().UnixMilli()

	described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"dp": {0: {}, 1: {}}})
	if err != nil {
		t.Fatalf("describe producers: %v", err)
	}
	parts := described["dp"].Partitions
	if len(parts) != 2 || parts[0].Err != nil || parts[1].Err != nil || len(parts[1].ActiveProducers) != 0 {
		t.Fatalf("described partitions %+v; want 0 and 1 without errors, no producers on 1", parts)
	}
	type state struct {
		epoch            int16
		lastSeq          int32
		coordEpoch       int32
		txnStartOffset   int64
		timestampInRange bool
	}
	want := map[int64]state{
		idem.id:    {idem.epoch, 2, -1, -1, true},
		open.id:    {open.epoch, 1, -1, 3, true},
		aborted.id: {aborted.epoch, 0, 7, -1, true},
	}
	got := map[int64]state{}
	for id, p := range parts[0].ActiveProducers {
		got[id] = state{p.ProducerEpoch, p.LastSequence, p.CoordinatorEpoch, p.CurrentTxnStartOffset,
			p.LastTimestamp >= before && p.LastTimestamp <= after}
		if p.Leader != b.cfg.NodeID || p.Topic != "dp" || p.Partition != 0 {
			t.Errorf("producer %d described by node %d for %s[%d]; want node %d, dp[0]", id, p.Leader, p.Topic, p.Partition, b.cfg.NodeID)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("producers of dp[0] (epoch, last sequence, coordinator epoch, txn start, timestamp in [%d, %d]):\n got %v\nwant %v",
			before, after, got, want)
	}

	resp := describeProducersRaw(ctx, t, b, cl, map[string][]int32{"dp": {9, -1}, "nope": {0, 1}, "bad/name": {0}})
	for _, c := range []struct {
		topic     string
		partition int32
		code      *kerr.Error
		message   bool
	}{
		{"dp", 9, kerr.UnknownTopicOrPartition, false},
		{"dp", -1, kerr.UnknownTopicOrPartition, false},
		{"nope", 0, kerr.UnknownTopicOrPartition, true},
		{"nope", 1, kerr.UnknownTopicOrPartition, true},
		{"bad/name", 0, kerr.InvalidTopicException, true},
	} {
		rp, ok := resp[c.topic][c.partition]
		if !ok || rp.ErrorCode != c.code.Code || (rp.ErrorMessage != nil) != c.message || len(rp.ActiveProducers) != 0 {
			t.Errorf("%s[%d]: answered %v, code %v, message %v, %d producers; want %v with a message %v, no producers",
				c.topic, c.partition, ok, kerr.ErrorForCode(rp.ErrorCode), rp.ErrorMessage, len(rp.ActiveProducers), c.code, c.message)
		}
	}
}

// TestDescribeProducersReplicas: a follower answers from its own replica, as Kafka's does, and
// a broker without a replica of an existing partition answers NOT_LEADER_OR_FOLLOWER.
func TestDescribeProducersReplicas(t *testing.T) {
	t.Parallel()
	bs, ctx, adm := replicatedCluster(t, "rdp", 1, nil, func(c *Config) { c.TxnPartitionVerification = false })
	cl := newClient(t, bs[0], clusterSeeds(bs))
	p := initProducer(ctx, t, cl)
	// The client sends to the leader, which answers NOT_LEADER_OR_FOLLOWER until it has opened
	// the partition.
	testutil.WaitFor(t, 20*time.Second, func() error {
		code, _ := produceRaw(ctx, t, bs[0], cl, "rdp", p, 0, nonTxn, "x", "y")
		return kerr.ErrorForCode(code)
	})
	waitReplicasEqual(t, bs, "rdp", 3)
	for _, b := range bs {
		rp := describeProducersRaw(ctx, t, b, cl, map[string][]int32{"rdp": {0}})["rdp"][0]
		if rp.ErrorCode != 0 || len(rp.ActiveProducers) != 1 || rp.ActiveProducers[0].ProducerID != p.id || rp.ActiveProducers[0].LastSequence != 1 {
			t.Fatalf("node %d describes rdp[0]: %v, %+v; want producer %d at sequence 1",
				b.cfg.NodeID, kerr.ErrorForCode(rp.ErrorCode), rp.ActiveProducers, p.id)
		}
	}

	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "solo"); err != nil {
		t.Fatal(err)
	}
	var other *Broker
	testutil.WaitFor(t, 20*time.Second, func() error {
		for _, b := range bs {
			tp := b.meta.Image().Topics["solo"]
			if tp == nil {
				return fmt.Errorf("node %d has no topic solo yet", b.cfg.NodeID)
			}
			if tp.Partitions[0].Replicas[0] != b.cfg.NodeID {
				other = b
			}
		}
		return nil
	})
	rp := describeProducersRaw(ctx, t, other, cl, map[string][]int32{"solo": {0}})["solo"][0]
	if rp.ErrorCode != kerr.NotLeaderForPartition.Code || rp.ErrorMessage != nil {
		t.Fatalf("node %d without a replica describes solo[0]: %v (message %v); want NOT_LEADER_OR_FOLLOWER without one",
			other.cfg.NodeID, kerr.ErrorForCode(rp.ErrorCode), rp.ErrorMessage)
	}
}
