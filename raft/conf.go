package raft

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// ConfChangeType is the kind of a single-node membership change.
type ConfChangeType uint8

const (
	// AddVoter adds a voter, or promotes a learner to voter.
	AddVoter ConfChangeType = iota + 1
	// AddLearner adds a learner, or demotes a voter to learner.
	AddLearner
	// RemoveNode removes a voter or a learner.
	RemoveNode
)

// String names the change type, for traces.
func (t ConfChangeType) String() string {
	switch t {
	case AddVoter:
		return "AddVoter"
	case AddLearner:
		return "AddLearner"
	case RemoveNode:
		return "RemoveNode"
	}
	return fmt.Sprintf("ConfChangeType(%d)", uint8(t))
}

// ConfChange changes the membership by one node. Context is opaque to the core; the Node puts
// the new member's transport address there.
type ConfChange struct {
	Type    ConfChangeType
	NodeID  uint64
	Context []byte
}

// String formats the change as "AddVoter(4)", for traces.
func (cc ConfChange) String() string {
	if len(cc.Context) > 0 {
		return fmt.Sprintf("%s(%d %q)", cc.Type, cc.NodeID, cc.Context)
	}
	return fmt.Sprintf("%s(%d)", cc.Type, cc.NodeID)
}

// confChangeHeader is the encoded size before Context: type, then node id.
const confChangeHeader = 9

// Encode returns cc's wire form: type (1 byte), node id (8 bytes big-endian), context.
func (cc ConfChange) Encode() []byte {
	b := make([]byte, confChangeHeader, confChangeHeader+len(cc.Context))
	b[0] = byte(cc.Type)
	binary.BigEndian.PutUint64(b[1:], cc.NodeID)
	return append(b, cc.Context...)
}

// DecodeConfChange parses an EntryConfChange payload.
func DecodeConfChange(b []byte) (ConfChange, error) {
	if len(b) < confChangeHeader {
		return ConfChange{}, fmt.Errorf("conf change too short: len=%d; want at least %d", len(b), confChangeHeader)
	}
	cc := ConfChange{Type: ConfChangeType(b[0]), NodeID: binary.BigEndian.Uint64(b[1:9])}
	if cc.Type < AddVoter || cc.Type > RemoveNode {
		return ConfChange{}, fmt.Errorf("conf change type %d unknown", b[0])
	}
	if cc.NodeID == None {
		return ConfChange{}, fmt.Errorf("conf change %s for node id 0", cc.Type)
	}
	if len(b) > confChangeHeader {
		cc.Context = slices.Clone(b[confChangeHeader:])
	}
	return cc, nil
}

// apply returns the membership after cc; cs is not modified.
func (cs ConfState) apply(cc ConfChange) ConfState {
	out := ConfState{
		Voters:   slices.DeleteFunc(slices.Clone(cs.Voters), func(id uint64) bool { return id == cc.NodeID }),
		Learners: slices.DeleteFunc(slices.Clone(cs.Learners), func(id uint64) bool { return id == cc.NodeID }),
	}
	switch cc.Type {
	case AddVoter:
		out.Voters = append(out.Voters, cc.NodeID)
		slices.Sort(out.Voters)
	case AddLearner:
		out.Learners = append(out.Learners, cc.NodeID)
		slices.Sort(out.Learners)
	}
	return out
}

// isVoter reports whether id votes in cs.
func (cs ConfState) isVoter(id uint64) bool {
	_, ok := slices.BinarySearch(cs.Voters, id)
	return ok
}

// isLearner reports whether id is a learner in cs.
func (cs ConfState) isLearner(id uint64) bool {
	_, ok := slices.BinarySearch(cs.Learners, id)
	return ok
}

// quorum is the number of voters that make a majority; 0 voters never reach one.
func (cs ConfState) quorum() int {
	if len(cs.Voters) == 0 {
		return 1 << 30
	}
	return len(cs.Voters)/2 + 1
}

// confPoint is the membership in force from log index Index on.
type confPoint struct {
	Index uint64
	Conf  ConfState
}
