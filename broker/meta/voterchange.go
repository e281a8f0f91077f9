package meta

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"ringbroker/raft"
)

// Voter changes of a dynamic quorum (KIP-853), on the active controller. Each refusal wraps
// one of the errors below, which the Kafka APIs map to Kafka's codes.
var (
	// ErrStaticQuorum: the voters are fixed by controller.quorum.voters (Kafka: kraft.version 0,
	// UNSUPPORTED_VERSION).
	ErrStaticQuorum = errors.New("the quorum is static (controller.quorum.voters): kraft.version is 0")
	// ErrVoterChangeBusy: another voter change is in progress or uncommitted, or the leader has
	// not committed an entry of its term yet (Kafka: REQUEST_TIMED_OUT).
	ErrVoterChangeBusy = errors.New("another voter change is in progress")
	// ErrDuplicateVoter: the node is a voter already (DUPLICATE_VOTER).
	ErrDuplicateVoter = errors.New("the node is already a voter")
	// ErrVoterNotFound: no voter has that id and directory id (VOTER_NOT_FOUND).
	ErrVoterNotFound = errors.New("no voter has that id and directory id")
	// ErrNotCaughtUp: the node is not a controller's learner that holds the log
	// (REQUEST_TIMED_OUT).
	ErrNotCaughtUp = errors.New("the node is not an observer caught up with the leader")
	// ErrInvalidVoterChange: the change cannot be made as asked (INVALID_REQUEST).
	ErrInvalidVoterChange = errors.New("invalid voter change")
	// ErrVoterDirectoryUnknown: a voter of a static quorum did not tell its directory id, so
	// the quorum cannot be upgraded to kraft.version 1 (Kafka refuses the same way until
	// every voter has sent it one).
	ErrVoterDirectoryUnknown = errors.New("directory id must be known for all of the voters")
)

// UpgradeKRaftVersion upgrades a static quorum (kraft.version 0) to kraft.version 1, as
// kafka-features upgrade --feature kraft.version=1: it asks every voter for its directory id
// over the controller listener, then commits, in one entry, a QuorumMember record of each
// voter with its controller listener and directory id, after which the voters change as a
// dynamic quorum's (AddVoter, RemoveVoter). validateOnly stops before the commit. An upgraded
// or dynamic quorum is left as it is. It runs on the leader only (a raft.NotLeaderError
// elsewhere), and not while a voter change is in progress.
func (s *RaftStore) UpgradeKRaftVersion(ctx context.Context, validateOnly bool) error {
	if s.Dynamic() {
		return nil
	}
	if !s.changeMu.TryLock() {
		return fmt.Errorf("leader %d: %w", s.cfg.NodeID, ErrVoterChangeBusy)
	}
	defer s.changeMu.Unlock()
	st, err := s.node.Status(ctx)
	if err != nil {
		return fmt.Errorf("upgrade kraft.version: %w", err)
	}
	if st.Progress == nil {
		return &raft.NotLeaderError{Leader: st.SoftState.Lead}
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(s.cfg.CommitTimeout)
	}
	var recs []Record
	for _, v := range st.Conf.Voters {
		id := int32(v - 1)
		dir := s.cfg.DirectoryID
		if id != s.cfg.NodeID {
			resp, err := s.forward(id, forwardRequest{Kind: "directory_id"}, deadline)
			if err != nil {
				return fmt.Errorf("upgrade kraft.version: voter %d: %w: %w", id, ErrVoterDirectoryUnknown, err)
			}
			dir = resp.DirectoryID
		}
		if dir.IsZero() {
			return fmt.Errorf("upgrade kraft.version: voter %d has no directory id: %w", id, ErrVoterDirectoryUnknown)
		}
		recs = append(recs, Record{Type: TypeQuorumMember, NodeID: id, MemberAddr: s.controllerAddr(id), DirectoryID: dir})
	}
	if validateOnly {
		_, err := s.Image().Apply(s.Image().Offset, recs)
		return err
	}
	if _, err := s.Commit(recs); err != nil {
		return fmt.Errorf("upgrade kraft.version: %w", err)
	}
	s.logger.Info("metadata quorum upgraded to kraft.version 1: its voters change as a dynamic quorum's", "voters", kafkaIDs(st.Conf.Voters))
	return nil
}

// caughtUpWindow is how recently a learner must have held the leader's whole log to be
// promoted: a few heartbeats, so that a new voter does not hold back the commit index.
const caughtUpWindow = 2 * time.Second

// Dynamic reports whether the quorum is a dynamic one: configured so (RaftConfig.Dynamic), or
// a static quorum upgraded to kraft.version 1 (UpgradeKRaftVersion).
func (s *RaftStore) Dynamic() bool { return s.cfg.Dynamic || s.Image().KRaftVersion() >= 1 }

