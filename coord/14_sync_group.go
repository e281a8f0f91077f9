package coord

// SyncGroup (key 14), versions 0-5.
//
// Behavior: after the join phase every member sends SyncGroup; the leader's
// carries the assignment. Requests are parked until the leader's assignment
// has been written to __consumer_offsets, then each member gets its own
// assignment (members the leader left out get an empty one) and the group is
// Stable. In a Stable group SyncGroup returns the current assignment at once.
//
// Version notes: v3 adds group.instance.id; v5 adds protocol type and name,
// which must match the group's (INCONSISTENT_GROUP_PROTOCOL otherwise); that
// v5+ requests carry them at all is checked by the broker, as Kafka's request
// handler does.

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var syncGroupAPI = API{Key: kmsg.SyncGroup, MinVersion: 0, MaxVersion: 5, handle: handleSyncGroup}

func handleSyncGroup(g *GroupCoordinator, _ RequestInfo, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.SyncGroupRequest)
	g.toGroup(req.Group, func(s *shard, p int32) { s.syncGroup(p, req, respond) })
}

func (s *shard) syncGroup(p int32, req *kmsg.SyncGroupRequest, respond func(kmsg.Response)) {
	w := &syncWaiter{req: req, respond: respond}
	if req.Group == "" {
		respondSyncError(w, kerr.InvalidGroupID)
		return
	}
	part, errc := s.owned(p)
	if errc == kerr.CoordinatorLoadInProgress {
		// The state of the rebalance is lost with the load; older clients do
		// not expect COORDINATOR_LOAD_IN_PROGRESS here, so ask for a rejoin.
		errc = kerr.RebalanceInProgress
	}
	if errc != nil {
		respondSyncError(w, errc)
		return
	}
	g := part.groups[req.Group]
	if g == nil {
		respondSyncError(w, kerr.UnknownMemberID)
		return
	}
	if errc := validateSync(g, req); errc != nil {
		respondSyncError(w, errc)
		return
	}
	m := g.byID[req.MemberID]
	switch g.state {
	case stateEmpty:
		respondSyncError(w, kerr.UnknownMemberID)
	case statePreparingRebalance:
		respondSyncError(w, kerr.RebalanceInProgress)
	case stateCompletingRebalance:
		if m.sync != nil {
			// Only the latest SyncGroup of a member is answered with the
			// assignment.
			respondSyncError(m.sync, kerr.RebalanceInProgress)
		}
		m.sync = w
		s.removePendingSync(g, m.id)
		if g.isLeader(m.id) {
			s.storeAssignment(g, req)
		}
	case stateStable:
		s.removePendingSync(g, m.id)
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ProtocolType = nonEmpty(g.protocolType)
		resp.Protocol = nonEmpty(g.protocol)
		resp.MemberAssignment = m.assignment
		respond(resp)
		s.rescheduleHeartbeat(g, m, m.sessionTimeout)
	}
}

func validateSync(g *group, req *kmsg.SyncGroupRequest) *kerr.Error {
	switch {
	case g.is(stateDead):
		return kerr.CoordinatorNotAvailable
	}
	if errc := g.validateMember(req.MemberID, req.InstanceID); errc != nil {
		return errc
	}
	switch {
	case req.Generation != g.generation:
		return kerr.IllegalGeneration
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType:
		return kerr.InconsistentGroupProtocol
	case req.Protocol != nil && *req.Protocol != g.protocol:
		return kerr.InconsistentGroupProtocol
	}
	return nil
}

// storeAssignment persists the leader's assignment and, once durable, hands
// it out and makes the group Stable.
func (s *shard) storeAssignment(g *group, req *kmsg.SyncGroupRequest) {
	assignment := make(map[string][]byte, len(g.members))
	for _, a := range req.GroupAssignment {
		if g.byID[a.MemberID] != nil {
			assignment[a.MemberID] = bytes.Clone(a.MemberAssignment)
		}
	}
	var missing []string
	for _, m := range g.members {
		if _, ok := assignment[m.id]; !ok {
			assignment[m.id] = []byte{}
			missing = append(missing, m.id)
		}
	}
	if len(missing) > 0 {
		s.c.log.Warn("leader assigned nothing to some members; giving them empty assignments", "group", g.id, "generation", g.generation, "members", missing)
	}
	gen := g.generation
	s.appendRecords(g.partition, []Record{groupMetadataRecord(g, assignment)}, func(err error) {
		// Members may have joined or left while the write was in flight:
		// act only if the rebalance is still the one that was stored.
		if !g.is(stateCompletingRebalance) || g.generation != gen {
			return
		}
		if err != nil {
			errc := appendGroupError(err)
			s.c.log.Warn("failed to store group assignment", "group", g.id, "generation", gen, "error", err)
			s.resetAndPropagateAssignmentError(g, errc)
			s.maybePrepareRebalanceOrCompleteJoin(g, "error storing group assignment: "+errc.Message)
			return
		}
		s.setAndPropagateAssignment(g, assignment)
		g.transition(stateStable, s.nowMs())
		s.c.log.Info("group is stable", "group", g.id, "generation", gen)
	})
}
