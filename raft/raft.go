package raft

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
)

// ErrProposalDropped is returned by Step when a proposal cannot be accepted now: no leader is
// known, a leader transfer is in progress, this node was removed, or a configuration change
// is refused because another one is still uncommitted. The caller may retry.
var ErrProposalDropped = errors.New("raft: proposal dropped")

// ErrReadIndexNotReady is returned by ReadIndex on a leader that has not yet committed an entry
// of its term: until then its commit index may be below entries an earlier leader committed.
// It is a matter of one round of appends; the caller may retry.
var ErrReadIndexNotReady = errors.New("raft: the leader has not committed an entry of its term yet")

// Config tunes a core. Zero fields take the defaults in parentheses.
type Config struct {
	// ID identifies this node; never 0.
	ID uint64
	// ElectionTick is the election timeout in ticks (10). A follower that hears nothing from
	// a leader for a random time in [ElectionTick, 2*ElectionTick) campaigns.
	ElectionTick int
	// HeartbeatTick is the heartbeat interval of a leader in ticks (1); below ElectionTick.
	HeartbeatTick int
	// MaxSizePerMsg caps the entry bytes of one append (1 MiB): the batching knob.
	MaxSizePerMsg uint64
	// MaxInflightMsgs caps appends in flight to one follower (256): the pipelining knob.
	MaxInflightMsgs int
	// MaxCommittedSizePerReady caps the committed entry bytes handed out by one Ready (64 MiB).
	MaxCommittedSizePerReady uint64
	// PreVote makes a node ask whether it could win before it raises its term, so a node
	// that was partitioned away does not disrupt a healthy leader when it comes back.
	PreVote bool
	// CheckQuorum makes a leader step down when a quorum has not been heard from within an
	// election timeout, and makes followers ignore votes while they hear from a leader.
	CheckQuorum bool
	// Applied is the index the state machine has already applied, for state machines that
	// persist themselves; committed entries are handed out from Applied+1.
	Applied uint64
	// Seed seeds the election timeout randomisation, for exact replays.
	Seed uint64
}

func (c *Config) withDefaults() (Config, error) {
	out := *c
	if out.ID == None {
		return out, errors.New("raft: config ID must not be 0")
	}
	if out.ElectionTick == 0 {
		out.ElectionTick = 10
	}
	if out.HeartbeatTick == 0 {
		out.HeartbeatTick = 1
	}
	if out.HeartbeatTick >= out.ElectionTick || out.HeartbeatTick < 0 {
		return out, fmt.Errorf("raft: heartbeat tick %d must be positive and below election tick %d", out.HeartbeatTick, out.ElectionTick)
	}
	if out.MaxSizePerMsg == 0 {
		out.MaxSizePerMsg = 1 << 20
	}
	if out.MaxInflightMsgs == 0 {
		out.MaxInflightMsgs = 256
	}
	if out.MaxInflightMsgs < 0 {
		return out, fmt.Errorf("raft: max inflight msgs %d must be positive", out.MaxInflightMsgs)
	}
	if out.MaxCommittedSizePerReady == 0 {
		out.MaxCommittedSizePerReady = 64 << 20
	}
	return out, nil
}

// State is what storage recovered for a core: the hard state, the latest snapshot and the
// entries after it. The zero State is a node that never ran and joins an existing cluster.
type State struct {
	HardState HardState
	Snapshot  *Snapshot
	Entries   []Entry
}

// BootstrapState is the initial state of every founding member of a new cluster: one
// configuration entry per member at term 1, committed. All founders must use the same lists;
// a node added later starts from the zero State and learns everything from the leader.
func BootstrapState(voters, learners []uint64) State {
	var changes []ConfChange
	for _, id := range voters {
		changes = append(changes, ConfChange{Type: AddVoter, NodeID: id})
	}
	for _, id := range learners {
		changes = append(changes, ConfChange{Type: AddLearner, NodeID: id})
	}
	return BootstrapConf(changes)
}

// BootstrapConf is BootstrapState with each founding member's change given whole, so that
// its Context (a transport address, say) is in the log from the first entry on.
func BootstrapConf(changes []ConfChange) State {
	var st State
	for _, cc := range changes {
		st.Entries = append(st.Entries, Entry{Index: uint64(len(st.Entries) + 1), Term: 1, Type: EntryConfChange,
			Data: cc.Encode()})
	}
	st.HardState = HardState{Term: 1, Commit: uint64(len(st.Entries))}
	return st
}

