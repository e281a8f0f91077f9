package coord

import (
	"bytes"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/timingwheel"
)

// groupState is a classic group's state, with Kafka's names and transitions:
//
//	Empty               -> PreparingRebalance, Dead
//	PreparingRebalance  -> CompletingRebalance, Empty, Dead
//	CompletingRebalance -> Stable, PreparingRebalance, Dead
//	Stable              -> PreparingRebalance, Dead
type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (s groupState) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	default:
		return "Dead"
	}
}

// protocolTypeConsumer is the protocol type of Kafka consumers, whose member
// metadata lists subscribed topics.
const protocolTypeConsumer = "consumer"

// joinWaiter is a JoinGroup request parked until the join phase completes.
type joinWaiter struct {
	req     *kmsg.JoinGroupRequest
	respond func(kmsg.Response)
}

// syncWaiter is a SyncGroup request parked until the leader's assignment is
// stored.
type syncWaiter struct {
	req     *kmsg.SyncGroupRequest
	respond func(kmsg.Response)
}

// member is one classic group member.
type member struct {
	id         string
	instanceID *string // group.instance.id of a static member
	clientID   string
	clientHost string
	// rebalanceTimeout and sessionTimeout are in milliseconds, as on the wire.
	rebalanceTimeout, sessionTimeout int32
	protocolType                     string
	// protocols are the member's supported protocols, most preferred first,
	// with their metadata passed through untouched.
	protocols  []kmsg.JoinGroupRequestProtocol
	assignment []byte
	// isNew is true from the member's first join until that join completes;
	// new members expire after the new-member join timeout even while
	// waiting in a rebalance.
	isNew bool
	// join and sync are the parked requests, nil when none waits.
	join *joinWaiter
	sync *syncWaiter
	// hb is the session (heartbeat) expiration timer.
	hb *timingwheel.Timer
}

func (m *member) isStatic() bool { return m.instanceID != nil }

// metadata returns the member's metadata for protocol, nil if unsupported.
func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether protocols are exactly the member's protocols.
func (m *member) matches(protocols []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b kmsg.JoinGroupRequestProtocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

// group is one classic group and its committed offsets. It is owned by one
// shard goroutine.
type group struct {
	id        string
	partition int32
	state     groupState
	prevState groupState
	stateTime int64 // ms of the last state change, -1 if never
	// generation counts completed join phases.
	generation   int32
	protocolType string // "" until the first member joins
	protocol     string // selected protocol, "" when the group is Empty
	leader       string // leader member id, "" when there are no members
	// members in join order; byID indexes them.
	// Invariant: len(members) == len(byID).
	members []*member
	byID    map[string]*member
	// pending are member ids handed out with MEMBER_ID_REQUIRED (KIP-394)
	// that have not joined yet, with their expiration timers.
	pending map[string]*timingwheel.Timer
	// pendingSync are members that got their JoinGroup response but have
	// not sent SyncGroup yet.
	pendingSync map[string]struct{}
	// static maps group.instance.id to the current member id.
	static map[string]string
	// supported counts, per protocol name, the members supporting it.
	supported map[string]int
	// numAwaitingJoin counts members whose join field is set.
	numAwaitingJoin int
	// newMemberAdded extends the initial rebalance delay when set.
	newMemberAdded bool
	// initialJoin is true while joinTimer is the initial-rebalance delay,
	// during which the join phase does not complete early.
	initialJoin bool
	joinTimer   *timingwheel.Timer
	syncTimer   *timingwheel.Timer
	// subscribed is the union of consumer members' subscribed topics, nil
	// when unknown (not a consumer group or undecodable metadata).
	subscribed map[string]struct{}

	// cons is set when the group is a KIP-848 consumer group; the classic
	// membership fields above then stay empty.
	cons *consumerGroup

	offsets map[topicPartition]committedOffset
	// pendingCommits counts in-flight appends per partition, for
	// OffsetFetch's require_stable.
	pendingCommits map[topicPartition]int
	// txnOffsets are transactional offsets written by TxnOffsetCommit whose
	// transaction has not ended, by producer id; the producer's COMMIT marker
	// moves them to offsets, its ABORT marker drops them. Invariant: no map
	// is empty, and every producer id here lists the group in its partition's
	// txnGroups.
	txnOffsets map[int64]map[topicPartition]committedOffset
}

func newGroup(id string, partition int32, now int64) *group {
	return &group{
		id:             id,
		partition:      partition,
		state:          stateEmpty,
		prevState:      stateEmpty,
		stateTime:      now,
		byID:           make(map[string]*member),
		pending:        make(map[string]*timingwheel.Timer),
		pendingSync:    make(map[string]struct{}),
		static:         make(map[string]string),
		supported:      make(map[string]int),
		offsets:        make(map[topicPartition]committedOffset),
		pendingCommits: make(map[topicPartition]int),
		txnOffsets:     make(map[int64]map[topicPartition]committedOffset),
		subscribed:     map[string]struct{}{},
	}
}

func (g *group) transition(to groupState, now int64) {
	g.prevState, g.state = g.state, to
	g.stateTime = now
}

func (g *group) is(s groupState) bool { return g.state == s }

// canRebalance reports whether PreparingRebalance may be entered from the
// current state.
func (g *group) canRebalance() bool {
	return g.state == stateStable || g.state == stateCompletingRebalance || g.state == stateEmpty
}

func (g *group) hasAllMembersJoined() bool {
	return len(g.members) == g.numAwaitingJoin && len(g.pending) == 0
}

// rebalanceTimeout is the largest member rebalance timeout, in ms.
func (g *group) rebalanceTimeout() int32 {
	var t int32
	for _, m := range g.members {
		t = max(t, m.rebalanceTimeout)
	}
	return t
}

// supportsProtocols reports whether a member with these protocols may join,
// as Kafka's ClassicGroup.supportsProtocols.
func (g *group) supportsProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if g.is(stateEmpty) {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supported[p.Name] == len(g.members) {
			return true
		}
	}
	return false
}

