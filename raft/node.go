package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrLeadershipLost is returned to proposers waiting on a leader that stepped down: the
// entry may or may not commit later under the new leader.
var ErrLeadershipLost = errors.New("raft: leadership lost before the proposal committed")

// ErrStopped is returned by a Node that has been stopped (or failed on a storage error).
var ErrStopped = errors.New("raft: node stopped")

// NotLeaderError is returned by Propose on a node that does not lead; Leader is the node
// believed to lead, or None.
type NotLeaderError struct{ Leader uint64 }

// Error names the believed leader so the caller can redirect.
func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("raft: not the leader (leader is %d)", e.Leader)
}

// StateMachine is what the log is for. The Node calls it from one goroutine at a time (its own,
// or a proposer's that drives it; see Node), in log order.
type StateMachine interface {
	// Apply applies one committed normal entry with data (empty no-ops are not passed).
	Apply(e Entry) error
	// Snapshot returns the state as of the last applied entry.
	Snapshot() ([]byte, error)
	// Restore replaces the state by a snapshot (at start, or one received from the leader).
	Restore(data []byte) error
}

// ConfChangeApplier is implemented by a StateMachine that also keeps what membership changes
// carry (their contexts), so that a snapshot of it keeps them after the log is compacted.
type ConfChangeApplier interface {
	// ApplyConfChange applies one committed configuration entry, in log order with Apply.
	ApplyConfChange(index uint64, cc ConfChange) error
}

// NodeConfig configures a Node. Zero fields take the defaults in parentheses.
type NodeConfig struct {
	// ID of this node; never 0.
	ID uint64
	// Dir holds the Raft log and snapshots.
	Dir string
	// Listen is the TCP address of the transport ("127.0.0.1:0" picks a port).
	Listen string
	// Listener, when set, replaces Listen (see TransportConfig.Listener).
	Listener net.Listener
	// Peers is the address book: id -> transport address of every other node. Members
	// added later announce their address in the ConfChange context.
	Peers map[uint64]string
	// Voters and Learners found the cluster when Dir is empty; every founder passes the
	// same lists. Both empty means join: wait to be added by the leader.
	Voters, Learners []uint64
	// TickInterval is one logical tick (100ms); the election timeout is ElectionTick ticks.
	TickInterval time.Duration
	// ElectionTick (10) and HeartbeatTick (1), MaxSizePerMsg, MaxInflightMsgs: see Config.
	ElectionTick, HeartbeatTick int
	MaxSizePerMsg               uint64
	MaxInflightMsgs             int
	// SnapshotEntries: a snapshot is taken once this many entries were applied since the
	// last one (10000).
	SnapshotEntries uint64
	// MaxBatch caps the proposals stepped as one append (256).
	MaxBatch int
	// StateMachine receives committed entries; required. If it is a ConfChangeApplier it
	// receives the committed configuration entries too.
	StateMachine StateMachine
	// ContextAddr returns the transport address a ConfChange context carries ("" for none);
	// nil takes the whole context for the address.
	ContextAddr func(context []byte) string
	// Logger; nil discards.
	Logger *slog.Logger
}

// Node runs a core with its DiskStorage, Transport and ticker. Its methods are safe for
// concurrent use.
//
// One goroutine at a time drives the core, holding mu: the node's own goroutine, for ticks,
// messages and queued proposals, or a proposer that finds the node idle. That proposer steps
// its proposal and handles the Ready itself (persist, send, apply) instead of queueing it,
// which saves the two goroutine handoffs of a round trip through the queue; on a quorum of
// one voter its entry is then committed and applied when Propose returns from the fsync.
type Node struct {
	cfg       NodeConfig
	logger    *slog.Logger
	storage   *DiskStorage
	transport *Transport

	recvc chan Message
	propc chan *proposal
	funcc chan func(*Raft)
	stopc chan struct{}
	done  chan struct{}

	// mu is held by the goroutine that drives the core; it guards the fields up to halted.
	mu sync.Mutex
	r  *Raft
	// pending are the proposals appended and not yet committed, by index.
	pending map[uint64]*proposal
	batch   []*proposal
	// snapIndex is the index of the last snapshot taken or installed.
	snapIndex uint64
	// synced is the hard state last made durable with an fsync.
	synced HardState
	// halted is set when the node stops or fails: nothing drives the core afterwards.
	halted bool
	// err is why the node stopped; set under mu before done closes.
	err error
	// contacts are, while this node leads in contactsTerm, when it last heard from each
	// follower and found it caught up.
	contacts     map[uint64]Contact
	contactsTerm uint64

	lead  atomic.Uint64
	state atomic.Uint32

	// appliedMu guards applied and appliedc: the index of the last entry applied to the state
	// machine (no-ops and configuration entries included), and a channel closed and replaced
	// each time it moves, for WaitApplied.
	appliedMu sync.Mutex
	applied   uint64
	appliedc  chan struct{}

	stopOnce sync.Once
}

