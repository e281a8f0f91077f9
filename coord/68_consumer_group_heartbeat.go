package coord

// ConsumerGroupHeartbeat (key 68), versions 0-1 (KIP-848).
//
// Behavior: one request both joins (member epoch 0), heartbeats (the current
// member epoch) and leaves (-1; -2 for a static member that will come back).
// The coordinator owns the assignment: a change of membership, subscription
// or subscribed topic metadata bumps the group epoch, the next heartbeat
// computes a new target assignment with the server-side assignor (uniform
// or range), and each member is reconciled towards its target: it first
// revokes what it must give up, keeping its epoch, and only after reporting
// that it no longer owns those partitions does it move to the new epoch and
// get partitions that no other member still owns. A member that does not
// revoke within its rebalance timeout, or misses its session timeout, is
// removed.
//
// Version notes: v1 adds the subscribed topic regex (RE2 syntax, matched
// against whole topic names) and requires a client-generated member id
// (KIP-1082); on v0 the coordinator generates it.

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var consumerGroupHeartbeatAPI = API{Key: kmsg.ConsumerGroupHeartbeat, MinVersion: 0, MaxVersion: 1, handle: handleConsumerGroupHeartbeat}

func handleConsumerGroupHeartbeat(g *GroupCoordinator, info RequestInfo, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.ConsumerGroupHeartbeatRequest)
	g.toGroup(req.Group, func(s *shard, p int32) { s.consumerGroupHeartbeat(p, info, req, respond) })
}