// Raft is the pure consensus core of one node. It is not safe for concurrent use: one
// goroutine steps it, ticks it and takes its Ready.
type Raft struct {
	id  uint64
	cfg Config

	term  uint64
	vote  uint64 // None, or the node voted for in term
	state StateType
	lead  uint64 // None when unknown; r.id when leader

	log memLog
	// Invariant: snapshot index <= applied <= committed <= lastIndex (the first only once
	// a received snapshot has been handed out).
	committed uint64
	applied   uint64 // last index handed out for applying (or installed by snapshot)
	// unstable is the first index not yet handed out by Ready for persisting;
	// snapIndex < unstable <= lastIndex+1.
	unstable uint64
	// snapshot is the latest snapshot: sent to followers that are too far behind.
	snapshot *Snapshot
	// pendingSnapshot is a snapshot received from the leader, not yet handed out by Ready.
	pendingSnapshot *Snapshot

	// confs are the memberships in force along the log: confs[0] at or before the snapshot,
	// then one point per configuration entry held in the log; the last one is in force.
	confs []confPoint

	prs   map[uint64]*progress // leader only: one per voter and learner (self included when a member)
	votes map[uint64]bool      // candidate and pre-candidate: answers received

	leadTransferee uint64 // leader only: node being handed leadership, or None

	electionElapsed  int // ticks since the last reset (leader: since the last quorum check)
	heartbeatElapsed int // leader only
	// randomizedElectionTimeout is in [ElectionTick, 2*ElectionTick).
	randomizedElectionTimeout int
	rng                       *rand.Rand

	msgs     []Message
	prevSoft SoftState
	prevHard HardState
}

// NewRaft returns a follower core at the state storage recovered.
func NewRaft(c Config, st State) (*Raft, error) {
	cfg, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Raft{id: cfg.ID, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.ID))}
	var base ConfState
	if !st.Snapshot.IsEmpty() {
		m := st.Snapshot.Meta
		r.log.reset(m.Index, m.Term)
		r.snapshot = st.Snapshot
		base = m.Conf
	}
	r.confs = []confPoint{{Index: r.log.snapIndex, Conf: base}}
	ents := st.Entries
	for len(ents) > 0 && ents[0].Index <= r.log.snapIndex {
		ents = ents[1:]
	}
	for i, e := range ents {
		if e.Index != r.log.snapIndex+1+uint64(i) {
			return nil, fmt.Errorf("raft: recovered entry %d at position %d; want index %d after snapshot %d", e.Index, i, r.log.snapIndex+1+uint64(i), r.log.snapIndex)
		}
		if e.Term < r.log.lastTerm() {
			return nil, fmt.Errorf("raft: recovered entry %d has term %d below the previous entry's term %d", e.Index, e.Term, r.log.lastTerm())
		}
		if e.Type == EntryConfChange {
			if _, err := DecodeConfChange(e.Data); err != nil {
				return nil, fmt.Errorf("raft: recovered entry %d: %w", e.Index, err)
			}
		}
		r.log.entries = append(r.log.entries, e)
	}
	for _, e := range r.log.entries {
		if e.Type == EntryConfChange {
			r.applyConfEntry(e)
		}
	}
	hs := st.HardState
	if hs.Commit > r.log.lastIndex() {
		return nil, fmt.Errorf("raft: recovered commit %d beyond last index %d: log truncated or lost", hs.Commit, r.log.lastIndex())
	}
	r.term, r.vote = hs.Term, hs.Vote
	if lt := r.log.lastTerm(); lt > r.term {
		// Entries were made durable but the hard state written after them was torn off by
		// a crash. Nothing of that Ready was sent, so taking the entries' term (with no
		// vote) is what the lost hard state said at most.
		r.term, r.vote = lt, None
	}
	r.committed = max(hs.Commit, r.log.snapIndex)
	r.applied = max(r.log.snapIndex, min(cfg.Applied, r.committed))
	r.unstable = r.log.lastIndex() + 1
	r.prevHard = HardState{Term: r.term, Vote: r.vote, Commit: r.committed}
	r.becomeFollower(r.term, None)
	r.prevSoft = SoftState{Lead: r.lead, State: r.state}
	r.assertInvariants()
	return r, nil
}

// ID returns the node id.
func (r *Raft) ID() uint64 { return r.id }

func (r *Raft) conf() ConfState { return r.confs[len(r.confs)-1].Conf }

// promotable reports whether this node may campaign: only voters do.
func (r *Raft) promotable() bool { return r.conf().isVoter(r.id) }

// assertInvariants panics with what probably happened when the core's state is inconsistent.
func (r *Raft) assertInvariants() {
	switch {
	case r.log.snapIndex > r.applied && r.pendingSnapshot == nil:
		panic(fmt.Sprintf("raft %d: snapshot %d beyond applied %d: compacted entries never handed out", r.id, r.log.snapIndex, r.applied))
	case r.applied > r.committed:
		panic(fmt.Sprintf("raft %d: applied %d beyond committed %d", r.id, r.applied, r.committed))
	case r.committed > r.log.lastIndex():
		panic(fmt.Sprintf("raft %d: committed %d beyond last index %d: log truncated or lost", r.id, r.committed, r.log.lastIndex()))
	case r.unstable <= r.log.snapIndex || r.unstable > r.log.lastIndex()+1:
		panic(fmt.Sprintf("raft %d: unstable %d outside (%d, %d]", r.id, r.unstable, r.log.snapIndex, r.log.lastIndex()+1))
	case r.state == StateLeader && r.lead != r.id:
		panic(fmt.Sprintf("raft %d: leader with lead %d", r.id, r.lead))
	case r.log.lastTerm() > r.term:
		panic(fmt.Sprintf("raft %d: last log term %d beyond current term %d", r.id, r.log.lastTerm(), r.term))
	}
}