type proposal struct {
	ent   Entry
	index uint64
	term  uint64
	done  chan error // buffered, 1
}

// StartNode recovers (or founds) the node's log in cfg.Dir, starts the transport and runs
// the node until Stop.
func StartNode(cfg NodeConfig) (*Node, error) {
	if cfg.StateMachine == nil {
		return nil, errors.New("raft node: StateMachine is required")
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 100 * time.Millisecond
	}
	if cfg.SnapshotEntries == 0 {
		cfg.SnapshotEntries = 10000
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("raft_node", cfg.ID)
	storage, st, err := OpenDiskStorage(cfg.Dir, DiskOptions{Logger: logger})
	if err != nil {
		return nil, err
	}
	fresh := st.HardState.IsEmpty() && st.Snapshot.IsEmpty() && len(st.Entries) == 0
	if fresh && len(cfg.Voters) > 0 {
		st = BootstrapState(cfg.Voters, cfg.Learners)
		if err := storage.Append(&st.HardState, st.Entries); err != nil {
			storage.Close()
			return nil, fmt.Errorf("raft node %d: bootstrap: %w", cfg.ID, err)
		}
	}
	if !st.Snapshot.IsEmpty() {
		if err := cfg.StateMachine.Restore(st.Snapshot.Data); err != nil {
			storage.Close()
			return nil, fmt.Errorf("raft node %d: restore snapshot at %d: %w", cfg.ID, st.Snapshot.Meta.Index, err)
		}
	}
	r, err := NewRaft(Config{ID: cfg.ID, ElectionTick: cfg.ElectionTick, HeartbeatTick: cfg.HeartbeatTick,
		MaxSizePerMsg: cfg.MaxSizePerMsg, MaxInflightMsgs: cfg.MaxInflightMsgs, PreVote: true, CheckQuorum: true,
		Seed: uint64(time.Now().UnixNano())}, st)
	if err != nil {
		storage.Close()
		return nil, fmt.Errorf("raft node %d: %w", cfg.ID, err)
	}
	n := &Node{cfg: cfg, logger: logger, storage: storage,
		recvc: make(chan Message, 4096), propc: make(chan *proposal, 4096), funcc: make(chan func(*Raft)),
		stopc: make(chan struct{}), done: make(chan struct{}),
		r: r, pending: map[uint64]*proposal{}, batch: make([]*proposal, 0, cfg.MaxBatch), synced: st.HardState,
		appliedc: make(chan struct{})}
	if s := r.Snapshot(); s != nil {
		n.snapIndex, n.applied = s.Meta.Index, s.Meta.Index
	}
	n.transport, err = NewTransport(TransportConfig{ID: cfg.ID, Listen: cfg.Listen, Listener: cfg.Listener, Logger: logger, Recv: n.recv})
	if err != nil {
		storage.Close()
		return nil, err
	}
	for id, addr := range cfg.Peers {
		n.transport.AddPeer(id, addr)
	}
	n.learnAddrs(st.Entries)
	go n.run()
	return n, nil
}

// recv takes a message from the transport; when the node is busy it is dropped.
func (n *Node) recv(m Message) {
	switch m.Type {
	case MsgHup, MsgBeat:
		return // local only
	}
	select {
	case n.recvc <- m:
	default:
	}
}

// learnAddrs adds the transport addresses carried by configuration entries.
func (n *Node) learnAddrs(ents []Entry) {
	for _, e := range ents {
		if e.Type != EntryConfChange {
			continue
		}
		if cc, err := DecodeConfChange(e.Data); err == nil && cc.Type != RemoveNode && len(cc.Context) > 0 {
			if addr := n.contextAddr(cc.Context); addr != "" {
				n.transport.AddPeer(cc.NodeID, addr)
			}
		}
	}
}

// contextAddr is the transport address in a ConfChange context (see NodeConfig.ContextAddr).
func (n *Node) contextAddr(context []byte) string {
	if n.cfg.ContextAddr != nil {
		return n.cfg.ContextAddr(context)
	}
	return string(context)
}

// AddPeer sets the transport address of node id (for peers whose address was not known at
// start).
func (n *Node) AddPeer(id uint64, addr string) { n.transport.AddPeer(id, addr) }

// Addr returns the transport's listening address.
func (n *Node) Addr() string { return n.transport.Addr() }

// Leader returns the node believed to lead, or None.
func (n *Node) Leader() uint64 { return n.lead.Load() }

// IsLeader reports whether this node leads.
func (n *Node) IsLeader() bool { return StateType(n.state.Load()) == StateLeader }

// Propose appends data to the log and returns its index once it is committed and applied.
// It fails with *NotLeaderError on a follower, ErrLeadershipLost if leadership is lost
// while waiting (the outcome is then unknown), or the context's error.
func (n *Node) Propose(ctx context.Context, data []byte) (uint64, error) {
	return n.propose(ctx, Entry{Type: EntryNormal, Data: data})
}

// ProposeConfChange changes the membership by one node and returns once the change is
// committed. For an added node, put its transport address in cc.Context.
func (n *Node) ProposeConfChange(ctx context.Context, cc ConfChange) (uint64, error) {
	return n.propose(ctx, Entry{Type: EntryConfChange, Data: cc.Encode()})
}

func (n *Node) propose(ctx context.Context, e Entry) (uint64, error) {
	p := &proposal{ent: e, done: make(chan error, 1)}
	if n.mu.TryLock() {
		// The node is idle: drive it, with whatever else was queued meanwhile.
		if n.halted {
			n.mu.Unlock()
			return 0, ErrStopped
		}
		n.stepProposals(n.drainProposals(p))
		ok := n.persist()
		n.mu.Unlock()
		if !ok {
			n.stopOnce.Do(func() { close(n.stopc) })
		}
	} else {
		select {
		case n.propc <- p:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-n.done:
			return 0, ErrStopped
		}
	}
	select {
	case err := <-p.done:
		return p.index, err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.done:
		return 0, ErrStopped
	}
}

// ReadIndex returns the leader's commit index as of the call (see Raft.ReadIndex): once a node
// has applied it (WaitApplied), its state machine holds every entry committed before the call.
// On a follower it fails with *NotLeaderError; a leader that has not committed an entry of its
// term yet is asked again every tick until it has or ctx ends.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	var t *time.Ticker
	for {
		var idx uint64
		var err error
		if derr := n.do(ctx, func(r *Raft) { idx, err = r.ReadIndex() }); derr != nil {
			return 0, derr
		}
		if !errors.Is(err, ErrReadIndexNotReady) {
			return idx, err
		}
		if t == nil {
			t = time.NewTicker(n.cfg.TickInterval)
			defer t.Stop()
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("raft node %d: read index: %w: %w", n.cfg.ID, err, ctx.Err())
		case <-n.done:
			return 0, ErrStopped
		case <-t.C:
		}
	}
}

