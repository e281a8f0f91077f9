package broker

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
	"ringbroker/internal/testutil"
)

// alterPartitionImage is an image with brokers 1-5 and topic "t" whose partition 0 has
// replicas 1-5, ISR 1,2, leader 1 at leader epoch 5 and partition epoch 1. Broker 3 registered
// twice (epoch 2), 4 is fenced and 5 in controlled shutdown.
func alterPartitionImage(t *testing.T) *meta.Image {
	t.Helper()
	tid := meta.NewUUID()
	recs := []meta.Record{{Type: meta.TypeTopic, TopicName: "t", TopicID: tid}}
	for id := int32(1); id <= 5; id++ {
		recs = append(recs, meta.Record{Type: meta.TypeBroker, NodeID: id, Incarnation: meta.NewUUID()})
	}
	recs = append(recs,
		meta.Record{Type: meta.TypeBroker, NodeID: 3, Incarnation: meta.NewUUID()},
		meta.Record{Type: meta.TypeFence, NodeID: 4, Fenced: true},
		meta.Record{Type: meta.TypePartition, TopicID: tid, Partition: 0, Replicas: []int32{1, 2, 3, 4, 5}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 5},
		meta.Record{Type: meta.TypePartition, TopicID: tid, Partition: 0, Replicas: []int32{1, 2, 3, 4, 5}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 1},
	)
	im, err := meta.EmptyImage("cid").Apply(0, recs)
	if err != nil {
		t.Fatal(err)
	}
	im, err = im.Apply(0, []meta.Record{{Type: meta.TypeControlledShutdown, NodeID: 5, Incarnation: im.Brokers[5].Incarnation}})
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// TestDecideAlterPartition holds the active controller's AlterPartition checks to KRaft's
// ReplicationControlManager: which error each wrong request gets, and the record of a good one.
func TestDecideAlterPartition(t *testing.T) {
	im := alterPartitionImage(t)
	if e := im.Brokers[3].Epoch; e != 2 || im.Brokers[1].Epoch != 1 {
		t.Fatalf("broker epochs 1: %d, 3: %d; want 1 and 2 (a second incarnation of 3)", im.Brokers[1].Epoch, e)
	}
	tid := im.Topics["t"].ID
	type member struct {
		id    int32
		epoch int64
	}
	for _, tc := range []struct {
		name                        string
		broker                      int32
		brokerEpoch                 int64
		topic                       meta.UUID
		partition                   int32
		leaderEpoch, partitionEpoch int32
		isr                         []member
		wTop, wCode                 *kerr.Error
	}{
		{name: "a follower joins", broker: 1, brokerEpoch: 1, isr: []member{{1, 1}, {2, -1}, {3, 2}}},
		{name: "a follower leaves", broker: 1, brokerEpoch: -1, isr: []member{{1, -1}}},
		{name: "requester at an old broker epoch", broker: 1, brokerEpoch: 7, isr: []member{{1, 1}}, wTop: kerr.StaleBrokerEpoch},
		{name: "requester fenced", broker: 4, brokerEpoch: -1, isr: []member{{1, 1}}, wTop: kerr.StaleBrokerEpoch},
		{name: "unknown topic id", broker: 1, brokerEpoch: 1, topic: meta.NewUUID(), isr: []member{{1, 1}}, wCode: kerr.UnknownTopicID},
		{name: "unknown partition", broker: 1, brokerEpoch: 1, partition: 7, isr: []member{{1, 1}}, wCode: kerr.UnknownTopicOrPartition},
		{name: "newer leader epoch", broker: 1, brokerEpoch: 1, leaderEpoch: 6, isr: []member{{1, 1}}, wCode: kerr.NotController},
		{name: "newer partition epoch", broker: 1, brokerEpoch: 1, partitionEpoch: 2, isr: []member{{1, 1}}, wCode: kerr.NotController},
		{name: "older leader epoch", broker: 1, brokerEpoch: 1, leaderEpoch: 4, isr: []member{{1, 1}}, wCode: kerr.FencedLeaderEpoch},
		{name: "not the leader", broker: 2, brokerEpoch: 1, isr: []member{{1, 1}, {2, 1}}, wCode: kerr.InvalidRequest},
		{name: "older partition epoch", broker: 1, brokerEpoch: 1, partitionEpoch: 0, isr: []member{{1, 1}, {2, 1}}, wCode: kerr.InvalidUpdateVersion},
		{name: "ISR without the leader", broker: 1, brokerEpoch: 1, isr: []member{{2, 1}}, wCode: kerr.InvalidRequest},
		{name: "ISR with a non-replica", broker: 1, brokerEpoch: 1, isr: []member{{1, 1}, {6, -1}}, wCode: kerr.InvalidRequest},
		{name: "ISR with a replica twice", broker: 1, brokerEpoch: 1, isr: []member{{1, 1}, {2, 1}, {2, 1}}, wCode: kerr.InvalidRequest},
		{name: "a member fetched from its earlier incarnation", broker: 1, brokerEpoch: 1, isr: []member{{1, 1}, {3, 1}}, wCode: kerr.IneligibleReplica},
		{name: "a fenced member", broker: 1, brokerEpoch: 1, isr: []member{{1, 1}, {4, -1}}, wCode: kerr.IneligibleReplica},
		{name: "a member shutting down", broker: 1, brokerEpoch: 1, isr: []member{{1, 1}, {5, 1}}, wCode: kerr.IneligibleReplica},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.topic == (meta.UUID{}) {
				tc.topic = tid
			}
			if tc.leaderEpoch == 0 {
				tc.leaderEpoch = 5
			}
			if tc.partitionEpoch == 0 && tc.wCode != kerr.InvalidUpdateVersion {
				tc.partitionEpoch = 1
			}
			req := kmsg.NewPtrAlterPartitionRequest()
			req.Version = alterPartitionVersion
			req.BrokerID, req.BrokerEpoch = tc.broker, tc.brokerEpoch
			rt := kmsg.NewAlterPartitionRequestTopic()
			rt.TopicID = tc.topic
			rp := kmsg.NewAlterPartitionRequestTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = tc.partition, tc.leaderEpoch, tc.partitionEpoch
			var isr []int32
			for _, m := range tc.isr {
				e := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
				e.BrokerID, e.BrokerEpoch = m.id, m.epoch
				rp.NewEpochISR = append(rp.NewEpochISR, e)
				isr = append(isr, m.id)
			}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)

			resp, recs := decideAlterPartition(im, req)
			if got := kerr.ErrorForCode(resp.ErrorCode); got != errOrNil(tc.wTop) {
				t.Fatalf("top-level error %v, want %v", got, tc.wTop)
			}
			if tc.wTop != nil {
				if len(recs) != 0 || len(resp.Topics) != 0 {
					t.Fatalf("refused request made %d records, %d topics", len(recs), len(resp.Topics))
				}
				return
			}
			sp := resp.Topics[0].Partitions[0]
			if got := kerr.ErrorForCode(sp.ErrorCode); got != errOrNil(tc.wCode) {
				t.Fatalf("partition error %v, want %v", got, tc.wCode)
			}
			if tc.wCode != nil {
				if len(recs) != 0 {
					t.Fatalf("refused change made records %+v", recs)
				}
				return
			}
			if len(recs) != 1 || !slices.Equal(recs[0].ISR, isr) || recs[0].PartitionEpoch != 2 || recs[0].Leader != 1 || recs[0].LeaderEpoch != 5 {
				t.Fatalf("records %+v; want one with ISR %v at partition epoch 2, leader 1 at epoch 5", recs, isr)
			}
			if sp.LeaderID != 1 || sp.LeaderEpoch != 5 || sp.PartitionEpoch != 2 || !slices.Equal(sp.ISR, isr) {
				t.Fatalf("response %+v does not give the new state", sp)
			}
			if _, err := im.Apply(0, recs); err != nil {
				t.Fatalf("the accepted change does not apply: %v", err)
			}
		})
	}
}