// send queues m for the next Ready, stamping the sender and, except for forwarded proposals
// and vote traffic (which carry their own), the current term.
func (r *Raft) send(m Message) {
	m.From = r.id
	switch m.Type {
	case MsgVote, MsgVoteResp, MsgPreVote, MsgPreVoteResp:
		if m.Term == 0 {
			panic(fmt.Sprintf("raft %d: %s to %d without a term", r.id, m.Type, m.To))
		}
	case MsgProp:
	default:
		m.Term = r.term
	}
	r.msgs = append(r.msgs, m)
}

func (r *Raft) reset(term uint64) {
	if r.term != term {
		r.term = term
		r.vote = None
	}
	r.lead = None
	r.electionElapsed, r.heartbeatElapsed = 0, 0
	r.randomizedElectionTimeout = r.cfg.ElectionTick + r.rng.IntN(r.cfg.ElectionTick)
	r.leadTransferee = None
	r.votes = nil
	r.prs = nil
}

func (r *Raft) becomeFollower(term, lead uint64) {
	r.reset(term)
	r.state = StateFollower
	r.lead = lead
}

func (r *Raft) becomePreCandidate() {
	if r.state == StateLeader {
		panic(fmt.Sprintf("raft %d: leader cannot become pre-candidate", r.id))
	}
	// A pre-candidate changes neither term nor vote: a lost pre-election leaves no trace.
	r.votes = map[uint64]bool{}
	r.prs = nil
	r.lead = None
	r.state = StatePreCandidate
}

func (r *Raft) becomeCandidate() {
	if r.state == StateLeader {
		panic(fmt.Sprintf("raft %d: leader cannot become candidate", r.id))
	}
	r.reset(r.term + 1)
	r.vote = r.id
	r.votes = map[uint64]bool{}
	r.state = StateCandidate
}

func (r *Raft) becomeLeader() {
	if r.state == StateFollower {
		panic(fmt.Sprintf("raft %d: follower cannot become leader without an election", r.id))
	}
	r.reset(r.term)
	r.state = StateLeader
	r.lead = r.id
	r.prs = map[uint64]*progress{}
	r.syncProgress()
	if pr := r.prs[r.id]; pr != nil {
		pr.becomeReplicate()
	}
	// The no-op of the new term: committing it commits everything before it (Raft §5.4.2),
	// and configuration changes wait for it.
	r.appendEntries([]Entry{{}})
}

// syncProgress gives every member a progress and drops those of former members.
func (r *Raft) syncProgress() {
	cs := r.conf()
	for _, ids := range [][]uint64{cs.Voters, cs.Learners} {
		for _, id := range ids {
			if r.prs[id] == nil {
				pr := &progress{next: r.log.lastIndex() + 1, recentActive: true, inflights: newInflights(r.cfg.MaxInflightMsgs)}
				if id == r.id {
					pr.match = r.log.lastIndex()
				}
				r.prs[id] = pr
			}
		}
	}
	for id := range r.prs {
		if !cs.isVoter(id) && !cs.isLearner(id) {
			delete(r.prs, id)
		}
	}
	if r.leadTransferee != None && !cs.isVoter(r.leadTransferee) {
		r.leadTransferee = None
	}
}

// applyConfEntry puts a configuration entry in force: membership changes take effect when
// appended.
func (r *Raft) applyConfEntry(e Entry) {
	cc, err := DecodeConfChange(e.Data)
	if err != nil {
		panic(fmt.Sprintf("raft %d: conf entry %d undecodable after validation: %v", r.id, e.Index, err))
	}
	r.confs = append(r.confs, confPoint{Index: e.Index, Conf: r.conf().apply(cc)})
	if r.state == StateLeader {
		r.syncProgress()
	}
}

// pendingConf reports whether a configuration entry is still uncommitted.
func (r *Raft) pendingConf() bool { return r.confs[len(r.confs)-1].Index > r.committed }

// committedInTerm reports whether the leader has committed an entry of its own term, which a
// configuration change must wait for (the single-server change safety fix, Ongaro 2015).
func (r *Raft) committedInTerm() bool {
	t, ok := r.log.term(r.committed)
	return ok && t == r.term
}

// appendEntries appends ents at the leader's tail in the current term.
func (r *Raft) appendEntries(ents []Entry) {
	li := r.log.lastIndex()
	for i := range ents {
		ents[i].Term = r.term
		ents[i].Index = li + 1 + uint64(i)
	}
	r.log.truncateAndAppend(ents)
	for _, e := range ents {
		if e.Type == EntryConfChange {
			r.applyConfEntry(e)
		}
	}
	if pr := r.prs[r.id]; pr != nil {
		pr.maybeUpdate(r.log.lastIndex())
	}
	r.maybeCommit()
}

// maybeCommit advances the commit index to the highest index a quorum of voters holds, if
// that entry is of the current term.
func (r *Raft) maybeCommit() bool {
	cs := r.conf()
	if len(cs.Voters) == 0 {
		return false
	}
	matches := make([]uint64, 0, len(cs.Voters))
	for _, id := range cs.Voters {
		if pr := r.prs[id]; pr != nil {
			matches = append(matches, pr.match)
		} else {
			matches = append(matches, 0)
		}
	}
	slices.Sort(matches)
	mci := matches[len(matches)-cs.quorum()]
	if mci > r.committed && r.log.matchTerm(mci, r.term) {
		r.commitTo(mci)
		return true
	}
	return false
}

