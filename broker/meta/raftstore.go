package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"ringbroker/raft"
)

// retryBackoff is the wait before retrying a commit while no leader is known.
const retryBackoff = 50 * time.Millisecond

// ErrNoLeader is returned by Commit when no controller could take the commit before the
// commit timeout: the quorum is electing or has lost its majority.
var ErrNoLeader = errors.New("metadata quorum has no reachable leader")

// RaftConfig configures a RaftStore.
type RaftConfig struct {
	// NodeID is the Kafka node id; the Raft id is NodeID+1, as Raft reserves 0.
	NodeID int32
	// Dir holds the Raft log and snapshots.
	Dir string
	// ClusterID goes into the image.
	ClusterID string
	// Listen is the controller listener address (host:port; port 0 picks one). A learner
	// listens here for the leader's appends and announces the port when it joins. Empty
	// means no controller listener: the quorum is this node alone, which sends, receives
	// and forwards nothing, so it needs no network (a single node without
	// controller.quorum.voters).
	Listen string
	// ListenControl, if set, is called on the controller listener's socket before it listens
	// (net.ListenConfig's Control): the broker sets socket.send.buffer.bytes and
	// socket.receive.buffer.bytes there, which accepted connections inherit, as Kafka's
	// controller listener takes them.
	ListenControl func(network, address string, c syscall.RawConn) error
	// Voters maps the node id of every controller (this one included unless Learner) to its
	// controller listener address: controller.quorum.voters. Without a Listen address it
	// names only NodeID, and the address is unused.
	Voters map[int32]string
	// Learner makes this node a non-voting follower of the log (process.roles=broker, as a
	// KRaft observer): it is not among Voters, never campaigns, asks the active controller to
	// add it at every start and forwards its commits and heartbeats to it.
	Learner bool
	// AdvertiseHost is the host a learner announces, with its bound port, for the leader to
	// reach it (its advertised listener's host); empty announces the bound address.
	AdvertiseHost string
	// Dynamic makes the quorum a dynamic one (KIP-853, controller.quorum.bootstrap.servers
	// without controller.quorum.voters): Voters is empty, the voter set is only in the log
	// (a bootstrap written by FormatDynamic, then membership changes), a node that is not a
	// voter joins as a learner through BootstrapServers, and AddVoter and RemoveVoter change
	// the voters.
	Dynamic bool
	// BootstrapServers are controller listener addresses (host:port) a node of a dynamic
	// quorum asks to join until it knows the leader.
	BootstrapServers []string
	// DirectoryID is the directory id of this node's metadata log dir (meta.properties), which
	// it joins a dynamic quorum with, and tells the leader when a static quorum is upgraded to
	// kraft.version 1.
	DirectoryID UUID
	// SnapshotEntries: a snapshot of the image is taken every this many entries (10000).
	SnapshotEntries uint64
	// TickInterval is Raft's logical tick (100ms); elections time out after 10 ticks.
	TickInterval time.Duration
	// CommitTimeout bounds a Commit, including waiting for a leader (30s).
	CommitTimeout time.Duration
	// OnChange, if set, is called after every image swap from the apply goroutine with the
	// new image; it must not block.
	OnChange func(*Image)
	// Logger; nil discards.
	Logger *slog.Logger
}

// RaftStore is the metadata log on a Raft quorum, on a single node as in a cluster (a single
// node is a quorum of one voter): each Commit is one Raft entry (a request id, then the
// records as EncodeRecords writes them), applied on every controller to the image, which is
// swapped atomically. Commit on a controller that does not lead is forwarded to the leader
// over the controller listener, and returns once the local image includes it. Snapshots of
// the image bound the log.
type RaftStore struct {
	cfg    RaftConfig
	logger *slog.Logger
	node   *raft.Node
	// ln is the controller listener; nil for a quorum of this node alone (no Listen).
	ln    net.Listener
	mux   *muxListener
	image atomic.Pointer[Image]

	// mu guards waiters, applied, appliedc and conns.
	mu sync.Mutex
	// waiters receive the apply outcome of the local proposals, by request id.
	waiters map[UUID]*waiter
	// applied is the index of the last entry applied (or skipped); appliedc is closed and
	// replaced each time it moves.
	applied  uint64
	appliedc chan struct{}
	conns    map[net.Conn]struct{}
	// lnClosed is set once the controller listener closes; no connection is tracked after.
	lnClosed bool
	// restores counts snapshots installed (at start or from the leader), for tests.
	restores atomic.Int64

	hbMu sync.Mutex
	// heartbeats are the last heartbeats received while leading, by node id (guarded by hbMu).
	heartbeats map[int32]Heartbeat
	// suspects carries reports of brokers found not listening to the active controller.
	suspects chan Suspect
	// apis answer the Kafka APIs served by the active controller alone.
	apis controllerAPIs
	// clients serves the Kafka clients of the controller listener; nil until ServeClients.
	clients atomic.Pointer[ClientConnHandler]

	// changeMu is held by the voter change (AddVoter, RemoveVoter) in progress on this leader:
	// one at a time, as Kafka.
	changeMu sync.Mutex
	// started is set once node is: a snapshot restored before then leaves the peers'
	// addresses to OpenRaft.
	started atomic.Bool

	closed atomic.Bool
	wg     sync.WaitGroup
}

