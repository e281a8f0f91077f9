package coord

// JoinGroup (key 11), versions 0-9.
//
// Behavior: a member without a member id joins as new: static members (v5+
// group.instance.id) get an id at once and may replace the previous holder
// of their instance id; dynamic members on v4+ first get MEMBER_ID_REQUIRED
// with a generated id (KIP-394) and join again with it. The request is parked
// until the join phase completes; the leader's response lists every member's
// metadata for the selected protocol, passed through untouched.
//
// Version notes: v0 has no rebalance timeout (the session timeout is used);
// v7 adds the protocol type to the response; v9 lets a rejoining static
// leader of a stable group skip the assignment (KIP-814).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var joinGroupAPI = API{Key: kmsg.JoinGroup, MinVersion: 0, MaxVersion: 9, handle: handleJoinGroup}

func handleJoinGroup(g *GroupCoordinator, info RequestInfo, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.JoinGroupRequest)
	g.toGroup(req.Group, func(s *shard, p int32) { s.joinGroup(p, info, req, respond) })
}

func (s *shard) joinGroup(p int32, info RequestInfo, req *kmsg.JoinGroupRequest, respond func(kmsg.Response)) {
	w := &joinWaiter{req: req, respond: respond}
	if req.Group == "" {
		respondJoinError(w, req.MemberID, kerr.InvalidGroupID)
		return
	}
	session := ms(req.SessionTimeoutMillis)
	if session < s.c.cfg.MinSessionTimeout || session > s.c.cfg.MaxSessionTimeout {
		respondJoinError(w, req.MemberID, kerr.InvalidSessionTimeout)
		return
	}
	part, errc := s.owned(p)
	if errc != nil {
		respondJoinError(w, req.MemberID, errc)
		return
	}
	rebalanceTimeout := req.RebalanceTimeoutMillis
	if req.Version == 0 || rebalanceTimeout < 0 {
		rebalanceTimeout = req.SessionTimeoutMillis
	}
	unknown := req.MemberID == ""
	g := part.groups[req.Group]
	if g == nil {
		if !unknown {
			respondJoinError(w, req.MemberID, kerr.UnknownMemberID)
			return
		}
		g = newGroup(req.Group, p, s.nowMs())
		part.groups[req.Group] = g
	}
	if g.cons != nil {
		if len(g.cons.members) > 0 {
			// A classic member cannot join a consumer group with members.
			respondJoinError(w, req.MemberID, kerr.InconsistentGroupProtocol)
			return
		}
		g.toClassic()
		s.appendRecords(g.partition, consumerGroupTombstones(g.id), func(err error) {
			if err != nil {
				s.c.log.Warn("failed to delete consumer group records", "group", req.Group, "error", err)
			}
		})
	}
	switch {
	case !s.acceptJoiningMember(g, req.MemberID):
		g.remove(req.MemberID)
		respondJoinError(w, "", kerr.GroupMaxSizeReached)
	case unknown:
		s.joinNewMember(g, info, w, rebalanceTimeout)
	default:
		s.joinExistingMember(g, info, w, rebalanceTimeout)
	}
}

// acceptJoiningMember enforces group.max.size as Kafka does: during the join
// phase the count of members that rejoined is compared, so that the members
// rejoining last are the ones turned away.
func (s *shard) acceptJoiningMember(g *group, memberID string) bool {
	limit := s.c.cfg.MaxGroupSize
	switch g.state {
	case statePreparingRebalance:
		m := g.byID[memberID]
		return m != nil && m.join != nil || g.numAwaitingJoin < limit
	case stateCompletingRebalance, stateStable:
		return g.byID[memberID] != nil || len(g.members) < limit
	default:
		return true
	}
}

