package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
	"ringbroker/internal/testutil"
)

// electionImage is an image of brokers 1-3 (2 fenced when fenced2, 3 in controlled shutdown
// when stopping3) and topic "t" with the given partitions.
func electionImage(t *testing.T, fenced2, stopping3 bool, parts ...meta.Partition) *meta.Image {
	t.Helper()
	tid := meta.NewUUID()
	recs := []meta.Record{
		{Type: meta.TypeBroker, NodeID: 1, Incarnation: meta.NewUUID()},
		{Type: meta.TypeBroker, NodeID: 2, Incarnation: meta.NewUUID()},
		{Type: meta.TypeBroker, NodeID: 3, Incarnation: meta.NewUUID()},
		{Type: meta.TypeTopic, TopicName: "t", TopicID: tid},
	}
	if fenced2 {
		recs = append(recs, meta.Record{Type: meta.TypeFence, NodeID: 2, Fenced: true})
	}
	for i, p := range parts {
		recs = append(recs, meta.Record{Type: meta.TypePartition, TopicID: tid, Partition: int32(i), Replicas: p.Replicas,
			ISR: p.ISR, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch})
	}
	im, err := meta.EmptyImage("cid").Apply(0, recs)
	if err != nil {
		t.Fatal(err)
	}
	if stopping3 {
		// After the partitions: a record may not add a broker in controlled shutdown to an ISR.
		if im, err = im.Apply(1, []meta.Record{{Type: meta.TypeControlledShutdown, NodeID: 3, Incarnation: im.Brokers[3].Incarnation}}); err != nil {
			t.Fatal(err)
		}
	}
	return im
}

func TestElectPartition(t *testing.T) {
	part := func(leader int32, replicas, isr []int32) meta.Partition {
		return meta.Partition{Leader: leader, LeaderEpoch: 4, PartitionEpoch: 9, Replicas: replicas, ISR: isr}
	}
	for _, tc := range []struct {
		name      string
		p         meta.Partition
		fenced2   bool
		stopping3 bool
		typ       int8
		topic     string
		part      int32
		wCode     *kerr.Error
		wMsg      string
		wLeader   int32
		wISR      []int32
	}{
		{name: "preferred leads", p: part(1, []int32{1, 2, 3}, []int32{1, 2, 3}), wCode: kerr.ElectionNotNeeded},
		{name: "preferred back in ISR", p: part(2, []int32{1, 2, 3}, []int32{2, 3, 1}), wLeader: 1, wISR: []int32{2, 3, 1}},
		{name: "preferred not in ISR", p: part(2, []int32{1, 2, 3}, []int32{2, 3}), wCode: kerr.PreferredLeaderNotAvailable},
		{name: "preferred fenced", p: part(1, []int32{2, 1, 3}, []int32{1, 2, 3}), fenced2: true, wCode: kerr.PreferredLeaderNotAvailable},
		{name: "preferred in controlled shutdown", p: part(1, []int32{3, 1, 2}, []int32{1, 2, 3}), stopping3: true, wCode: kerr.PreferredLeaderNotAvailable},
		// Offline, the preferred replica fenced: the next live ISR member in replica order.
		{name: "offline, preferred fenced", p: part(-1, []int32{2, 3, 1}, []int32{1, 2, 3}), fenced2: true, wLeader: 3, wISR: []int32{1, 2, 3}},
		{name: "offline, no live ISR member", p: part(-1, []int32{1, 2}, []int32{2}), fenced2: true, wCode: kerr.PreferredLeaderNotAvailable},
		{name: "unclean, leader exists", p: part(2, []int32{1, 2, 3}, []int32{2}), typ: electionUnclean, wCode: kerr.ElectionNotNeeded},
		{name: "unclean, ISR member live", p: part(-1, []int32{1, 2, 3}, []int32{3, 2}), fenced2: true, typ: electionUnclean, wLeader: 3, wISR: []int32{3, 2}},
		{name: "unclean, outside the ISR", p: part(-1, []int32{2, 1, 3}, []int32{2}), fenced2: true, typ: electionUnclean, wLeader: 1, wISR: []int32{1}},
		{name: "unclean, nobody live", p: part(-1, []int32{2, 3}, []int32{2}), fenced2: true, stopping3: true, typ: electionUnclean, wCode: kerr.EligibleLeadersNotAvailable},
		{name: "unknown topic", p: part(1, []int32{1}, []int32{1}), topic: "nope", wCode: kerr.UnknownTopicOrPartition, wMsg: "No such topic as nope"},
		{name: "unknown partition", p: part(1, []int32{1}, []int32{1}), part: 1, wCode: kerr.UnknownTopicOrPartition, wMsg: "No such partition as t-1"},
		{name: "negative partition", p: part(1, []int32{1}, []int32{1}), part: -1, wCode: kerr.UnknownTopicOrPartition, wMsg: "No such partition as t--1"},
		{name: "unknown type", p: part(2, []int32{1, 2}, []int32{1, 2}), typ: 2, wCode: kerr.InvalidRequest, wMsg: "Unknown election type 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := electionImage(t, tc.fenced2, tc.stopping3, tc.p)
			topic := tc.topic
			if topic == "" {
				topic = "t"
			}
			o := electPartition(im, leaderCandidates(im), topic, tc.part, tc.typ)
			if o.code != tc.wCode || o.msg != tc.wMsg {
				t.Fatalf("error %v %q; want %v %q", o.code, o.msg, tc.wCode, tc.wMsg)
			}
			if tc.wCode != nil {
				return
			}
			r := o.rec
			if r.Type != meta.TypePartition || r.Leader != tc.wLeader || r.LeaderEpoch != 5 || r.PartitionEpoch != 10 ||
				!slices.Equal(r.ISR, tc.wISR) || !slices.Equal(r.Replicas, tc.p.Replicas) {
				t.Fatalf("record %+v; want leader %d at leader epoch 5, partition epoch 10, ISR %v, replicas kept", r, tc.wLeader, tc.wISR)
			}
			// The record applies to the image it was decided on.
			if _, err := im.Apply(2, []meta.Record{r}); err != nil {
				t.Fatalf("apply the election: %v", err)
			}
		})
	}
}

