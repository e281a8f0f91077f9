package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// describeQuorum sends DescribeQuorum at version v for topic's partition 0 to the broker cl
// reaches.
func describeQuorum(ctx context.Context, t *testing.T, cl *kgo.Client, v int16, topic string) *kmsg.DescribeQuorumResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = v
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = topic
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestDescribeQuorumSingleNode checks a single node's answer: itself as the only voter and
// leader, at its log end and caught up now, with no controller endpoint (it has no controller
// listener); and UNKNOWN_TOPIC_OR_PARTITION for another topic.
func TestDescribeQuorumSingleNode(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		b := startBroker(t, io, t.TempDir())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cl := newClient(t, b)
		before := time.Now().Add(-time.Second).UnixMilli()
		for _, v := range []int16{0, 1, 2} {
			resp := describeQuorum(ctx, t, cl, v, "__cluster_metadata")
			if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.LeaderID != b.cfg.NodeID || p.LeaderEpoch < 1 || p.HighWatermark < 1 || len(p.CurrentVoters) != 1 || len(p.Observers) != 0 {
				t.Fatalf("v%d: partition %+v; want node %d leading, the only voter", v, p, b.cfg.NodeID)
			}
			s := p.CurrentVoters[0]
			if s.ReplicaID != b.cfg.NodeID || s.LogEndOffset < p.HighWatermark {
				t.Fatalf("v%d: voter %+v; want node %d at least at the high watermark %d", v, s, b.cfg.NodeID, p.HighWatermark)
			}
			if v >= 1 && (s.LastFetchTimestamp < before || s.LastCaughtUpTimestamp < before) {
				t.Fatalf("v%d: the leader's own timestamps %d/%d are not now", v, s.LastFetchTimestamp, s.LastCaughtUpTimestamp)
			}
			if v >= 2 && (len(resp.Nodes) != 1 || len(resp.Nodes[0].Listeners) != 0) {
				t.Fatalf("v2: nodes %+v; want the one node, without a controller listener", resp.Nodes)
			}
		}
		if resp := describeQuorum(ctx, t, cl, 2, "other"); resp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("DescribeQuorum of another topic: error %d; want UNKNOWN_TOPIC_OR_PARTITION", resp.ErrorCode)
		}
	})
}

// TestDescribeQuorumCluster asks each node of a 3-node quorum: all name the same leader and
// the three voters with their controller endpoints, answered by the leader, which has heard
// from both followers and found them caught up.
func TestDescribeQuorumCluster(t *testing.T) {
	t.Parallel()
	bs := startInProcessCluster(t, 3, fastReplication)
	waitUnfenced(t, bs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range bs {
		cl := newClient(t, b)
		testutil.WaitFor(t, 20*time.Second, func() error {
			resp := describeQuorum(ctx, t, cl, 2, "__cluster_metadata")
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return fmt.Errorf("node %d: %+v", b.cfg.NodeID, resp)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.LeaderID != b.meta.Leader() || len(p.CurrentVoters) != 3 || len(resp.Nodes) != 3 {
				return fmt.Errorf("node %d (leader %d): partition %+v, nodes %+v", b.cfg.NodeID, b.meta.Leader(), p, resp.Nodes)
			}
			for _, n := range resp.Nodes {
				if len(n.Listeners) != 1 || n.Listeners[0].Port == 0 {
					return fmt.Errorf("node %d: voter %d endpoints %+v", b.cfg.NodeID, n.NodeID, n.Listeners)
				}
			}
			for _, s := range p.CurrentVoters {
				if s.LastFetchTimestamp < 0 || s.LastCaughtUpTimestamp < 0 || s.LogEndOffset < p.HighWatermark {
					return fmt.Errorf("node %d: voter %+v not caught up to %d", b.cfg.NodeID, s, p.HighWatermark)
				}
			}
			return nil
		})
	}
}