// raftID maps a Kafka node id to a Raft id.
func raftID(nodeID int32) uint64 { return uint64(nodeID) + 1 }

// OpenRaft starts this controller's Raft node: it recovers the log in cfg.Dir (or founds the
// quorum of cfg.Voters when the directory is empty, upgrading a single node's one-file log
// found there) and listens on cfg.Listen. A quorum of one voter leads, with its whole log
// applied to the image, when OpenRaft returns.
func OpenRaft(cfg RaftConfig) (*RaftStore, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 30 * time.Second
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	peers := map[uint64]string{}
	var voters []uint64
	for id, addr := range cfg.Voters {
		voters = append(voters, raftID(id))
		if id != cfg.NodeID {
			peers[raftID(id)] = addr
		}
	}
	sort.Slice(voters, func(i, j int) bool { return voters[i] < voters[j] })
	if cfg.Learner {
		voters = nil // join: the leader adds this node as a learner
	}
	if err := upgradeOneFileLog(cfg.Dir, voters, cfg.ClusterID, logger); err != nil {
		return nil, err
	}
	s := &RaftStore{cfg: cfg, logger: logger, waiters: map[UUID]*waiter{},
		appliedc: make(chan struct{}), conns: map[net.Conn]struct{}{}, heartbeats: map[int32]Heartbeat{},
		suspects: make(chan Suspect, suspectQueue)}
	s.mux = &muxListener{addr: soleVoterAddr{}, conns: make(chan net.Conn), done: make(chan struct{})}
	if cfg.Listen != "" {
		lc := net.ListenConfig{Control: cfg.ListenControl}
		ln, err := lc.Listen(context.Background(), "tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("controller listener %s: %w", cfg.Listen, err)
		}
		s.ln, s.mux.addr = ln, ln.Addr()
	}
	s.image.Store(EmptyImage(cfg.ClusterID))
	var err error
	s.node, err = raft.StartNode(raft.NodeConfig{ID: raftID(cfg.NodeID), Dir: cfg.Dir, Listener: s.mux,
		Peers: peers, Voters: voters, TickInterval: cfg.TickInterval, SnapshotEntries: cfg.SnapshotEntries,
		StateMachine: (*stateMachine)(s), ContextAddr: memberAddr, Logger: logger})
	if err != nil {
		s.closeListener()
		return nil, fmt.Errorf("metadata quorum node %d: %w", cfg.NodeID, err)
	}
	s.started.Store(true)
	s.learnMemberAddrs(s.Image())
	if s.ln != nil {
		// Connections are taken only now: a forwarded request is served with the node, which
		// a peer that still takes this node for the leader (it restarted) may send at once.
		s.wg.Add(1)
		go s.accept()
	}
	if cfg.Learner || cfg.Dynamic {
		s.wg.Add(1)
		go s.join()
	}
	sole, err := s.soleVoter()
	if err != nil {
		s.Close()
		return nil, err
	}
	if sole {
		if err := s.waitLeader(time.Now().Add(cfg.CommitTimeout)); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// check validates the configuration's membership keys.
func (cfg *RaftConfig) check() error {
	if cfg.Dynamic {
		if len(cfg.Voters) > 0 {
			return fmt.Errorf("metadata quorum: node %d: a dynamic quorum has no static voters, got %v", cfg.NodeID, cfg.Voters)
		}
		if cfg.Listen == "" || len(cfg.BootstrapServers) == 0 {
			return fmt.Errorf("metadata quorum: node %d of a dynamic quorum needs a listener and bootstrap servers", cfg.NodeID)
		}
		return nil
	}
	if _, ok := cfg.Voters[cfg.NodeID]; ok == cfg.Learner {
		if cfg.Learner {
			return fmt.Errorf("metadata quorum: learner node %d is among the voters %v", cfg.NodeID, cfg.Voters)
		}
		return fmt.Errorf("metadata quorum: node %d is not among the voters %v", cfg.NodeID, cfg.Voters)
	}
	if cfg.Listen == "" && len(cfg.Voters) != 1 {
		return fmt.Errorf("metadata quorum: node %d has no controller listener, so it can only be the sole voter, not one of %v", cfg.NodeID, cfg.Voters)
	}
	return nil
}

// soleVoter reports whether the membership this node recovered (or founded) has it as the
// only voter, which then leads at once.
func (s *RaftStore) soleVoter() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommitTimeout)
	defer cancel()
	st, err := s.node.Status(ctx)
	if err != nil {
		return false, fmt.Errorf("metadata quorum node %d: %w", s.cfg.NodeID, err)
	}
	return len(st.Conf.Voters) == 1 && st.Conf.Voters[0] == raftID(s.cfg.NodeID), nil
}

