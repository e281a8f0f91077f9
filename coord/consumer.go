package coord

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/timingwheel"
)

// This file holds the state of KIP-848 consumer groups (group type
// "consumer"): members with epochs, the group's target assignment, and the
// reconciliation that moves each member from its current assignment to its
// target without two members ever owning one partition, as Kafka 4's
// ConsumerGroup and CurrentAssignmentBuilder do.
//
// A group is either classic or consumer: a consumer group is a *group whose
// cons field is set. The classic fields then stay empty, except the state
// (Empty without members, Stable with them, so that offset expiration and
// the Empty checks of DeleteGroups and OffsetDelete apply unchanged), the
// protocol type "consumer", subscribed and the committed offsets.

// TopicInfo is one topic of the cluster's metadata image.
type TopicInfo struct {
	// Name is the topic name.
	Name string
	// ID is the topic id (KIP-516).
	ID [16]byte
	// Partitions is the topic's partition count.
	Partitions int32
}

// Topics is a consistent, read-only view of the cluster's topics. KIP-848
// groups need it because members subscribe by name or regular expression but
// are assigned by topic id; OffsetCommit and OffsetFetch v10 address topics
// by id.
type Topics interface {
	// Version increases whenever any topic changes; the coordinator
	// re-resolves subscriptions only when it moved.
	Version() int64
	// ByName returns the topic called name.
	ByName(name string) (TopicInfo, bool)
	// ByID returns the topic with id.
	ByID(id [16]byte) (TopicInfo, bool)
	// Names lists the topics a regular expression may subscribe to: every
	// topic but the internal ones.
	Names() []string
}

// Server-side assignor names (group.consumer.assignors).
const (
	assignorUniform = "uniform"
	assignorRange   = "range"
)

// groupTypeConsumer is the KIP-848 group type name of consumer groups.
const groupTypeConsumer = "consumer"

// consumerState is a consumer group's state as Kafka names it.
type consumerState int8

const (
	consumerEmpty consumerState = iota
	consumerAssigning
	consumerReconciling
	consumerStable
)

func (s consumerState) String() string {
	switch s {
	case consumerEmpty:
		return "Empty"
	case consumerAssigning:
		return "Assigning"
	case consumerReconciling:
		return "Reconciling"
	default:
		return "Stable"
	}
}

// memberState is where a member is in its reconciliation.
type memberState int8

const (
	// memberStable: the member owns its whole target at the assignment epoch.
	memberStable memberState = iota
	// memberUnrevoked: the member must give up the partitions in revoking
	// before it may move to the next epoch.
	memberUnrevoked
	// memberUnreleased: the member is at the assignment epoch but part of
	// its target is still owned by others.
	memberUnreleased
)

func (s memberState) String() string {
	switch s {
	case memberStable:
		return "stable"
	case memberUnrevoked:
		return "unrevoked_partitions"
	default:
		return "unreleased_partitions"
	}
}

// Member epochs with a meaning of their own in ConsumerGroupHeartbeat.
const (
	epochJoin        = 0
	epochLeave       = -1
	epochStaticLeave = -2
)

// tpID is a partition addressed by topic id.
type tpID struct {
	topic     [16]byte
	partition int32
}

// partSet is a set of partitions.
type partSet map[tpID]struct{}

func (s partSet) has(tp tpID) bool { _, ok := s[tp]; return ok }

// sorted returns the partitions ordered by topic id, then partition.
func (s partSet) sorted() []tpID {
	return slices.SortedFunc(maps.Keys(s), compareTP)
}

func compareTP(a, b tpID) int {
	return cmp.Or(slices.Compare(a.topic[:], b.topic[:]), cmp.Compare(a.partition, b.partition))
}

// equal reports whether s and o hold the same partitions.
func (s partSet) equal(o partSet) bool {
	if len(s) != len(o) {
		return false
	}
	for tp := range s {
		if !o.has(tp) {
			return false
		}
	}
	return true
}

