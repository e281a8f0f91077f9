package coord

// LeaveGroup (key 13), versions 0-5.
//
// Behavior: members leave, and the group rebalances without them (or finishes
// a running join phase without waiting for them). Each member gets its own
// error code.
//
// Version notes: from v3 one request removes a batch of members, each
// identified by member id and/or group.instance.id, and an administrator may
// remove a static member by instance id alone; before v3 the single member's
// error is the top-level error.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var leaveGroupAPI = API{Key: kmsg.LeaveGroup, MinVersion: 0, MaxVersion: 5, handle: handleLeaveGroup}

func handleLeaveGroup(g *GroupCoordinator, _ RequestInfo, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.LeaveGroupRequest)
	g.toGroup(req.Group, func(s *shard, p int32) { s.leaveGroup(p, req, respond) })
}

func (s *shard) leaveGroup(p int32, req *kmsg.LeaveGroupRequest, respond func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = req.MemberID
		leaving = []kmsg.LeaveGroupRequestMember{lm}
	}
	top, members := s.leave(p, req.Group, leaving)
	resp.ErrorCode = errCode(top)
	if req.Version >= 3 {
		resp.Members = members
	} else if top == nil && len(members) == 1 {
		resp.ErrorCode = members[0].ErrorCode
	}
	respond(resp)
}

// leave removes the members and returns the top-level error and per-member
// results.
func (s *shard) leave(p int32, groupID string, leaving []kmsg.LeaveGroupRequestMember) (*kerr.Error, []kmsg.LeaveGroupResponseMember) {
	if groupID == "" {
		return kerr.InvalidGroupID, nil
	}
	part, errc := s.owned(p)
	if errc != nil {
		return errc, nil
	}
	results := make([]kmsg.LeaveGroupResponseMember, len(leaving))
	for i, lm := range leaving {
		results[i] = kmsg.NewLeaveGroupResponseMember()
		results[i].MemberID, results[i].InstanceID = lm.MemberID, lm.InstanceID
	}
	g := part.groups[groupID]
	if g == nil {
		for i := range results {
			results[i].ErrorCode = kerr.UnknownMemberID.Code
		}
		return nil, results
	}
	if g.is(stateDead) {
		return kerr.CoordinatorNotAvailable, nil
	}
	removed := false
	for i, lm := range leaving {
		switch {
		case lm.MemberID == "":
			// Administrative removal of a static member by instance id.
			id, ok := "", false
			if lm.InstanceID != nil {
				id, ok = g.static[*lm.InstanceID]
			}
			if !ok {
				results[i].ErrorCode = kerr.UnknownMemberID.Code
				continue
			}
			g.remove(id)
			removed = true
		case g.pending[lm.MemberID] != nil:
			g.remove(lm.MemberID)
			removed = true
		default:
			if errc := g.validateMember(lm.MemberID, lm.InstanceID); errc != nil {
				results[i].ErrorCode = errc.Code
				continue
			}
			g.remove(lm.MemberID)
			removed = true
		}
		s.c.log.Info("member left group", "group", groupID, "member", lm.MemberID, "reason", stringOr(lm.Reason, "not provided"))
	}
	if removed {
		switch g.state {
		case stateStable, stateCompletingRebalance:
			s.maybePrepareRebalanceOrCompleteJoin(g, "members left the group")
		case statePreparingRebalance:
			s.maybeCompleteJoinPhase(g)
		}
	}
	return nil, results
}

func stringOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}