func (s *shard) consumerGroupHeartbeat(p int32, info RequestInfo, req *kmsg.ConsumerGroupHeartbeatRequest, respond func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	var recs []Record
	fail := func(e *kerr.Error, msg string) {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		respond(resp)
	}
	re, errc, msg := s.validateConsumerHeartbeat(req)
	if errc != nil {
		fail(errc, msg)
		return
	}
	part, errc := s.owned(p)
	if errc != nil {
		fail(errc, "")
		return
	}
	g := part.groups[req.Group]
	if g != nil && g.cons == nil && !g.classicEmpty() {
		fail(kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a consumer group.", req.Group))
		return
	}
	if g == nil || g.cons == nil {
		if req.MemberEpoch != epochJoin {
			fail(kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, req.Group))
			return
		}
		if g == nil {
			g = newGroup(req.Group, p, s.nowMs())
			part.groups[req.Group] = g
		}
		if g.generation > 0 {
			// The classic group's metadata record is superseded.
			recs = append(recs, Record{Key: groupMetadataKey(g.id)})
		}
		g.toConsumer()
	}
	cg := g.cons
	owned := ownedFromRequest(req.Topics)
	// finish writes what changed and answers once it is durable. A failed
	// write is reported to the member, whose next heartbeat finds the state
	// as it was changed in memory (Kafka reverts it instead).
	finish := func() {
		if len(recs) == 0 {
			respond(resp)
			return
		}
		s.appendRecords(g.partition, recs, func(err error) {
			if err != nil {
				errc := appendGroupError(err)
				s.c.log.Warn("failed to store consumer group records", "group", g.id, "error", err)
				resp = req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
				resp.ErrorCode = errc.Code
			}
			respond(resp)
		})
	}

	if req.MemberEpoch == epochLeave || req.MemberEpoch == epochStaticLeave {
		m, errc := cg.lookupMember(req.MemberID, req.InstanceID)
		if errc != nil {
			fail(errc, "")
			return
		}
		resp.MemberID = &m.id
		resp.MemberEpoch = req.MemberEpoch
		if req.MemberEpoch == epochStaticLeave && m.instanceID != nil {
			// The static member keeps its assignment for its session
			// timeout, for the same instance to rejoin.
			if m.epoch != epochStaticLeave {
				m.prevEpoch, m.epoch = m.epoch, epochStaticLeave
			}
			s.c.log.Info("static consumer group member left temporarily", "group", g.id, "member", m.id)
		} else {
			recs = append(recs, s.removeConsumerMember(g, m, "member left the group")...)
		}
		finish()
		return
	}

	var m *consumerMember
	added := false
	if req.MemberEpoch == epochJoin {
		var replaced string
		m, added, replaced, errc, msg = s.joinConsumerMember(g, info, req)
		if errc != nil {
			fail(errc, msg)
			return
		}
		if replaced != "" {
			recs = append(recs, memberTombstones(g.id, replaced)...)
			recs = append(recs, targetMemberRecord(g.id, m.id, cg.target[m.id]))
		}
	} else {
		var errc *kerr.Error
		if m, errc = cg.lookupMember(req.MemberID, req.InstanceID); errc != nil {
			fail(errc, "")
			return
		}
		if req.MemberEpoch != m.epoch && !(req.MemberEpoch == m.prevEpoch && (owned == nil || subset(owned, m.assigned))) {
			fail(kerr.FencedMemberEpoch, fmt.Sprintf("The consumer group member has a smaller or larger member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch))
			return
		}
	}
	m.clientID, m.clientHost = info.ClientID, info.ClientHost
	changed := m.updateSubscription(req, re) || added
	if changed || req.MemberEpoch == epochJoin {
		recs = append(recs, memberMetadataRecord(g.id, m))
	}
	if cg.resolve(s.topics(), changed) || changed {
		cg.epoch++
		recs = append(recs, groupEpochRecord(g.id, cg.epoch))
		s.c.log.Info("consumer group epoch bumped", "group", g.id, "epoch", cg.epoch, "member", m.id)
	}
	if cg.epoch > cg.assignmentEpoch {
		cg.computeTarget(cg.chooseAssignor(s.c.cfg.ConsumerAssignors[0]))
		for _, om := range cg.members {
			recs = append(recs, targetMemberRecord(g.id, om.id, cg.target[om.id]))
		}
		recs = append(recs, targetMetadataRecord(g.id, cg.assignmentEpoch))
		s.c.log.Info("computed consumer group target assignment", "group", g.id, "epoch", cg.assignmentEpoch, "assignor", cg.assignorName, "members", len(cg.members))
	}
	reconciled := cg.reconcile(m, owned)
	if reconciled || req.MemberEpoch == epochJoin {
		recs = append(recs, currentAssignmentRecord(g.id, m))
	}
	if m.state == memberUnrevoked && m.revokeTimer == nil {
		s.scheduleRevocation(g, m)
	}
	s.rescheduleConsumerSession(g, m)
	s.syncConsumerState(g)

	resp.MemberID = &m.id
	resp.MemberEpoch = m.epoch
	heartbeat, _ := s.c.consumerTimeouts(g.id)
	resp.HeartbeatIntervalMillis = int32(heartbeat.Milliseconds())
	if req.MemberEpoch == epochJoin || reconciled || owned != nil && !owned.equal(m.assigned) {
		resp.Assignment = wireAssignment(m.assigned)
	}
	finish()
}

// validateConsumerHeartbeat checks the request as Kafka's
// throwIfConsumerGroupHeartbeatRequestIsInvalid, and compiles its regex.
func (s *shard) validateConsumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (*regexp.Regexp, *kerr.Error, string) {
	invalid := func(msg string) (*regexp.Regexp, *kerr.Error, string) { return nil, kerr.InvalidRequest, msg }
	switch {
	case req.Group == "":
		return invalid("GroupId can't be empty.")
	case req.MemberID == "" && (req.Version >= 1 || req.MemberEpoch != epochJoin):
		return invalid("MemberId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return invalid("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return invalid("RackId can't be empty.")
	case req.MemberEpoch < epochStaticLeave:
		return invalid(fmt.Sprintf("MemberEpoch %d is invalid.", req.MemberEpoch))
	case req.MemberEpoch == epochStaticLeave && req.InstanceID == nil:
		return invalid("InstanceId can't be null.")
	}
	if req.MemberEpoch == epochJoin {
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		case len(req.Topics) != 0:
			return invalid("TopicPartitions must be empty when (re-)joining.")
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
		}
	}
	if a := req.ServerAssignor; a != nil && !slices.Contains(s.c.cfg.ConsumerAssignors, *a) {
		return nil, kerr.UnsupportedAssignor, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %s.", *a, strings.Join(s.c.cfg.ConsumerAssignors, ", "))
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		re, err := regexp.Compile("^(?:" + *req.SubscribedTopicRegex + ")$")
		if err != nil {
			return nil, kerr.InvalidRegularExpression, fmt.Sprintf("SubscribedTopicRegex %q is not a valid regular expression: %v", *req.SubscribedTopicRegex, err)
		}
		return re, nil, ""
	}
	return nil, nil, ""
}

// joinConsumerMember handles member epoch 0: a new member, a member
// rejoining after being fenced (it starts over with nothing owned), or a
// static member taking over its instance id's assignment. It reports whether
// the member is new to the group, and the id of a static member it replaced.
func (s *shard) joinConsumerMember(g *group, info RequestInfo, req *kmsg.ConsumerGroupHeartbeatRequest) (*consumerMember, bool, string, *kerr.Error, string) {
	cg := g.cons
	id := req.MemberID
	if id == "" {
		id = s.c.newID()
	}
	if req.InstanceID != nil {
		if oldID, ok := cg.static[*req.InstanceID]; ok && oldID != id {
			old := cg.byID[oldID]
			if old.epoch != epochStaticLeave {
				return nil, false, "", kerr.UnreleasedInstanceID, fmt.Sprintf("Static member %s with instance id %s is not released yet.", oldID, *req.InstanceID)
			}
			return cg.replaceStatic(old, id), false, oldID, nil, ""
		}
	}
	if m := cg.byID[id]; m != nil {
		cg.release(m, m.assigned)
		cg.release(m, m.revoking)
		m.assigned, m.revoking = nil, nil
		stopTimer(&m.revokeTimer)
		m.epoch, m.prevEpoch, m.state = 0, 0, memberStable
		return m, false, "", nil, ""
	}
	if len(cg.members) >= s.c.cfg.MaxGroupSize {
		return nil, false, "", kerr.GroupMaxSizeReached, fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", s.c.cfg.MaxGroupSize)
	}
	m := &consumerMember{id: id, instanceID: req.InstanceID, clientID: info.ClientID, clientHost: info.ClientHost}
	cg.add(m)
	return m, true, "", nil, ""
}

// replaceStatic gives the assignment and epoch of a static member that left
// temporarily to newID, as the same instance rejoining.
func (cg *consumerGroup) replaceStatic(old *consumerMember, newID string) *consumerMember {
	m := &consumerMember{
		id: newID, instanceID: old.instanceID, rackID: old.rackID,
		epoch: old.prevEpoch, prevEpoch: old.prevEpoch, state: old.state,
		rebalanceTimeout: old.rebalanceTimeout, topics: old.topics, regex: old.regex, re: old.re, assignor: old.assignor,
		assigned: old.assigned, revoking: old.revoking,
	}
	if old.epoch != epochStaticLeave {
		m.epoch = old.epoch
	}
	for _, s := range []partSet{m.assigned, m.revoking} {
		for tp := range s {
			cg.owners[tp] = newID
		}
	}
	if t, ok := cg.target[old.id]; ok {
		cg.target[newID] = t
	}
	old.assigned, old.revoking = nil, nil
	cg.remove(old)
	cg.add(m)
	return m
}

// lookupMember returns the member named by a heartbeat: UNKNOWN_MEMBER_ID if
// there is none, FENCED_INSTANCE_ID if the instance id belongs to another.
func (cg *consumerGroup) lookupMember(memberID string, instanceID *string) (*consumerMember, *kerr.Error) {
	m := cg.byID[memberID]
	if m == nil {
		return nil, kerr.UnknownMemberID
	}
	if instanceID != nil && (m.instanceID == nil || *m.instanceID != *instanceID) {
		return nil, kerr.FencedInstanceID
	}
	return m, nil
}

// updateSubscription applies the request's non-null fields to m and reports
// whether what m subscribes to, or the assignor it asks for, changed.
func (m *consumerMember) updateSubscription(req *kmsg.ConsumerGroupHeartbeatRequest, re *regexp.Regexp) bool {
	changed := false
	if req.RebalanceTimeoutMillis != -1 {
		m.rebalanceTimeout = req.RebalanceTimeoutMillis
	}
	if req.RackID != nil {
		m.rackID = req.RackID
	}
	if req.SubscribedTopicNames != nil {
		topics := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(topics)
		topics = slices.Compact(topics)
		if !slices.Equal(topics, m.topics) {
			m.topics = topics
			changed = true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex, m.re = *req.SubscribedTopicRegex, re
		changed = true
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor = *req.ServerAssignor
		changed = true
	}
	return changed
}

// removeConsumerMember removes m, frees its partitions and bumps the group
// epoch so the next heartbeat computes a new target. It returns the records
// that say so, for the caller to write.
func (s *shard) removeConsumerMember(g *group, m *consumerMember, reason string) []Record {
	cg := g.cons
	cg.remove(m)
	cg.epoch++
	cg.topicsVersion = -1 // the union of subscriptions may have shrunk
	s.syncConsumerState(g)
	s.c.log.Info("removed consumer group member", "group", g.id, "member", m.id, "epoch", cg.epoch, "reason", reason)
	return append(memberTombstones(g.id, m.id), groupEpochRecord(g.id, cg.epoch))
}

// expireConsumerMember removes m on a timer and writes the removal.
func (s *shard) expireConsumerMember(g *group, m *consumerMember, reason string) {
	recs := s.removeConsumerMember(g, m, reason)
	s.appendRecords(g.partition, recs, func(err error) {
		if err != nil {
			s.c.log.Warn("failed to store consumer group member removal", "group", g.id, "member", m.id, "error", err)
		}
	})
}

// rescheduleConsumerSession restarts m's session timeout.
func (s *shard) rescheduleConsumerSession(g *group, m *consumerMember) {
	stopTimer(&m.hb)
	_, session := s.c.consumerTimeouts(g.id)
	m.hb = s.schedule(session, func() {
		m.hb = nil
		if s.current(g) && g.cons != nil && g.cons.byID[m.id] == m {
			s.expireConsumerMember(g, m, "session timeout expired")
		}
	})
}

// scheduleRevocation removes m unless it revokes within its rebalance
// timeout.
func (s *shard) scheduleRevocation(g *group, m *consumerMember) {
	m.revokeTimer = s.schedule(ms(m.rebalanceTimeout), func() {
		m.revokeTimer = nil
		if s.current(g) && g.cons != nil && g.cons.byID[m.id] == m && m.state == memberUnrevoked {
			s.expireConsumerMember(g, m, "partitions not revoked within the rebalance timeout")
		}
	})
}

// syncConsumerState mirrors the consumer group into the classic fields the
// shared code reads: the state (Empty or Stable) and the subscribed topics.
func (s *shard) syncConsumerState(g *group) {
	cg := g.cons
	want := stateStable
	if len(cg.members) == 0 {
		want = stateEmpty
	}
	if g.state != want {
		g.transition(want, s.nowMs())
	}
	sub := make(map[string]struct{}, len(cg.resolved))
	for name := range cg.resolved {
		sub[name] = struct{}{}
	}
	g.subscribed = sub
}

// topics returns the current topic view, nil when the coordinator has none.
func (s *shard) topics() Topics {
	if s.c.cfg.Topics == nil {
		return nil
	}
	return s.c.cfg.Topics()
}

func subset(a, b partSet) bool {
	for tp := range a {
		if !b.has(tp) {
			return false
		}
	}
	return true
}

// consumerTimeouts is the heartbeat interval and session timeout of KIP-848 group id: its
// group configs where it sets them, the coordinator's otherwise.
func (c *GroupCoordinator) consumerTimeouts(id string) (heartbeat, session time.Duration) {
	heartbeat, session = c.cfg.ConsumerHeartbeatInterval, c.cfg.ConsumerSessionTimeout
	if c.cfg.GroupTimeouts == nil {
		return heartbeat, session
	}
	h, sess := c.cfg.GroupTimeouts(id)
	if h > 0 {
		heartbeat = h
	}
	if sess > 0 {
		session = sess
	}
	return heartbeat, session
}