func TestElectLeaders(t *testing.T) {
	im := electionImage(t, false, false,
		meta.Partition{Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, // balanced
		meta.Partition{Leader: 1, Replicas: []int32{2, 1}, ISR: []int32{1, 2}}, // 2 should lead
		meta.Partition{Leader: 3, Replicas: []int32{2, 3}, ISR: []int32{3}},    // 2 out of the ISR
	)
	live := leaderCandidates(im)
	answers := func(topics []kmsg.ElectLeadersResponseTopic) map[string][]int16 {
		out := map[string][]int16{}
		for _, rt := range topics {
			out[rt.Topic] = []int16{}
			for _, rp := range rt.Partitions {
				out[rt.Topic] = append(out[rt.Topic], int16(rp.Partition), rp.ErrorCode)
			}
		}
		return out
	}

	// All partitions: those needing no election are left out; every topic is listed.
	got, recs := electLeaders(im, live, electionPreferred, nil)
	if w := map[string][]int16{"t": {1, 0, 2, kerr.PreferredLeaderNotAvailable.Code}}; !mapsEqual(answers(got), w) {
		t.Fatalf("all partitions: answers %v; want %v", answers(got), w)
	}
	if len(recs) != 1 || recs[0].Partition != 1 || recs[0].Leader != 2 {
		t.Fatalf("all partitions: records %+v; want partition 1 led by 2", recs)
	}

	// Named partitions are all answered, in request order; a repeat is elected once; an
	// unknown topic is answered too.
	req := []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{1, 0, 1, 7}}, {Topic: "gone", Partitions: []int32{0}}}
	got, recs = electLeaders(im, live, electionPreferred, req)
	w := map[string][]int16{
		"t":    {1, 0, 0, kerr.ElectionNotNeeded.Code, 1, 0, 7, kerr.UnknownTopicOrPartition.Code},
		"gone": {0, kerr.UnknownTopicOrPartition.Code},
	}
	if !mapsEqual(answers(got), w) || got[0].Topic != "t" || got[1].Topic != "gone" {
		t.Fatalf("named partitions: answers %+v; want %v", got, w)
	}
	if len(recs) != 1 {
		t.Fatalf("named partitions: records %+v; want one election", recs)
	}
	if got[0].Partitions[1].ErrorMessage != nil {
		t.Fatalf("ELECTION_NOT_NEEDED with message %q; Kafka sends none", *got[0].Partitions[1].ErrorMessage)
	}

	// An empty request answers nothing.
	if got, recs := electLeaders(im, live, electionPreferred, []kmsg.ElectLeadersRequestTopic{}); len(got) != 0 || len(recs) != 0 {
		t.Fatalf("empty request: %+v %+v", got, recs)
	}

	// Unclean for all partitions: every one has a leader, so nothing is listed but the topic.
	if got, recs := electLeaders(im, live, electionUnclean, nil); len(got) != 1 || len(got[0].Partitions) != 0 || len(recs) != 0 {
		t.Fatalf("unclean, all led: %+v %+v", got, recs)
	}

	// Once the election is applied, the same request needs none.
	im2, err := im.Apply(2, recs)
	if err != nil {
		t.Fatal(err)
	}
	if got, recs := electLeaders(im2, live, electionPreferred, nil); len(recs) != 0 || len(got[0].Partitions) != 1 {
		t.Fatalf("after the election: %+v %+v; want only partition 2's PREFERRED_LEADER_NOT_AVAILABLE", got, recs)
	}
}