func (g *group) isLeader(id string) bool { return g.leader != "" && g.leader == id }

// staticMemberFenced reports whether instanceID belongs to a member other
// than memberID.
func (g *group) staticMemberFenced(instanceID *string, memberID string) bool {
	if instanceID == nil {
		return false
	}
	cur, ok := g.static[*instanceID]
	return ok && cur != memberID
}

// validateMember checks that memberID (and instanceID, if given) name a
// current member: UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID otherwise.
func (g *group) validateMember(memberID string, instanceID *string) *kerr.Error {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID
		}
		if cur != memberID {
			return kerr.FencedInstanceID
		}
	}
	if g.byID[memberID] == nil {
		return kerr.UnknownMemberID
	}
	return nil
}

// add inserts m; join, if not nil, parks its JoinGroup.
func (g *group) add(m *member, join *joinWaiter) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	for _, p := range m.protocols {
		g.supported[p.Name]++
	}
	if g.leader == "" {
		g.leader = m.id
	}
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	g.members = append(g.members, m)
	g.byID[m.id] = m
	if join != nil {
		m.join = join
		g.numAwaitingJoin++
	}
	if t := g.pending[m.id]; t != nil {
		t.Stop()
		delete(g.pending, m.id)
	}
}

// remove deletes member (or pending member) id and stops its timers. Parked
// JoinGroup and SyncGroup requests of the member are answered with
// UNKNOWN_MEMBER_ID, so that a client still alive joins again.
func (g *group) remove(id string) {
	m := g.byID[id]
	if m != nil {
		for _, p := range m.protocols {
			g.supported[p.Name]--
			if g.supported[p.Name] == 0 {
				delete(g.supported, p.Name)
			}
		}
		if m.join != nil {
			respondJoinError(m.join, "", kerr.UnknownMemberID)
			g.numAwaitingJoin--
			m.join = nil
		}
		if m.sync != nil {
			respondSyncError(m.sync, kerr.UnknownMemberID)
			m.sync = nil
		}
		if m.instanceID != nil && g.static[*m.instanceID] == id {
			delete(g.static, *m.instanceID)
		}
		if m.hb != nil {
			m.hb.Stop()
			m.hb = nil
		}
		delete(g.byID, id)
		g.members = slices.DeleteFunc(g.members, func(x *member) bool { return x == m })
	}
	if g.isLeader(id) {
		g.leader = ""
		if len(g.members) > 0 {
			g.leader = g.members[0].id
		}
	}
	if t := g.pending[id]; t != nil {
		t.Stop()
		delete(g.pending, id)
	}
	delete(g.pendingSync, id)
}

