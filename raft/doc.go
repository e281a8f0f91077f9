// Package raft is ringbroker's Raft library: a pure consensus core, a disk log for it, a TCP
// transport between controllers, and a Node that drives the three on goroutines.
//
// The core (type Raft) never touches a socket, a file or a clock. It is stepped with messages
// (Step) and with logical clock ticks (Tick), and it hands back a Ready: what to persist, what
// to send, what is committed and which snapshot to install. Everything it does follows from
// those inputs and its seeded random source, so a run replays exactly.
//
// The order rule for a Ready, which every driver must follow:
//
//  1. Persist Snapshot (if any), then Entries and HardState, durably (fsync), before anything
//     else. A vote or an acknowledgement that has been sent must survive a crash.
//  2. Only then send Messages.
//  3. Only then apply CommittedEntries to the state machine, in order (after restoring the
//     state machine from Snapshot, if any).
//
// Ready drains the core: each entry, message and committed entry is handed out exactly once.
//
// Features: leader election with pre-vote and check-quorum (with a leader lease that ignores
// disruptive votes), log replication with batching (MaxSizePerMsg) and pipelining (at most
// MaxInflightMsgs appends in flight per follower), snapshots (Compact takes one, followers too
// far behind get one, Ready hands a received one over for installation), learners that follow
// the log without voting, leader transfer (MsgTimeoutNow), and membership change one voter at a
// time through configuration entries that take effect when they are appended, not when they
// commit (Raft thesis, section 4.1).
package raft
