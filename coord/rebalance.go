package coord

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the rebalance machinery shared by the request handlers:
// entering PreparingRebalance, completing the join phase, propagating
// assignments, and the session, join and sync timers. It follows Kafka 4's
// GroupMetadataManager for classic groups.

func ms(v int32) time.Duration { return time.Duration(v) * time.Millisecond }

// maybePrepareRebalanceOrCompleteJoin starts a rebalance if the state allows
// one, else tries to finish the running join phase.
func (s *shard) maybePrepareRebalanceOrCompleteJoin(g *group, reason string) {
	if g.canRebalance() {
		s.prepareRebalance(g, reason)
		return
	}
	s.maybeCompleteJoinPhase(g)
}

// prepareRebalance moves g to PreparingRebalance. From Empty the join phase
// waits InitialRebalanceDelay (extended while new members keep arriving, up
// to the rebalance timeout); otherwise it completes when every member has
// rejoined, or at the rebalance timeout.
func (s *shard) prepareRebalance(g *group, reason string) {
	if g.is(stateCompletingRebalance) {
		s.resetAndPropagateAssignmentError(g, kerr.RebalanceInProgress)
	}
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
	initial := g.is(stateEmpty)
	if initial {
		delay := s.c.cfg.InitialRebalanceDelay
		remaining := max(ms(g.rebalanceTimeout())-delay, 0)
		s.setJoinTimer(g, true, delay, func() { s.initialRebalanceTimeout(g, delay, remaining) })
	}
	g.transition(statePreparingRebalance, s.nowMs())
	s.c.log.Info("preparing to rebalance group", "group", g.id, "generation", g.generation, "reason", reason)
	if !initial {
		s.maybeCompleteJoinElseSchedule(g)
	}
}

func (s *shard) setJoinTimer(g *group, initial bool, d time.Duration, fn func()) {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
	}
	g.initialJoin = initial
	g.joinTimer = s.schedule(d, func() {
		if s.current(g) {
			fn()
		}
	})
}

// initialRebalanceTimeout ends one step of the initial rebalance delay.
func (s *shard) initialRebalanceTimeout(g *group, delay, remaining time.Duration) {
	if g.newMemberAdded && remaining != 0 {
		g.newMemberAdded = false
		next := min(s.c.cfg.InitialRebalanceDelay, remaining)
		rest := max(remaining-delay, 0)
		s.setJoinTimer(g, true, next, func() { s.initialRebalanceTimeout(g, next, rest) })
		return
	}
	s.completeJoin(g)
}

func (s *shard) maybeCompleteJoinElseSchedule(g *group) {
	if g.is(statePreparingRebalance) && g.hasAllMembersJoined() {
		s.completeJoin(g)
		return
	}
	s.setJoinTimer(g, false, ms(g.rebalanceTimeout()), func() { s.completeJoin(g) })
}

// maybeCompleteJoinPhase completes the join phase early once every member
// has rejoined, except during the initial rebalance delay.
func (s *shard) maybeCompleteJoinPhase(g *group) {
	if g.is(statePreparingRebalance) && g.hasAllMembersJoined() && !g.initialJoin {
		s.completeJoin(g)
	}
}

// completeJoin ends the join phase: dynamic members that did not rejoin are
// removed, the next generation starts, and every parked JoinGroup is answered
// (the leader's with all members' metadata).
func (s *shard) completeJoin(g *group) {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
		g.joinTimer = nil
	}
	g.initialJoin = false
	for _, m := range append([]*member(nil), g.members...) {
		if m.join == nil && !m.isStatic() {
			g.remove(m.id)
			s.c.log.Info("removed member that did not rejoin", "group", g.id, "member", m.id)
		}
	}
	if g.is(stateDead) {
		return
	}
	if !g.maybeElectJoinedLeader() && len(g.members) > 0 {
		// Only static members that have not rejoined remain: wait for them
		// or for their sessions to expire.
		s.c.log.Error("group could not complete rebalance because no members rejoined", "group", g.id)
		s.setJoinTimer(g, false, ms(g.rebalanceTimeout()), func() { s.completeJoin(g) })
		return
	}
	g.initNextGeneration(s.nowMs())
	if g.is(stateEmpty) {
		s.c.log.Info("group is now empty", "group", g.id, "generation", g.generation)
		gen := g.generation
		s.appendRecords(g.partition, []Record{groupMetadataRecord(g, nil)}, func(err error) {
			if err != nil {
				// Safe to ignore: the previous generation in the log has no
				// live members and will time out if it is ever loaded.
				s.c.log.Warn("failed to write empty group metadata", "group", g.id, "generation", gen, "error", err)
			}
		})
		return
	}
	s.c.log.Info("stabilized group", "group", g.id, "generation", g.generation, "members", len(g.members), "protocol", g.protocol)
	for _, m := range g.members {
		resp := g.joinResult(m.id, g.isLeader(m.id))
		g.completeJoin(m, resp)
		s.rescheduleHeartbeat(g, m, m.sessionTimeout)
		m.isNew = false
		g.pendingSync[m.id] = struct{}{}
	}
	gen := g.generation
	g.syncTimer = s.schedule(ms(g.rebalanceTimeout()), func() {
		if s.current(g) {
			s.expirePendingSync(g, gen)
		}
	})
}

