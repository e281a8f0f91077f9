package meta

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ringbroker/raft"
)

// The controller listener carries two protocols: Raft's transport, and requests that a
// controller forwards to the active one (a commit, or a broker heartbeat). A forwarding
// connection opens with forwardMagic; as a Raft frame length it would exceed raft's frame
// limit, so the two cannot be confused.
const (
	forwardMagic = "RBFW"
	// maxForwardBytes bounds one forwarded request or response.
	maxForwardBytes = 64 << 20
	// classifyTimeout bounds how long a new connection may take to send its first 4 bytes.
	classifyTimeout = 10 * time.Second
	// retryBackoff is the wait before retrying a commit while no leader is known.
	retryBackoff = 50 * time.Millisecond
	// joinTimeout bounds one attempt of a learner to join through one controller.
	joinTimeout = 5 * time.Second
)

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

	closed atomic.Bool
	wg     sync.WaitGroup
}

// Heartbeat is the last heartbeat the active controller received from a broker.
type Heartbeat struct {
	Incarnation UUID
	At          time.Time
}

// raftID maps a Kafka node id to a Raft id.
func raftID(nodeID int32) uint64 { return uint64(nodeID) + 1 }

// OpenRaft starts this controller's Raft node: it recovers the log in cfg.Dir (or founds the
// quorum of cfg.Voters when the directory is empty, upgrading a single node's one-file log
// found there) and listens on cfg.Listen. A quorum of one voter leads when OpenRaft returns.
func OpenRaft(cfg RaftConfig) (*RaftStore, error) {
	if _, ok := cfg.Voters[cfg.NodeID]; ok == cfg.Learner {
		if cfg.Learner {
			return nil, fmt.Errorf("metadata quorum: learner node %d is among the voters %v", cfg.NodeID, cfg.Voters)
		}
		return nil, fmt.Errorf("metadata quorum: node %d is not among the voters %v", cfg.NodeID, cfg.Voters)
	}
	if cfg.Listen == "" && len(cfg.Voters) != 1 {
		return nil, fmt.Errorf("metadata quorum: node %d has no controller listener, so it can only be the sole voter, not one of %v", cfg.NodeID, cfg.Voters)
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
		appliedc: make(chan struct{}), conns: map[net.Conn]struct{}{}, heartbeats: map[int32]Heartbeat{}}
	s.mux = &muxListener{addr: soleVoterAddr{}, conns: make(chan net.Conn), done: make(chan struct{})}
	if cfg.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("controller listener %s: %w", cfg.Listen, err)
		}
		s.ln, s.mux.addr = ln, ln.Addr()
		s.wg.Add(1)
		go s.accept()
	}
	s.image.Store(EmptyImage(cfg.ClusterID))
	var err error
	s.node, err = raft.StartNode(raft.NodeConfig{ID: raftID(cfg.NodeID), Dir: cfg.Dir, Listener: s.mux,
		Peers: peers, Voters: voters, TickInterval: cfg.TickInterval, SnapshotEntries: cfg.SnapshotEntries,
		StateMachine: (*stateMachine)(s), Logger: logger})
	if err != nil {
		s.closeListener()
		return nil, fmt.Errorf("metadata quorum node %d: %w", cfg.NodeID, err)
	}
	if cfg.Learner {
		s.wg.Add(1)
		go s.join()
	}
	if len(cfg.Voters) == 1 && !cfg.Learner {
		if err := s.waitLeader(time.Now().Add(cfg.CommitTimeout)); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// waitLeader waits for the sole voter to win the election it starts at once (raft.Node).
func (s *RaftStore) waitLeader(deadline time.Time) error {
	for !s.node.IsLeader() {
		if time.Now().After(deadline) {
			return fmt.Errorf("metadata quorum: sole voter %d did not lead within %v", s.cfg.NodeID, s.cfg.CommitTimeout)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// join asks the voters in turn, following not-leader hints, to add this node as a learner
// with its listener address, until one leader accepts or the store closes. It runs at every
// start, as the address may have changed; adding a learner again only updates its address.
func (s *RaftStore) join() {
	defer s.wg.Done()
	ids := make([]int32, 0, len(s.cfg.Voters))
	for id := range s.cfg.Voters {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	req := forwardRequest{Kind: "join", NodeID: s.cfg.NodeID, Addr: s.learnerAddr()}
	for attempt := 0; !s.closed.Load(); attempt++ {
		to := ids[attempt%len(ids)]
		if l := s.Leader(); l >= 0 {
			to = l
		}
		_, err := s.forward(to, req, time.Now().Add(joinTimeout))
		var nl *raft.NotLeaderError
		if errors.As(err, &nl) && nl.Leader != raft.None {
			_, err = s.forward(int32(nl.Leader-1), req, time.Now().Add(joinTimeout))
		}
		if err == nil {
			s.logger.Info("joined the metadata quorum as a learner", "node", s.cfg.NodeID, "addr", req.Addr, "via", to)
			return
		}
		s.logger.Debug("join the metadata quorum as a learner", "node", s.cfg.NodeID, "via", to, "err", err)
		time.Sleep(retryBackoff)
	}
}

// addLearner is the leader's side of a join: it adds node id as a learner at addr. A voter
// is never demoted this way.
func (s *RaftStore) addLearner(id int32, addr string) error {
	if _, ok := s.cfg.Voters[id]; ok {
		return fmt.Errorf("node %d is a voter (controller.quorum.voters) and cannot join as a learner", id)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("learner %d address %q: %w", id, addr, err)
	}
	if !s.node.IsLeader() {
		return &raft.NotLeaderError{Leader: s.node.Leader()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommitTimeout)
	defer cancel()
	if _, err := s.node.ProposeConfChange(ctx, raft.ConfChange{Type: raft.AddLearner, NodeID: raftID(id), Context: []byte(addr)}); err != nil {
		return fmt.Errorf("add learner %d at %s: %w", id, addr, err)
	}
	return nil
}

// Addr is the controller listener's bound address.
func (s *RaftStore) Addr() string { return s.mux.addr.String() }

// learnerAddr is the address a learner announces: its bound port on AdvertiseHost.
func (s *RaftStore) learnerAddr() string {
	if s.cfg.AdvertiseHost == "" {
		return s.Addr()
	}
	return net.JoinHostPort(s.cfg.AdvertiseHost, strconv.Itoa(s.ln.Addr().(*net.TCPAddr).Port))
}

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

// Heartbeat tells the active controller that broker nodeID (this process, incarnation inc)
// is alive.
func (s *RaftStore) Heartbeat(nodeID int32, inc UUID) error {
	deadline := time.Now().Add(s.cfg.CommitTimeout)
	_, err := s.toLeader(deadline, func(leader int32) (uint64, error) {
		if leader == s.cfg.NodeID {
			return 0, s.recordHeartbeat(nodeID, inc)
		}
		req := forwardRequest{Kind: "heartbeat", NodeID: nodeID, Incarnation: inc}
		if s.cfg.Learner {
			req.Addr = s.learnerAddr()
		}
		_, err := s.forward(leader, req, deadline)
		return 0, err
	})
	return err
}

// Heartbeats returns the heartbeats received since this controller last became the leader.
func (s *RaftStore) Heartbeats() map[int32]Heartbeat {
	s.hbMu.Lock()
	defer s.hbMu.Unlock()
	out := make(map[int32]Heartbeat, len(s.heartbeats))
	for k, v := range s.heartbeats {
		out[k] = v
	}
	return out
}

// ResetHeartbeats forgets the heartbeats received so far; the controller calls it when it
// becomes the leader, so that a broker silent under an earlier term is not taken for alive.
func (s *RaftStore) ResetHeartbeats() {
	s.hbMu.Lock()
	s.heartbeats = map[int32]Heartbeat{}
	s.hbMu.Unlock()
}

func (s *RaftStore) recordHeartbeat(nodeID int32, inc UUID) error {
	if !s.node.IsLeader() {
		return &raft.NotLeaderError{Leader: s.node.Leader()}
	}
	s.hbMu.Lock()
	s.heartbeats[nodeID] = Heartbeat{Incarnation: inc, At: time.Now()}
	s.hbMu.Unlock()
	return nil
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

// entryData is the data of a metadata entry: the id of the request that proposed it, which
// tells the proposer the outcome of applying it, then the encoded records.
func entryData(id UUID, payload []byte) []byte {
	data := make([]byte, 0, len(id)+len(payload))
	return append(append(data, id[:]...), payload...)
}

// stateMachine is the RaftStore as Raft's StateMachine.
type stateMachine RaftStore

// Apply applies one entry: a request id, then the records. Records that do not apply to the
// image (two controllers raced to create one topic) leave it unchanged on every node alike;
// the proposer learns why.
func (sm *stateMachine) Apply(e raft.Entry) error {
	s := (*RaftStore)(sm)
	var aerr error
	var id UUID
	var w *waiter
	if len(e.Data) < len(id) {
		aerr = fmt.Errorf("metadata entry %d: %d bytes, shorter than its request id", e.Index, len(e.Data))
	} else {
		copy(id[:], e.Data)
		s.mu.Lock()
		w = s.waiters[id]
		s.mu.Unlock()
		aerr = s.applyRecords(e, w)
	}
	if aerr != nil {
		s.logger.Warn("metadata entry not applied", "index", e.Index, "err", aerr)
	}
	if w != nil {
		w.done <- aerr
	}
	s.setApplied(e.Index)
	return nil
}

// applyRecords applies the records of entry e and publishes the image they make. For a local
// proposal w whose image is still current, that image was already made.
func (s *RaftStore) applyRecords(e raft.Entry, w *waiter) error {
	im := s.Image()
	if w != nil && w.base == im {
		w.next.Offset = int64(e.Index)
		s.publish(w.next)
		return nil
	}
	recs, err := DecodeRecords(e.Data[len(UUID{}):])
	if err != nil {
		return err
	}
	next, err := im.Apply(int64(e.Index), recs)
	if err != nil {
		return err
	}
	s.publish(next)
	return nil
}

// imageSnapshot is the serialised form of an image.
type imageSnapshot struct {
	Applied        uint64   `json:"applied"`
	Offset         int64    `json:"offset"`
	ClusterID      string   `json:"cluster_id"`
	Brokers        []Broker `json:"brokers"`
	Topics         []*Topic `json:"topics"`
	NextProducerID int64    `json:"next_producer_id"`
}

// Snapshot serialises the current image.
func (sm *stateMachine) Snapshot() ([]byte, error) {
	s := (*RaftStore)(sm)
	im := s.Image()
	s.mu.Lock()
	snap := imageSnapshot{Applied: s.applied, Offset: im.Offset, ClusterID: im.ClusterID, NextProducerID: im.NextProducerID}
	s.mu.Unlock()
	for _, b := range im.Brokers {
		snap.Brokers = append(snap.Brokers, b)
	}
	sort.Slice(snap.Brokers, func(i, j int) bool { return snap.Brokers[i].NodeID < snap.Brokers[j].NodeID })
	for _, n := range im.SortedTopicNames() {
		snap.Topics = append(snap.Topics, im.Topics[n])
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("encode metadata snapshot at offset %d: %w", im.Offset, err)
	}
	return b, nil
}

// Restore replaces the image by a snapshot.
func (sm *stateMachine) Restore(data []byte) error {
	s := (*RaftStore)(sm)
	var snap imageSnapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("decode metadata snapshot (%d bytes): %w", len(data), err)
	}
	im := EmptyImage(snap.ClusterID)
	im.Offset, im.NextProducerID = snap.Offset, snap.NextProducerID
	for _, b := range snap.Brokers {
		im.Brokers[b.NodeID] = b
	}
	for _, t := range snap.Topics {
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		im.Topics[t.Name] = t
		im.TopicsByID[t.ID] = t
	}
	s.publish(im)
	s.setApplied(snap.Applied)
	s.restores.Add(1)
	s.logger.Info("metadata image restored from a snapshot", "applied", snap.Applied, "topics", len(im.Topics))
	return nil
}

// forwardRequest is what a controller sends the active one.
type forwardRequest struct {
	// Kind is "commit" (Records, encoded), "heartbeat" (NodeID, Incarnation, and Addr from a
	// learner) or "join" (NodeID, Addr: add a learner).
	Kind        string `json:"kind"`
	Records     []byte `json:"records,omitempty"`
	NodeID      int32  `json:"node_id,omitempty"`
	Incarnation UUID   `json:"incarnation,omitempty"`
	// Addr is a learner's listener address, where the leader sends it the log.
	Addr string `json:"addr,omitempty"`
}

// forwardResponse answers a forwardRequest: the entry's index, or why not.
type forwardResponse struct {
	Index     uint64 `json:"index,omitempty"`
	Err       string `json:"err,omitempty"`
	NotLeader bool   `json:"not_leader,omitempty"`
	Leader    uint64 `json:"leader,omitempty"`
}

// unreachableError says a forward did not reach the leader, so nothing was proposed.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// forward sends req to controller leader and returns its answer.
func (s *RaftStore) forward(leader int32, req forwardRequest, deadline time.Time) (forwardResponse, error) {
	var resp forwardResponse
	addr, ok := s.cfg.Voters[leader]
	if !ok {
		return resp, &unreachableError{fmt.Errorf("leader %d is not a known voter", leader)}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return resp, fmt.Errorf("encode forwarded %s: %w", req.Kind, err)
	}
	c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
	if err != nil {
		return resp, &unreachableError{fmt.Errorf("forward %s to controller %d at %s: %w", req.Kind, leader, addr, err)}
	}
	defer c.Close()
	c.SetDeadline(deadline)
	msg := make([]byte, 0, 8+len(body))
	msg = append(msg, forwardMagic...)
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(body)))
	msg = append(msg, body...)
	if _, err := c.Write(msg); err != nil {
		return resp, &unreachableError{fmt.Errorf("forward %s to controller %d at %s: %w", req.Kind, leader, addr, err)}
	}
	out, err := readForwardFrame(bufio.NewReader(c))
	if err != nil {
		return resp, fmt.Errorf("forward %s to controller %d at %s: no answer: %w", req.Kind, leader, addr, err)
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return resp, fmt.Errorf("forward %s to controller %d: bad answer: %w", req.Kind, leader, err)
	}
	switch {
	case resp.NotLeader:
		return resp, &raft.NotLeaderError{Leader: resp.Leader}
	case resp.Err != "":
		return resp, errors.New(resp.Err)
	}
	return resp, nil
}

func readForwardFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxForwardBytes {
		return nil, fmt.Errorf("forwarded frame of %d bytes exceeds %d", n, maxForwardBytes)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// accept classifies each connection to the controller listener by its first four bytes:
// forwarded requests are served here, the rest go to Raft's transport.
func (s *RaftStore) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.lnClosed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.classify(c)
	}
}

func (s *RaftStore) classify(c net.Conn) {
	defer s.wg.Done()
	untrack := func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}
	br := bufio.NewReaderSize(c, 64<<10)
	c.SetReadDeadline(time.Now().Add(classifyTimeout))
	head, err := br.Peek(len(forwardMagic))
	c.SetReadDeadline(time.Time{})
	if err != nil {
		untrack()
		c.Close()
		return
	}
	if string(head) != forwardMagic {
		untrack() // Raft's transport owns and closes it from here on
		if !s.mux.deliver(&peekedConn{Conn: c, r: br}) {
			c.Close()
		}
		return
	}
	defer func() {
		untrack()
		c.Close()
	}()
	br.Discard(len(forwardMagic))
	body, err := readForwardFrame(br)
	if err != nil {
		s.logger.Debug("controller listener: bad forwarded request", "remote", c.RemoteAddr(), "err", err)
		return
	}
	resp := s.serveForward(body)
	out, _ := json.Marshal(resp)
	c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(out))))
	c.Write(out)
}

