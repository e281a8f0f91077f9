package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"ringbroker/internal/testutil"
	"ringbroker/raft"
)

// dynamicQuorum is n RaftStores of a dynamic quorum on loopback: node 1 formatted as its sole
// voter (format --standalone), the others with empty logs (--no-initial-controllers).
type dynamicQuorum struct {
	t      *testing.T
	dir    string
	addrs  map[int32]string
	dirIDs map[int32]UUID
	stores map[int32]*RaftStore
}

func newDynamicQuorum(t *testing.T, n int) *dynamicQuorum {
	q := &dynamicQuorum{t: t, dir: t.TempDir(), addrs: map[int32]string{}, dirIDs: map[int32]UUID{}, stores: map[int32]*RaftStore{}}
	for i, a := range freeAddrs(t, n) {
		q.addrs[int32(i+1)], q.dirIDs[int32(i+1)] = a, NewUUID()
	}
	if err := FormatDynamic(filepath.Join(q.dir, "1"), []BootstrapVoter{{NodeID: 1, QuorumMember: QuorumMember{Addr: q.addrs[1], DirectoryID: q.dirIDs[1]}}}); err != nil {
		t.Fatal(err)
	}
	for id := range q.addrs {
		q.start(id)
	}
	closeAtEnd(t, q.stores)
	return q
}

