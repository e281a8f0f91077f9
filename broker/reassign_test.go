package broker

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/broker/meta"
)

// reassignImage is an image with brokers 1-4 (4 fenced when fenced4) and topic "t" whose
// partition 0 is p.
func reassignImage(t *testing.T, p meta.Partition, fenced4 bool) (*meta.Image, *meta.Topic) {
	t.Helper()
	tid := meta.NewUUID()
	recs := []meta.Record{{Type: meta.TypeTopic, TopicName: "t", TopicID: tid}}
	for id := int32(1); id <= 4; id++ {
		recs = append(recs, meta.Record{Type: meta.TypeBroker, NodeID: id, Incarnation: meta.NewUUID()})
	}
	recs = append(recs, meta.Record{Type: meta.TypeFence, NodeID: 4, Fenced: fenced4},
		meta.Record{Type: meta.TypePartition, TopicID: tid, Partition: 0, Replicas: p.Replicas, ISR: p.ISR, Leader: p.Leader,
			LeaderEpoch: p.LeaderEpoch, AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas})
	im, err := meta.EmptyImage("cid").Apply(0, recs)
	if err != nil {
		t.Fatal(err)
	}
	return im, im.Topics["t"]
}

func TestReassignRecord(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p       meta.Partition
		target  []int32
		fenced4 bool
		// wChange false: nothing to record.
		wChange                     bool
		wReplicas, wAdding, wRemove []int32
		wISR                        []int32
		wLeader, wLeaderEpoch       int32
	}{
		{name: "same replicas", p: meta.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5},
			target: []int32{1, 2, 3}},
		{name: "replace one", p: meta.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5},
			target: []int32{1, 2, 4}, wChange: true,
			wReplicas: []int32{1, 2, 4, 3}, wAdding: []int32{4}, wRemove: []int32{3}, wISR: []int32{1, 2, 3}, wLeader: 1, wLeaderEpoch: 5},
		{name: "replace one, to a fenced broker", p: meta.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5},
			target: []int32{4, 2, 3}, fenced4: true, wChange: true,
			wReplicas: []int32{4, 2, 3, 1}, wAdding: []int32{4}, wRemove: []int32{1}, wISR: []int32{1, 2, 3}, wLeader: 1, wLeaderEpoch: 5},
		{name: "reorder completes at once", p: meta.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5},
			target: []int32{3, 2, 1}, wChange: true, wReplicas: []int32{3, 2, 1}, wISR: []int32{1, 2, 3}, wLeader: 1, wLeaderEpoch: 5},
		{name: "removing the leader completes at once with a new leader", p: meta.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5},
			target: []int32{3, 2}, wChange: true, wReplicas: []int32{3, 2}, wISR: []int32{2, 3}, wLeader: 3, wLeaderEpoch: 6},
		{name: "removing a follower bumps the leader epoch", p: meta.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5},
			target: []int32{1, 2}, wChange: true, wReplicas: []int32{1, 2}, wISR: []int32{1, 2}, wLeader: 1, wLeaderEpoch: 6},
		{name: "removal waits while no target replica is in sync", p: meta.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 5},
			target: []int32{2, 3}, wChange: true, wReplicas: []int32{2, 3, 1}, wRemove: []int32{1}, wISR: []int32{1}, wLeader: 1, wLeaderEpoch: 5},
		{name: "a new target replaces the one in progress", p: meta.Partition{Replicas: []int32{1, 2, 4, 3}, AddingReplicas: []int32{4}, RemovingReplicas: []int32{3},
			ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5},
			target: []int32{1, 3, 4}, wChange: true, wReplicas: []int32{1, 3, 4, 2}, wAdding: []int32{4}, wRemove: []int32{2}, wISR: []int32{1, 2, 3}, wLeader: 1, wLeaderEpoch: 5,
		},
		{name: "going back to the old replicas completes at once", p: meta.Partition{Replicas: []int32{1, 2, 4, 3}, AddingReplicas: []int32{4}, RemovingReplicas: []int32{3},
			ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5},
			target: []int32{1, 2, 3}, wChange: true, wReplicas: []int32{1, 2, 3}, wISR: []int32{1, 2, 3}, wLeader: 1, wLeaderEpoch: 6,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im, topic := reassignImage(t, tc.p, tc.fenced4)
			p := topic.Partitions[0]
			rec, change := reassignRecord(topic, p, tc.target, leaderCandidates(im))
			if change != tc.wChange {
				t.Fatalf("change = %v, want %v (record %+v)", change, tc.wChange, rec)
			}
			if !change {
				return
			}
			if !slices.Equal(rec.Replicas, tc.wReplicas) || !slices.Equal(rec.AddingReplicas, tc.wAdding) || !slices.Equal(rec.RemovingReplicas, tc.wRemove) ||
				!slices.Equal(rec.ISR, tc.wISR) || rec.Leader != tc.wLeader || rec.LeaderEpoch != tc.wLeaderEpoch || rec.PartitionEpoch != p.PartitionEpoch+1 {
				t.Fatalf("record replicas %v adding %v removing %v ISR %v leader %d epoch %d partition epoch %d; want %v %v %v %v %d %d %d",
					rec.Replicas, rec.AddingReplicas, rec.RemovingReplicas, rec.ISR, rec.Leader, rec.LeaderEpoch, rec.PartitionEpoch,
					tc.wReplicas, tc.wAdding, tc.wRemove, tc.wISR, tc.wLeader, tc.wLeaderEpoch, p.PartitionEpoch+1)
			}
			if _, err := im.Apply(1, []meta.Record{rec}); err != nil {
				t.Fatalf("the record does not apply: %v", err)
			}
		})
	}
}