func (s *RaftStore) serveForward(body []byte) forwardResponse {
	var req forwardRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return forwardResponse{Err: fmt.Sprintf("decode forwarded request (%d bytes): %v", len(body), err)}
	}
	var idx uint64
	var err error
	switch req.Kind {
	case "commit":
		var recs []Record
		if recs, err = DecodeRecords(req.Records); err == nil {
			base := s.Image()
			var next *Image
			if next, err = base.Apply(base.Offset, recs); err == nil {
				idx, err = s.proposeLocal(req.Records, base, next, time.Now().Add(s.cfg.CommitTimeout))
			}
		}
	case "heartbeat":
		if err = s.recordHeartbeat(req.NodeID, req.Incarnation); err == nil && req.Addr != "" {
			// A learner's address is known from its join entry, which a snapshot may have
			// compacted away; its heartbeats keep this leader's address book current.
			if _, voter := s.cfg.Voters[req.NodeID]; !voter {
				s.node.AddPeer(raftID(req.NodeID), req.Addr)
			}
		}
	case "join":
		err = s.addLearner(req.NodeID, req.Addr)
	default:
		err = fmt.Errorf("unknown forwarded request kind %q", req.Kind)
	}
	var nl *raft.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return forwardResponse{NotLeader: true, Leader: nl.Leader}
	case err != nil:
		return forwardResponse{Err: err.Error()}
	}
	return forwardResponse{Index: idx}
}

