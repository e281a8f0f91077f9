package meta

import (
	"context"
	"fmt"
	"time"
)

// QuorumStatus is the metadata quorum as its leader sees it, for DescribeQuorum.
type QuorumStatus struct {
	Leader int32
	// Epoch is the leader's Raft term, Kafka's leader epoch of __cluster_metadata.
	Epoch uint64
	// HighWatermark is the index of the last committed entry.
	HighWatermark uint64
	// Voters and Observers (learners, KRaft's observers) with their progress.
	Voters, Observers []ReplicaStatus
}

// ReplicaStatus is the leader's view of one member of the metadata quorum.
type ReplicaStatus struct {
	NodeID int32
	// LogEnd is the index of the last entry the member is known to hold.
	LogEnd uint64
	// LastFetch and LastCaughtUp are when the leader last heard from the member and last
	// found it holding the whole log; zero when not heard from since it became leader.
	LastFetch, LastCaughtUp time.Time
	// Addr is the member's controller listener address (a broker-only learner's learner
	// listener), when known.
	Addr string
	// DirectoryID is the directory id the member joined a dynamic quorum with; zero when not
	// recorded (a static quorum's voters).
	DirectoryID UUID
}

// QuorumStatus returns the state of the metadata quorum; only the leader knows it, so other
// nodes fail with a raft.NotLeaderError (ControllerAPI takes a request to the leader).
func (s *RaftStore) QuorumStatus(ctx context.Context) (QuorumStatus, error) {
	st, err := s.node.Status(ctx)
	if err != nil {
		return QuorumStatus{}, fmt.Errorf("metadata quorum status: %w", err)
	}
	if st.Progress == nil {
		return QuorumStatus{}, fmt.Errorf("metadata quorum status: %w", ErrNoLeader)
	}
	contacts, err := s.node.Contacts(ctx)
	if err != nil {
		return QuorumStatus{}, fmt.Errorf("metadata quorum status: %w", err)
	}
	now := time.Now()
	q := QuorumStatus{Leader: s.cfg.NodeID, Epoch: st.HardState.Term, HighWatermark: st.HardState.Commit}
	member := func(id uint64) ReplicaStatus {
		node := int32(id - 1)
		r := ReplicaStatus{NodeID: node, LogEnd: st.Progress[id].Match, Addr: s.controllerAddr(node), DirectoryID: s.Image().Quorum[node].DirectoryID}
		if node == s.cfg.NodeID {
			r.LogEnd, r.LastFetch, r.LastCaughtUp = st.LastIndex, now, now
		} else if c, ok := contacts[id]; ok {
			r.LastFetch, r.LastCaughtUp = c.LastHeard, c.LastCaughtUp
		}
		return r
	}
	for _, id := range st.Conf.Voters {
		q.Voters = append(q.Voters, member(id))
	}
	for _, id := range st.Conf.Learners {
		q.Observers = append(q.Observers, member(id))
	}
	return q, nil
}