func (r *Raft) commitTo(c uint64) {
	if c <= r.committed {
		return
	}
	if c > r.log.lastIndex() {
		panic(fmt.Sprintf("raft %d: commit %d beyond last index %d: was the log truncated or lost?", r.id, c, r.log.lastIndex()))
	}
	r.committed = c
}

// Tick advances the logical clock by one tick.
func (r *Raft) Tick() {
	if r.state == StateLeader {
		r.tickHeartbeat()
	} else {
		r.tickElection()
	}
	r.assertInvariants()
}

func (r *Raft) tickElection() {
	r.electionElapsed++
	if r.promotable() && r.electionElapsed >= r.randomizedElectionTimeout {
		r.electionElapsed = 0
		r.hup(false)
	}
}

func (r *Raft) tickHeartbeat() {
	r.heartbeatElapsed++
	r.electionElapsed++
	if r.electionElapsed >= r.cfg.ElectionTick {
		r.electionElapsed = 0
		if r.cfg.CheckQuorum && !r.quorumActive() {
			r.becomeFollower(r.term, None)
			return
		}
		r.leadTransferee = None
	}
	for _, id := range r.memberIDs() {
		pr := r.prs[id]
		if pr.state != snapshotState {
			continue
		}
		// A snapshot (or its answer) may have been lost: fall back to probing, which sends
		// a fresh snapshot if the follower still needs one.
		if pr.snapshotTicks++; pr.snapshotTicks >= 2*r.cfg.ElectionTick {
			pr.becomeProbe()
			r.sendAppend(id, true)
		}
	}
	if r.heartbeatElapsed >= r.cfg.HeartbeatTick {
		r.heartbeatElapsed = 0
		r.bcastHeartbeat()
	}
}

// quorumActive reports whether a quorum of voters was heard from since the last check, and
// starts a new check period.
func (r *Raft) quorumActive() bool {
	cs := r.conf()
	active := 0
	for _, id := range cs.Voters {
		pr := r.prs[id]
		if id == r.id || pr != nil && pr.recentActive {
			active++
		}
	}
	for id, pr := range r.prs {
		if id != r.id {
			pr.recentActive = false
		}
	}
	return active >= cs.quorum()
}

func (r *Raft) hup(transfer bool) {
	if r.state == StateLeader || !r.promotable() {
		return
	}
	if r.cfg.PreVote && !transfer {
		r.campaign(true, false)
	} else {
		r.campaign(false, transfer)
	}
}

type voteResult uint8

const (
	votePending voteResult = iota
	voteWon
	voteLost
)

func (r *Raft) campaign(pre, transfer bool) {
	var term uint64
	var typ MessageType
	if pre {
		r.becomePreCandidate()
		typ, term = MsgPreVote, r.term+1
	} else {
		r.becomeCandidate()
		typ, term = MsgVote, r.term
	}
	if r.poll(r.id, true) == voteWon {
		r.wonElection(pre)
		return
	}
	for _, id := range r.conf().Voters {
		if id != r.id {
			r.send(Message{Type: typ, To: id, Term: term, Index: r.log.lastIndex(), LogTerm: r.log.lastTerm(), Transfer: transfer})
		}
	}
}

func (r *Raft) wonElection(pre bool) {
	if pre {
		r.campaign(false, false)
		return
	}
	r.becomeLeader()
	r.bcastAppend()
}

// poll records id's answer and counts the voters' answers so far.
func (r *Raft) poll(id uint64, granted bool) voteResult {
	if _, seen := r.votes[id]; !seen {
		r.votes[id] = granted
	}
	cs := r.conf()
	yes, no := 0, 0
	for _, v := range cs.Voters {
		g, ok := r.votes[v]
		switch {
		case !ok:
		case g:
			yes++
		default:
			no++
		}
	}
	switch q := cs.quorum(); {
	case yes >= q:
		return voteWon
	case no >= q || no > len(cs.Voters)-q:
		return voteLost
	}
	return votePending
}

// Step feeds one message to the core. Malformed messages are refused with an error and
// change nothing. A proposal that cannot be accepted returns ErrProposalDropped.
func (r *Raft) Step(m Message) error {
	if err := r.validate(m); err != nil {
		return err
	}
	err := r.step(m)
	r.assertInvariants()
	return err
}

