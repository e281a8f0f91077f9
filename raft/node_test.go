package raft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ringbroker/internal/testutil"
)

// listSM is a state machine that records the data of every applied entry.
type listSM struct {
	mu       sync.Mutex
	applied  []string
	restores int
}

func (sm *listSM) Apply(e Entry) error {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.applied = append(sm.applied, string(e.Data))
	return nil
}

func (sm *listSM) Snapshot() ([]byte, error) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return json.Marshal(sm.applied)
}

func (sm *listSM) Restore(data []byte) error {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.restores++
	sm.applied = nil
	return json.Unmarshal(data, &sm.applied)
}

func (sm *listSM) list() []string {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return slices.Clone(sm.applied)
}

type testCluster struct {
	tb    testing.TB
	dirs  map[uint64]string
	addrs map[uint64]string
	nodes map[uint64]*Node
	sms   map[uint64]*listSM
	cfg   NodeConfig
}

func newTestCluster(tb testing.TB, n int, cfg NodeConfig) *testCluster {
	c := &testCluster{tb: tb, dirs: map[uint64]string{}, addrs: map[uint64]string{}, nodes: map[uint64]*Node{}, sms: map[uint64]*listSM{}, cfg: cfg}
	var voters []uint64
	for i := 1; i <= n; i++ {
		voters = append(voters, uint64(i))
	}
	for _, id := range voters {
		c.dirs[id] = tb.TempDir()
		c.addrs[id] = "127.0.0.1:0"
		c.start(id, voters)
	}
	for id, nd := range c.nodes {
		c.addrs[id] = nd.Addr()
	}
	for _, nd := range c.nodes {
		for id, addr := range c.addrs {
			nd.AddPeer(id, addr)
		}
	}
	tb.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.Stop()
		}
	})
	return c
}

func (c *testCluster) start(id uint64, voters []uint64) {
	c.tb.Helper()
	cfg := c.cfg
	cfg.ID, cfg.Dir, cfg.Listen, cfg.Voters = id, c.dirs[id], c.addrs[id], voters
	cfg.Peers = map[uint64]string{}
	for pid, addr := range c.addrs {
		if pid != id && addr != "127.0.0.1:0" {
			cfg.Peers[pid] = addr
		}
	}
	sm := &listSM{}
	cfg.StateMachine = sm
	nd, err := StartNode(cfg)
	if err != nil {
		c.tb.Fatalf("start node %d: %v", id, err)
	}
	c.nodes[id], c.sms[id] = nd, sm
}

func (c *testCluster) stop(id uint64) {
	c.tb.Helper()
	if err := c.nodes[id].Stop(); err != nil {
		c.tb.Fatalf("stop node %d: %v", id, err)
	}
	delete(c.nodes, id)
}

// leader waits until a running node leads and every running node that knows a leader
// agrees on it.
func (c *testCluster) leader() *Node {
	c.tb.Helper()
	var lead *Node
	found := false
	defer func() {
		if !found {
			for id, nd := range c.nodes {
				st, _ := nd.Status(context.Background())
				c.tb.Logf("node %d: %+v", id, st)
			}
		}
	}()
	testutil.WaitFor(c.tb, 10*time.Second, testutil.Holds("a leader", func() bool {
		lead = nil
		var seen uint64
		for _, nd := range c.nodes {
			if nd.IsLeader() {
				lead = nd
			}
			// Nodes not yet members know no leader; the others must agree.
			if l := nd.Leader(); l != None && seen != None && l != seen {
				return false
			} else if l != None {
				seen = l
			}
		}
		return lead != nil && lead.cfg.ID == seen
	}))
	found = true
	return lead
}

// proposeAll proposes n entries named prefix-i concurrently at the leader, retrying on
// leader changes.
func (c *testCluster) proposeAll(prefix string, n int) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := fmt.Appendf(nil, "%s-%d", prefix, i)
			for {
				lead := c.leader()
				_, err := lead.Propose(ctx, data)
				var nl *NotLeaderError
				if err == nil || ctx.Err() != nil {
					errs <- err
					return
				}
				if !errors.As(err, &nl) && !errors.Is(err, ErrProposalDropped) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			c.tb.Fatalf("propose: %v", err)
		}
	}
}

// converged waits until every running node applied the same entries, with want of them.
func (c *testCluster) converged(want int) {
	c.tb.Helper()
	testutil.WaitFor(c.tb, 15*time.Second, testutil.Holds(fmt.Sprintf("all nodes to apply %d entries", want), func() bool {
		var ref []string
		for _, sm := range c.sms {
			if ref == nil {
				ref = sm.list()
			}
		}
		for id := range c.nodes {
			if got := c.sms[id].list(); len(got) != want || !slices.Equal(got, ref) {
				return false
			}
		}
		return true
	}))
}

