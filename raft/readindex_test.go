package raft

import (
	"errors"
	"testing"
)

// TestReadIndex steps one core through an election by hand: as candidate it has no read
// index (not the leader), as a new leader none until its no-op commits (its commit index
// could still be below what an earlier leader committed), then its commit index.
func TestReadIndex(t *testing.T) {
	r, err := NewRaft(Config{ID: 1, Seed: 1}, BootstrapState([]uint64{1, 2, 3}, nil))
	if err != nil {
		t.Fatal(err)
	}
	r.Ready() // the bootstrap state is durable
	step := func(m Message) {
		t.Helper()
		if err := r.Step(m); err != nil {
			t.Fatalf("step %s: %v", m, err)
		}
	}
	var nl *NotLeaderError
	if _, err := r.ReadIndex(); !errors.As(err, &nl) || nl.Leader != None {
		t.Fatalf("follower without a leader: %v; want a NotLeaderError naming none", err)
	}
	step(Message{Type: MsgHup})
	if _, err := r.ReadIndex(); !errors.As(err, &nl) {
		t.Fatalf("candidate: %v; want a NotLeaderError", err)
	}
	step(Message{Type: MsgVoteResp, From: 2, Term: 2})
	if r.state != StateLeader {
		t.Fatalf("node 1 is %s after a quorum of votes; want leader", r.state)
	}
	if idx, err := r.ReadIndex(); !errors.Is(err, ErrReadIndexNotReady) {
		t.Fatalf("leader before its no-op commits: %d, %v; want ErrReadIndexNotReady", idx, err)
	}
	noop := r.log.lastIndex()
	step(Message{Type: MsgAppResp, From: 2, Term: 2, Index: noop})
	if idx, err := r.ReadIndex(); err != nil || idx != noop {
		t.Fatalf("leader with its no-op committed: %d, %v; want %d", idx, err, noop)
	}
	// A higher term makes it a follower that names the new leader.
	step(Message{Type: MsgHeartbeat, From: 3, Term: 3})
	if _, err := r.ReadIndex(); !errors.As(err, &nl) || nl.Leader != 3 {
		t.Fatalf("follower of 3: %v; want a NotLeaderError naming 3", err)
	}
}
