package meta

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// freeAddrs reserves n loopback addresses for controller listeners.
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

// quorum is n RaftStores on loopback, node ids 1..n.
type quorum struct {
	t      testing.TB
	dir    string
	voters map[int32]string
	snap   uint64
	stores map[int32]*RaftStore
}

func newQuorum(t testing.TB, n int, snapshotEntries uint64) *quorum {
	q := &quorum{t: t, dir: t.TempDir(), voters: map[int32]string{}, snap: snapshotEntries, stores: map[int32]*RaftStore{}}
	for i, a := range freeAddrs(t, n) {
		q.voters[int32(i+1)] = a
	}
	for id := range q.voters {
		q.start(id)
	}
	t.Cleanup(func() {
		for _, s := range q.stores {
			s.Close()
		}
	})
	return q
}

func (q *quorum) start(id int32) *RaftStore {
	q.t.Helper()
	s, err := OpenRaft(RaftConfig{NodeID: id, Dir: filepath.Join(q.dir, fmt.Sprint(id)), ClusterID: "cid",
		Listen: q.voters[id], Voters: q.voters, TickInterval: 20 * time.Millisecond, SnapshotEntries: q.snap,
		CommitTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		q.t.Fatal(err)
	}
	q.stores[id] = s
	return s
}

// leader waits for a leader among the running stores.
func (q *quorum) leader() int32 {
	q.t.Helper()
	var l int32 = -1
	waitFor(q.t, 10*time.Second, "a leader", func() bool {
		for id, s := range q.stores {
			if s.IsLeader() {
				l = id
				return true
			}
		}
		return false
	})
	return l
}

// waitFor polls cond every 10ms for at most d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func topicRecords(name string, parts int) []Record {
	id := NewUUID()
	recs := []Record{{Type: TypeTopic, TopicName: name, TopicID: id}}
	for p := range parts {
		recs = append(recs, Record{Type: TypePartition, TopicID: id, Partition: int32(p), Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
	}
	return recs
}

func TestRaftStoreCommitOnEveryNode(t *testing.T) {
	q := newQuorum(t, 3, 0)
	q.leader()
	for id, s := range q.stores {
		name := fmt.Sprintf("t%d", id)
		im, err := s.Commit(topicRecords(name, 2))
		if err != nil {
			t.Fatalf("commit on node %d (leader %d): %v", id, s.Leader(), err)
		}
		// Commit returns the local image, which must already hold the topic.
		if tp := im.Topics[name]; tp == nil || len(tp.Partitions) != 2 {
			t.Fatalf("node %d: image after commit lacks %s: %+v", id, name, tp)
		}
	}
	for id, s := range q.stores {
		waitFor(t, 5*time.Second, fmt.Sprintf("node %d to see 3 topics", id), func() bool { return len(s.Image().Topics) == 3 })
	}
	// A record that does not apply is refused, wherever it is committed.
	for id, s := range q.stores {
		if _, err := s.Commit(topicRecords("t1", 1)); err == nil {
			t.Fatalf("node %d committed a duplicate topic", id)
		}
	}
}

func TestRaftStoreConcurrentDuplicateCreatesOneWins(t *testing.T) {
	q := newQuorum(t, 3, 0)
	q.leader()
	var wg sync.WaitGroup
	errs := make([]error, 0, 3)
	var mu sync.Mutex
	for _, s := range q.stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Commit(topicRecords("same", 1))
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		}
	}
	if ok != 1 {
		t.Fatalf("%d of 3 racing creates of one topic succeeded, want 1: %v", ok, errs)
	}
	var want UUID
	for id, s := range q.stores {
		waitFor(t, 5*time.Second, fmt.Sprintf("node %d to see the topic", id), func() bool { return s.Image().Topics["same"] != nil })
		got := s.Image().Topics["same"].ID
		if want.IsZero() {
			want = got
		} else if got != want {
			t.Fatalf("node %d has topic id %s, another node %s", id, got, want)
		}
	}
}