// muxListener is the net.Listener Raft's transport accepts from: the controller listener's
// connections that are not forwarded requests. A quorum of this node alone has no controller
// listener: its muxListener accepts nothing until closed.
type muxListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// Accept returns the next Raft connection.
func (m *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; the underlying listener is the store's to close.
func (m *muxListener) Close() error {
	m.once.Do(func() { close(m.done) })
	return nil
}

// Addr is the controller listener's address.
func (m *muxListener) Addr() net.Addr { return m.addr }

func (m *muxListener) deliver(c net.Conn) bool {
	select {
	case m.conns <- c:
		return true
	case <-m.done:
		return false
	}
}

// soleVoterAddr is the address of a quorum of this node alone, which has no controller
// listener.
type soleVoterAddr struct{}

// Network names the address kind: no network.
func (soleVoterAddr) Network() string { return "none" }

// String says why there is no address.
func (soleVoterAddr) String() string { return "sole voter, no controller listener" }

// peekedConn is a connection whose first bytes were read into r; reads come from r first.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

// Read reads through the buffer that holds the peeked bytes.
func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// ParseVoters parses controller.quorum.voters: "id@host:port,..." into node id -> address.
func ParseVoters(val string) (map[int32]string, error) {
	out := map[int32]string{}
	for _, part := range strings.Split(val, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("voter %q: want id@host:port", part)
		}
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("voter %q: bad node id %q", part, id)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("voter %q: %w", part, err)
		}
		if _, dup := out[int32(n)]; dup {
			return nil, fmt.Errorf("voter %q: node id %d listed twice", part, n)
		}
		out[int32(n)] = addr
	}
	if len(out) == 0 {
		return nil, errors.New("no voters")
	}
	return out, nil
}