func fastNodeConfig() NodeConfig {
	return NodeConfig{TickInterval: 25 * time.Millisecond, ElectionTick: 10, HeartbeatTick: 1}
}

// TestNodeThreeOverTCP runs three Nodes over loopback TCP with real fsync: concurrent
// proposals commit in one order everywhere, the cluster survives the loss of its leader, and
// a node that was down catches up from a snapshot.
func TestNodeThreeOverTCP(t *testing.T) {
	cfg := fastNodeConfig()
	cfg.SnapshotEntries = 40
	c := newTestCluster(t, 3, cfg)
	c.proposeAll("a", 100)
	c.converged(100)

	old := c.leader().cfg.ID
	c.stop(old)
	c.proposeAll("b", 100)
	if nl := c.leader().cfg.ID; nl == old {
		t.Fatalf("node %d still leads after it was stopped", nl)
	}
	c.start(old, nil)
	// Once the restarted node has applied the leader's read index, it holds every entry,
	// whether it caught up by entries or by a snapshot.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	idx, err := c.leader().ReadIndex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[old].WaitApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	if got := len(c.sms[old].list()); got != 200 {
		t.Fatalf("restarted node %d applied %d entries at read index %d; want 200", old, got, idx)
	}
	c.converged(200)
	if c.sms[old].restores == 0 {
		t.Errorf("restarted node %d never restored a snapshot; want it to catch up from one", old)
	}
	st, err := c.nodes[old].Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.FirstIdx <= 1 {
		t.Errorf("restarted node %d holds its log from %d; want it compacted by a snapshot", old, st.FirstIdx)
	}
}

// TestNodeReadIndexAndWaitApplied: a follower has no read index and names the leader; the
// leader's is its commit index, which a node has applied once WaitApplied returns, even when
// only no-ops lie up to it (they never reach the state machine).
func TestNodeReadIndexAndWaitApplied(t *testing.T) {
	c := newTestCluster(t, 3, fastNodeConfig())
	lead := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	waitAll := func(want int) uint64 {
		t.Helper()
		idx, err := lead.ReadIndex(ctx)
		if err != nil {
			t.Fatalf("read index on leader %d: %v", lead.cfg.ID, err)
		}
		for id, nd := range c.nodes {
			if err := nd.WaitApplied(ctx, idx); err != nil {
				t.Fatalf("node %d: %v", id, err)
			}
			if got := len(c.sms[id].list()); got != want {
				t.Fatalf("node %d applied %d entries at read index %d; want %d", id, got, idx, want)
			}
		}
		return idx
	}
	first := waitAll(0)
	for id, nd := range c.nodes {
		var nl *NotLeaderError
		if _, err := nd.ReadIndex(ctx); id != lead.cfg.ID && (!errors.As(err, &nl) || nl.Leader != lead.cfg.ID) {
			t.Fatalf("read index on follower %d: %v; want a NotLeaderError naming %d", id, err, lead.cfg.ID)
		}
	}
	c.proposeAll("a", 20)
	if idx := waitAll(20); idx < first+20 {
		t.Fatalf("read index %d after 20 entries past %d", idx, first)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := lead.WaitApplied(short, 1<<40); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait for an index never reached: %v; want the context's deadline", err)
	}
}

