package raft

import (
	"fmt"
	"strings"
)

// None is the absent node id: no leader known, no vote cast.
const None uint64 = 0

// EntryType tells a state machine entry from a configuration change.
type EntryType uint8

const (
	// EntryNormal carries application data (an empty one is a new leader's no-op).
	EntryNormal EntryType = iota
	// EntryConfChange carries an encoded ConfChange; it takes effect when appended.
	EntryConfChange
)

// Entry is one log entry.
type Entry struct {
	Index uint64
	Term  uint64
	Type  EntryType
	Data  []byte
}

func (e Entry) size() uint64 { return uint64(len(e.Data)) + 24 }

// HardState is the part of the core's state that must be durable before messages go out.
type HardState struct {
	Term   uint64
	Vote   uint64
	Commit uint64
}

// IsEmpty reports whether hs is the zero state of a node that never ran.
func (hs HardState) IsEmpty() bool { return hs == HardState{} }

// ConfState is a membership: the voters and the learners (non-voting followers). A node id
// appears in at most one of the two lists; both are sorted.
type ConfState struct {
	Voters   []uint64
	Learners []uint64
}

// SnapshotMeta describes the log prefix a snapshot replaces.
type SnapshotMeta struct {
	Index uint64    // last entry covered
	Term  uint64    // term of that entry
	Conf  ConfState // membership as of Index
}

// Snapshot is a state machine image at Meta.Index. Data is opaque to the core.
type Snapshot struct {
	Meta SnapshotMeta
	Data []byte
}

// IsEmpty reports whether s is the zero snapshot (no log prefix replaced).
func (s *Snapshot) IsEmpty() bool { return s == nil || s.Meta.Index == 0 }

// MessageType is the kind of a Message.
type MessageType uint8

// Message types. Hup, Beat and Prop (with term 0) are local inputs; the rest travel between
// nodes.
const (
	MsgHup            MessageType = iota // local: start an election now
	MsgBeat                              // local: leader sends heartbeats now
	MsgProp                              // propose entries (local, or forwarded by a follower)
	MsgApp                               // leader appends Entries after (Index, LogTerm)
	MsgAppResp                           // follower's answer: Index matched, or Reject with a hint
	MsgVote                              // candidate asks for a vote in Term
	MsgVoteResp                          // vote granted unless Reject
	MsgPreVote                           // would you vote for me in Term? (no state change)
	MsgPreVoteResp                       // pre-vote granted unless Reject
	MsgSnap                              // leader sends a snapshot
	MsgHeartbeat                         // leader is alive; carries a safe commit index
	MsgHeartbeatResp                     // follower is alive
	MsgTransferLeader                    // move leadership to From (sent to the leader)
	MsgTimeoutNow                        // leader to transferee: campaign at once
	numMessageTypes
)

var msgNames = [...]string{"MsgHup", "MsgBeat", "MsgProp", "MsgApp", "MsgAppResp", "MsgVote",
	"MsgVoteResp", "MsgPreVote", "MsgPreVoteResp", "MsgSnap", "MsgHeartbeat", "MsgHeartbeatResp",
	"MsgTransferLeader", "MsgTimeoutNow"}

// String names the message type, for traces.
func (t MessageType) String() string {
	if int(t) < len(msgNames) {
		return msgNames[t]
	}
	return fmt.Sprintf("MessageType(%d)", uint8(t))
}

// Message is what nodes exchange, and what callers step into the core.
type Message struct {
	Type MessageType
	To   uint64
	From uint64
	Term uint64
	// LogTerm and Index: for MsgApp the entry preceding Entries; for votes the candidate's
	// last entry; for MsgAppResp the index matched (or, on Reject, the index rejected, with
	// LogTerm the term at RejectHint).
	LogTerm    uint64
	Index      uint64
	Entries    []Entry
	Commit     uint64
	Reject     bool
	RejectHint uint64
	Snapshot   *Snapshot
	// Transfer marks a vote request caused by leader transfer: voters grant it even while
	// they still hear from a leader.
	Transfer bool
}