// WaitApplied waits until this node has applied the log up to index (an index from the
// leader's ReadIndex, say), so that its state machine holds every entry up to it.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	for {
		n.appliedMu.Lock()
		applied, ch := n.applied, n.appliedc
		n.appliedMu.Unlock()
		if applied >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("raft node %d: wait to apply index %d (applied %d): %w", n.cfg.ID, index, applied, ctx.Err())
		case <-n.done:
			return ErrStopped
		}
	}
}

// noteApplied records that the state machine holds the log up to index and wakes WaitApplied.
func (n *Node) noteApplied(index uint64) {
	n.appliedMu.Lock()
	defer n.appliedMu.Unlock()
	if index > n.applied {
		n.applied = index
		close(n.appliedc)
		n.appliedc = make(chan struct{})
	}
}

// do runs f on the node's goroutine, which holds mu while it does.
func (n *Node) do(ctx context.Context, f func(*Raft)) error {
	ran := make(chan struct{})
	select {
	case n.funcc <- func(r *Raft) { f(r); close(ran) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-n.done:
		return ErrStopped
	}
	select {
	case <-ran:
		return nil
	case <-n.done:
		return ErrStopped
	}
}

// Status returns a copy of the core's state.
func (n *Node) Status(ctx context.Context) (Status, error) {
	var st Status
	err := n.do(ctx, func(r *Raft) { st = r.Status() })
	return st, err
}

// TransferLeadership asks the leader to hand leadership to node to, and waits until it has.
func (n *Node) TransferLeadership(ctx context.Context, to uint64) error {
	if err := n.do(ctx, func(r *Raft) { r.Step(Message{Type: MsgTransferLeader, From: to}) }); err != nil {
		return err
	}
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	for n.Leader() != to {
		select {
		case <-ctx.Done():
			return fmt.Errorf("raft node %d: transfer leadership to %d: %w", n.cfg.ID, to, ctx.Err())
		case <-n.done:
			return ErrStopped
		case <-t.C:
		}
	}
	return nil
}

// Stop stops the node and closes its transport and storage. It returns the error that
// stopped the node early, if any.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() { close(n.stopc) })
	<-n.done
	if errors.Is(n.err, ErrStopped) {
		return nil
	}
	return n.err
}