func (q *dynamicQuorum) start(id int32) {
	q.t.Helper()
	s, err := OpenRaft(RaftConfig{NodeID: id, Dir: filepath.Join(q.dir, fmt.Sprint(id)), ClusterID: "cid",
		Listen: q.addrs[id], Dynamic: true, BootstrapServers: []string{q.addrs[1]}, DirectoryID: q.dirIDs[id],
		TickInterval: 20 * time.Millisecond, SnapshotEntries: 4, CommitTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		q.t.Fatalf("open node %d: %v", id, err)
	}
	q.stores[id] = s
}

// leader returns the store that leads, waiting for one.
func (q *dynamicQuorum) leader() *RaftStore {
	q.t.Helper()
	return q.stores[leaderOf(q.t, q.stores)]
}

// members returns the leader's voters and observers by node id.
func (q *dynamicQuorum) members() (voters, observers []int32) {
	q.t.Helper()
	st, err := q.leader().QuorumStatus(context.Background())
	if err != nil {
		q.t.Fatal(err)
	}
	for _, r := range st.Voters {
		voters = append(voters, r.NodeID)
	}
	for _, r := range st.Observers {
		observers = append(observers, r.NodeID)
	}
	slices.Sort(voters)
	slices.Sort(observers)
	return voters, observers
}

// TestDynamicQuorumVoterChanges grows a dynamic quorum from one voter to three and back, as
// kafka-metadata-quorum add-controller and remove-controller do, with Kafka's refusals on the
// way: a node that is not an observer with that directory id, a voter added twice, a voter
// removed with the wrong directory id, the last voter removed. Removing the leader hands
// leadership over first. Commits go on throughout, every node applies them, and a node
// restarted after snapshots still knows the voters' addresses (the log's membership, not its
// configuration, names them).
func TestDynamicQuorumVoterChanges(t *testing.T) {
	q := newDynamicQuorum(t, 3)
	ctx := context.Background()
	if l := q.leader(); l.cfg.NodeID != 1 {
		t.Fatalf("leader %d; want the standalone voter 1", l.cfg.NodeID)
	}
	testutil.WaitFor(t, 10*time.Second, func() error {
		if v, o := q.members(); !slices.Equal(v, []int32{1}) || !slices.Equal(o, []int32{2, 3}) {
			return fmt.Errorf("voters %v observers %v; want [1] and [2 3]", v, o)
		}
		return nil
	})
	commit := func(name string) {
		t.Helper()
		if _, err := q.stores[2].Commit(topicRecords(name, 1)); err != nil {
			t.Fatalf("commit %s: %v", name, err)
		}
	}
	for i := range 6 {
		commit(fmt.Sprintf("grow-%d", i))
	}

	for _, tc := range []struct {
		name string
		do   func(l *RaftStore) error
		want error
	}{
		{"wrong directory id", func(l *RaftStore) error { return l.AddVoter(ctx, 2, NewUUID(), q.addrs[2]) }, ErrNotCaughtUp},
		{"not an observer", func(l *RaftStore) error { return l.AddVoter(ctx, 7, NewUUID(), "127.0.0.1:1") }, ErrNotCaughtUp},
		{"voter already", func(l *RaftStore) error { return l.AddVoter(ctx, 1, q.dirIDs[1], q.addrs[1]) }, ErrDuplicateVoter},
		{"bad endpoint", func(l *RaftStore) error { return l.AddVoter(ctx, 2, q.dirIDs[2], "nohostport") }, ErrInvalidVoterChange},
		{"last voter", func(l *RaftStore) error { return l.RemoveVoter(ctx, 1, q.dirIDs[1]) }, ErrInvalidVoterChange},
		{"remove an observer", func(l *RaftStore) error { return l.RemoveVoter(ctx, 2, q.dirIDs[2]) }, ErrVoterNotFound},
	} {
		if err := tc.do(q.leader()); !errors.Is(err, tc.want) {
			t.Fatalf("%s: err %v; want %v", tc.name, err, tc.want)
		}
	}

	for _, id := range []int32{2, 3} {
		testutil.WaitFor(t, 10*time.Second, func() error { return q.leader().AddVoter(ctx, id, q.dirIDs[id], q.addrs[id]) })
		commit(fmt.Sprintf("after-add-%d", id))
	}
	if v, o := q.members(); !slices.Equal(v, []int32{1, 2, 3}) || len(o) != 0 {
		t.Fatalf("after adding 2 and 3: voters %v observers %v; want [1 2 3] and none", v, o)
	}
	if err := q.leader().RemoveVoter(ctx, 2, NewUUID()); !errors.Is(err, ErrVoterNotFound) {
		t.Fatalf("remove voter 2 with another directory id: %v; want ErrVoterNotFound", err)
	}

	// Removing the leader: it hands leadership over and sends the caller to the new leader.
	old := q.leader()
	err := old.RemoveVoter(ctx, old.cfg.NodeID, q.dirIDs[old.cfg.NodeID])
	var nl *raft.NotLeaderError
	if !errors.As(err, &nl) || nl.Leader == raftID(old.cfg.NodeID) {
		t.Fatalf("remove the leader %d: %v; want a NotLeaderError naming another voter", old.cfg.NodeID, err)
	}
	testutil.WaitFor(t, 10*time.Second, func() error { return q.leader().RemoveVoter(ctx, old.cfg.NodeID, q.dirIDs[old.cfg.NodeID]) })
	if v, o := q.members(); len(v) != 2 || slices.Contains(v, old.cfg.NodeID) || !slices.Equal(o, []int32{old.cfg.NodeID}) {
		t.Fatalf("after removing %d: voters %v observers %v; want the two others, and %d observing", old.cfg.NodeID, v, o, old.cfg.NodeID)
	}
	commit("after-remove")

	// A voter restarted after snapshots compacted every membership change away rejoins.
	var other int32
	for _, id := range []int32{1, 2, 3} {
		if id != old.cfg.NodeID && !q.stores[id].IsLeader() {
			other = id
		}
	}
	for i := range 6 {
		commit(fmt.Sprintf("compact-%d", i))
	}
	if err := q.stores[other].Close(); err != nil {
		t.Fatal(err)
	}
	q.start(other)
	commit("after-restart")
	for id, s := range q.stores {
		testutil.WaitFor(t, 10*time.Second, testutil.Holds(fmt.Sprintf("node %d to apply every commit", id), func() bool { return s.Image().Topics["after-restart"] != nil }))
	}
	if q.stores[other].Image().Quorum[q.leader().cfg.NodeID].Addr == "" {
		t.Fatalf("restarted node %d does not know the leader's address", other)
	}
}

// TestStaticQuorumRefusesVoterChanges: a quorum of controller.quorum.voters has kraft.version
// 0, and Kafka answers its voter changes with UNSUPPORTED_VERSION.
func TestStaticQuorumRefusesVoterChanges(t *testing.T) {
	q := newQuorum(t, 1, 0)
	s := q.stores[q.leader()]
	if err := s.AddVoter(context.Background(), 2, NewUUID(), "127.0.0.1:1"); !errors.Is(err, ErrStaticQuorum) {
		t.Fatalf("AddVoter on a static quorum: %v; want ErrStaticQuorum", err)
	}
	if err := s.RemoveVoter(context.Background(), 1, UUID{}); !errors.Is(err, ErrStaticQuorum) {
		t.Fatalf("RemoveVoter on a static quorum: %v; want ErrStaticQuorum", err)
	}
}

// TestQuorumMemberRecord applies the records of a kraft.version upgrade: a valid one records
// the voter and makes the quorum's kraft.version 1; one without a directory id, with an
// address that is not host:port or with a negative node id is refused.
func TestQuorumMemberRecord(t *testing.T) {
	dir := NewUUID()
	im, err := EmptyImage("cid").Apply(1, []Record{{Type: TypeQuorumMember, NodeID: 2, MemberAddr: "127.0.0.1:9093", DirectoryID: dir}})
	if err != nil {
		t.Fatal(err)
	}
	if got := im.Quorum[2]; got != (QuorumMember{Addr: "127.0.0.1:9093", DirectoryID: dir}) || im.KRaftVersion() != 1 {
		t.Fatalf("quorum %+v, kraft.version %d; want node 2 recorded and kraft.version 1", im.Quorum, im.KRaftVersion())
	}
	for _, r := range []Record{
		{Type: TypeQuorumMember, NodeID: 2, MemberAddr: "127.0.0.1:9093"},
		{Type: TypeQuorumMember, NodeID: 2, MemberAddr: "nohostport", DirectoryID: dir},
		{Type: TypeQuorumMember, NodeID: -1, MemberAddr: "127.0.0.1:9093", DirectoryID: dir},
	} {
		if _, err := EmptyImage("cid").Apply(1, []Record{r}); err == nil {
			t.Errorf("%+v applied; want it refused", r)
		}
	}
}
