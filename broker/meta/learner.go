package meta

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"time"

	"ringbroker/raft"
)

// joinTimeout bounds one attempt of a learner to join through one controller.
const joinTimeout = 5 * time.Second

// join asks the controllers in turn (the static voters, or a dynamic quorum's bootstrap
// servers), following not-leader hints, to add this node as a learner with its listener
// address and directory id, until one leader accepts or the store closes. It runs at every
// start, as the address may have changed; the leader only records the new address of a node
// that is a member already (see addLearner).
func (s *RaftStore) join() {
	defer s.wg.Done()
	var addrs []string
	if s.cfg.Dynamic {
		addrs = slices.Clone(s.cfg.BootstrapServers)
	} else {
		ids := make([]int32, 0, len(s.cfg.Voters))
		for id := range s.cfg.Voters {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			addrs = append(addrs, s.cfg.Voters[id])
		}
	}
	req := forwardRequest{Kind: "join", NodeID: s.cfg.NodeID, Addr: s.learnerAddr(), DirectoryID: s.cfg.DirectoryID, Broker: s.cfg.Learner}
	for attempt := 0; !s.closed.Load(); attempt++ {
		to, addr := int32(-1), addrs[attempt%len(addrs)]
		if l := s.Leader(); l >= 0 {
			if a := s.controllerAddr(l); a != "" {
				to, addr = l, a
			}
		}
		resp, err := s.forwardTo(to, addr, req, time.Now().Add(joinTimeout))
		var nl *notLeaderAtError
		if errors.As(err, &nl) {
			resp, err = s.forwardTo(int32(nl.Leader-1), nl.addr, req, time.Now().Add(joinTimeout))
		}
		if err == nil {
			if resp.Leader != raft.None && resp.LeaderAddr != "" && s.controllerAddr(int32(resp.Leader-1)) == "" {
				s.node.AddPeer(resp.Leader, resp.LeaderAddr)
			}
			how := "as a learner"
			if s.votes() {
				how = "as a voter"
			}
			s.logger.Info("joined the metadata quorum "+how, "node", s.cfg.NodeID, "addr", req.Addr, "via", addr)
			return
		}
		s.logger.Debug("join the metadata quorum", "node", s.cfg.NodeID, "via", addr, "err", err)
		time.Sleep(retryBackoff)
	}
}

// votes reports whether this node is a voter of the membership it holds.
func (s *RaftStore) votes() bool {
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	st, err := s.node.Status(ctx)
	return err == nil && slices.Contains(st.Conf.Voters, raftID(s.cfg.NodeID))
}

// addLearner is the leader's side of a join: it adds node id as a learner with m. A voter is
// never demoted this way: a static voter is refused, and a member of a dynamic quorum (voter
// or learner) only gets its address and directory id updated when they changed, as Kafka's
// UpdateRaftVoter does for a voter that restarts on a new endpoint.
func (s *RaftStore) addLearner(id int32, m QuorumMember) error {
	if _, ok := s.cfg.Voters[id]; ok {
		return fmt.Errorf("node %d is a voter (controller.quorum.voters) and cannot join as a learner", id)
	}
	if _, _, err := net.SplitHostPort(m.Addr); err != nil {
		return fmt.Errorf("learner %d address %q: %w", id, m.Addr, err)
	}
	if !s.node.IsLeader() {
		return &raft.NotLeaderError{Leader: s.node.Leader()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommitTimeout)
	defer cancel()
	st, err := s.node.Status(ctx)
	if err != nil {
		return fmt.Errorf("add learner %d: %w", id, err)
	}
	cc := raft.ConfChange{Type: raft.AddLearner, NodeID: raftID(id), Context: encodeMemberContext(m)}
	if slices.Contains(st.Conf.Voters, raftID(id)) || slices.Contains(st.Conf.Learners, raftID(id)) {
		if old, ok := s.Image().Quorum[id]; ok && old == m {
			return nil
		}
		if slices.Contains(st.Conf.Voters, raftID(id)) {
			cc.Type = raft.AddVoter // keeps it a voter, with the new context
		}
	}
	if _, err := s.node.ProposeConfChange(ctx, cc); err != nil {
		return fmt.Errorf("add learner %d at %s: %w", id, m.Addr, err)
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
