package coord

// Heartbeat (key 12), versions 0-4.
//
// Behavior: a heartbeat restarts the member's session. It returns
// REBALANCE_IN_PROGRESS while the group prepares a rebalance, which is how
// members learn that they must rejoin, and ILLEGAL_GENERATION for a stale
// generation.
//
// Version notes: v3 adds group.instance.id (FENCED_INSTANCE_ID if another
// member holds it).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var heartbeatAPI = API{Key: kmsg.Heartbeat, MinVersion: 0, MaxVersion: 4, handle: handleHeartbeat}

func handleHeartbeat(g *GroupCoordinator, _ RequestInfo, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.HeartbeatRequest)
	g.toGroup(req.Group, func(s *shard, p int32) { s.heartbeat(p, req, respond) })
}

func (s *shard) heartbeat(p int32, req *kmsg.HeartbeatRequest, respond func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = errCode(s.heartbeatError(p, req))
	respond(resp)
}

func (s *shard) heartbeatError(p int32, req *kmsg.HeartbeatRequest) *kerr.Error {
	if req.Group == "" {
		return kerr.InvalidGroupID
	}
	g, errc := s.ownedGroup(p, req.Group)
	if errc != nil {
		return errc
	}
	switch {
	case g == nil:
		return kerr.UnknownMemberID
	case g.is(stateDead):
		return kerr.CoordinatorNotAvailable
	}
	if errc := g.validateMember(req.MemberID, req.InstanceID); errc != nil {
		return errc
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration
	}
	m := g.byID[req.MemberID]
	switch g.state {
	case statePreparingRebalance:
		s.rescheduleHeartbeat(g, m, m.sessionTimeout)
		return kerr.RebalanceInProgress
	case stateCompletingRebalance, stateStable:
		s.rescheduleHeartbeat(g, m, m.sessionTimeout)
		return nil
	default:
		return kerr.UnknownMemberID
	}
}

// errCode returns e's code, 0 (no error) for nil.
func errCode(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}