// TestReassignmentLifecycle follows one move through the image: started, waiting while the
// new replica is out of the ISR, completed by the controller once it joins, and nothing more.
func TestReassignmentLifecycle(t *testing.T) {
	im, topic := reassignImage(t, meta.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 3, LeaderEpoch: 2}, false)
	rec, _ := reassignRecord(topic, topic.Partitions[0], []int32{1, 2, 4}, leaderCandidates(im))
	im, err := im.Apply(1, []meta.Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	if recs := reassignmentRecords(im); len(recs) != 0 {
		t.Fatalf("completed before the new replica joined the ISR: %+v", recs)
	}
	p := im.Topics["t"].Partitions[0]
	if !p.Reassigning() || !slices.Equal(p.TargetReplicas(), []int32{1, 2, 4}) {
		t.Fatalf("partition %+v: want a reassignment in progress to 1,2,4", p)
	}
	// The leader adds the caught-up replica to the ISR; the reassignment stays in the record.
	join := p.Next(topic.ID, p.Leader, p.LeaderEpoch, []int32{1, 2, 3, 4})
	if im, err = im.Apply(2, []meta.Record{join}); err != nil {
		t.Fatal(err)
	}
	recs := reassignmentRecords(im)
	if len(recs) != 1 {
		t.Fatalf("want the completion record, got %+v", recs)
	}
	done := recs[0]
	if !slices.Equal(done.Replicas, []int32{1, 2, 4}) || !slices.Equal(done.ISR, []int32{1, 2, 4}) || done.Leader != 1 || done.LeaderEpoch != 3 ||
		len(done.AddingReplicas) != 0 || len(done.RemovingReplicas) != 0 {
		t.Fatalf("completion record %+v: want replicas and ISR 1,2,4, leader 1 (3 left) at epoch 3", done)
	}
	if im, err = im.Apply(3, recs); err != nil {
		t.Fatal(err)
	}
	if recs := reassignmentRecords(im); len(recs) != 0 {
		t.Fatalf("records after the completion: %+v", recs)
	}
	// The completion, decided from the image before it, is stale now.
	if _, err := im.Apply(4, []meta.Record{done}); !errors.Is(err, meta.ErrStalePartitionEpoch) {
		t.Fatalf("replaying the completion: %v; want a stale partition epoch", err)
	}
}

func TestCancelReassignment(t *testing.T) {
	inProgress := meta.Partition{Replicas: []int32{1, 2, 4, 3}, AddingReplicas: []int32{4}, RemovingReplicas: []int32{3},
		ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5}
	im, topic := reassignImage(t, inProgress, true)
	rec, code, _ := cancelReassignment(topic, topic.Partitions[0], leaderCandidates(im), false)
	if code != nil || !slices.Equal(rec.Replicas, []int32{1, 2, 3}) || !slices.Equal(rec.ISR, []int32{1, 2, 3}) || rec.Leader != 1 ||
		len(rec.AddingReplicas)+len(rec.RemovingReplicas) > 0 {
		t.Fatalf("cancel: %+v %v; want replicas and ISR 1,2,3 led by 1", rec, code)
	}
	if _, err := im.Apply(1, []meta.Record{rec}); err != nil {
		t.Fatal(err)
	}

	idle, topic := reassignImage(t, meta.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}, false)
	if _, code, _ := cancelReassignment(topic, topic.Partitions[0], leaderCandidates(idle), false); code != kerr.NoReassignmentInProgress {
		t.Fatalf("cancel without a reassignment: %v; want NO_REASSIGNMENT_IN_PROGRESS", code)
	}

	// Only the adding replica is in sync: reverting would be an unclean election.
	onlyNew := meta.Partition{Replicas: []int32{4, 1}, AddingReplicas: []int32{4}, RemovingReplicas: []int32{1}, ISR: []int32{4}, Leader: 4, LeaderEpoch: 7}
	im, topic = reassignImage(t, onlyNew, false)
	if _, code, _ := cancelReassignment(topic, topic.Partitions[0], leaderCandidates(im), false); code != kerr.InvalidReplicaAssignment {
		t.Fatalf("cancel needing an unclean election: %v; want INVALID_REPLICA_ASSIGNMENT", code)
	}
	rec, code, _ = cancelReassignment(topic, topic.Partitions[0], leaderCandidates(im), true)
	if code != nil || !slices.Equal(rec.Replicas, []int32{1}) || !slices.Equal(rec.ISR, []int32{1}) || rec.Leader != 1 || rec.LeaderEpoch != 8 {
		t.Fatalf("unclean cancel: %+v %v; want broker 1 alone, leading at epoch 8", rec, code)
	}
}

func TestValidateAssignment(t *testing.T) {
	im, _ := reassignImage(t, meta.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}, true)
	for _, tc := range []struct {
		target []int32
		want   *kerr.Error
	}{
		{[]int32{1, 2, 4}, nil},
		{nil, kerr.InvalidReplicaAssignment},
		{[]int32{1, 2, 1}, kerr.InvalidReplicaAssignment},
		{[]int32{1, 5}, kerr.InvalidReplicaAssignment},
	} {
		if code, msg := validateAssignment(im, tc.target); code != tc.want {
			t.Errorf("validateAssignment(%v) = %v %q; want %v", tc.target, code, msg, tc.want)
		}
	}
}

func TestApplyRefusesReassignmentOutsideReplicas(t *testing.T) {
	im, topic := reassignImage(t, meta.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}, false)
	p := topic.Partitions[0]
	bad := p.Next(topic.ID, 1, 0, p.ISR)
	bad.AddingReplicas = []int32{3}
	if _, err := im.Apply(1, []meta.Record{bad}); err == nil {
		t.Fatal("a record adding a replica outside its replicas was applied")
	}
}
