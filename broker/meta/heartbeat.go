package meta

import (
	"context"
	"time"

	"ringbroker/raft"
)

// Heartbeat is the last heartbeat the active controller received from a broker.
type Heartbeat struct {
	Incarnation UUID
	At          time.Time
	// WantShutdown says the broker is stopping and asks for its leadership to move away
	// first (Kafka's BrokerHeartbeat WantShutDown).
	WantShutdown bool
}

// Heartbeat tells the active controller that broker nodeID (this process, incarnation inc)
// is alive and whether it wants to shut down. The answer says whether it may stop now: it
// asked to, the controller recorded its controlled shutdown, and it leads no partition any
// more (Kafka's ShouldShutDown). It gives up when ctx ends or after the commit timeout.
func (s *RaftStore) Heartbeat(ctx context.Context, nodeID int32, inc UUID, wantShutdown bool) (shouldShutdown bool, err error) {
	deadline := time.Now().Add(s.cfg.CommitTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_, err = s.toLeader(deadline, func(leader int32) (uint64, error) {
		if leader == s.cfg.NodeID {
			var err error
			shouldShutdown, err = s.recordHeartbeat(nodeID, inc, wantShutdown)
			return 0, err
		}
		req := forwardRequest{Kind: "heartbeat", NodeID: nodeID, Incarnation: inc, WantShutdown: wantShutdown}
		if s.cfg.Learner {
			req.Addr = s.learnerAddr()
		}
		resp, err := s.forward(leader, req, deadline)
		shouldShutdown = resp.ShouldShutdown
		return 0, err
	})
	return shouldShutdown, err
}

// Heartbeats returns the heartbeats received since this controller last became the leader.
func (s *RaftStore) Heartbeats() map[int32]Heartbeat {
	s.hbMu.Lock()
	defer s.hbMu.Unlock()
	out := make(map[int32]Heartbeat, len(s.heartbeats))
	for k, v := range s.heartbeats {
		out[k] = v
	}
	return out
}

// ResetHeartbeats forgets the heartbeats received so far; the controller calls it when it
// becomes the leader, so that a broker silent under an earlier term is not taken for alive.
func (s *RaftStore) ResetHeartbeats() {
	s.hbMu.Lock()
	s.heartbeats = map[int32]Heartbeat{}
	s.hbMu.Unlock()
}

func (s *RaftStore) recordHeartbeat(nodeID int32, inc UUID, wantShutdown bool) (shouldShutdown bool, err error) {
	if !s.node.IsLeader() {
		return false, &raft.NotLeaderError{Leader: s.node.Leader()}
	}
	s.hbMu.Lock()
	s.heartbeats[nodeID] = Heartbeat{Incarnation: inc, At: time.Now(), WantShutdown: wantShutdown}
	s.hbMu.Unlock()
	return wantShutdown && s.Image().ReadyToShutDown(nodeID, inc), nil
}

// Suspect is a broker registration that another broker found not listening: a connection to
// its advertised endpoint was refused, as after its process died.
type Suspect struct {
	NodeID      int32
	Incarnation UUID
}

// suspectQueue bounds the reports waiting for the active controller's loop; more are dropped,
// since the reporters repeat them.
const suspectQueue = 64

// ReportUnreachable tells the active controller that broker nodeID, registered as inc, refused
// a connection, so that it can check and fence the broker without waiting out its session.
func (s *RaftStore) ReportUnreachable(ctx context.Context, nodeID int32, inc UUID) error {
	deadline := time.Now().Add(s.cfg.CommitTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_, err := s.toLeader(deadline, func(leader int32) (uint64, error) {
		if leader == s.cfg.NodeID {
			return 0, s.recordSuspect(nodeID, inc)
		}
		_, err := s.forward(leader, forwardRequest{Kind: "unreachable", NodeID: nodeID, Incarnation: inc}, deadline)
		return 0, err
	})
	return err
}

// Suspects delivers, on the active controller, the brokers reported unreachable.
func (s *RaftStore) Suspects() <-chan Suspect { return s.suspects }

func (s *RaftStore) recordSuspect(nodeID int32, inc UUID) error {
	if !s.node.IsLeader() {
		return &raft.NotLeaderError{Leader: s.node.Leader()}
	}
	select {
	case s.suspects <- Suspect{NodeID: nodeID, Incarnation: inc}:
	default:
	}
	return nil
}