// TestAlterISRChecksBrokerEpoch runs AlterPartition from a partition leader that is not the
// active controller, over the controller listener: a follower whose fetches gave an earlier
// broker epoch than its registration's is refused the ISR (KIP-903), and the same follower at
// its registration's epoch joins it.
func TestAlterISRChecksBrokerEpoch(t *testing.T) {
	t.Parallel()
	// Broker 9 is registered by the test and never runs: a long session keeps it unfenced.
	bs, ctx, _ := replicatedCluster(t, "warmup", 1, nil, func(c *Config) { c.BrokerSessionTimeout = time.Minute })
	var leader *Broker
	for _, b := range bs {
		if !b.meta.IsLeader() {
			leader = b
		}
	}
	tid := meta.NewUUID()
	if _, err := leader.meta.Commit([]meta.Record{
		{Type: meta.TypeBroker, NodeID: 9, Host: "127.0.0.1", Port: 1, Incarnation: meta.NewUUID()},
		{Type: meta.TypeTopic, TopicName: "ep", TopicID: tid},
		{Type: meta.TypePartition, TopicID: tid, Replicas: []int32{leader.cfg.NodeID, 9}, ISR: []int32{leader.cfg.NodeID}, Leader: leader.cfg.NodeID},
	}); err != nil {
		t.Fatal(err)
	}
	var p *partition
	testutil.WaitFor(t, 30*time.Second, func() error {
		ps := leader.parts.Load().byName["ep"]
		if len(ps) != 1 || !ps[0].state().leader {
			return errors.New("the leader has not opened partition ep-0 as its leader")
		}
		p = ps[0]
		return nil
	})
	pm := leader.meta.Image().Topics["ep"].Partitions[0]
	if e := leader.meta.Image().Brokers[9].Epoch; e != 1 {
		t.Fatalf("broker 9 registered once: epoch %d, want 1", e)
	}
	join := []int32{leader.cfg.NodeID, 9}
	p.followerFetched(9, 7, 0, time.Now(), leader.cfg.NodeID, 0)
	if err := leader.alterISR(ctx, p, tid, pm, join); !errors.Is(err, kerr.IneligibleReplica) {
		t.Fatalf("ISR join after a fetch at broker epoch 7: %v; want %v", err, kerr.IneligibleReplica)
	}
	if isr := leader.meta.Image().Topics["ep"].Partitions[0].ISR; len(isr) != 1 {
		t.Fatalf("ISR %v after a refused join", isr)
	}
	p.followerFetched(9, 1, 0, time.Now(), leader.cfg.NodeID, 0)
	if err := leader.alterISR(ctx, p, tid, pm, join); err != nil {
		t.Fatalf("ISR join after a fetch at broker 9's epoch: %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, func() error {
		if isr := leader.meta.Image().Topics["ep"].Partitions[0].ISR; !slices.Equal(isr, join) {
			return fmt.Errorf("ISR %v, want %v", isr, join)
		}
		return nil
	})
	// The change was made from partition epoch pm: made again, it is out of date.
	if err := leader.alterISR(ctx, p, tid, pm, join); !errors.Is(err, kerr.InvalidUpdateVersion) {
		t.Fatalf("the same change again: %v; want %v", err, kerr.InvalidUpdateVersion)
	}
}
