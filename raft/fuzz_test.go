package raft

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzReader turns fuzz bytes into small numbers; past the end it yields zeros.
type fuzzReader struct {
	b []byte
	i int
}

func (f *fuzzReader) next(n int) uint64 {
	if f.i >= len(f.b) {
		return 0
	}
	v := f.b[f.i]
	f.i++
	return uint64(int(v) % n)
}

// FuzzStep steps random messages and ticks into a core (a leader or a follower) and checks
// that it neither panics nor refuses a well-formed Ready: every input either is refused with
// an error or leaves the core's invariants intact (Step and Tick assert them).
func FuzzStep(f *testing.F) {
	f.Add([]byte{0, 3, 2, 2, 1, 0, 3, 1, 0})
	f.Add([]byte{1, 4, 3, 3, 5, 2, 5, 0, 0, 1, 9, 2, 4, 0, 1, 1})
	f.Add(bytes.Repeat([]byte{7, 2, 9, 1, 3}, 20))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzReader{b: data}
		r, err := NewRaft(Config{ID: 1, ElectionTick: 5, PreVote: in.next(2) == 0, CheckQuorum: in.next(2) == 0, MaxInflightMsgs: 2, MaxSizePerMsg: 16},
			BootstrapState([]uint64{1, 2, 3}, []uint64{4}))
		if err != nil {
			t.Fatal(err)
		}
		if in.next(2) == 0 {
			// Become leader first, so that leader paths are fuzzed too.
			r.Step(Message{Type: MsgHup})
			r.Step(Message{Type: MsgVoteResp, From: 2, Term: r.term})
			r.Step(Message{Type: MsgPreVoteResp, From: 2, Term: r.term + 1})
			r.Step(Message{Type: MsgVoteResp, From: 2, Term: r.term})
		}
		for in.i < len(in.b) {
			switch in.next(8) {
			case 0:
				r.Tick()
				continue
			case 1:
				rd := r.Ready()
				if len(rd.CommittedEntries) > 0 && rd.CommittedEntries[0].Index > r.applied {
					t.Fatalf("handed out committed entry %d beyond applied %d", rd.CommittedEntries[0].Index, r.applied)
				}
				continue
			case 2:
				if r.applied > r.log.snapIndex {
					if _, err := r.Compact(r.applied, []byte("s")); err != nil {
						t.Fatalf("compact at applied %d: %v", r.applied, err)
					}
				}
				continue
			}
			m := Message{
				Type:       MessageType(in.next(int(numMessageTypes) + 1)),
				From:       in.next(5),
				To:         1,
				Term:       in.next(6),
				LogTerm:    in.next(6),
				Index:      in.next(12),
				Commit:     in.next(12),
				Reject:     in.next(2) == 1,
				RejectHint: in.next(12),
				Transfer:   in.next(2) == 1,
			}
			for range in.next(4) {
				e := Entry{Index: in.next(14), Term: in.next(6), Data: []byte{byte(in.next(256))}}
				if in.next(4) == 0 {
					e.Type = EntryConfChange
					e.Data = ConfChange{Type: ConfChangeType(in.next(4)), NodeID: in.next(6)}.Encode()
				}
				m.Entries = append(m.Entries, e)
			}
			if in.next(3) == 0 {
				m.Snapshot = &Snapshot{Meta: SnapshotMeta{Index: in.next(14), Term: in.next(6), Conf: ConfState{Voters: []uint64{1, 2, in.next(6) + 2}}}}
			}
			if err := r.Step(m); err != nil && errors.Is(err, ErrProposalDropped) {
				continue
			}
		}
		r.Ready()
	})
}

// FuzzDecodeMessage checks that the transport decoder refuses garbage without panicking and
// that whatever it accepts encodes back to the same bytes.
func FuzzDecodeMessage(f *testing.F) {
	f.Add(AppendMessage(nil, Message{Type: MsgApp, To: 2, From: 1, Term: 3, Index: 4, LogTerm: 2, Commit: 4,
		Entries: []Entry{{Index: 5, Term: 3, Data: []byte("x")}}}))
	f.Add(AppendMessage(nil, Message{Type: MsgSnap, To: 2, From: 1, Term: 3,
		Snapshot: &Snapshot{Meta: SnapshotMeta{Index: 9, Term: 3, Conf: ConfState{Voters: []uint64{1, 2}}}, Data: []byte("s")}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeMessage(data)
		if err != nil {
			return
		}
		if again := AppendMessage(nil, m); !bytes.Equal(again, data) {
			t.Fatalf("decode then encode changed the bytes:\n in %x\nout %x", data, again)
		}
	})
}