func TestRaftStoreLeaderLossAndSnapshotCatchUp(t *testing.T) {
	q := newQuorum(t, 3, 5)
	first := q.leader()
	if _, err := q.stores[first].Commit(topicRecords("before", 1)); err != nil {
		t.Fatal(err)
	}
	// Kill the leader: the others elect a new one and commits go on through either of them.
	if err := q.stores[first].Close(); err != nil {
		t.Fatal(err)
	}
	delete(q.stores, first)
	second := q.leader()
	if second == first {
		t.Fatalf("leader %d still leads after stopping", first)
	}
	for i := range 20 {
		for _, s := range q.stores {
			if _, err := s.Commit(topicRecords(fmt.Sprintf("after-%d-%d", i, s.cfg.NodeID), 1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Bring the old leader back: the others compacted past its log, so it catches up from a
	// snapshot and then follows.
	back := q.start(first)
	want := len(q.stores[second].Image().Topics)
	waitFor(t, 10*time.Second, "the restarted node to catch up", func() bool { return len(back.Image().Topics) == want })
	if back.restores.Load() == 0 {
		t.Fatal("restarted node caught up without installing a snapshot")
	}
	if _, err := back.Commit(topicRecords("last", 3)); err != nil {
		t.Fatal(err)
	}
	for id, s := range q.stores {
		waitFor(t, 5*time.Second, fmt.Sprintf("node %d to see the last topic", id), func() bool { return s.Image().Topics["last"] != nil })
	}
}

func TestRaftStoreHeartbeatsReachTheLeader(t *testing.T) {
	q := newQuorum(t, 3, 0)
	l := q.leader()
	inc := NewUUID()
	for id, s := range q.stores {
		if err := s.Heartbeat(id, inc); err != nil {
			t.Fatalf("heartbeat from node %d: %v", id, err)
		}
	}
	hb := q.stores[l].Heartbeats()
	if len(hb) != 3 || hb[1].Incarnation != inc {
		t.Fatalf("leader %d holds heartbeats %v, want one from each of 3 nodes", l, hb)
	}
}

func TestParseVoters(t *testing.T) {
	v, err := ParseVoters("1@127.0.0.1:9093, 2@localhost:9094")
	if err != nil || len(v) != 2 || v[2] != "localhost:9094" {
		t.Fatalf("ParseVoters = %v, %v", v, err)
	}
	for _, bad := range []string{"", "1@", "x@h:1", "1@h:1,1@h:2", "1:h:1"} {
		if _, err := ParseVoters(bad); err == nil {
			t.Errorf("ParseVoters(%q) accepted", bad)
		}
	}
}

// BenchmarkRaftStoreCommit measures a metadata commit (one topic of one partition) through a
// 3-voter quorum on loopback, proposed on the leader, and reports p50/p99.
func BenchmarkRaftStoreCommit(b *testing.B) {
	benchCommit(b, false)
}

// BenchmarkRaftStoreCommitForwarded is the same commit made on a follower, which forwards it.
func BenchmarkRaftStoreCommitForwarded(b *testing.B) {
	benchCommit(b, true)
}

// BenchmarkRaftStoreCommitSoleVoter is the same commit on a single node: the sole voter of its
// quorum, without a controller listener.
func BenchmarkRaftStoreCommitSoleVoter(b *testing.B) {
	s, err := OpenRaft(RaftConfig{NodeID: 1, Dir: b.TempDir(), ClusterID: "cid", Voters: map[int32]string{1: ""},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	timeCommits(b, s)
}

func benchCommit(b *testing.B, follower bool) {
	q := newQuorum(b, 3, 0)
	l := q.leader()
	s := q.stores[l]
	if follower {
		for id, f := range q.stores {
			if id != l {
				s = f
				break
			}
		}
	}
	timeCommits(b, s)
}

// timeCommits commits b.N topics of one partition through s and reports p50/p99.
func timeCommits(b *testing.B, s *RaftStore) {
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if _, err := s.Commit(topicRecords(fmt.Sprintf("b%d", i), 1)); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

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
	waitFor(t, 10*time.Second, "the learner to catch up", func() bool { return len(l.Image().Topics) == 6 })
	if l.restores.Load() == 0 {
		t.Fatal("the learner caught up without installing a snapshot")
	}
	if _, err := l.Commit(topicRecords("from-learner", 1)); err != nil {
		t.Fatalf("commit through the learner: %v", err)
	}
	for id, s := range q.stores {
		waitFor(t, 5*time.Second, fmt.Sprintf("voter %d to see the learner's topic", id), func() bool { return s.Image().Topics["from-learner"] != nil })
	}
	lead = q.leader()
	if err := l.Heartbeat(9, NewUUID()); err != nil {
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
	waitFor(t, 10*time.Second, "the restarted learner to catch up", func() bool { return l.Image().Topics["while-down"] != nil })
	if _, err := q.stores[lead].Commit(topicRecords("after-restart", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the restarted learner to follow", func() bool { return l.Image().Topics["after-restart"] != nil })
}

// TestRaftStoreSoleVoter runs the quorum of a single node: no controller listener, leading as
// soon as it is open, committing and taking its own heartbeats, and back after a restart.
func TestRaftStoreSoleVoter(t *testing.T) {
	dir := t.TempDir()
	s, err := openSoleVoter(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !s.IsLeader() || s.Leader() != 1 {
		t.Fatalf("sole voter open but not leading (leader %d)", s.Leader())
	}
	if n := s.ListenAddr().Network(); n != "none" {
		t.Fatalf("sole voter has a controller listener on %s %s", n, s.ListenAddr())
	}
	if _, err := s.Commit(topicRecords("a", 2)); err != nil {
		t.Fatal(err)
	}
	inc := NewUUID()
	if err := s.Heartbeat(1, inc); err != nil || s.Heartbeats()[1].Incarnation != inc {
		t.Fatalf("heartbeat to itself: %v, heartbeats %v", err, s.Heartbeats())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = openSoleVoter(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if tp := s.Image().Topics["a"]; tp == nil || len(tp.Partitions) != 2 {
		t.Fatalf("after a restart topic a is %+v", tp)
	}
	if _, err := OpenRaft(RaftConfig{NodeID: 1, Dir: t.TempDir(), Voters: map[int32]string{1: "", 2: "127.0.0.1:1"}}); err == nil {
		t.Fatal("a voter without a controller listener opened as one of two")
	}
}
