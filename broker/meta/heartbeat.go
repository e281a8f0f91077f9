package meta

import (
	"time"

	"ringbroker/raft"
)

// Heartbeat is the last heartbeat the active controller received from a broker.
type Heartbeat struct {
	Incarnation UUID
	At          time.Time
}

// Heartbeat tells the active controller that broker nodeID (this process, incarnation inc)
// is alive.
func (s *RaftStore) Heartbeat(nodeID int32, inc UUID) error {
	deadline := time.Now().Add(s.cfg.CommitTimeout)
	_, err := s.toLeader(deadline, func(leader int32) (uint64, error) {
		if leader == s.cfg.NodeID {
			return 0, s.recordHeartbeat(nodeID, inc)
		}
		req := forwardRequest{Kind: "heartbeat", NodeID: nodeID, Incarnation: inc}
		if s.cfg.Learner {
			req.Addr = s.learnerAddr()
		}
		_, err := s.forward(leader, req, deadline)
		return 0, err
	})
	return err
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

func (s *RaftStore) recordHeartbeat(nodeID int32, inc UUID) error {
	if !s.node.IsLeader() {
		return &raft.NotLeaderError{Leader: s.node.Leader()}
	}
	s.hbMu.Lock()
	s.heartbeats[nodeID] = Heartbeat{Incarnation: inc, At: time.Now()}
	s.hbMu.Unlock()
	return nil
}
