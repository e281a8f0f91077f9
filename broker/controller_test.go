package broker

import (
	"errors"
	"slices"
	"testing"
	"time"

	"ringbroker/broker/meta"
)

func TestFenceRecords(t *testing.T) {
	inc1, inc2 := meta.NewUUID(), meta.NewUUID()
	im := meta.EmptyImage("cid")
	tid := meta.NewUUID()
	im, err := im.Apply(0, []meta.Record{
		{Type: meta.TypeBroker, NodeID: 1, Incarnation: inc1},
		{Type: meta.TypeBroker, NodeID: 2, Incarnation: inc2},
		{Type: meta.TypeTopic, TopicName: "t", TopicID: tid},
		{Type: meta.TypePartition, TopicID: tid, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3},
		{Type: meta.TypePartition, TopicID: tid, Partition: 1, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	since := now.Add(-time.Minute)
	// Node 1 heartbeats; node 2 heartbeated with a stale incarnation only: it is fenced and
	// its partition goes offline with a new leader epoch.
	hbs := map[int32]meta.Heartbeat{1: {Incarnation: inc1, At: now}, 2: {Incarnation: meta.NewUUID(), At: now}}
	recs := fenceRecords(im, hbs, nil, since, now, 9*time.Second, noUnclean)
	if len(recs) != 2 || recs[0].Type != meta.TypeFence || recs[0].NodeID != 2 || !recs[0].Fenced ||
		recs[1].Type != meta.TypePartition || recs[1].Partition != 1 || recs[1].Leader != -1 || recs[1].LeaderEpoch != 1 {
		t.Fatalf("fence records = %+v", recs)
	}
	if im, err = im.Apply(1, recs); err != nil {
		t.Fatal(err)
	}
	// A new leader gives every broker a full session from when it began leading.
	if recs := fenceRecords(im, nil, nil, now, now.Add(time.Second), 9*time.Second, noUnclean); len(recs) != 2 || recs[0].Fenced {
		t.Fatalf("under a fresh leader, fence records = %+v; want node 2 unfenced and its leader back", recs)
	}
	// Node 2 heartbeats again: unfenced, and its partition led by it again.
	hbs[2] = meta.Heartbeat{Incarnation: inc2, At: now}
	recs = fenceRecords(im, hbs, nil, since, now, 9*time.Second, noUnclean)
	if len(recs) != 2 || recs[0].Fenced || recs[1].Leader != 2 || recs[1].LeaderEpoch != 2 {
		t.Fatalf("unfence records = %+v", recs)
	}
	if im, err = im.Apply(2, recs); err != nil {
		t.Fatal(err)
	}
	if recs := fenceRecords(im, hbs, nil, since, now, 9*time.Second, noUnclean); len(recs) != 0 {
		t.Fatalf("steady state produced records %+v", recs)
	}
}

func noUnclean(*meta.Topic) bool { return false }

func TestControlledShutdownRecords(t *testing.T) {
	inc1, inc2, inc3 := meta.NewUUID(), meta.NewUUID(), meta.NewUUID()
	tid := meta.NewUUID()
	im, err := meta.EmptyImage("cid").Apply(0, []meta.Record{
		{Type: meta.TypeBroker, NodeID: 1, Incarnation: inc1},
		{Type: meta.TypeBroker, NodeID: 2, Incarnation: inc2},
		{Type: meta.TypeBroker, NodeID: 3, Incarnation: inc3},
		{Type: meta.TypeTopic, TopicName: "t", TopicID: tid},
		{Type: meta.TypePartition, TopicID: tid, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4},
		{Type: meta.TypePartition, TopicID: tid, Partition: 1, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3, 1}, Leader: 2},
		{Type: meta.TypePartition, TopicID: tid, Partition: 2, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	hbs := map[int32]meta.Heartbeat{
		1: {Incarnation: inc1, At: now, WantShutdown: true},
		2: {Incarnation: inc2, At: now},
		3: {Incarnation: inc3, At: now},
	}
	recs := fenceRecords(im, hbs, nil, now.Add(-time.Minute), now, 9*time.Second, noUnclean)
	if len(recs) != 4 || recs[0].Type != meta.TypeControlledShutdown || recs[0].NodeID != 1 || recs[0].Incarnation != inc1 {
		t.Fatalf("records = %+v; want node 1's controlled shutdown first, then three partition changes", recs)
	}
	if im.ReadyToShutDown(1, inc1) {
		t.Fatal("node 1 ready to shut down before its shutdown was recorded")
	}
	if im, err = im.Apply(1, recs); err != nil {
		t.Fatal(err)
	}
	ps := im.Topics["t"].Partitions
	// Leadership moves to the next ISR member with a new epoch; node 1 leaves every ISR but
	// the one it is the last member of, where the partition goes offline as in KRaft.
	if ps[0].Leader != 2 || ps[0].LeaderEpoch != 5 || !slices.Equal(ps[0].ISR, []int32{2, 3}) {
		t.Fatalf("partition 0 = %+v; want leader 2 at epoch 5, ISR [2 3]", ps[0])
	}
	if ps[1].Leader != 2 || ps[1].LeaderEpoch != 0 || !slices.Equal(ps[1].ISR, []int32{2, 3}) {
		t.Fatalf("partition 1 = %+v; want leader 2 kept, ISR [2 3]", ps[1])
	}
	if ps[2].Leader != -1 || !slices.Equal(ps[2].ISR, []int32{1}) {
		t.Fatalf("partition 2 = %+v; want offline with ISR [1]", ps[2])
	}
	if !im.ReadyToShutDown(1, inc1) || im.ReadyToShutDown(1, meta.NewUUID()) || im.ReadyToShutDown(2, inc2) {
		t.Fatal("ReadyToShutDown: want true for node 1's registration only")
	}
	if recs := fenceRecords(im, hbs, nil, now.Add(-time.Minute), now, 9*time.Second, noUnclean); len(recs) != 0 {
		t.Fatalf("after the shutdown was recorded, records = %+v; want none", recs)
	}
	// The partition's leader may not take node 1 back into the ISR while it shuts down.
	back := ps[0].Next(tid, 2, 5, []int32{2, 3, 1})
	if _, err := im.Apply(2, []meta.Record{back}); !errors.Is(err, meta.ErrIneligibleReplica) {
		t.Fatalf("ISR expansion to a broker in controlled shutdown: err = %v; want ErrIneligibleReplica", err)
	}
	// Registering again (a restart) ends the controlled shutdown.
	inc1b := meta.NewUUID()
	if im, err = im.Apply(2, []meta.Record{{Type: meta.TypeBroker, NodeID: 1, Incarnation: inc1b}}); err != nil {
		t.Fatal(err)
	}
	if _, err := im.Apply(3, []meta.Record{back}); err != nil {
		t.Fatalf("ISR expansion after node 1 registered again: %v", err)
	}
	// A request from an earlier registration does not stop the new one.
	stale := meta.Record{Type: meta.TypeControlledShutdown, NodeID: 1, Incarnation: inc1}
	if im, err = im.Apply(3, []meta.Record{stale}); err != nil || im.Brokers[1].InControlledShutdown {
		t.Fatalf("stale controlled shutdown: err %v, broker %+v", err, im.Brokers[1])
	}
}

func TestFenceDeadBroker(t *testing.T) {
	inc1, inc2 := meta.NewUUID(), meta.NewUUID()
	tid := meta.NewUUID()
	im, err := meta.EmptyImage("cid").Apply(0, []meta.Record{
		{Type: meta.TypeBroker, NodeID: 1, Incarnation: inc1},
		{Type: meta.TypeBroker, NodeID: 2, Incarnation: inc2},
		{Type: meta.TypeTopic, TopicName: "t", TopicID: tid},
		{Type: meta.TypePartition, TopicID: tid, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	since := now.Add(-time.Minute)
	hbs := map[int32]meta.Heartbeat{1: {Incarnation: inc1, At: now.Add(-time.Second)}, 2: {Incarnation: inc2, At: now}}
	// Node 1 heartbeated a second ago, well within its session, but its endpoint refused a
	// connection since: it is fenced now and node 2 leads.
	recs := fenceRecords(im, hbs, map[int32]bool{1: true}, since, now, 9*time.Second, noUnclean)
	if len(recs) != 2 || recs[0].Type != meta.TypeFence || recs[0].NodeID != 1 || !recs[0].Fenced || recs[1].Leader != 2 {
		t.Fatalf("records = %+v; want node 1 fenced and node 2 leading", recs)
	}
}

func TestDeadBrokers(t *testing.T) {
	inc1, inc2, old := meta.NewUUID(), meta.NewUUID(), meta.NewUUID()
	im, err := meta.EmptyImage("cid").Apply(0, []meta.Record{
		{Type: meta.TypeBroker, NodeID: 1, Incarnation: inc1},
		{Type: meta.TypeBroker, NodeID: 2, Incarnation: inc2},
		{Type: meta.TypeBroker, NodeID: 3, Incarnation: meta.NewUUID()},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	refused := map[int32]meta.Heartbeat{
		1: {Incarnation: inc1, At: now},                   // no heartbeat since: dead
		2: {Incarnation: inc2, At: now.Add(-time.Second)}, // heartbeated after: alive
		3: {Incarnation: old, At: now},                    // an earlier registration: forgotten
	}
	hbs := map[int32]meta.Heartbeat{1: {Incarnation: inc1, At: now.Add(-time.Millisecond)}, 2: {Incarnation: inc2, At: now}}
	dead := deadBrokers(im, refused, hbs)
	if !dead[1] || dead[2] || dead[3] || len(dead) != 1 {
		t.Fatalf("dead = %v; want node 1 only", dead)
	}
	if _, ok := refused[3]; ok || len(refused) != 2 {
		t.Fatalf("refused = %v; want node 3's stale refusal dropped", refused)
	}
}
