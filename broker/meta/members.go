package meta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"

	"ringbroker/raft"
)

// QuorumMember is what the metadata log records of a member of the controller quorum, voter
// or learner (a KRaft observer), from the context of its last membership change: where its
// controller listener (or, for a broker-only learner, its learner listener) is, and the
// directory id of its metadata log dir (Kafka's directory.id in meta.properties), which tells
// a reformatted node from the one that was added.
type QuorumMember struct {
	Addr        string `json:"addr"`
	DirectoryID UUID   `json:"dir"`
	// Broker marks a broker-only learner (process.roles=broker), which has no controller
	// listener and can never vote.
	Broker bool `json:"broker,omitempty"`
}

// encodeMemberContext is the context of a membership change for m.
func encodeMemberContext(m QuorumMember) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("encode quorum member %+v: %v", m, err))
	}
	return b
}

// decodeMemberContext reads a membership change's context: a QuorumMember in JSON, or, as
// written before directory ids were recorded, the bare address. An empty context (a founding
// member of a static quorum) is the zero member.
func decodeMemberContext(ctx []byte) (QuorumMember, error) {
	if len(ctx) == 0 || ctx[0] != '{' {
		return QuorumMember{Addr: string(ctx)}, nil
	}
	var m QuorumMember
	if err := json.NewDecoder(bytes.NewReader(ctx)).Decode(&m); err != nil {
		return QuorumMember{}, fmt.Errorf("decode quorum member context %q: %w", ctx, err)
	}
	return m, nil
}

// memberAddr is the transport address in a membership change's context, for raft.Node.
func memberAddr(ctx []byte) string {
	m, err := decodeMemberContext(ctx)
	if err != nil {
		return ""
	}
	return m.Addr
}

// withMember returns a copy of im whose quorum records m for node id after a committed
// membership change (without m: the node left).
func (im *Image) withMember(id int32, m QuorumMember, present bool) *Image {
	next := *im
	next.Quorum = maps.Clone(im.Quorum)
	if next.Quorum == nil {
		next.Quorum = map[int32]QuorumMember{}
	}
	if present {
		next.Quorum[id] = m
	} else {
		delete(next.Quorum, id)
	}
	return &next
}

// ApplyConfChange records a committed membership change in the image (raft.ConfChangeApplier):
// an added member's address and directory id, or a removed member's absence. A change without
// a context (a founding voter of a static quorum) records nothing.
func (sm *stateMachine) ApplyConfChange(index uint64, cc raft.ConfChange) error {
	s := (*RaftStore)(sm)
	id := int32(cc.NodeID - 1)
	if cc.Type == raft.RemoveNode {
		if _, ok := s.Image().Quorum[id]; ok {
			s.publish(s.Image().withMember(id, QuorumMember{}, false))
		}
		s.setApplied(index)
		return nil
	}
	if len(cc.Context) > 0 {
		m, err := decodeMemberContext(cc.Context)
		if err != nil {
			// The context was written by a leader of this cluster; a member that cannot be
			// read is logged, not fatal: it only lacks an address until it joins again.
			s.logger.Warn("metadata quorum: membership change with an unreadable context", "index", index, "err", err)
		} else if old, ok := s.Image().Quorum[id]; !ok || old != m {
			s.publish(s.Image().withMember(id, m, true))
		}
	}
	s.setApplied(index)
	return nil
}

// KRaftVersion is the quorum's kraft.version feature level: 1 for a dynamic quorum (KIP-853),
// whose membership changes record the members' directory ids, 0 for a static one
// (controller.quorum.voters), which records none.
func (im *Image) KRaftVersion() int16 {
	for _, m := range im.Quorum {
		if !m.DirectoryID.IsZero() {
			return 1
		}
	}
	return 0
}
