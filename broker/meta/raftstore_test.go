package meta

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ringbroker/internal/testutil"
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
	// mods change each store's configuration (NodeID set) before it opens.
	mods []func(*RaftConfig)
}

func newQuorum(t testing.TB, n int, snapshotEntries uint64, mods ...func(*RaftConfig)) *quorum {
	q := &quorum{t: t, dir: t.TempDir(), voters: map[int32]string{}, snap: snapshotEntries, stores: map[int32]*RaftStore{}, mods: mods}
	for i, a := range freeAddrs(t, n) {
		q.voters[int32(i+1)] = a
	}
	for id := range q.voters {
		q.start(id)
	}
	closeAtEnd(t, q.stores)
	return q
}

// closeAtEnd closes the stores left in the map when the test ends.
func closeAtEnd(t testing.TB, stores map[int32]*RaftStore) {
	t.Cleanup(func() {
		for _, s := range stores {
			s.Close()
		}
	})
}

func (q *quorum) start(id int32) *RaftStore {
	q.t.Helper()
	cfg := RaftConfig{NodeID: id, Dir: filepath.Join(q.dir, fmt.Sprint(id)), ClusterID: "cid",
		Listen: q.voters[id], Voters: q.voters, TickInterval: 20 * time.Millisecond, SnapshotEntries: q.snap,
		CommitTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	for _, m := range q.mods {
		m(&cfg)
	}
	s, err := OpenRaft(cfg)
	if err != nil {
		q.t.Fatal(err)
	}
	q.stores[id] = s
	return s
}

// leader waits for a leader among the running stores.
func (q *quorum) leader() int32 {
	q.t.Helper()
	return leaderOf(q.t, q.stores)
}

// leaderOf waits for a leader among stores and returns its node id.
func leaderOf(t testing.TB, stores map[int32]*RaftStore) int32 {
	t.Helper()
	var l int32 = -1
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("a leader", func() bool {
		for id, s := range stores {
			if s.IsLeader() {
				l = id
				return true
			}
		}
		return false
	}))
	return l
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
		testutil.WaitFor(t, 5*time.Second, testutil.Holds(fmt.Sprintf("node %d to see 3 topics", id), func() bool { return len(s.Image().Topics) == 3 }))
	}
	// A record that does not apply is refused, wherever it is committed.
	for id, s := range q.stores {
		if _, err := s.Commit(topicRecords("t1", 1)); err == nil {
			t.Fatalf("node %d committed a duplicate topic", id)
		}
	}
}

// TestRaftStoreCatchUp holds one follower's apply back while the others commit, and checks
// that CatchUp on it returns only an image with everything committed before the call: a
// broker checking a request against its own image would otherwise not know of a topic that
// a client has just created through another broker.
func TestRaftStoreCatchUp(t *testing.T) {
	var lagger atomic.Int32 // the follower held back, once chosen
	blocked := make(chan struct{})
	release := make(chan struct{})
	var blockOnce, releaseOnce sync.Once
	q := newQuorum(t, 3, 0, func(c *RaftConfig) {
		id := c.NodeID
		c.OnChange = func(im *Image) {
			// The lagger stops applying once it has published topic b, so its image holds
			// b and not c.
			if id == lagger.Load() && im.Topics["b"] != nil {
				blockOnce.Do(func() { close(blocked) })
				<-release
			}
		}
	})
	// Before the stores close (cleanups run last first), or the lagger's would wait forever.
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	lead := q.leader()
	// Every node knows the leader and has applied topic a.
	if _, err := q.stores[lead].Commit(topicRecords("a", 1)); err != nil {
		t.Fatal(err)
	}
	for id, s := range q.stores {
		testutil.WaitFor(t, 5*time.Second, testutil.Holds(fmt.Sprintf("node %d to apply topic a and know leader %d", id, lead), func() bool {
			return s.Image().Topics["a"] != nil && s.Leader() == lead
		}))
	}
	lag := lead%3 + 1
	lagger.Store(lag)
	var want int64
	for _, name := range []string{"b", "c"} {
		im, err := q.stores[lead].Commit(topicRecords(name, 1))
		if err != nil {
			t.Fatalf("commit topic %s on leader %d: %v", name, lead, err)
		}
		want = im.Offset
	}
	<-blocked
	if im := q.stores[lag].Image(); im.Topics["c"] != nil {
		t.Fatalf("node %d applied topic c while held back (image at %d)", lag, im.Offset)
	}
	type result struct {
		im  *Image
		err error
	}
	done := make(chan result, 1)
	go func() {
		im, err := q.stores[lag].CatchUp()
		done <- result{im, err}
	}()
	var res result
	select {
	case res = <-done:
		// CatchUp must still be waiting for the held-back node: an answer now is early.
	case <-time.After(300 * time.Millisecond):
		releaseOnce.Do(func() { close(release) })
		res = <-done
	}
	if res.err != nil {
		t.Fatalf("CatchUp on node %d: %v", lag, res.err)
	}
	if res.im.Offset < want || res.im.Topics["c"] == nil {
		t.Fatalf("CatchUp on node %d returned the image at %d without topic c; want it at %d or later, with c", lag, res.im.Offset, want)
	}
	// On the leader it returns at once with what it committed.
	im, err := q.stores[lead].CatchUp()
	if err != nil || im.Offset < want {
		t.Fatalf("CatchUp on leader %d: image at %d, %v; want at %d or later", lead, im.Offset, err, want)
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
		testutil.WaitFor(t, 5*time.Second, testutil.Holds(fmt.Sprintf("node %d to see the topic", id), func() bool { return s.Image().Topics["same"] != nil }))
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
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("the restarted node to catch up", func() bool { return len(back.Image().Topics) == want }))
	if back.restores.Load() == 0 {
		t.Fatal("restarted node caught up without installing a snapshot")
	}
	if _, err := back.Commit(topicRecords("last", 3)); err != nil {
		t.Fatal(err)
	}
	for id, s := range q.stores {
		testutil.WaitFor(t, 5*time.Second, testutil.Holds(fmt.Sprintf("node %d to see the last topic", id), func() bool { return s.Image().Topics["last"] != nil }))
	}
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
	if _, err := s.Heartbeat(context.Background(), 1, inc, false); err != nil || s.Heartbeats()[1].Incarnation != inc {
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

// TestRaftStoreSoleVoterReopensWithWholeLog restarts a sole voter whose log holds many entries
// and checks the image holds all of them as soon as OpenRaft returns: a broker lists its
// partitions from that image before it listens, so an entry applied later would be a topic
// missing after a restart.
func TestRaftStoreSoleVoterReopensWithWholeLog(t *testing.T) {
	const topics = 2000
	dir := t.TempDir()
	s, err := openSoleVoter(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range topics {
		if _, err := s.Commit(topicRecords(fmt.Sprintf("t%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for restart := range 3 {
		s, err = openSoleVoter(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(s.Image().Topics); n != topics {
			t.Fatalf("restart %d: image holds %d of %d topics when OpenRaft returns", restart, n, topics)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