func (n *Node) run() {
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer func() {
		ticker.Stop()
		n.mu.Lock()
		n.halted = true
		if n.err == nil {
			n.err = ErrStopped
		}
		n.failPending(ErrStopped)
		if err := n.transport.Close(); err != nil && errors.Is(n.err, ErrStopped) {
			n.err = err
		}
		if err := n.storage.Close(); err != nil && errors.Is(n.err, ErrStopped) {
			n.err = err
		}
		n.mu.Unlock()
		close(n.done)
	}()
	r := n.r
	n.mu.Lock()
	// The only voter of its configuration campaigns at once: nobody else can win, and waiting
	// for an election timeout would only delay the first commit.
	if cs := r.conf(); len(cs.Voters) == 1 && cs.Voters[0] == n.cfg.ID {
		r.Step(Message{Type: MsgHup})
	}
	ok := n.persist()
	n.mu.Unlock()
	for ok {
		select {
		case <-n.stopc:
			return
		case <-ticker.C:
			n.mu.Lock()
			r.Tick()
		case m := <-n.recvc:
			n.mu.Lock()
			n.step(m)
		case f := <-n.funcc:
			n.mu.Lock()
			f(r)
		case p := <-n.propc:
			n.mu.Lock()
			n.stepProposals(n.drainProposals(p))
		}
		// Step whatever else already arrived, so that one Ready (and one fsync) covers it.
	more:
		for range 1024 {
			select {
			case m := <-n.recvc:
				n.step(m)
			default:
				break more
			}
		}
		ok = n.persist()
		n.mu.Unlock()
	}
}

// step steps a message from a peer (mu held).
func (n *Node) step(m Message) {
	if err := n.r.Step(m); err != nil && !errors.Is(err, ErrProposalDropped) {
		n.logger.Debug("raft node: message refused", "msg", m.String(), "err", err)
	}
	if m.Type == MsgAppResp || m.Type == MsgHeartbeatResp {
		n.noteContact(m.From, time.Now())
	}
}

// Contact is what a leader knows of when it last heard from a follower: Kafka's
// lastFetchTimestamp and lastCaughtUpTimestamp in DescribeQuorum.
type Contact struct {
	// LastHeard is the follower's last answer to an append or heartbeat.
	LastHeard time.Time
	// LastCaughtUp is the last answer after which the follower held the leader's whole log.
	LastCaughtUp time.Time
}

// noteContact records an answer from follower id at now while this node leads (mu held).
func (n *Node) noteContact(id uint64, now time.Time) {
	r := n.r
	if r.state != StateLeader {
		return
	}
	if n.contacts == nil || n.contactsTerm != r.term {
		n.contacts, n.contactsTerm = map[uint64]Contact{}, r.term
	}
	c := n.contacts[id]
	c.LastHeard = now
	if pr := r.prs[id]; pr != nil && pr.match >= r.log.lastIndex() {
		c.LastCaughtUp = now
	}
	n.contacts[id] = c
}

// Contacts returns, while this node leads, what it knows of when it last heard from each
// follower (those it has not heard from in this term are missing); nil on other nodes.
func (n *Node) Contacts(ctx context.Context) (map[uint64]Contact, error) {
	var out map[uint64]Contact
	err := n.do(ctx, func(r *Raft) {
		if r.state == StateLeader && n.contactsTerm == r.term {
			out = maps.Clone(n.contacts)
		}
	})
	return out, err
}

// drainProposals returns p and the proposals queued behind it, up to MaxBatch (mu held).
func (n *Node) drainProposals(p *proposal) []*proposal {
	batch := append(n.batch[:0], p)
	for len(batch) < n.cfg.MaxBatch {
		select {
		case p := <-n.propc:
			batch = append(batch, p)
		default:
			return batch
		}
	}
	return batch
}

// persist handles every Ready the core has (mu held). It reports false when the node failed
// and must stop; the error is in n.err.
func (n *Node) persist() bool {
	if n.halted {
		return false
	}
	for n.r.HasReady() {
		if err := n.handleReady(n.r.Ready()); err != nil {
			n.logger.Error("raft node: stopping", "err", err)
			n.err, n.halted = err, true
			return false
		}
	}
	return true
}

// failPending answers every pending proposal with err (mu held).
func (n *Node) failPending(err error) {
	for i, p := range n.pending {
		p.done <- err
		delete(n.pending, i)
	}
}