func (r *Raft) step(m Message) error {
	switch {
	case m.Term == 0:
		// Local message (or a forwarded proposal).
	case m.Term > r.term:
		if m.Type == MsgVote || m.Type == MsgPreVote {
			inLease := r.cfg.CheckQuorum && r.lead != None && r.electionElapsed < r.cfg.ElectionTick
			if inLease && !m.Transfer {
				// A leader was heard from within the election timeout: this vote request
				// comes from a node that was cut off. Ignore it without raising the term.
				return nil
			}
		}
		switch {
		case m.Type == MsgPreVote:
			// A pre-vote never changes the voter's term.
		case m.Type == MsgPreVoteResp && !m.Reject:
			// Granted for the term we will campaign in; the term rises when we win.
		case m.Type == MsgApp || m.Type == MsgHeartbeat || m.Type == MsgSnap:
			r.becomeFollower(m.Term, m.From)
		default:
			r.becomeFollower(m.Term, None)
		}
	case m.Term < r.term:
		switch {
		case (r.cfg.CheckQuorum || r.cfg.PreVote) && (m.Type == MsgHeartbeat || m.Type == MsgApp):
			// A stale leader, probably cut off and back. Tell it the term so it steps down;
			// otherwise, with pre-vote, it would never learn it was replaced.
			r.send(Message{Type: MsgAppResp, To: m.From})
		case m.Type == MsgPreVote:
			r.send(Message{Type: MsgPreVoteResp, To: m.From, Term: r.term, Reject: true})
		}
		return nil
	}

	switch m.Type {
	case MsgHup:
		r.hup(false)
		return nil
	case MsgVote, MsgPreVote:
		r.handleVote(m)
		return nil
	}
	switch r.state {
	case StateLeader:
		return r.stepLeader(m)
	case StateCandidate, StatePreCandidate:
		return r.stepCandidate(m)
	default:
		return r.stepFollower(m)
	}
}

func (r *Raft) handleVote(m Message) {
	resp := MsgVoteResp
	if m.Type == MsgPreVote {
		resp = MsgPreVoteResp
	}
	canVote := r.vote == m.From || (r.vote == None && r.lead == None) || (m.Type == MsgPreVote && m.Term > r.term)
	if canVote && r.log.isUpToDate(m.Index, m.LogTerm) {
		// Answer in the candidate's term: a pre-vote grant must not be mistaken for a
		// message of our (lower) term.
		r.send(Message{Type: resp, To: m.From, Term: m.Term})
		if m.Type == MsgVote {
			r.electionElapsed = 0
			r.vote = m.From
		}
		return
	}
	r.send(Message{Type: resp, To: m.From, Term: r.term, Reject: true})
}

func (r *Raft) stepLeader(m Message) error {
	switch m.Type {
	case MsgBeat:
		r.bcastHeartbeat()
		return nil
	case MsgProp:
		return r.propose(m.Entries)
	}
	pr := r.prs[m.From]
	if pr == nil {
		return nil
	}
	switch m.Type {
	case MsgAppResp:
		pr.recentActive = true
		r.handleAppendResp(m, pr)
	case MsgHeartbeatResp:
		pr.recentActive = true
		pr.probeSent = false
		if m.Reject && pr.state == replicateState {
			// The follower lacks appends sent before the heartbeat on the same ordered
			// stream: they were lost (it restarted, or dropped them while busy). Probe from
			// what it holds, or nothing is resent until a new entry is appended.
			pr.becomeProbe()
			r.sendAppend(m.From, true)
			return nil
		}
		if pr.state == replicateState && pr.inflights.full() {
			pr.inflights.freeFirstOne()
		}
		if pr.match < r.log.lastIndex() {
			// A probe goes out even with no entries after next: a follower added at the
			// leader's tail (a new learner) holds nothing, and only a rejected probe tells
			// the leader so while no new entry is appended.
			r.sendAppend(m.From, pr.state == probeState)
		}
	case MsgTransferLeader:
		r.transferLeader(m.From, pr)
	}
	return nil
}

func (r *Raft) propose(ents []Entry) error {
	if len(ents) == 0 {
		return errors.New("raft: empty proposal")
	}
	if r.prs[r.id] == nil || r.leadTransferee != None {
		return ErrProposalDropped
	}
	confs := 0
	next := r.conf()
	for _, e := range ents {
		if e.Type != EntryConfChange {
			continue
		}
		confs++
		cc, _ := DecodeConfChange(e.Data) // validated
		next = next.apply(cc)
		if confs > 1 || r.pendingConf() || !r.committedInTerm() || len(next.Voters) == 0 {
			return ErrProposalDropped
		}
	}
	ents = slices.Clone(ents)
	r.appendEntries(ents)
	r.bcastAppend()
	r.maybeStepDownRemoved()
	return nil
}

func (r *Raft) handleAppendResp(m Message, pr *progress) {
	if m.Reject {
		hint := min(m.RejectHint, m.Index)
		if m.LogTerm > 0 {
			hint, _ = r.log.findConflictByTerm(hint, m.LogTerm)
		}
		if pr.maybeDecrTo(m.Index, hint) {
			if pr.state == replicateState {
				pr.becomeProbe()
			}
			r.sendAppend(m.From, false)
		}
		return
	}
	if m.Index > r.log.lastIndex() {
		return
	}
	wasPaused := pr.isPaused()
	if !pr.maybeUpdate(m.Index) {
		return
	}
	switch {
	case pr.state == probeState:
		pr.becomeReplicate()
	case pr.state == snapshotState && pr.match >= pr.pendingSnapshot:
		pr.becomeProbe()
		pr.becomeReplicate()
	case pr.state == replicateState:
		pr.inflights.freeLE(m.Index)
	}
	if r.maybeCommit() {
		r.bcastAppend()
	} else if wasPaused {
		// The follower may not know the commit index yet: tell it, even with no entries.
		r.sendAppend(m.From, true)
	}
	for r.prs[m.From] != nil && r.sendAppend(m.From, false) {
	}
	if m.From == r.leadTransferee && pr.match == r.log.lastIndex() {
		r.send(Message{Type: MsgTimeoutNow, To: m.From})
	}
	r.maybeStepDownRemoved()
}