func (s *shard) joinNewMember(g *group, info RequestInfo, w *joinWaiter, rebalanceTimeout int32) {
	req := w.req
	switch {
	case g.is(stateDead):
		respondJoinError(w, "", kerr.CoordinatorNotAvailable)
		return
	case !g.supportsProtocols(req.ProtocolType, req.Protocols):
		respondJoinError(w, "", kerr.InconsistentGroupProtocol)
		return
	}
	prefix := info.ClientID
	if req.InstanceID != nil {
		prefix = *req.InstanceID
	}
	newID := prefix + "-" + s.c.newID()
	switch {
	case req.InstanceID != nil:
		if oldID, ok := g.static[*req.InstanceID]; ok {
			s.replaceStaticMemberAndRebalance(g, w, oldID, newID, rebalanceTimeout)
			return
		}
		s.addMemberAndRebalance(g, info, w, newID, rebalanceTimeout)
	case req.Version >= 4:
		// KIP-394: hand out the id and wait for the member to come back
		// with it, so that retries do not pile up unknown members.
		g.pending[newID] = s.schedule(ms(req.SessionTimeoutMillis), func() {
			if s.current(g) {
				s.expirePending(g, newID)
			}
		})
		respondJoinError(w, newID, kerr.MemberIDRequired)
	default:
		s.addMemberAndRebalance(g, info, w, newID, rebalanceTimeout)
	}
}

func (s *shard) joinExistingMember(g *group, info RequestInfo, w *joinWaiter, rebalanceTimeout int32) {
	req := w.req
	switch {
	case g.is(stateDead):
		respondJoinError(w, req.MemberID, kerr.CoordinatorNotAvailable)
		return
	case !g.supportsProtocols(req.ProtocolType, req.Protocols):
		respondJoinError(w, req.MemberID, kerr.InconsistentGroupProtocol)
		return
	}
	if _, ok := g.pending[req.MemberID]; ok {
		if req.InstanceID != nil {
			// Pending ids are only handed to dynamic members.
			respondJoinError(w, req.MemberID, kerr.UnknownMemberID)
			return
		}
		s.addMemberAndRebalance(g, info, w, req.MemberID, rebalanceTimeout)
		return
	}
	if errc := g.validateMember(req.MemberID, req.InstanceID); errc != nil {
		respondJoinError(w, req.MemberID, errc)
		return
	}
	m := g.byID[req.MemberID]
	switch g.state {
	case statePreparingRebalance:
		s.updateMemberAndRebalance(g, m, w, rebalanceTimeout, "member joining during PreparingRebalance")
	case stateCompletingRebalance:
		if m.matches(req.Protocols) {
			// The member lost its JoinGroup response: answer it again.
			respondJoin(w, g.joinResult(m.id, g.isLeader(m.id)))
			return
		}
		s.updateMemberAndRebalance(g, m, w, rebalanceTimeout, "member metadata changed during CompletingRebalance")
	case stateStable:
		switch {
		case g.isLeader(m.id):
			// A leader rejoins to trigger a rebalance for changes its
			// metadata does not show, such as new topic partitions.
			s.updateMemberAndRebalance(g, m, w, rebalanceTimeout, "leader rejoining Stable group")
		case !m.matches(req.Protocols):
			s.updateMemberAndRebalance(g, m, w, rebalanceTimeout, "member metadata changed in Stable group")
		default:
			respondJoin(w, g.joinResult(m.id, false))
		}
	default:
		respondJoinError(w, req.MemberID, kerr.UnknownMemberID)
	}
}

func respondJoin(w *joinWaiter, resp *kmsg.JoinGroupResponse) {
	resp.Version = w.req.Version
	w.respond(resp)
}