// updateMember replaces m's protocols and timeouts and parks (or clears,
// with a nil join) its JoinGroup.
func (g *group) updateMember(m *member, protocols []kmsg.JoinGroupRequestProtocol, rebalanceTimeout, sessionTimeout int32, join *joinWaiter) {
	for _, p := range m.protocols {
		g.supported[p.Name]--
		if g.supported[p.Name] == 0 {
			delete(g.supported, p.Name)
		}
	}
	m.protocols = cloneProtocols(protocols)
	for _, p := range m.protocols {
		g.supported[p.Name]++
	}
	m.rebalanceTimeout, m.sessionTimeout = rebalanceTimeout, sessionTimeout
	switch {
	case join != nil && m.join == nil:
		g.numAwaitingJoin++
	case join == nil && m.join != nil:
		g.numAwaitingJoin--
	case join != nil && m.join != nil:
		// A second JoinGroup while the first is parked: the first will never
		// be answered by the rebalance, so answer it now.
		respondJoinError(m.join, m.id, kerr.RebalanceInProgress)
	}
	m.join = join
}

// completeJoin answers m's parked JoinGroup, if any, with resp.
func (g *group) completeJoin(m *member, resp *kmsg.JoinGroupResponse) {
	if m.join == nil {
		return
	}
	w := m.join
	m.join = nil
	g.numAwaitingJoin--
	resp.Version = w.req.Version
	w.respond(resp)
}

// completeSync answers m's parked SyncGroup, if any. It reports whether one
// was parked.
func (g *group) completeSync(m *member, errCode int16) bool {
	if m.sync == nil {
		return false
	}
	w := m.sync
	m.sync = nil
	resp := w.req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = errCode
	if errCode == 0 {
		resp.ProtocolType = nonEmpty(g.protocolType)
		resp.Protocol = nonEmpty(g.protocol)
		resp.MemberAssignment = m.assignment
	}
	w.respond(resp)
	return true
}

// replaceStaticMember moves instanceID from oldID to a new member newID that
// keeps the old member's settings and assignment, fencing requests the old
// member has parked. It returns the new member.
func (g *group) replaceStaticMember(instanceID, oldID, newID string) *member {
	old := g.byID[oldID]
	if old.join != nil {
		resp := old.join.req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.MemberID = oldID
		resp.ErrorCode = kerr.FencedInstanceID.Code
		g.completeJoin(old, resp)
	}
	if old.sync != nil {
		respondSyncError(old.sync, kerr.FencedInstanceID)
		old.sync = nil
	}
	if old.hb != nil {
		old.hb.Stop()
	}
	nm := &member{
		id: newID, instanceID: old.instanceID, clientID: old.clientID, clientHost: old.clientHost,
		rebalanceTimeout: old.rebalanceTimeout, sessionTimeout: old.sessionTimeout,
		protocolType: old.protocolType, protocols: old.protocols, assignment: old.assignment,
	}
	i := slices.Index(g.members, old)
	g.members[i] = nm
	delete(g.byID, oldID)
	g.byID[newID] = nm
	if g.isLeader(oldID) {
		g.leader = newID
	}
	if _, ok := g.pendingSync[oldID]; ok {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = struct{}{}
	}
	g.static[instanceID] = newID
	return nm
}

// selectProtocol picks the protocol all members support that most members
// prefer; ties go to the protocol named first alphabetically.
func (g *group) selectProtocol() string {
	votes := make(map[string]int)
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.supported[p.Name] == len(g.members) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for name, v := range votes {
		if v > bestVotes || v == bestVotes && name < best {
			best, bestVotes = name, v
		}
	}
	return best
}