func mapsEqual(a, b map[string][]int16) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !slices.Equal(v, w) {
			return false
		}
	}
	return true
}

func TestBalanceRecords(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fenced2 bool
		limit   int
		parts   []meta.Partition
		wParts  []int32 // partitions elected, in order
		wMore   bool
	}{
		{name: "balanced", limit: 10, parts: []meta.Partition{
			{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
			{Leader: 2, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3, 1}},
		}},
		{name: "after a restart", limit: 10, parts: []meta.Partition{
			{Leader: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3, 1}}, // 1 is back in sync
			{Leader: 2, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3, 1}},
			{Leader: 3, Replicas: []int32{1, 3, 2}, ISR: []int32{3, 2}}, // 1 still catching up
			{Leader: 3, Replicas: []int32{1, 3, 2}, ISR: []int32{3, 2, 1}},
		}, wParts: []int32{0, 3}},
		{name: "limited", limit: 1, parts: []meta.Partition{
			{Leader: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
			{Leader: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
		}, wParts: []int32{0}, wMore: true},
		{name: "preferred fenced", fenced2: true, limit: 10, parts: []meta.Partition{
			{Leader: 1, Replicas: []int32{2, 1}, ISR: []int32{1, 2}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := electionImage(t, tc.fenced2, false, tc.parts...)
			recs, more := balanceRecords(im, leaderCandidates(im), tc.limit)
			var parts []int32
			for _, r := range recs {
				parts = append(parts, r.Partition)
				if p := im.Topics["t"].Partitions[r.Partition]; r.Leader != p.Replicas[0] || r.LeaderEpoch != p.LeaderEpoch+1 || !slices.Equal(r.ISR, p.ISR) {
					t.Fatalf("record %+v for %+v; want the preferred replica at the next leader epoch, ISR kept", r, p)
				}
			}
			if !slices.Equal(parts, tc.wParts) || more != tc.wMore {
				t.Fatalf("elected %v, more %v; want %v, %v", parts, more, tc.wParts, tc.wMore)
			}
		})
	}
}

// moveLeaders commits, through b, leadership of every partition of topic to its second replica
// (an imbalance as a failover leaves it) and returns the image after.
func moveLeaders(t *testing.T, b *Broker, topic string) *meta.Image {
	t.Helper()
	im := b.meta.Image()
	tp := im.Topics[topic]
	var recs []meta.Record
	for _, p := range tp.Partitions {
		recs = append(recs, p.Next(tp.ID, p.Replicas[1], p.LeaderEpoch+1, p.ISR))
	}
	im, err := b.meta.Commit(recs)
	if err != nil {
		t.Fatalf("move leaders of %s: %v", topic, err)
	}
	return im
}

// waitPreferredLeaders waits until every node sees every partition of topic led by its first
// replica in one election after moved (what moveLeaders committed), with the ISR kept: a node
// that has not applied the move yet still shows the preferred leaders of before it.
func waitPreferredLeaders(t *testing.T, bs []*Broker, topic string, moved *meta.Image) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, func() error {
		for _, b := range bs {
			for _, p := range b.meta.Image().Topics[topic].Partitions {
				was := moved.Topics[topic].Partitions[p.Index]
				if p.Leader != p.Replicas[0] || p.LeaderEpoch != was.LeaderEpoch+1 || !slices.Equal(p.ISR, was.ISR) {
					return fmt.Errorf("node %d: %s-%d %+v; want leader %d, leader epoch %d, ISR %v kept",
						b.cfg.NodeID, topic, p.Index, p, p.Replicas[0], was.LeaderEpoch+1, was.ISR)
				}
			}
		}
		return nil
	})
}

