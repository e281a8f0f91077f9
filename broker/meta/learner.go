package meta

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	"ringbroker/raft"
)

// joinTimeout bounds one attempt of a learner to join through one controller.
const joinTimeout = 5 * time.Second

// join asks the voters in turn, following not-leader hints, to add this node as a learner
// with its listener address, until one leader accepts or the store closes. It runs at every
// start, as the address may have changed; adding a learner again only updates its address.
func (s *RaftStore) join() {
	defer s.wg.Done()
	ids := make([]int32, 0, len(s.cfg.Voters))
	for id := range s.cfg.Voters {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	req := forwardRequest{Kind: "join", NodeID: s.cfg.NodeID, Addr: s.learnerAddr()}
	for attempt := 0; !s.closed.Load(); attempt++ {
		to := ids[attempt%len(ids)]
		if l := s.Leader(); l >= 0 {
			to = l
		}
		_, err := s.forward(to, req, time.Now().Add(joinTimeout))
		var nl *raft.NotLeaderError
		if errors.As(err, &nl) && nl.Leader != raft.None {
			_, err = s.forward(int32(nl.Leader-1), req, time.Now().Add(joinTimeout))
		}
		if err == nil {
			s.logger.Info("joined the metadata quorum as a learner", "node", s.cfg.NodeID, "addr", req.Addr, "via", to)
			return
		}
		s.logger.Debug("join the metadata quorum as a learner", "node", s.cfg.NodeID, "via", to, "err", err)
		time.Sleep(retryBackoff)
	}
}

// addLearner is the leader's side of a join: it adds node id as a learner at addr. A voter
// is never demoted this way.
func (s *RaftStore) addLearner(id int32, addr string) error {
	if _, ok := s.cfg.Voters[id]; ok {
		return fmt.Errorf("node %d is a voter (controller.quorum.voters) and cannot join as a learner", id)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("learner %d address %q: %w", id, addr, err)
	}
	if !s.node.IsLeader() {
		return &raft.NotLeaderError{Leader: s.node.Leader()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommitTimeout)
	defer cancel()
	if _, err := s.node.ProposeConfChange(ctx, raft.ConfChange{Type: raft.AddLearner, NodeID: raftID(id), Context: []byte(addr)}); err != nil {
		return fmt.Errorf("add learner %d at %s: %w", id, addr, err)
	}
	return nil
}

// learnerAddr is the address a learner announces: its bound port on AdvertiseHost.
func (s *RaftStore) learnerAddr() string {
	if s.cfg.AdvertiseHost == "" {
		return s.Addr()
	}
	return net.JoinHostPort(s.cfg.AdvertiseHost, strconv.Itoa(s.ln.Addr().(*net.TCPAddr).Port))
}
