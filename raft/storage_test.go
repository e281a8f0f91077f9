package raft

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func ents(term uint64, from, to uint64) []Entry {
	var out []Entry
	for i := from; i <= to; i++ {
		out = append(out, Entry{Index: i, Term: term, Data: fmt.Appendf(nil, "e%d.%d", term, i)})
	}
	return out
}

func openStorage(t *testing.T, dir string, opts DiskOptions) (*DiskStorage, State) {
	t.Helper()
	s, st, err := OpenDiskStorage(dir, opts)
	if err != nil {
		t.Fatalf("open storage %s: %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s, st
}

func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, walPrefix+"*"+walSuffix))
	if err != nil || len(m) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	slices.Sort(m)
	return m[len(m)-1]
}

func TestStorageRoundTripAndOverwrite(t *testing.T) {
	dir := t.TempDir()
	s, st := openStorage(t, dir, DiskOptions{})
	if !st.HardState.IsEmpty() || len(st.Entries) != 0 || st.Snapshot != nil {
		t.Fatalf("fresh storage recovered %+v; want empty", st)
	}
	hs := HardState{Term: 2, Vote: 1, Commit: 3}
	if err := s.Append(&hs, ents(1, 1, 5)); err != nil {
		t.Fatal(err)
	}
	// A follower's conflicting suffix is replaced from index 4.
	hs2 := HardState{Term: 3, Vote: 2, Commit: 4}
	if err := s.Append(&hs2, ents(3, 4, 6)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, st = openStorage(t, dir, DiskOptions{})
	want := append(ents(1, 1, 3), ents(3, 4, 6)...)
	if st.HardState != hs2 {
		t.Errorf("hard state %+v; want %+v", st.HardState, hs2)
	}
	if !slices.EqualFunc(st.Entries, want, sameEntry) {
		t.Errorf("entries %v; want %v", st.Entries, want)
	}
}

// TestStorageTornTail cuts or corrupts the last write at every byte and checks that recovery
// keeps exactly the records before the damage and that the log stays appendable.
func TestStorageTornTail(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	s, _ := openStorage(t, src, DiskOptions{})
	hs := HardState{Term: 1, Commit: 2}
	if err := s.Append(&hs, ents(1, 1, 3)); err != nil {
		t.Fatal(err)
	}
	seg := lastSegment(t, src)
	before, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	hs2 := HardState{Term: 1, Commit: 5}
	if err := s.Append(&hs2, ents(1, 4, 5)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	full, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"cut", "flip"} {
		for n := len(before); n < len(full); n++ {
			dir := filepath.Join(base, fmt.Sprintf("%s-%d", mode, n))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			img := slices.Clone(full)
			if mode == "cut" {
				img = img[:n]
			} else {
				img[n] ^= 0x40
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(seg)), img, 0o644); err != nil {
				t.Fatal(err)
			}
			s2, st := openStorage(t, dir, DiskOptions{})
			// Records are entries 4, 5 then the hard state: a damaged one drops it and
			// everything after.
			if len(st.Entries) < 3 || len(st.Entries) > 5 {
				t.Fatalf("%s at %d: recovered %d entries; want 3 to 5", mode, n, len(st.Entries))
			}
			if !slices.EqualFunc(st.Entries, ents(1, 1, uint64(len(st.Entries))), sameEntry) {
				t.Fatalf("%s at %d: recovered %v", mode, n, st.Entries)
			}
			if st.HardState != hs && st.HardState != hs2 || st.HardState == hs2 && len(st.Entries) != 5 {
				t.Fatalf("%s at %d: hard state %+v with %d entries", mode, n, st.HardState, len(st.Entries))
			}
			// The damaged tail is gone: appending and reopening gives a clean log.
			next := uint64(len(st.Entries)) + 1
			if err := s2.Append(nil, ents(2, next, next)); err != nil {
				t.Fatalf("%s at %d: append after recovery: %v", mode, n, err)
			}
			s2.Close()
			_, st = openStorage(t, dir, DiskOptions{})
			if got := st.Entries[len(st.Entries)-1]; got.Index != next || got.Term != 2 {
				t.Fatalf("%s at %d: after reopen last entry %v; want 2/%d", mode, n, got, next)
			}
		}
	}
}

func TestStorageCorruptOlderSegmentIsAnError(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStorage(t, dir, DiskOptions{SegmentBytes: 100})
	for i := uint64(1); i <= 10; i++ {
		if err := s.Append(&HardState{Term: 1, Commit: i}, ents(1, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	m, _ := filepath.Glob(filepath.Join(dir, walPrefix+"*"))
	slices.Sort(m)
	if len(m) < 3 {
		t.Fatalf("%d segments; want several with SegmentBytes=100", len(m))
	}
	b, _ := os.ReadFile(m[0])
	b[len(b)-1] ^= 1
	os.WriteFile(m[0], b, 0o644)
	if _, _, err := OpenDiskStorage(dir, DiskOptions{}); err == nil {
		t.Fatalf("open with a corrupt older segment succeeded; want an error")
	}
}

func TestStorageSnapshots(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStorage(t, dir, DiskOptions{SegmentBytes: 200})
	for i := uint64(1); i <= 20; i++ {
		if err := s.Append(&HardState{Term: 1, Commit: i}, ents(1, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	segsBefore, _ := filepath.Glob(filepath.Join(dir, walPrefix+"*"))
	snap := &Snapshot{Meta: SnapshotMeta{Index: 15, Term: 1, Conf: ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}}, Data: []byte("state@15")}
	if err := s.SaveSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	segsAfter, _ := filepath.Glob(filepath.Join(dir, walPrefix+"*"))
	if len(segsAfter) >= len(segsBefore) {
		t.Errorf("segments %d before snapshot, %d after; want old ones deleted", len(segsBefore), len(segsAfter))
	}
	s.Close()
	s, st := openStorage(t, dir, DiskOptions{SegmentBytes: 200})
	if st.Snapshot == nil || st.Snapshot.Meta.Index != 15 || string(st.Snapshot.Data) != "state@15" ||
		!slices.Equal(st.Snapshot.Meta.Conf.Learners, []uint64{4}) {
		t.Fatalf("recovered snapshot %+v", st.Snapshot)
	}
	r, err := NewRaft(Config{ID: 1}, st)
	if err != nil {
		t.Fatalf("core from recovered state: %v", err)
	}
	if r.log.firstIndex() != 16 || r.log.lastIndex() != 20 || r.committed != 20 {
		t.Fatalf("core log (%d..%d] commit %d; want (15..20] commit 20", r.log.snapIndex, r.log.lastIndex(), r.committed)
	}
	// A snapshot from the leader replaces the whole log, including entries past it.
	inst := &Snapshot{Meta: SnapshotMeta{Index: 18, Term: 4, Conf: ConfState{Voters: []uint64{1, 2}}}, Data: []byte("leader@18")}
	if err := s.InstallSnapshot(inst); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(&HardState{Term: 4, Commit: 19}, ents(4, 19, 19)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, st = openStorage(t, dir, DiskOptions{})
	if st.Snapshot.Meta.Index != 18 || len(st.Entries) != 1 || st.Entries[0].Term != 4 || st.HardState.Commit != 19 {
		t.Fatalf("after install recovered snapshot %d, entries %v, hard state %+v; want 18, [4/19], commit 19",
			st.Snapshot.Meta.Index, st.Entries, st.HardState)
	}
}
