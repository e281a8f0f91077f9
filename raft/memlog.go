package raft

import "fmt"

// memLog is the core's copy of the log: the snapshot point, then every entry after it.
type memLog struct {
	snapIndex uint64 // index of the last entry replaced by the snapshot; 0 for none
	snapTerm  uint64 // term of that entry
	// entries[i].Index == snapIndex+1+i; terms never decrease along the slice.
	entries []Entry
}

func (l *memLog) firstIndex() uint64 { return l.snapIndex + 1 }

func (l *memLog) lastIndex() uint64 { return l.snapIndex + uint64(len(l.entries)) }

func (l *memLog) lastTerm() uint64 {
	t, _ := l.term(l.lastIndex())
	return t
}

// term returns the term of entry i; ok is false when i was compacted or is past the end.
func (l *memLog) term(i uint64) (t uint64, ok bool) {
	switch {
	case i == l.snapIndex:
		return l.snapTerm, true
	case i < l.snapIndex || i > l.lastIndex():
		return 0, false
	}
	return l.entries[i-l.snapIndex-1].Term, true
}

func (l *memLog) matchTerm(i, t uint64) bool {
	tt, ok := l.term(i)
	return ok && tt == t
}

// entry returns entry i, which must be held.
func (l *memLog) entry(i uint64) Entry {
	if i <= l.snapIndex || i > l.lastIndex() {
		panic(fmt.Sprintf("raft: entry %d requested outside the held log (%d, %d]", i, l.snapIndex, l.lastIndex()))
	}
	return l.entries[i-l.snapIndex-1]
}

// slice returns entries [lo, hi) sharing the backing array, cut after maxBytes (at least one
// entry is returned when lo < hi). lo must be above snapIndex and hi at most lastIndex+1.
func (l *memLog) slice(lo, hi, maxBytes uint64) []Entry {
	if lo <= l.snapIndex || hi > l.lastIndex()+1 || lo > hi {
		panic(fmt.Sprintf("raft: slice [%d, %d) outside the held log (%d, %d]", lo, hi, l.snapIndex, l.lastIndex()))
	}
	ents := l.entries[lo-l.snapIndex-1 : hi-l.snapIndex-1]
	var size uint64
	for i, e := range ents {
		size += e.size()
		if i > 0 && size > maxBytes {
			return ents[:i]
		}
	}
	return ents
}

// truncateAndAppend drops entries from ents[0].Index on and appends ents. It never drops
// below the snapshot.
func (l *memLog) truncateAndAppend(ents []Entry) {
	if len(ents) == 0 {
		return
	}
	first := ents[0].Index
	if first <= l.snapIndex || first > l.lastIndex()+1 {
		panic(fmt.Sprintf("raft: append at %d outside the held log (%d, %d]; a gap or an overwrite of the snapshot", first, l.snapIndex, l.lastIndex()+1))
	}
	if first == l.lastIndex()+1 {
		l.entries = append(l.entries, ents...)
		return
	}
	// Overwriting: copy, so slices handed out earlier (in a Ready or a message) keep their
	// entries.
	k := first - l.snapIndex - 1
	l.entries = append(l.entries[:k:k], ents...)
}

// compact drops entries up to and including i, which must be held.
func (l *memLog) compact(i uint64) {
	t, ok := l.term(i)
	if !ok || i <= l.snapIndex {
		panic(fmt.Sprintf("raft: compact to %d outside the held log (%d, %d]", i, l.snapIndex, l.lastIndex()))
	}
	rest := l.entries[i-l.snapIndex:]
	l.entries = append(make([]Entry, 0, len(rest)), rest...)
	l.snapIndex, l.snapTerm = i, t
}

// reset replaces the whole log by a snapshot point.
func (l *memLog) reset(index, term uint64) {
	l.snapIndex, l.snapTerm, l.entries = index, term, nil
}

// isUpToDate reports whether a log ending at (index, term) is at least as up to date as l
// (Raft §5.4.1): a later last term wins, then a longer log.
func (l *memLog) isUpToDate(index, term uint64) bool {
	return term > l.lastTerm() || (term == l.lastTerm() && index >= l.lastIndex())
}

// findConflictByTerm returns the largest index at or below index whose term is at most term,
// (or the snapshot index), with that term. A follower answers a rejected append with it so the
// leader skips a whole run of entries from a stale term instead of probing one at a time.
func (l *memLog) findConflictByTerm(index, term uint64) (uint64, uint64) {
	if index > l.lastIndex() {
		index = l.lastIndex()
	}
	for index > l.snapIndex {
		t, _ := l.term(index)
		if t <= term {
			return index, t
		}
		index--
	}
	return l.snapIndex, l.snapTerm
}
