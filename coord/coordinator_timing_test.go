package coord

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// discardStore acknowledges every append at once and keeps nothing, so that
// benchmarks measure the coordinator rather than a growing fake log.
type discardStore struct{}

func (discardStore) Append(_ int32, _ int64, _ int16, _ []Record, done func(int64, error)) {
	done(0, nil)
}

func (discardStore) Load(int32, func(LoggedRecord) error) error { return nil }

// benchCoordinator starts a coordinator on the system clock over a
// discarding store with every partition loaded.
func benchCoordinator(b *testing.B, shards int) *GroupCoordinator {
	b.Helper()
	cfg := testConfig()
	cfg.Shards = shards
	c, err := New(cfg, discardStore{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	var wg sync.WaitGroup
	for p := range cfg.OffsetsPartitions {
		wg.Add(1)
		if err := c.LoadPartition(int32(p), func(error) { wg.Done() }); err != nil {
			b.Fatal(err)
		}
	}
	waitGroup(b, &wg, 10*time.Second)
	return c
}

// callSync sends req and waits for its response.
func callSync(b *testing.B, c *GroupCoordinator, req kmsg.Request) kmsg.Response {
	ch := make(chan kmsg.Response, 1)
	if err := c.Handle(RequestInfo{ClientID: "bench"}, req, func(r kmsg.Response) { ch <- r }); err != nil {
		b.Fatal(err)
	}
	return <-ch
}

// BenchmarkRebalance measures one full rebalance round of a 100-member
// group: every member rejoins (the leader first, which forces the
// rebalance), the leader's JoinGroup response lists all members, everyone
// sends SyncGroup and gets its assignment once the group metadata is stored.
func BenchmarkRebalance(b *testing.B) {
	const n = 100
	c := benchCoordinator(b, 2)
	ids := make([]string, n)
	// joinAll has every member join and returns the new generation. In a
	// Stable group the leader goes first, forcing the rebalance; at setup
	// the new members go first and the leader completes the join phase.
	joinAll := func(leaderFirst bool) int32 {
		var wg sync.WaitGroup
		resps := make([]<-chan kmsg.Response, n)
		order := make([]int, 0, n)
		if leaderFirst {
			order = append(order, 0)
		}
		for i := 1; i < n; i++ {
			order = append(order, i)
		}
		if !leaderFirst {
			order = append(order, 0)
		}
		for _, i := range order {
			resps[i] = callAsync(c, joinReq("g", ids[i], 3), &wg)
		}
		waitGroup(b, &wg, 30*time.Second)
		var gen int32
		for i, ch := range resps {
			r := (<-ch).(*kmsg.JoinGroupResponse)
			if r.ErrorCode != 0 {
				b.Fatalf("join of member %d: %s", i, errName(r.ErrorCode))
			}
			ids[i], gen = r.MemberID, r.Generation
		}
		return gen
	}
	syncAll := func(gen int32) {
		var wg sync.WaitGroup
		resps := make([]<-chan kmsg.Response, 0, n)
		for i := n - 1; i >= 0; i-- {
			req := kmsg.NewPtrSyncGroupRequest()
			req.Version, req.Group, req.MemberID, req.Generation = 5, "g", ids[i], gen
			if i == 0 {
				for _, id := range ids {
					req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte("assignment")})
				}
			}
			resps = append(resps, callAsync(c, req, &wg))
		}
		waitGroup(b, &wg, 30*time.Second)
		for _, ch := range resps {
			if r := (<-ch).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 {
				b.Fatalf("sync: %s", errName(r.ErrorCode))
			}
		}
	}
	// Setup: the first member forms generation 1 alone, then all join.
	first := callSync(b, c, joinReq("g", "", 3)).(*kmsg.JoinGroupResponse)
	ids[0] = first.MemberID
	syncAll1 := kmsg.NewPtrSyncGroupRequest()
	syncAll1.Version, syncAll1.Group, syncAll1.MemberID, syncAll1.Generation = 5, "g", ids[0], first.Generation
	callSync(b, c, syncAll1)
	syncAll(joinAll(false))
	b.ResetTimer()
	for range b.N {
		syncAll(joinAll(true))
	}
}

// callAsync sends req; the returned channel delivers the response, and wg
// is done once it has been delivered.
func callAsync(c *GroupCoordinator, req kmsg.Request, wg *sync.WaitGroup) <-chan kmsg.Response {
	ch := make(chan kmsg.Response, 1)
	wg.Add(1)
	if err := c.Handle(RequestInfo{ClientID: "bench"}, req, func(r kmsg.Response) {
		ch <- r
		wg.Done()
	}); err != nil {
		panic(fmt.Sprintf("Handle: %v", err))
	}
	return ch
}

// BenchmarkOffsetCommit measures committed offset requests of 10 partitions
// each, answered after the in-memory store acknowledged the records: one
// member committing round trip after round trip, and many simple groups
// committing in parallel across the shards.
func BenchmarkOffsetCommit(b *testing.B) {
	commitReq := func(group, member string, gen int32, offset int64) *kmsg.OffsetCommitRequest {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 9, group, member, gen
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "topic"
		for p := range int32(10) {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, offset
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		return req
	}
	b.Run("member", func(b *testing.B) {
		c := benchCoordinator(b, 2)
		j := callSync(b, c, joinReq("g", "", 3)).(*kmsg.JoinGroupResponse)
		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, "g", j.MemberID, j.Generation
		callSync(b, c, sync)
		b.ResetTimer()
		for i := range b.N {
			r := callSync(b, c, commitReq("g", j.MemberID, j.Generation, int64(i))).(*kmsg.OffsetCommitResponse)
			if r.Topics[0].Partitions[0].ErrorCode != 0 {
				b.Fatalf("commit: %s", errName(r.Topics[0].Partitions[0].ErrorCode))
			}
		}
	})
	b.Run("parallel-groups", func(b *testing.B) {
		c := benchCoordinator(b, 2)
		var next atomic.Int32
		b.SetParallelism(8)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			group := fmt.Sprintf("simple-%d", next.Add(1))
			for i := int64(0); pb.Next(); i++ {
				r := callSync(b, c, commitReq(group, "", -1, i)).(*kmsg.OffsetCommitResponse)
				if r.Topics[0].Partitions[0].ErrorCode != 0 {
					b.Errorf("commit: %s", errName(r.Topics[0].Partitions[0].ErrorCode))
					return
				}
			}
		})
	})
}