// TestElectLeadersAPI drives ElectLeaders with a real client against a 3-node cluster whose
// leaders were moved off their preferred replicas.
func TestElectLeadersAPI(t *testing.T) {
	t.Parallel()
	bs, ctx, adm := replicatedCluster(t, "el", 3, nil, func(c *Config) { c.AutoLeaderRebalance = false })
	waitReplicasEqual(t, bs, "el", 3)
	moved := moveLeaders(t, bs[1], "el")

	// Every partition: the three are elected, from any node.
	rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs["el"]) != 3 {
		t.Fatalf("all partitions: %+v; want the 3 of el", rs)
	}
	for p, r := range rs["el"] {
		if r.Err != nil {
			t.Fatalf("el-%d: %v %s", p, r.Err, r.ErrMessage)
		}
	}
	waitPreferredLeaders(t, bs, "el", moved)

	// Again: nothing to do, so no partition is listed; named, each needs no election.
	if rs, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil); err != nil || len(rs["el"]) != 0 {
		t.Fatalf("all partitions, balanced: %+v %v; want none listed", rs, err)
	}
	rs, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"el": {0: {}, 5: {}}, "none": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if !errorIs(rs["el"][0].Err, kerr.ElectionNotNeeded) || !errorIs(rs["el"][5].Err, kerr.UnknownTopicOrPartition) ||
		!errorIs(rs["none"][0].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("named partitions: %+v", rs)
	}
	rs, err = adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{"el": {1: {}}})
	if err != nil || !errorIs(rs["el"][1].Err, kerr.ElectionNotNeeded) {
		t.Fatalf("unclean with a leader: %+v %v; want ELECTION_NOT_NEEDED", rs, err)
	}

	// An unknown election type fails the whole request.
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = 7
	req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "el", Partitions: []int32{0}}}
	resp, err := req.RequestWith(ctx, newClient(t, bs[0]))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("election type 7: %+v; want INVALID_REQUEST", resp)
	}
}

// TestAutoLeaderRebalance moves a cluster's leaders off their preferred replicas: the active
// controller moves them back within a check interval.
func TestAutoLeaderRebalance(t *testing.T) {
	t.Parallel()
	bs, _, _ := replicatedCluster(t, "auto", 3, nil, func(c *Config) { c.LeaderImbalanceCheckInterval = 100 * time.Millisecond })
	waitReplicasEqual(t, bs, "auto", 3)
	moved := moveLeaders(t, bs[2], "auto")
	waitPreferredLeaders(t, bs, "auto", moved)
}