// initNextGeneration starts the next generation after a join phase.
func (g *group) initNextGeneration(now int64) {
	g.generation++
	if len(g.members) > 0 {
		g.protocol = g.selectProtocol()
		g.transition(stateCompletingRebalance, now)
	} else {
		g.protocol = ""
		g.transition(stateEmpty, now)
	}
	g.subscribed = g.computeSubscribed()
	clear(g.pendingSync)
}

// computeSubscribed returns the topics consumer members subscribe to, nil if
// unknown, like Kafka's computeSubscribedTopics.
func (g *group) computeSubscribed() map[string]struct{} {
	if g.protocolType != protocolTypeConsumer {
		return nil
	}
	topics := make(map[string]struct{})
	if len(g.members) == 0 || g.protocol == "" {
		return topics
	}
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadata(g.protocol)); err != nil {
			return nil
		}
		for _, t := range md.Topics {
			topics[t] = struct{}{}
		}
	}
	return topics
}

// leaderMembers lists the members with their metadata for the selected
// protocol, for the leader's JoinGroup response.
func (g *group) leaderMembers() []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, 0, len(g.members))
	for _, m := range g.members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID = m.id
		rm.InstanceID = m.instanceID
		rm.ProtocolMetadata = m.metadata(g.protocol)
		out = append(out, rm)
	}
	return out
}

// assignments returns the members' current assignments by member id.
func (g *group) assignments() map[string][]byte {
	a := make(map[string][]byte, len(g.members))
	for _, m := range g.members {
		a[m.id] = m.assignment
	}
	return a
}

// classicEmpty reports whether g is a classic group without members, which
// may become a consumer group (Kafka converts such a group on the first
// ConsumerGroupHeartbeat, keeping its offsets).
func (g *group) classicEmpty() bool {
	return g.cons == nil && g.is(stateEmpty) && len(g.members) == 0 && len(g.pending) == 0
}

// toConsumer turns the empty classic group g into a consumer group.
func (g *group) toConsumer() {
	g.cons = newConsumerGroup()
	g.protocolType = protocolTypeConsumer
	g.protocol, g.leader = "", ""
	g.subscribed = map[string]struct{}{}
}

// toClassic turns the empty consumer group g back into a classic group, for
// a classic member joining it.
func (g *group) toClassic() {
	g.cons = nil
	g.protocolType = ""
	g.subscribed = map[string]struct{}{}
}

// typeName is the group's KIP-848 type: "consumer" or "classic".
func (g *group) typeName() string {
	if g.cons != nil {
		return groupTypeConsumer
	}
	return groupTypeClassic
}

// stateName is the group's state as ListGroups and DescribeGroups name it.
func (g *group) stateName() string {
	if g.cons != nil && !g.is(stateDead) {
		return g.cons.state().String()
	}
	return g.state.String()
}

// stopTimers stops every timer of the group, before it is dropped.
func (g *group) stopTimers() {
	if g.cons != nil {
		for _, m := range g.cons.members {
			stopTimer(&m.hb)
			stopTimer(&m.revokeTimer)
		}
	}
	for _, m := range g.members {
		if m.hb != nil {
			m.hb.Stop()
		}
	}
	for _, t := range g.pending {
		t.Stop()
	}
	if g.joinTimer != nil {
		g.joinTimer.Stop()
	}
	if g.syncTimer != nil {
		g.syncTimer.Stop()
	}
}

// cloneProtocols deep-copies protocols: decoded requests alias the receive
// buffer, and a member keeps its metadata for the life of the group.
func cloneProtocols(ps []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, len(ps))
	for i, p := range ps {
		out[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
	}
	return out
}

// respondJoinError answers a JoinGroup with an error and no group data.
func respondJoinError(w *joinWaiter, memberID string, err *kerr.Error) {
	resp := w.req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.MemberID = memberID
	resp.ErrorCode = err.Code
	w.respond(resp)
}

// respondSyncError answers a SyncGroup with an error and no assignment.
func respondSyncError(w *syncWaiter, err *kerr.Error) {
	resp := w.req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = err.Code
	w.respond(resp)
}
