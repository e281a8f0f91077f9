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
// ConsumerGroup and CurrentAssignmentBuilder do. The server-side assignors
// that compute the target are in assign.go.
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
	// topic, internal ones such as __consumer_offsets included, since Kafka
	// resolves regular expressions against the whole metadata image.
	Names() []string
}

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