// consumerMember is one member of a consumer group.
type consumerMember struct {
	id                   string
	instanceID, rackID   *string
	clientID, clientHost string
	// epoch is the member epoch; prevEpoch the one before the last bump,
	// accepted once more from a member that lost a response. An epoch of
	// epochStaticLeave marks a static member that left temporarily.
	epoch, prevEpoch int32
	state            memberState
	rebalanceTimeout int32 // ms
	// topics are the subscribed topic names, sorted; regex, if not empty, the
	// subscribed regular expression, compiled in re.
	topics   []string
	regex    string
	re       *regexp.Regexp
	assignor string // requested server assignor, "" for the group's default
	// assigned are the partitions the member owns; revoking those it must
	// give up before moving on. Both count as owned by the member.
	// Invariant: assigned and revoking are disjoint, and each of their
	// partitions maps to this member in consumerGroup.owners.
	assigned, revoking partSet
	// hb is the session timer; revokeTimer bounds how long the member may
	// take to revoke (its rebalance timeout).
	hb, revokeTimer *timingwheel.Timer
}

// consumerGroup is the KIP-848 part of a consumer group.
type consumerGroup struct {
	// epoch is the group epoch, bumped by every change of membership,
	// subscriptions or subscribed topic metadata; assignmentEpoch is the
	// epoch the target assignment was computed at.
	// Invariant: assignmentEpoch <= epoch.
	epoch, assignmentEpoch int32
	// members in join order; byID indexes them.
	members []*consumerMember
	byID    map[string]*consumerMember
	// static maps group.instance.id to member id.
	static map[string]string
	// target is each member's target assignment at assignmentEpoch.
	target map[string]partSet
	// owners maps every partition some member owns (assigned or revoking)
	// to that member: a partition has at most one owner.
	owners map[tpID]string
	// assignorName is the assignor of the last target assignment.
	assignorName string
	// topicsVersion is the Topics version subscriptions were last resolved
	// at; topicsSig the resolved subscribed topics (names, ids, partition
	// counts), whose change bumps the group epoch.
	topicsVersion int64
	topicsSig     string
	// resolved maps every subscribed topic name to its metadata.
	resolved map[string]TopicInfo
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		byID:          make(map[string]*consumerMember),
		static:        make(map[string]string),
		target:        make(map[string]partSet),
		owners:        make(map[tpID]string),
		resolved:      make(map[string]TopicInfo),
		topicsVersion: -1,
	}
}

// state derives the group state from its epochs and members, as Kafka's
// ConsumerGroup.maybeUpdateGroupState.
func (cg *consumerGroup) state() consumerState {
	switch {
	case len(cg.members) == 0:
		return consumerEmpty
	case cg.assignmentEpoch != cg.epoch:
		return consumerAssigning
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignmentEpoch || m.state != memberStable {
			return consumerReconciling
		}
	}
	return consumerStable
}

// add inserts m.
func (cg *consumerGroup) add(m *consumerMember) {
	cg.members = append(cg.members, m)
	cg.byID[m.id] = m
	if m.instanceID != nil {
		cg.static[*m.instanceID] = m.id
	}
}

// remove deletes m, releasing its partitions, and stops its timers.
func (cg *consumerGroup) remove(m *consumerMember) {
	cg.release(m, m.assigned)
	cg.release(m, m.revoking)
	m.assigned, m.revoking = nil, nil
	stopTimer(&m.hb)
	stopTimer(&m.revokeTimer)
	delete(cg.byID, m.id)
	delete(cg.target, m.id)
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
	cg.members = slices.DeleteFunc(cg.members, func(x *consumerMember) bool { return x == m })
}

// release drops m's ownership of the partitions in s.
func (cg *consumerGroup) release(m *consumerMember, s partSet) {
	for tp := range s {
		if cg.owners[tp] == m.id {
			delete(cg.owners, tp)
		}
	}
}