func TestNodeProposeOnFollowerAndTransfer(t *testing.T) {
	c := newTestCluster(t, 3, fastNodeConfig())
	lead := c.leader()
	var follower *Node
	for _, nd := range c.nodes {
		if nd != lead {
			follower = nd
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := follower.Propose(ctx, []byte("x"))
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != lead.cfg.ID {
		t.Fatalf("propose on follower: %v; want NotLeaderError naming %d", err, lead.cfg.ID)
	}
	if err := lead.TransferLeadership(ctx, follower.cfg.ID); err != nil {
		t.Fatal(err)
	}
	if got := c.leader(); got != follower {
		t.Fatalf("leader after transfer is %d; want %d", got.cfg.ID, follower.cfg.ID)
	}
	if _, err := follower.Propose(ctx, []byte("after-transfer")); err != nil {
		t.Fatalf("propose at new leader: %v", err)
	}
	c.converged(1)
}

func TestNodeMembershipChange(t *testing.T) {
	c := newTestCluster(t, 3, fastNodeConfig())
	c.proposeAll("a", 10)
	// Node 4 joins empty, as a learner first, then is promoted.
	c.dirs[4], c.addrs[4] = t.TempDir(), "127.0.0.1:0"
	c.start(4, nil)
	c.addrs[4] = c.nodes[4].Addr()
	for id, addr := range c.addrs {
		c.nodes[4].AddPeer(id, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lead := c.leader()
	if _, err := lead.ProposeConfChange(ctx, ConfChange{Type: AddLearner, NodeID: 4, Context: []byte(c.addrs[4])}); err != nil {
		t.Fatalf("add learner 4: %v", err)
	}
	c.converged(10)
	if _, err := lead.ProposeConfChange(ctx, ConfChange{Type: AddVoter, NodeID: 4, Context: []byte(c.addrs[4])}); err != nil {
		t.Fatalf("promote 4: %v", err)
	}
	st, err := lead.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Conf.Voters, []uint64{1, 2, 3, 4}) {
		t.Fatalf("voters %v; want [1 2 3 4]", st.Conf.Voters)
	}
	// Remove the leader itself: it steps down once the removal commits, and the rest go on.
	if _, err := lead.ProposeConfChange(ctx, ConfChange{Type: RemoveNode, NodeID: lead.cfg.ID}); err != nil && !errors.Is(err, ErrLeadershipLost) {
		t.Fatalf("remove leader %d: %v", lead.cfg.ID, err)
	}
	c.stop(lead.cfg.ID)
	c.proposeAll("b", 10)
	c.converged(20)
}

// TestNodeSoleVoterLeadsAtOnce starts a node that is its configuration's only voter with a
// tick too slow to ever time out an election: it must lead at start, and again after a restart
// from its log, without a tick.
func TestNodeSoleVoterLeadsAtOnce(t *testing.T) {
	dir := t.TempDir()
	for i, voters := range [][]uint64{{1}, nil} {
		sm := &listSM{}
		n, err := StartNode(NodeConfig{ID: 1, Dir: dir, Listen: "127.0.0.1:0", Voters: voters,
			TickInterval: time.Hour, StateMachine: sm})
		if err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 5*time.Second, testutil.Holds("the sole voter to lead", n.IsLeader))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := n.Propose(ctx, []byte(fmt.Sprint("start-", i))); err != nil {
			t.Fatalf("start %d: propose: %v", i, err)
		}
		cancel()
		if got := sm.list(); len(got) != i+1 {
			t.Fatalf("start %d: applied %v, want %d entries", i, got, i+1)
		}
		if err := n.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// confSM is a listSM that also records the committed configuration changes it is handed.
type confSM struct {
	listSM
	confs []string
}

func (sm *confSM) ApplyConfChange(index uint64, cc ConfChange) error {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.confs = append(sm.confs, fmt.Sprintf("%d %s", index, cc))
	return nil
}

func (sm *confSM) confList() []string {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return slices.Clone(sm.confs)
}

// TestNodeContextAddrAndConfChangeApplier founds a node with BootstrapConf, whose membership
// change carries its address in an application's own context form ("at=host:port"), and adds a
// joiner with the same form of context: the leader finds the joiner through
// NodeConfig.ContextAddr alone, the joiner follows the log, and both state machines receive
// every committed change in order.
func TestNodeContextAddrAndConfChangeApplier(t *testing.T) {
	ln := make([]net.Listener, 2)
	for i := range ln {
		var err error
		if ln[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	ctxOf := func(i int) []byte { return []byte("at=" + ln[i].Addr().String()) }
	contextAddr := func(c []byte) string { return strings.TrimPrefix(string(c), "at=") }
	dir0 := t.TempDir()
	storage, _, err := OpenDiskStorage(dir0, DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	boot := BootstrapConf([]ConfChange{{Type: AddVoter, NodeID: 1, Context: ctxOf(0)}})
	if err := storage.Append(&boot.HardState, boot.Entries); err != nil {
		t.Fatal(err)
	}
	if err := storage.Close(); err != nil {
		t.Fatal(err)
	}
	sms := []*confSM{{}, {}}
	nodes := make([]*Node, 2)
	for i, dir := range []string{dir0, t.TempDir()} {
		cfg := fastNodeConfig()
		cfg.ID, cfg.Dir, cfg.Listener, cfg.StateMachine, cfg.ContextAddr = uint64(i+1), dir, ln[i], sms[i], contextAddr
		if i == 1 {
			cfg.Peers = map[uint64]string{1: ln[0].Addr().String()} // to answer before it has the log
		}
		if nodes[i], err = StartNode(cfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nodes[i].Stop() })
	}
	testutil.WaitFor(t, 5*time.Second, testutil.Holds("node 1 to lead", nodes[0].IsLeader))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := nodes[0].ProposeConfChange(ctx, ConfChange{Type: AddLearner, NodeID: 2, Context: ctxOf(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].Propose(ctx, []byte("after")); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("1 AddVoter(1 %q)", ctxOf(0)), fmt.Sprintf("3 AddLearner(2 %q)", ctxOf(1))}
	for i, sm := range sms {
		testutil.WaitFor(t, 5*time.Second, func() error {
			if got := sm.list(); !slices.Equal(got, []string{"after"}) {
				return fmt.Errorf("node %d applied %q; want [after]", i+1, got)
			}
			if got := sm.confList(); !slices.Equal(got, want) {
				return fmt.Errorf("node %d conf changes %q; want %q", i+1, got, want)
			}
			return nil
		})
	}
}
