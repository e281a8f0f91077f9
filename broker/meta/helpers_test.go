package meta

import (
	"log/slog"
	"testing"
)

// checkSnapshotReplay commits batches to a new sole voter that snapshots every two entries,
// runs check on its image, reopens it (which must restore a snapshot, the rest replayed from
// the log) and runs check on the image again.
func checkSnapshotReplay(t *testing.T, batches [][]Record, check func(when string, im *Image)) {
	t.Helper()
	dir := t.TempDir()
	open := func() *RaftStore {
		s, err := OpenRaft(RaftConfig{NodeID: 1, Dir: dir, ClusterID: "cid", Voters: map[int32]string{1: ""},
			SnapshotEntries: 2, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	for _, recs := range batches {
		if _, err := s.Commit(recs); err != nil {
			t.Fatal(err)
		}
	}
	check("before restart", s.Image())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	if s.restores.Load() == 0 {
		t.Fatal("reopen did not restore a snapshot; the test needs one")
	}
	check("after restart", s.Image())
}