func stopTimer(t **timingwheel.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// subscribedNames returns the union of the members' subscribed topic names
// (regular expressions resolved against names).
func (cg *consumerGroup) subscribedNames(names []string) map[string]struct{} {
	out := make(map[string]struct{})
	for _, m := range cg.members {
		for _, t := range m.topics {
			out[t] = struct{}{}
		}
		if m.re != nil {
			for _, n := range names {
				if m.re.MatchString(n) {
					out[n] = struct{}{}
				}
			}
		}
	}
	return out
}

// resolve re-resolves the subscribed topics against topics and reports
// whether their metadata differs from what the last target assignment used.
func (cg *consumerGroup) resolve(topics Topics, force bool) bool {
	if topics == nil {
		return false
	}
	if v := topics.Version(); v == cg.topicsVersion && !force {
		return false
	} else {
		cg.topicsVersion = v
	}
	var names []string
	for _, m := range cg.members {
		if m.re != nil {
			names = topics.Names()
			break
		}
	}
	resolved := make(map[string]TopicInfo)
	for name := range cg.subscribedNames(names) {
		if ti, ok := topics.ByName(name); ok {
			resolved[name] = ti
		}
	}
	var sig strings.Builder
	for _, name := range slices.Sorted(maps.Keys(resolved)) {
		ti := resolved[name]
		fmt.Fprintf(&sig, "%s/%x/%d;", name, ti.ID, ti.Partitions)
	}
	cg.resolved = resolved
	changed := sig.String() != cg.topicsSig
	cg.topicsSig = sig.String()
	return changed
}

// memberTopics returns the topics m subscribes to, resolved.
func (cg *consumerGroup) memberTopics(m *consumerMember) []TopicInfo {
	var out []TopicInfo
	for name, ti := range cg.resolved {
		if slices.Contains(m.topics, name) || m.re != nil && m.re.MatchString(name) {
			out = append(out, ti)
		}
	}
	slices.SortFunc(out, func(a, b TopicInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// chooseAssignor returns the assignor the most members ask for, ties to the
// first name, or def when no member asks for one.
func (cg *consumerGroup) chooseAssignor(def string) string {
	votes := make(map[string]int)
	for _, m := range cg.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best, bestVotes := def, 0
	for _, name := range slices.Sorted(maps.Keys(votes)) {
		if votes[name] > bestVotes {
			best, bestVotes = name, votes[name]
		}
	}
	return best
}

// computeTarget computes the target assignment at the group epoch with
// assignor.
func (cg *consumerGroup) computeTarget(assignor string) {
	subs := make([]assignMember, 0, len(cg.members))
	for _, m := range cg.members {
		subs = append(subs, assignMember{id: m.id, topics: cg.memberTopics(m), prev: cg.target[m.id]})
	}
	switch assignor {
	case assignorRange:
		cg.target = assignRange(subs)
	default:
		cg.target = assignUniform(subs)
	}
	cg.assignorName = assignor
	cg.assignmentEpoch = cg.epoch
}

// reconcile moves m towards its target, as Kafka's CurrentAssignmentBuilder:
// partitions leaving m are first revoked (m keeps its epoch until it reports
// it no longer owns them), and only then does m move to the assignment epoch
// and receive the partitions no other member still owns. owned is what m
// reported owning, nil if it did not say. It reports whether m's assignment
// or epoch changed.
func (cg *consumerGroup) reconcile(m *consumerMember, owned partSet) bool {
	changed := false
	if m.state == memberUnrevoked {
		if owned == nil || intersects(owned, m.revoking) {
			return false
		}
		cg.release(m, m.revoking)
		m.revoking = nil
		stopTimer(&m.revokeTimer)
		m.state = memberStable
		changed = true
	}
	target := cg.target[m.id]
	if m.epoch == cg.assignmentEpoch && m.state == memberStable {
		return changed
	}
	if m.epoch != cg.assignmentEpoch {
		var revoke partSet
		for tp := range m.assigned {
			if !target.has(tp) {
				if revoke == nil {
					revoke = make(partSet)
				}
				revoke[tp] = struct{}{}
			}
		}
		if len(revoke) > 0 {
			for tp := range revoke {
				delete(m.assigned, tp)
			}
			m.revoking = revoke
			m.state = memberUnrevoked
			return true
		}
	}
	if m.assigned == nil {
		m.assigned = make(partSet)
	}
	unreleased := false
	for tp := range target {
		if m.assigned.has(tp) {
			continue
		}
		if owner, ok := cg.owners[tp]; ok && owner != m.id {
			unreleased = true
			continue
		}
		m.assigned[tp] = struct{}{}
		cg.owners[tp] = m.id
		changed = true
	}
	if m.epoch != cg.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, cg.assignmentEpoch
		changed = true
	}
	m.state = memberStable
	if unreleased {
		m.state = memberUnreleased
	}
	return changed
}

func intersects(a, b partSet) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	for tp := range a {
		if b.has(tp) {
			return true
		}
	}
	return false
}

// assignMember is one member as an assignor sees it.
type assignMember struct {
	id     string
	topics []TopicInfo // subscribed, sorted by name
	prev   partSet     // previous target, for stickiness
}

// assignUniform spreads the partitions of the subscribed topics evenly over
// the members subscribed to them, keeping previous assignments where the
// balance allows (Kafka's "uniform" assignor): every partition goes to one
// member subscribed to its topic, and no partition can move to a member that
// has at least two fewer partitions and is subscribed to its topic.
func assignUniform(members []assignMember) map[string]partSet {
	out := make(map[string]partSet, len(members))
	// eligible lists, per topic, the members subscribed to it, in order.
	eligible := make(map[[16]byte][]int)
	counts := make(map[[16]byte]int32)
	var parts []tpID
	for i, m := range members {
		out[m.id] = make(partSet)
		for _, t := range m.topics {
			if len(eligible[t.ID]) == 0 {
				counts[t.ID] = t.Partitions
				for p := range t.Partitions {
					parts = append(parts, tpID{t.ID, p})
				}
			}
			eligible[t.ID] = append(eligible[t.ID], i)
		}
	}
	slices.SortFunc(parts, compareTP)
	if homogeneous(members) {
		return assignHomogeneous(members, parts, counts, out)
	}
	owner := make(map[tpID]int, len(parts))
	count := make([]int, len(members))
	// Keep previous assignments while the member stays subscribed.
	for i, m := range members {
		for tp := range m.prev {
			if _, taken := owner[tp]; !taken && tp.partition < counts[tp.topic] && slices.Contains(eligible[tp.topic], i) {
				owner[tp] = i
				count[i]++
			}
		}
	}
	least := func(cands []int) int {
		best := cands[0]
		for _, c := range cands[1:] {
			if count[c] < count[best] {
				best = c
			}
		}
		return best
	}
	for _, tp := range parts {
		if _, ok := owner[tp]; !ok {
			i := least(eligible[tp.topic])
			owner[tp] = i
			count[i]++
		}
	}
	// Move partitions from overfull to underfull members until no move
	// improves the balance. Each move lowers the sum of squared counts, so
	// the loop ends.
	for moved := true; moved; {
		moved = false
		for _, tp := range parts {
			from := owner[tp]
			to := least(eligible[tp.topic])
			if count[to]+1 < count[from] {
				owner[tp] = to
				count[from]--
				count[to]++
				moved = true
			}
		}
	}
	for tp, i := range owner {
		out[members[i].id][tp] = struct{}{}
	}
	return out
}

// homogeneous reports whether every member subscribes to the same topics.
func homogeneous(members []assignMember) bool {
	for _, m := range members[min(1, len(members)):] {
		if !slices.EqualFunc(m.topics, members[0].topics, func(a, b TopicInfo) bool { return a.ID == b.ID }) {
			return false
		}
	}
	return true
}

// assignHomogeneous is assignUniform when all members subscribe to the same
// topics, in O(partitions log partitions): every member gets
// partitions/members partitions and the first partitions%members that can,
// one more; members keep previous partitions up to that quota.
func assignHomogeneous(members []assignMember, parts []tpID, counts map[[16]byte]int32, out map[string]partSet) map[string]partSet {
	if len(members) == 0 {
		return out
	}
	quota, extra := len(parts)/len(members), len(parts)%len(members)
	// prevOwner maps each partition to the member that had it; parts is
	// sorted, so walking it keeps the choice deterministic.
	prevOwner := make(map[tpID]int, len(parts))
	for i, m := range members {
		for tp := range m.prev {
			if tp.partition < counts[tp.topic] {
				prevOwner[tp] = i
			}
		}
	}
	taken := make(map[tpID]bool, len(parts))
	for _, tp := range parts {
		if i, ok := prevOwner[tp]; ok && len(out[members[i].id]) < quota {
			taken[tp] = true
			out[members[i].id][tp] = struct{}{}
		}
	}
	for _, tp := range parts {
		if extra == 0 {
			break
		}
		if i, ok := prevOwner[tp]; ok && !taken[tp] && len(out[members[i].id]) == quota {
			taken[tp] = true
			out[members[i].id][tp] = struct{}{}
			extra--
		}
	}
	// Fill members below their quota, then hand the remaining extras out in
	// member order.
	next := 0
	for _, tp := range parts {
		if taken[tp] {
			continue
		}
		for next < len(members) && len(out[members[next].id]) >= quota {
			next++
		}
		if next < len(members) {
			out[members[next].id][tp] = struct{}{}
			continue
		}
		for i := range members {
			if s := out[members[i].id]; len(s) == quota {
				s[tp] = struct{}{}
				break
			}
		}
	}
	return out
}

// assignRange gives each member, per subscribed topic, a contiguous range of
// its partitions: the members subscribed to a topic, sorted by member id,
// get partitions/members each and the first partitions%members one more, as
// Kafka's server-side "range" assignor without co-partitioning rack logic.
func assignRange(members []assignMember) map[string]partSet {
	out := make(map[string]partSet, len(members))
	byTopic := make(map[[16]byte][]string)
	topics := make(map[[16]byte]TopicInfo)
	for _, m := range members {
		out[m.id] = make(partSet)
		for _, t := range m.topics {
			byTopic[t.ID] = append(byTopic[t.ID], m.id)
			topics[t.ID] = t
		}
	}
	for id, ids := range byTopic {
		slices.Sort(ids)
		n := topics[id].Partitions
		per, extra := n/int32(len(ids)), n%int32(len(ids))
		next := int32(0)
		for i, mid := range ids {
			k := per
			if int32(i) < extra {
				k++
			}
			for p := next; p < next+k; p++ {
				out[mid][tpID{id, p}] = struct{}{}
			}
			next += k
		}
	}
	return out
}

// wireAssignment is s in ConsumerGroupHeartbeat form, topics and partitions
// sorted.
func wireAssignment(s partSet) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, tp := range s.sorted() {
		if n := len(a.Topics); n == 0 || a.Topics[n-1].TopicID != tp.topic {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID = tp.topic
			t.Partitions = []int32{}
			a.Topics = append(a.Topics, t)
		}
		last := &a.Topics[len(a.Topics)-1]
		last.Partitions = append(last.Partitions, tp.partition)
	}
	return &a
}

// describeAssignment is s in ConsumerGroupDescribe form, with topic names
// from resolved (and from topics for topics no longer subscribed).
func describeAssignment(s partSet, names map[[16]byte]string) kmsg.Assignment {
	var a kmsg.Assignment
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, tp := range s.sorted() {
		if n := len(a.TopicPartitions); n == 0 || a.TopicPartitions[n-1].TopicID != tp.topic {
			a.TopicPartitions = append(a.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: tp.topic, Topic: names[tp.topic], Partitions: []int32{}})
		}
		last := &a.TopicPartitions[len(a.TopicPartitions)-1]
		last.Partitions = append(last.Partitions, tp.partition)
	}
	return a
}

// ownedFromRequest converts a heartbeat's owned partitions, nil when the
// request did not carry them.
func ownedFromRequest(topics []kmsg.ConsumerGroupHeartbeatRequestTopic) partSet {
	if topics == nil {
		return nil
	}
	s := make(partSet)
	for _, t := range topics {
		for _, p := range t.Partitions {
			s[tpID{t.TopicID, p}] = struct{}{}
		}
	}
	return s
}