// learnMemberAddrs gives the transport the addresses im recorded of the quorum's members,
// which a snapshot keeps after the membership changes that carried them were compacted away.
func (s *RaftStore) learnMemberAddrs(im *Image) {
	if !s.started.Load() {
		return
	}
	for id, m := range im.Quorum {
		if id != s.cfg.NodeID && m.Addr != "" {
			if _, static := s.cfg.Voters[id]; !static {
				s.node.AddPeer(raftID(id), m.Addr)
			}
		}
	}
}

// controllerAddr is where node id's controller listener is: its static voter address, else
// what the log recorded of it; "" when unknown.
func (s *RaftStore) controllerAddr(id int32) string {
	if addr, ok := s.cfg.Voters[id]; ok {
		return addr
	}
	return s.Image().Quorum[id].Addr
}

// Controllers maps the node id of every controller of the quorum to its controller listener
// address: the static voters (controller.quorum.voters), and the members of a dynamic quorum
// that are controllers, voters or observers, as the log recorded them.
func (s *RaftStore) Controllers() map[int32]string {
	out := map[int32]string{}
	for id, addr := range s.cfg.Voters {
		out[id] = addr
	}
	for id, m := range s.Image().Quorum {
		if !m.Broker && m.Addr != "" {
			out[id] = m.Addr
		}
	}
	return out
}