// StateType is a node's role.
type StateType uint8

// Roles.
const (
	StateFollower StateType = iota
	StatePreCandidate
	StateCandidate
	StateLeader
)

// String names the role, for traces.
func (s StateType) String() string {
	switch s {
	case StateFollower:
		return "StateFollower"
	case StatePreCandidate:
		return "StatePreCandidate"
	case StateCandidate:
		return "StateCandidate"
	case StateLeader:
		return "StateLeader"
	}
	return fmt.Sprintf("StateType(%d)", uint8(s))
}

// SoftState is volatile state worth reporting: who leads, and this node's role.
type SoftState struct {
	Lead  uint64
	State StateType
}

// Ready is what the core hands back after being stepped; see the package comment for the
// order in which a driver must handle it.
type Ready struct {
	// SoftState is non-nil when the leader or the role changed.
	SoftState *SoftState
	// HardState is non-nil when term, vote or commit changed; persist it with Entries.
	HardState *HardState
	// Entries to append durably. Entries[0].Index may be at or below the last persisted
	// index: storage then drops its entries from there on first.
	Entries []Entry
	// Snapshot received from the leader, to persist and install; it replaces the whole log.
	Snapshot *Snapshot
	// CommittedEntries to apply, in order, after persisting.
	CommittedEntries []Entry
	// Messages to send after persisting.
	Messages []Message
}

// IsEmpty reports whether rd holds nothing to do.
func (rd *Ready) IsEmpty() bool {
	return rd.SoftState == nil && rd.HardState == nil && len(rd.Entries) == 0 &&
		rd.Snapshot == nil && len(rd.CommittedEntries) == 0 && len(rd.Messages) == 0
}

// String formats m compactly for traces: "1->2 MsgApp Term:2 Log:1/3 Commit:3 Entries:[2/4]".
func (m Message) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d->%d %s Term:%d", m.From, m.To, m.Type, m.Term)
	switch m.Type {
	case MsgApp, MsgVote, MsgPreVote:
		fmt.Fprintf(&b, " Log:%d/%d", m.LogTerm, m.Index)
	case MsgAppResp:
		fmt.Fprintf(&b, " Index:%d", m.Index)
	}
	if m.Reject {
		fmt.Fprintf(&b, " Rejected (Hint: %d)", m.RejectHint)
	}
	if m.Commit != 0 {
		fmt.Fprintf(&b, " Commit:%d", m.Commit)
	}
	if m.Transfer {
		b.WriteString(" Transfer")
	}
	if len(m.Entries) > 0 {
		b.WriteString(" Entries:[")
		for i, e := range m.Entries {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(e.String())
		}
		b.WriteByte(']')
	}
	if m.Snapshot != nil {
		fmt.Fprintf(&b, " Snapshot:{Index:%d Term:%d Voters:%v Learners:%v}", m.Snapshot.Meta.Index,
			m.Snapshot.Meta.Term, m.Snapshot.Meta.Conf.Voters, m.Snapshot.Meta.Conf.Learners)
	}
	return b.String()
}

// String formats e as "term/index", with its payload: "2/5 EntryNormal \"x\"".
func (e Entry) String() string {
	switch {
	case e.Type == EntryConfChange:
		cc, err := DecodeConfChange(e.Data)
		if err != nil {
			return fmt.Sprintf("%d/%d ConfChange(bad)", e.Term, e.Index)
		}
		return fmt.Sprintf("%d/%d %s", e.Term, e.Index, cc)
	case len(e.Data) == 0:
		return fmt.Sprintf("%d/%d EntryNormal", e.Term, e.Index)
	default:
		return fmt.Sprintf("%d/%d EntryNormal %q", e.Term, e.Index, e.Data)
	}
}