// joinResult is a successful JoinGroup answer for memberID in the current
// generation; the leader's lists the members.
func (g *group) joinResult(memberID string, withMembers bool) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Generation = g.generation
	resp.ProtocolType = nonEmpty(g.protocolType)
	resp.Protocol = nonEmpty(g.protocol)
	resp.LeaderID = g.leader
	resp.MemberID = memberID
	if withMembers {
		resp.Members = g.leaderMembers()
	}
	return resp
}

// maybeElectJoinedLeader keeps the leader if it rejoined, else picks a member
// that did. It reports false if no member rejoined.
func (g *group) maybeElectJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if l := g.byID[g.leader]; l != nil && l.join != nil {
		return true
	}
	for _, m := range g.members {
		if m.join != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// expirePendingSync removes members that did not send SyncGroup within the
// rebalance timeout after the join phase, and rebalances.
func (s *shard) expirePendingSync(g *group, generation int32) {
	g.syncTimer = nil
	if generation != g.generation || !(g.is(stateCompletingRebalance) || g.is(stateStable)) || len(g.pendingSync) == 0 {
		return
	}
	var ids []string
	for _, m := range g.members {
		if _, ok := g.pendingSync[m.id]; ok {
			ids = append(ids, m.id)
		}
	}
	for _, id := range ids {
		g.remove(id)
	}
	s.c.log.Info("removed members that did not sync", "group", g.id, "members", ids)
	s.prepareRebalance(g, "members did not send SyncGroup in time")
}

// removePendingSync notes that memberID sent SyncGroup.
func (s *shard) removePendingSync(g *group, memberID string) {
	delete(g.pendingSync, memberID)
	if len(g.pendingSync) == 0 && g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
}

// resetAndPropagateAssignmentError clears assignments and answers every
// parked SyncGroup with err.
func (s *shard) resetAndPropagateAssignmentError(g *group, err *kerr.Error) {
	for _, m := range g.members {
		m.assignment = nil
	}
	s.propagateAssignment(g, err.Code)
}

// setAndPropagateAssignment installs the leader's assignment and answers
// every parked SyncGroup.
func (s *shard) setAndPropagateAssignment(g *group, assignment map[string][]byte) {
	for _, m := range g.members {
		m.assignment = assignment[m.id]
	}
	s.propagateAssignment(g, 0)
}

func (s *shard) propagateAssignment(g *group, errCode int16) {
	for _, m := range g.members {
		if g.completeSync(m, errCode) {
			// The session restarts once the member has its assignment: its
			// expiration was ignored while it waited.
			s.rescheduleHeartbeat(g, m, m.sessionTimeout)
		}
	}
}

// rescheduleHeartbeat restarts m's session expiration, timeoutMs from now.
func (s *shard) rescheduleHeartbeat(g *group, m *member, timeoutMs int32) {
	if m.hb != nil {
		m.hb.Stop()
	}
	m.hb = s.schedule(ms(timeoutMs), func() {
		m.hb = nil
		if s.current(g) && g.byID[m.id] == m {
			s.expireHeartbeat(g, m)
		}
	})
}

// expireHeartbeat removes m after a missed session, unless it is waiting in
// a rebalance (new members excepted), which counts as alive.
func (s *shard) expireHeartbeat(g *group, m *member) {
	if g.is(stateDead) {
		return
	}
	if !m.isNew && (m.join != nil || m.sync != nil) {
		return
	}
	s.c.log.Info("member session expired", "group", g.id, "member", m.id)
	s.removeMemberAndUpdateGroup(g, m, "member session expired")
}

// expirePending drops a pending member (KIP-394) that never joined.
func (s *shard) expirePending(g *group, memberID string) {
	if _, ok := g.pending[memberID]; !ok || g.is(stateDead) {
		return
	}
	delete(g.pending, memberID)
	s.c.log.Info("pending member expired", "group", g.id, "member", memberID)
	s.maybeCompleteJoinPhase(g)
}

// removeMemberAndUpdateGroup removes m and moves the group on.
func (s *shard) removeMemberAndUpdateGroup(g *group, m *member, reason string) {
	g.remove(m.id)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		s.maybePrepareRebalanceOrCompleteJoin(g, reason)
	case statePreparingRebalance:
		s.maybeCompleteJoinPhase(g)
	}
}
