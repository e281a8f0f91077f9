package meta

import (
	"context"
	"errors"
	"time"

	"ringbroker/raft"
)

// AlterPartitionHandler decides an AlterPartition request (Kafka's API 56) on the active
// controller: body is the request's encoding, the answer the response's. The broker installs
// it, since deciding needs the partition and broker state it keeps: ISR changes then travel
// as Kafka's AlterPartition from a partition's leader to the active controller, wherever
// either runs.
type AlterPartitionHandler func(body []byte) ([]byte, error)

// errAlterPartitionNotReady says no AlterPartitionHandler is installed yet.
var errAlterPartitionNotReady = errors.New("AlterPartition: the controller is not serving it yet")

// SetAlterPartitionHandler installs h; until then AlterPartition requests fail.
func (s *RaftStore) SetAlterPartitionHandler(h AlterPartitionHandler) { s.alterPartition.Store(&h) }

// AlterPartition sends an encoded AlterPartition request to the active controller (this
// node's handler if it is that controller) and returns the encoded response. It gives up when
// ctx ends or after the commit timeout.
func (s *RaftStore) AlterPartition(ctx context.Context, body []byte) ([]byte, error) {
	deadline := time.Now().Add(s.cfg.CommitTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var out []byte
	_, err := s.toLeader(deadline, func(leader int32) (uint64, error) {
		if leader == s.cfg.NodeID {
			var err error
			out, err = s.serveAlterPartition(body)
			return 0, err
		}
		resp, err := s.forward(leader, forwardRequest{Kind: "alter_partition", Body: body}, deadline)
		out = resp.Body
		return 0, err
	})
	return out, err
}

// serveAlterPartition runs the installed handler if this node is the active controller.
func (s *RaftStore) serveAlterPartition(body []byte) ([]byte, error) {
	if l := s.node.Leader(); l != raftID(s.cfg.NodeID) {
		return nil, &raft.NotLeaderError{Leader: l}
	}
	h := s.alterPartition.Load()
	if h == nil {
		return nil, errAlterPartitionNotReady
	}
	return (*h)(body)
}
