package meta

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// BenchmarkRaftStoreCommit measures a metadata commit (one topic of one partition) through a
// 3-voter quorum on loopback, proposed on the leader, and reports p50/p99.
func BenchmarkRaftStoreCommit(b *testing.B) {
	benchCommit(b, false)
}

// BenchmarkRaftStoreCommitForwarded is the same commit made on a follower, which forwards it.
func BenchmarkRaftStoreCommitForwarded(b *testing.B) {
	benchCommit(b, true)
}

// BenchmarkRaftStoreCommitSoleVoter is the same commit on a single node: the sole voter of its
// quorum, without a controller listener.
func BenchmarkRaftStoreCommitSoleVoter(b *testing.B) {
	s, err := OpenRaft(RaftConfig{NodeID: 1, Dir: b.TempDir(), ClusterID: "cid", Voters: map[int32]string{1: ""},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	timeCommits(b, s)
}

func benchCommit(b *testing.B, follower bool) {
	q := newQuorum(b, 3, 0)
	l := q.leader()
	s := q.stores[l]
	if follower {
		for id, f := range q.stores {
			if id != l {
				s = f
				break
			}
		}
	}
	timeCommits(b, s)
}

// timeCommits commits b.N topics of one partition through s and reports p50/p99.
func timeCommits(b *testing.B, s *RaftStore) {
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if _, err := s.Commit(topicRecords(fmt.Sprintf("b%d", i), 1)); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