// AddVoter promotes node id, a learner of the quorum with directory id dir that holds the
// leader's log, to voter at addr (its controller listener), and returns once the change is
// committed. It runs on the leader only (a raft.NotLeaderError elsewhere).
func (s *RaftStore) AddVoter(ctx context.Context, id int32, dir UUID, addr string) error {
	if id < 0 {
		return fmt.Errorf("add voter %d: %w: a node id is not negative", id, ErrInvalidVoterChange)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("add voter %d: endpoint %q: %w: %w", id, addr, ErrInvalidVoterChange, err)
	}
	return s.changeVoters(ctx, func(st raft.Status, contacts map[uint64]raft.Contact) (raft.ConfChange, error) {
		rid := raftID(id)
		if slices.Contains(st.Conf.Voters, rid) {
			return raft.ConfChange{}, fmt.Errorf("add voter %d: voters are %v: %w", id, kafkaIDs(st.Conf.Voters), ErrDuplicateVoter)
		}
		m, known := s.Image().Quorum[id]
		switch {
		case !slices.Contains(st.Conf.Learners, rid) || !known:
			return raft.ConfChange{}, fmt.Errorf("add voter %d: it is not an observer of the quorum: %w", id, ErrNotCaughtUp)
		case m.DirectoryID != dir:
			return raft.ConfChange{}, fmt.Errorf("add voter %d: observer %d has directory id %s, not %s: %w", id, id, m.DirectoryID, dir, ErrNotCaughtUp)
		case m.Broker:
			// Kafka asks the new voter's controller listener for its ApiVersions first,
			// which a broker does not have, and answers REQUEST_TIMED_OUT.
			return raft.ConfChange{}, fmt.Errorf("add voter %d: it is a broker (process.roles=broker), not a controller: %w", id, ErrNotCaughtUp)
		}
		pr, c := st.Progress[rid], contacts[rid]
		if pr.Match < st.HardState.Commit || time.Since(c.LastCaughtUp) > caughtUpWindow {
			return raft.ConfChange{}, fmt.Errorf("add voter %d: it is lagging behind (log end %d, high watermark %d, last caught up %v): %w",
				id, pr.Match, st.HardState.Commit, c.LastCaughtUp.Format(time.RFC3339Nano), ErrNotCaughtUp)
		}
		return raft.ConfChange{Type: raft.AddVoter, NodeID: rid, Context: encodeMemberContext(QuorumMember{Addr: addr, DirectoryID: dir})}, nil
	})
}

// RemoveVoter makes voter id with directory id dir an observer again (a learner that keeps
// following the log, as a removed Kafka controller keeps fetching) and returns once the change
// is committed. Removing the leader hands leadership to another voter first and fails with a
// raft.NotLeaderError naming it, so that the caller asks the new leader.
func (s *RaftStore) RemoveVoter(ctx context.Context, id int32, dir UUID) error {
	if id < 0 {
		return fmt.Errorf("remove voter %d: %w: a node id is not negative", id, ErrInvalidVoterChange)
	}
	return s.changeVoters(ctx, func(st raft.Status, _ map[uint64]raft.Contact) (raft.ConfChange, error) {
		rid := raftID(id)
		m, known := s.Image().Quorum[id]
		if !slices.Contains(st.Conf.Voters, rid) || !known || m.DirectoryID != dir {
			return raft.ConfChange{}, fmt.Errorf("remove voter %d with directory id %s: voters are %v: %w", id, dir, kafkaIDs(st.Conf.Voters), ErrVoterNotFound)
		}
		if len(st.Conf.Voters) == 1 {
			return raft.ConfChange{}, fmt.Errorf("remove voter %d: it is the only voter: %w", id, ErrInvalidVoterChange)
		}
		if id == s.cfg.NodeID {
			return raft.ConfChange{}, s.handOff(ctx, st)
		}
		return raft.ConfChange{Type: raft.AddLearner, NodeID: rid, Context: encodeMemberContext(m)}, nil
	})
}

// changeVoters runs one voter change on the leader: decide returns the change to propose
// given the leader's state, or why not.
func (s *RaftStore) changeVoters(ctx context.Context, decide func(raft.Status, map[uint64]raft.Contact) (raft.ConfChange, error)) error {
	if !s.Dynamic() {
		return ErrStaticQuorum
	}
	if !s.changeMu.TryLock() {
		return fmt.Errorf("leader %d: %w", s.cfg.NodeID, ErrVoterChangeBusy)
	}
	defer s.changeMu.Unlock()
	st, err := s.node.Status(ctx)
	if err != nil {
		return fmt.Errorf("voter change: %w", err)
	}
	if st.Progress == nil {
		return &raft.NotLeaderError{Leader: st.SoftState.Lead}
	}
	contacts, err := s.node.Contacts(ctx)
	if err != nil {
		return fmt.Errorf("voter change: %w", err)
	}
	cc, err := decide(st, contacts)
	if err != nil {
		return err
	}
	if _, err := s.node.ProposeConfChange(ctx, cc); err != nil {
		if errors.Is(err, raft.ErrProposalDropped) {
			return fmt.Errorf("%s: the last voter change is not committed yet: %w", cc, ErrVoterChangeBusy)
		}
		return fmt.Errorf("%s: %w", cc, err)
	}
	s.logger.Info("metadata quorum: voters changed", "change", cc.Type.String(), "node", int32(cc.NodeID-1))
	return nil
}

// handOff makes the voter that holds most of the log lead instead of this one, and returns
// the raft.NotLeaderError that sends the caller to it.
func (s *RaftStore) handOff(ctx context.Context, st raft.Status) error {
	var to uint64
	for _, v := range st.Conf.Voters {
		if v != st.ID && (to == raft.None || st.Progress[v].Match > st.Progress[to].Match) {
			to = v
		}
	}
	if err := s.node.TransferLeadership(ctx, to); err != nil {
		return fmt.Errorf("remove voter %d, the leader: hand leadership to %d first: %w: %w", s.cfg.NodeID, to-1, ErrVoterChangeBusy, err)
	}
	return &raft.NotLeaderError{Leader: to}
}

// kafkaIDs turns Raft ids into node ids, for messages.
func kafkaIDs(ids []uint64) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id - 1)
	}
	return out
}
