package meta

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ringbroker/internal/testutil"
)

// TestRaftStoreLearner adds a learner to a 3-voter quorum after the voters compacted their
// logs: it catches up from a snapshot, follows new entries, forwards commits and heartbeats to
// the leader, never leads, survives a restart on a new port, and a voter may not join as one.
func TestRaftStoreLearner(t *testing.T) {
	q := newQuorum(t, 3, 4)
	lead := q.leader()
	for i := range 6 {
		if _, err := q.stores[lead].Commit(topicRecords(fmt.Sprintf("before-%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(q.dir, "learner")
	open := func() *RaftStore {
		s, err := OpenRaft(RaftConfig{NodeID: 9, Dir: dir, ClusterID: "cid", Listen: "127.0.0.1:0",
			Voters: q.voters, Learner: true, TickInterval: 20 * time.Millisecond, SnapshotEntries: 4,
			CommitTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	l := open()
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("the learner to catch up", func() bool { return len(l.Image().Topics) == 6 }))
	if l.restores.Load() == 0 {
		t.Fatal("the learner caught up without installing a snapshot")
	}
	if _, err := l.Commit(topicRecords("from-learner", 1)); err != nil {
		t.Fatalf("commit through the learner: %v", err)
	}
	for id, s := range q.stores {
		testutil.WaitFor(t, 5*time.Second, testutil.Holds(fmt.Sprintf("voter %d to see the learner's topic", id), func() bool { return s.Image().Topics["from-learner"] != nil }))
	}
	lead = q.leader()
	if _, err := l.Heartbeat(context.Background(), 9, NewUUID(), false); err != nil {
		t.Fatalf("heartbeat from the learner: %v", err)
	}
	if _, ok := q.stores[lead].Heartbeats()[9]; !ok {
		t.Fatalf("leader %d has no heartbeat from learner 9", lead)
	}
	if l.IsLeader() {
		t.Fatal("the learner leads")
	}
	if _, err := q.stores[lead].forward(lead, forwardRequest{Kind: "join", NodeID: 2, Addr: "127.0.0.1:1"}, time.Now().Add(5*time.Second)); err == nil ||
		!strings.Contains(err.Error(), "is a voter") {
		t.Fatalf("voter 2 joining as a learner: err %v, want a refusal", err)
	}

	// Restarted on a new port, the learner rejoins and follows entries committed meanwhile.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.stores[lead].Commit(topicRecords("while-down", 1)); err != nil {
		t.Fatal(err)
	}
	l = open()
	defer l.Close()
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("the restarted learner to catch up", func() bool { return l.Image().Topics["while-down"] != nil }))
	if _, err := q.stores[lead].Commit(topicRecords("after-restart", 1)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("the restarted learner to follow", func() bool { return l.Image().Topics["after-restart"] != nil }))
}