// waitLeader waits for the sole voter to win the election it starts at once (raft.Node) and
// to apply every entry of its log: leading alone is not enough, since the entries a restart
// replays reach the image only as they are applied, and a broker that listened before then
// would serve an image without the topics it had acknowledged.
func (s *RaftStore) waitLeader(deadline time.Time) error {
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		st, err := s.node.Status(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("metadata quorum: sole voter %d: %w", s.cfg.NodeID, err)
		}
		if st.SoftState.State == raft.StateLeader && st.Applied >= st.LastIndex {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("metadata quorum: sole voter %d did not lead and apply its log (applied %d of %d) within %v",
				s.cfg.NodeID, st.Applied, st.LastIndex, s.cfg.CommitTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// Addr is the controller listener's bound address.
func (s *RaftStore) Addr() string { return s.mux.addr.String() }

// ListenAddr is the controller listener's bound address as a net.Addr.
func (s *RaftStore) ListenAddr() net.Addr { return s.mux.addr }

// Image returns the current image. It never returns nil.
func (s *RaftStore) Image() *Image { return s.image.Load() }

// IsLeader reports whether this controller is the active one.
func (s *RaftStore) IsLeader() bool { return s.node.IsLeader() }

// Leader returns the node id of the active controller, or -1 when none is known.
func (s *RaftStore) Leader() int32 {
	l := s.node.Leader()
	if l == raft.None {
		return -1
	}
	return int32(l - 1)
}

// waiter is a local proposal waiting for its entry to be applied.
type waiter struct {
	// done receives the outcome of applying the entry.
	done chan error
	// base is the image the proposer checked the records against and next the image they
	// make of it, not yet published: while base is still the current image when the entry
	// applies, next is the result, and the records need not be decoded and applied again.
	base, next *Image
}

// Commit proposes recs as one Raft entry, on the leader or forwarded to it, and returns the
// local image once it includes the entry. Records that do not apply are refused.
func (s *RaftStore) Commit(recs []Record) (*Image, error) {
	if s.closed.Load() {
		return nil, errors.New("metadata quorum is closed")
	}
	base := s.Image()
	next, err := base.Apply(base.Offset, recs)
	if err != nil {
		return nil, err
	}
	payload, err := EncodeRecords(recs)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(s.cfg.CommitTimeout)
	idx, err := s.toLeader(deadline, func(leader int32) (uint64, error) {
		if leader == s.cfg.NodeID {
			return s.proposeLocal(payload, base, next, deadline)
		}
		resp, err := s.forward(leader, forwardRequest{Kind: "commit", Records: payload}, deadline)
		return resp.Index, err
	})
	if err != nil {
		return nil, err
	}
	if err := s.waitApplied(idx, deadline); err != nil {
		return nil, err
	}
	return s.Image(), nil
}

// CatchUp returns the image once it holds every entry the active controller had committed
// when CatchUp was called: this node's image may lag the controller's by a few entries, and a
// check against it would refuse what a client was already told exists (a topic it just
// created through another broker). Kafka avoids that by forwarding such requests to the
// active controller; here the request waits instead, for one round trip to the controller
// (Raft's read index) and for this node to apply up to there. It fails when no controller
// answers within the commit timeout.
func (s *RaftStore) CatchUp() (*Image, error) {
	if s.closed.Load() {
		return nil, errors.New("metadata quorum is closed")
	}
	deadline := time.Now().Add(s.cfg.CommitTimeout)
	idx, err := s.toLeader(deadline, func(leader int32) (uint64, error) {
		if leader == s.cfg.NodeID {
			return s.readIndex(deadline)
		}
		resp, err := s.forward(leader, forwardRequest{Kind: "read_index"}, deadline)
		return resp.Index, err
	})
	if err != nil {
		return nil, fmt.Errorf("catch up with the active controller: %w", err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := s.node.WaitApplied(ctx, idx); err != nil {
		return nil, fmt.Errorf("catch up with the active controller to metadata entry %d: %w", idx, err)
	}
	return s.Image(), nil
}

// readIndex returns the index up to which the log was committed, as this node leads (a
// raft.NotLeaderError when it does not).
func (s *RaftStore) readIndex(deadline time.Time) (uint64, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	return s.node.ReadIndex(ctx)
}

// toLeader runs try against the current leader until it succeeds, fails for good, or the
// deadline passes. Only errors that say the request was not taken (no leader, not the
// leader, leader unreachable) are retried, so an entry is never proposed twice.
func (s *RaftStore) toLeader(deadline time.Time, try func(leader int32) (uint64, error)) (uint64, error) {
	var last error = ErrNoLeader
	for time.Now().Before(deadline) {
		if s.closed.Load() {
			return 0, errors.New("metadata quorum is closed")
		}
		leader := s.Leader()
		if leader < 0 {
			last = ErrNoLeader
			time.Sleep(retryBackoff)
			continue
		}
		idx, err := try(leader)
		var nl *raft.NotLeaderError
		var unreachable *unreachableError
		switch {
		case err == nil:
			return idx, nil
		case errors.As(err, &nl), errors.As(err, &unreachable):
			last = err
			time.Sleep(retryBackoff)
		default:
			return 0, err
		}
	}
	return 0, fmt.Errorf("metadata commit timed out after %v: %w", s.cfg.CommitTimeout, last)
}

// proposeLocal proposes one entry on this node and returns its index and apply outcome; next
// is what the records make of image base (see waiter).
func (s *RaftStore) proposeLocal(payload []byte, base, next *Image, deadline time.Time) (uint64, error) {
	id := NewUUID()
	data := entryData(id, payload)
	w := &waiter{done: make(chan error, 1), base: base, next: next}
	s.mu.Lock()
	s.waiters[id] = w
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiters, id)
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	idx, err := s.node.Propose(ctx, data)
	if err != nil {
		return 0, fmt.Errorf("propose metadata entry: %w", err)
	}
	select {
	case err := <-w.done:
		if err != nil {
			return 0, err
		}
		return idx, nil
	default:
		return 0, fmt.Errorf("metadata entry %d committed but its outcome was not recorded", idx)
	}
}

// waitApplied waits until the local image has applied index idx.
func (s *RaftStore) waitApplied(idx uint64, deadline time.Time) error {
	var t *time.Timer
	for {
		s.mu.Lock()
		applied, ch := s.applied, s.appliedc
		s.mu.Unlock()
		if applied >= idx {
			return nil
		}
		if t == nil {
			t = time.NewTimer(time.Until(deadline))
			defer t.Stop()
		}
		select {
		case <-ch:
		case <-t.C:
			return fmt.Errorf("metadata entry %d committed but not applied here (applied %d) within %v", idx, applied, s.cfg.CommitTimeout)
		}
	}
}

func (s *RaftStore) setApplied(idx uint64) {
	s.mu.Lock()
	if idx > s.applied {
		s.applied = idx
		close(s.appliedc)
		s.appliedc = make(chan struct{})
	}
	s.mu.Unlock()
}

func (s *RaftStore) publish(im *Image) {
	s.image.Store(im)
	if s.cfg.OnChange != nil {
		s.cfg.OnChange(im)
	}
}

// Close stops the Raft node and the controller listener.
func (s *RaftStore) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := s.node.Stop()
	s.closeListener()
	if err != nil {
		return fmt.Errorf("stop metadata quorum node %d: %w", s.cfg.NodeID, err)
	}
	return nil
}

func (s *RaftStore) closeListener() {
	s.mux.Close()
	if s.ln != nil {
		s.ln.Close()
	}
	s.mu.Lock()
	s.lnClosed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
