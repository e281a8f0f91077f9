package broker

import (
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
	recs := fenceRecords(im, hbs, since, now, 9*time.Second, noUnclean)
	if len(recs) != 2 || recs[0].Type != meta.TypeFence || recs[0].NodeID != 2 || !recs[0].Fenced ||
		recs[1].Type != meta.TypePartition || recs[1].Partition != 1 || recs[1].Leader != -1 || recs[1].LeaderEpoch != 1 {
		t.Fatalf("fence records = %+v", recs)
	}
	if im, err = im.Apply(1, recs); err != nil {
		t.Fatal(err)
	}
	// A new leader gives every broker a full session from when it began leading.
	if recs := fenceRecords(im, nil, now, now.Add(time.Second), 9*time.Second, noUnclean); len(recs) != 2 || recs[0].Fenced {
		t.Fatalf("under a fresh leader, fence records = %+v; want node 2 unfenced and its leader back", recs)
	}
	// Node 2 heartbeats again: unfenced, and its partition led by it again.
	hbs[2] = meta.Heartbeat{Incarnation: inc2, At: now}
	recs = fenceRecords(im, hbs, since, now, 9*time.Second, noUnclean)
	if len(recs) != 2 || recs[0].Fenced || recs[1].Leader != 2 || recs[1].LeaderEpoch != 2 {
		t.Fatalf("unfence records = %+v", recs)
	}
	if im, err = im.Apply(2, recs); err != nil {
		t.Fatal(err)
	}
	if recs := fenceRecords(im, hbs, since, now, 9*time.Second, noUnclean); len(recs) != 0 {
		t.Fatalf("steady state produced records %+v", recs)
	}
}

func noUnclean(*meta.Topic) bool { return false }