// stepProposals appends a batch of proposals on the leader (mu held).
func (n *Node) stepProposals(batch []*proposal) {
	r := n.r
	if r.state != StateLeader {
		for _, p := range batch {
			p.done <- &NotLeaderError{Leader: r.lead}
		}
		return
	}
	// Conf changes go alone: the core refuses a batch when it refuses its conf change.
	start := 0
	for start < len(batch) {
		end := start + 1
		if batch[start].ent.Type != EntryConfChange {
			for end < len(batch) && batch[end].ent.Type != EntryConfChange {
				end++
			}
		}
		ents := make([]Entry, 0, end-start)
		for _, p := range batch[start:end] {
			ents = append(ents, p.ent)
		}
		if err := r.Step(Message{Type: MsgProp, Entries: ents}); err != nil {
			for _, p := range batch[start:end] {
				p.done <- err
			}
		} else {
			first := r.log.lastIndex() - uint64(len(ents)) + 1
			for i, p := range batch[start:end] {
				p.index, p.term = first+uint64(i), r.term
				n.pending[p.index] = p
			}
		}
		start = end
	}
}

// handleReady follows the order rule: persist, send, apply (mu held).
func (n *Node) handleReady(rd Ready) error {
	if rd.Snapshot != nil {
		if err := n.storage.InstallSnapshot(rd.Snapshot); err != nil {
			return err
		}
	}
	// A Ready that only moves the commit index needs no fsync: a commit index lost in a
	// crash is relearned from the leader, and the entries it covers were synced before.
	commitOnly := rd.Snapshot == nil && len(rd.Entries) == 0 && rd.HardState != nil &&
		rd.HardState.Term == n.synced.Term && rd.HardState.Vote == n.synced.Vote
	if err := n.storage.append(rd.HardState, rd.Entries, !commitOnly); err != nil {
		return err
	}
	if rd.HardState != nil && !commitOnly {
		n.synced = *rd.HardState
	}
	n.learnAddrs(rd.Entries)
	if rd.SoftState != nil {
		n.lead.Store(rd.SoftState.Lead)
		n.state.Store(uint32(rd.SoftState.State))
		if rd.SoftState.State != StateLeader {
			n.failPending(ErrLeadershipLost)
		}
	}
	n.transport.Send(rd.Messages)
	if rd.Snapshot != nil {
		if err := n.cfg.StateMachine.Restore(rd.Snapshot.Data); err != nil {
			return fmt.Errorf("raft node %d: restore snapshot at %d: %w", n.cfg.ID, rd.Snapshot.Meta.Index, err)
		}
		n.snapIndex = rd.Snapshot.Meta.Index
		n.noteApplied(rd.Snapshot.Meta.Index)
	}
	for _, e := range rd.CommittedEntries {
		switch {
		case e.Type == EntryConfChange:
			cc, err := DecodeConfChange(e.Data)
			if err != nil {
				return fmt.Errorf("raft node %d: committed conf entry %d: %w", n.cfg.ID, e.Index, err)
			}
			if cc.Type == RemoveNode && cc.NodeID != n.cfg.ID {
				n.transport.RemovePeer(cc.NodeID)
			}
			if ca, ok := n.cfg.StateMachine.(ConfChangeApplier); ok {
				if err := ca.ApplyConfChange(e.Index, cc); err != nil {
					return fmt.Errorf("raft node %d: apply conf entry %d: %w", n.cfg.ID, e.Index, err)
				}
			}
		case len(e.Data) > 0:
			if err := n.cfg.StateMachine.Apply(e); err != nil {
				return fmt.Errorf("raft node %d: apply entry %d: %w", n.cfg.ID, e.Index, err)
			}
		}
		if p := n.pending[e.Index]; p != nil {
			delete(n.pending, e.Index)
			if p.term == e.Term {
				p.done <- nil
			} else {
				p.done <- ErrProposalDropped
			}
		}
	}
	if k := len(rd.CommittedEntries); k > 0 {
		n.noteApplied(rd.CommittedEntries[k-1].Index)
		if applied := rd.CommittedEntries[k-1].Index; applied-n.snapIndex >= n.cfg.SnapshotEntries {
			data, err := n.cfg.StateMachine.Snapshot()
			if err != nil {
				return fmt.Errorf("raft node %d: snapshot at %d: %w", n.cfg.ID, applied, err)
			}
			snap, err := n.r.Compact(applied, data)
			if err != nil {
				return err
			}
			if err := n.storage.SaveSnapshot(snap); err != nil {
				return err
			}
			n.snapIndex = applied
		}
	}
	return nil
}