// addMemberAndRebalance adds a new member and parks its JoinGroup.
func (s *shard) addMemberAndRebalance(g *group, info RequestInfo, w *joinWaiter, memberID string, rebalanceTimeout int32) {
	req := w.req
	m := &member{
		id: memberID, instanceID: req.InstanceID, clientID: info.ClientID, clientHost: info.ClientHost,
		rebalanceTimeout: rebalanceTimeout, sessionTimeout: req.SessionTimeoutMillis,
		protocolType: req.ProtocolType, protocols: cloneProtocols(req.Protocols), isNew: true,
	}
	if g.is(statePreparingRebalance) && g.generation == 0 {
		g.newMemberAdded = true
	}
	g.add(m, w)
	// New members cannot heartbeat while parked, and a client that timed out
	// and retried would leave a defunct member behind: bound the wait.
	s.rescheduleHeartbeat(g, m, int32(s.c.cfg.NewMemberJoinTimeout/time.Millisecond))
	s.maybePrepareRebalanceOrCompleteJoin(g, "adding new member "+memberID)
}

func (s *shard) updateMemberAndRebalance(g *group, m *member, w *joinWaiter, rebalanceTimeout int32, reason string) {
	g.updateMember(m, w.req.Protocols, rebalanceTimeout, w.req.SessionTimeoutMillis, w)
	s.maybePrepareRebalanceOrCompleteJoin(g, reason)
}

// replaceStaticMemberAndRebalance gives a static member's instance id to a
// new member id (the old member is fenced). A Stable group whose selected
// protocol stays the same does not rebalance: the new member id is
// persisted and the member gets the current generation back.
func (s *shard) replaceStaticMemberAndRebalance(g *group, w *joinWaiter, oldID, newID string, rebalanceTimeout int32) {
	req := w.req
	currentLeader := g.leader
	m := g.replaceStaticMember(*req.InstanceID, oldID, newID)
	s.rescheduleHeartbeat(g, m, m.sessionTimeout)
	oldProtocols, oldRebalance, oldSession := m.protocols, m.rebalanceTimeout, m.sessionTimeout
	g.updateMember(m, req.Protocols, rebalanceTimeout, req.SessionTimeoutMillis, w)
	switch g.state {
	case stateStable:
		if g.selectProtocol() != g.protocol {
			s.maybePrepareRebalanceOrCompleteJoin(g, "static member "+newID+" joined with a change of protocol")
			return
		}
		s.appendRecords(g.partition, []Record{groupMetadataRecord(g, g.assignments())}, func(err error) {
			if m.join != w {
				return // answered meanwhile, by a rebalance or an unload
			}
			if err != nil {
				errc := appendGroupError(err)
				s.c.log.Warn("failed to persist static member replacement; reverting", "group", g.id, "instance", *req.InstanceID, "error", errc)
				g.updateMember(m, oldProtocols, oldRebalance, oldSession, nil)
				if s.current(g) && g.byID[newID] == m {
					old := g.replaceStaticMember(*req.InstanceID, newID, oldID)
					s.rescheduleHeartbeat(g, old, old.sessionTimeout)
				}
				resp := kmsg.NewPtrJoinGroupResponse()
				resp.ErrorCode = errc.Code
				resp.Generation = g.generation
				resp.ProtocolType = nonEmpty(g.protocolType)
				resp.Protocol = nonEmpty(g.protocol)
				resp.LeaderID = currentLeader
				respondJoin(w, resp)
				return
			}
			if req.Version >= 9 {
				// KIP-814: tell a static leader it leads, but let it skip
				// the assignment of an already stable group.
				leader := g.isLeader(newID)
				resp := g.joinResult(newID, leader)
				resp.SkipAssignment = leader
				g.completeJoin(m, resp)
				return
			}
			// Before v9 the old leader id is returned, so that a rejoining
			// leader does not compute an assignment a Stable group would
			// ignore.
			resp := g.joinResult(newID, false)
			resp.LeaderID = currentLeader
			g.completeJoin(m, resp)
		})
	case stateCompletingRebalance:
		s.prepareRebalance(g, "static member "+newID+" replaced during CompletingRebalance")
	case statePreparingRebalance:
		s.maybeCompleteJoinPhase(g)
	}
}