// maybeStepDownRemoved makes a leader that removed itself step down once the removal is
// committed; until then it keeps replicating (without counting itself).
func (r *Raft) maybeStepDownRemoved() {
	if r.state == StateLeader && !r.promotable() && !r.pendingConf() {
		r.becomeFollower(r.term, None)
	}
}

func (r *Raft) transferLeader(to uint64, pr *progress) {
	if to == r.id || !r.conf().isVoter(to) || r.leadTransferee == to {
		return
	}
	r.leadTransferee = to
	r.electionElapsed = 0 // the transfer must finish within an election timeout
	if pr.match == r.log.lastIndex() {
		r.send(Message{Type: MsgTimeoutNow, To: to})
	} else {
		r.sendAppend(to, true)
	}
}

// sendAppend sends the next append (or a snapshot) to a follower unless it is paused. It
// reports whether a message went out.
func (r *Raft) sendAppend(to uint64, sendIfEmpty bool) bool {
	pr := r.prs[to]
	if to == r.id || pr == nil || pr.isPaused() {
		return false
	}
	prevIndex := pr.next - 1
	prevTerm, ok := r.log.term(prevIndex)
	if !ok {
		if !pr.recentActive || r.snapshot.IsEmpty() {
			return false
		}
		r.send(Message{Type: MsgSnap, To: to, Snapshot: r.snapshot})
		pr.becomeSnapshot(r.snapshot.Meta.Index)
		return true
	}
	var ents []Entry
	if pr.next <= r.log.lastIndex() {
		ents = r.log.slice(pr.next, r.log.lastIndex()+1, r.cfg.MaxSizePerMsg)
	}
	if len(ents) == 0 && !sendIfEmpty {
		return false
	}
	r.send(Message{Type: MsgApp, To: to, Index: prevIndex, LogTerm: prevTerm, Entries: ents, Commit: r.committed})
	if n := len(ents); n > 0 {
		switch pr.state {
		case replicateState:
			last := ents[n-1].Index
			pr.next = last + 1
			pr.inflights.add(last)
		case probeState:
			pr.probeSent = true
		}
	}
	return true
}

func (r *Raft) bcastAppend() {
	for _, id := range r.memberIDs() {
		r.sendAppend(id, true)
	}
}

func (r *Raft) bcastHeartbeat() {
	for _, id := range r.memberIDs() {
		if id == r.id {
			continue
		}
		pr := r.prs[id]
		// Never tell a follower to commit past what it is known to hold. Index is the last
		// entry sent to it, which it holds once the heartbeat arrives unless an append was lost.
		r.send(Message{Type: MsgHeartbeat, To: id, Commit: min(pr.match, r.committed), Index: pr.next - 1})
	}
}

// memberIDs returns the ids with a progress, sorted so that message order is deterministic.
func (r *Raft) memberIDs() []uint64 {
	ids := make([]uint64, 0, len(r.prs))
	for id := range r.prs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (r *Raft) stepCandidate(m Message) error {
	resp := MsgVoteResp
	if r.state == StatePreCandidate {
		resp = MsgPreVoteResp
	}
	switch m.Type {
	case MsgProp:
		return ErrProposalDropped
	case MsgApp:
		r.becomeFollower(m.Term, m.From)
		r.handleAppend(m)
	case MsgHeartbeat:
		r.becomeFollower(m.Term, m.From)
		r.handleHeartbeat(m)
	case MsgSnap:
		r.becomeFollower(m.Term, m.From)
		r.handleSnapshot(m)
	case resp:
		switch r.poll(m.From, !m.Reject) {
		case voteWon:
			r.wonElection(r.state == StatePreCandidate)
		case voteLost:
			r.becomeFollower(r.term, None)
		}
	}
	return nil
}

func (r *Raft) stepFollower(m Message) error {
	switch m.Type {
	case MsgProp:
		if r.lead == None {
			return ErrProposalDropped
		}
		m.To = r.lead
		r.send(m)
	case MsgApp:
		r.electionElapsed = 0
		r.lead = m.From
		r.handleAppend(m)
	case MsgHeartbeat:
		r.electionElapsed = 0
		r.lead = m.From
		r.handleHeartbeat(m)
	case MsgSnap:
		r.electionElapsed = 0
		r.lead = m.From
		r.handleSnapshot(m)
	case MsgTransferLeader:
		if r.lead == None {
			return nil
		}
		m.To = r.lead
		r.send(m)
	case MsgTimeoutNow:
		r.hup(true)
	}
	return nil
}

func (r *Raft) handleAppend(m Message) {
	if m.Index < r.committed {
		r.send(Message{Type: MsgAppResp, To: m.From, Index: r.committed})
		return
	}
	if !r.log.matchTerm(m.Index, m.LogTerm) {
		hint, hintTerm := r.log.findConflictByTerm(min(m.Index, r.log.lastIndex()), m.LogTerm)
		r.send(Message{Type: MsgAppResp, To: m.From, Index: m.Index, Reject: true, RejectHint: hint, LogTerm: hintTerm})
		return
	}
	lastNew := m.Index + uint64(len(m.Entries))
	for i, e := range m.Entries {
		if r.log.matchTerm(e.Index, e.Term) {
			continue
		}
		if e.Index <= r.committed {
			panic(fmt.Sprintf("raft %d: entry %d (term %d) conflicts with committed entry (committed %d)", r.id, e.Index, e.Term, r.committed))
		}
		r.appendFollower(m.Entries[i:])
		break
	}
	r.commitTo(min(m.Commit, lastNew))
	r.send(Message{Type: MsgAppResp, To: m.From, Index: lastNew})
}

// appendFollower writes ents from the leader, dropping any conflicting suffix first.
func (r *Raft) appendFollower(ents []Entry) {
	first := ents[0].Index
	if first <= r.log.lastIndex() {
		r.unstable = min(r.unstable, first)
		for len(r.confs) > 1 && r.confs[len(r.confs)-1].Index >= first {
			r.confs = r.confs[:len(r.confs)-1]
		}
	}
	r.log.truncateAndAppend(ents)
	for _, e := range ents {
		if e.Type == EntryConfChange {
			r.applyConfEntry(e)
		}
	}
}

func (r *Raft) handleHeartbeat(m Message) {
	r.commitTo(min(m.Commit, r.log.lastIndex()))
	if li := r.log.lastIndex(); m.Index > li {
		r.send(Message{Type: MsgHeartbeatResp, To: m.From, Reject: true, RejectHint: li})
		return
	}
	r.send(Message{Type: MsgHeartbeatResp, To: m.From})
}

func (r *Raft) handleSnapshot(m Message) {
	s := m.Snapshot
	meta := s.Meta
	switch {
	case meta.Index <= r.committed:
		// Already have it; tell the leader where we are.
	case r.log.matchTerm(meta.Index, meta.Term):
		// Our log already contains the snapshot's last entry: it is committed.
		r.commitTo(meta.Index)
	default:
		r.log.reset(meta.Index, meta.Term)
		r.confs = []confPoint{{Index: meta.Index, Conf: meta.Conf}}
		r.committed = meta.Index
		r.unstable = meta.Index + 1
		r.snapshot = s
		r.pendingSnapshot = s
	}
	r.send(Message{Type: MsgAppResp, To: m.From, Index: r.committed})
}

// validate refuses messages no correct peer sends, so that bad input cannot break the core.
func (r *Raft) validate(m Message) error {
	const maxIndex = 1 << 62
	if m.Type >= numMessageTypes {
		return fmt.Errorf("raft: message type %d unknown", m.Type)
	}
	if m.Index > maxIndex || m.Commit > maxIndex || m.Term > maxIndex || m.LogTerm > maxIndex || m.RejectHint > maxIndex {
		return fmt.Errorf("raft: %s from %d: index, term or commit out of range", m.Type, m.From)
	}
	switch m.Type {
	case MsgHup, MsgBeat, MsgProp:
	case MsgTransferLeader:
		if m.From == None {
			return fmt.Errorf("raft: %s without a transferee", m.Type)
		}
	default:
		if m.From == None || m.From == r.id {
			return fmt.Errorf("raft: %s from node %d refused", m.Type, m.From)
		}
		if m.Term == 0 {
			return fmt.Errorf("raft: %s from node %d without a term", m.Type, m.From)
		}
	}
	for i, e := range m.Entries {
		if e.Type > EntryConfChange {
			return fmt.Errorf("raft: %s from %d: entry %d has type %d", m.Type, m.From, i, e.Type)
		}
		if e.Type == EntryConfChange {
			if _, err := DecodeConfChange(e.Data); err != nil {
				return fmt.Errorf("raft: %s from %d: entry %d: %w", m.Type, m.From, i, err)
			}
		}
		if m.Type != MsgApp {
			continue
		}
		prevTerm := m.LogTerm
		if i > 0 {
			prevTerm = m.Entries[i-1].Term
		}
		if e.Index != m.Index+1+uint64(i) || e.Term < prevTerm || e.Term > m.Term {
			return fmt.Errorf("raft: MsgApp from %d after %d/%d: entry %d is %d/%d", m.From, m.LogTerm, m.Index, i, e.Term, e.Index)
		}
	}
	if m.Type == MsgApp && m.LogTerm > m.Term {
		return fmt.Errorf("raft: MsgApp from %d: log term %d beyond term %d", m.From, m.LogTerm, m.Term)
	}
	if m.Type == MsgSnap {
		s := m.Snapshot
		if s == nil || s.Meta.Index == 0 || s.Meta.Term == 0 || s.Meta.Term > m.Term {
			return fmt.Errorf("raft: MsgSnap from %d without a valid snapshot", m.From)
		}
		cs := s.Meta.Conf
		if !slices.IsSorted(cs.Voters) || !slices.IsSorted(cs.Learners) || slices.Contains(cs.Voters, None) || slices.Contains(cs.Learners, None) {
			return fmt.Errorf("raft: MsgSnap from %d: membership %v/%v not sorted or holds node 0", m.From, cs.Voters, cs.Learners)
		}
		for _, id := range cs.Learners {
			if cs.isVoter(id) {
				return fmt.Errorf("raft: MsgSnap from %d: node %d both voter and learner", m.From, id)
			}
		}
	}
	return nil
}

// HasReady reports whether Ready would hand out anything.
func (r *Raft) HasReady() bool {
	return SoftState{Lead: r.lead, State: r.state} != r.prevSoft ||
		(HardState{Term: r.term, Vote: r.vote, Commit: r.committed}) != r.prevHard ||
		r.unstable <= r.log.lastIndex() || r.pendingSnapshot != nil || r.committed > r.applied || len(r.msgs) > 0
}

// Ready hands out, once, what the driver must persist, send and apply; see the package
// comment for the order.
func (r *Raft) Ready() Ready {
	var rd Ready
	if ss := (SoftState{Lead: r.lead, State: r.state}); ss != r.prevSoft {
		rd.SoftState = &ss
		r.prevSoft = ss
	}
	if hs := (HardState{Term: r.term, Vote: r.vote, Commit: r.committed}); hs != r.prevHard {
		rd.HardState = &hs
		r.prevHard = hs
	}
	if r.unstable <= r.log.lastIndex() {
		rd.Entries = r.log.slice(r.unstable, r.log.lastIndex()+1, 1<<63)
		r.unstable = r.log.lastIndex() + 1
	}
	if r.pendingSnapshot != nil {
		rd.Snapshot = r.pendingSnapshot
		r.applied = r.pendingSnapshot.Meta.Index
		r.pendingSnapshot = nil
	}
	if r.committed > r.applied {
		rd.CommittedEntries = r.log.slice(r.applied+1, r.committed+1, r.cfg.MaxCommittedSizePerReady)
		r.applied = rd.CommittedEntries[len(rd.CommittedEntries)-1].Index
	}
	rd.Messages = r.msgs
	r.msgs = nil
	r.assertInvariants()
	return rd
}

// ReadIndex returns, on a leader, its commit index as the index a read must wait for: once a
// node has applied it, the node's state holds every entry committed before the call, by this
// leader or an earlier one (Raft thesis, section 6.4). It trusts the leader's lease instead of
// confirming leadership with a round of heartbeats (etcd's lease-based read): a leader cut off
// from its quorum may answer an older index until check-quorum makes it step down, within an
// election timeout. A follower gets a *NotLeaderError naming the leader it knows; a leader
// that has not committed an entry of its term yet, ErrReadIndexNotReady.
func (r *Raft) ReadIndex() (uint64, error) {
	if r.state != StateLeader {
		return 0, &NotLeaderError{Leader: r.lead}
	}
	if !r.committedInTerm() {
		return 0, ErrReadIndexNotReady
	}
	return r.committed, nil
}

// Compact replaces the log up to index (which must be applied) by a snapshot of the state
// machine at index, data. The snapshot is kept to send to followers too far behind; the
// driver persists it and drops its stored entries up to index.
func (r *Raft) Compact(index uint64, data []byte) (*Snapshot, error) {
	if index <= r.log.snapIndex {
		return nil, fmt.Errorf("raft: compact to %d: already compacted to %d", index, r.log.snapIndex)
	}
	if index > r.applied {
		return nil, fmt.Errorf("raft: compact to %d beyond applied index %d", index, r.applied)
	}
	term, _ := r.log.term(index)
	j := 0
	for k, p := range r.confs {
		if p.Index <= index {
			j = k
		}
	}
	r.confs = r.confs[j:]
	s := &Snapshot{Meta: SnapshotMeta{Index: index, Term: term, Conf: r.confs[0].Conf}, Data: data}
	r.log.compact(index)
	r.snapshot = s
	r.assertInvariants()
	return s, nil
}

// ProgressStatus is the leader's view of one follower.
type ProgressStatus struct {
	Match, Next uint64
	State       string
	Paused      bool
}

// Status is a copy of the core's state for callers and tests.
type Status struct {
	ID        uint64
	HardState HardState
	SoftState SoftState
	Applied   uint64
	FirstIdx  uint64 // first index held in the log (snapshot index + 1)
	LastIndex uint64
	Conf      ConfState
	// Transferee is the node leadership is being handed to (leader only), or None.
	Transferee uint64
	// Progress is the leader's view of every member, nil on other nodes.
	Progress map[uint64]ProgressStatus
}

// Status returns a copy of the core's state.
func (r *Raft) Status() Status {
	s := Status{
		ID:         r.id,
		HardState:  HardState{Term: r.term, Vote: r.vote, Commit: r.committed},
		SoftState:  SoftState{Lead: r.lead, State: r.state},
		Applied:    r.applied,
		FirstIdx:   r.log.firstIndex(),
		LastIndex:  r.log.lastIndex(),
		Conf:       r.conf(),
		Transferee: r.leadTransferee,
	}
	if r.state == StateLeader {
		s.Progress = make(map[uint64]ProgressStatus, len(r.prs))
		for id, pr := range r.prs {
			s.Progress[id] = ProgressStatus{Match: pr.match, Next: pr.next, State: pr.state.String(), Paused: pr.isPaused()}
		}
	}
	return s
}

// Snapshot returns the latest snapshot (taken or installed), or nil.
func (r *Raft) Snapshot() *Snapshot { return r.snapshot }
