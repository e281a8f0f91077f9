package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
	"ringbroker/coord"
	"ringbroker/internal/testutil"
)

// TestClusterGroupCoordinator consumes in a consumer group through a 3-node cluster: every node
// names the same coordinator, the leader of the group's __consumer_offsets partition, and the
// group reads everything and commits there.
func TestClusterGroupCoordinator(t *testing.T) {
	t.Parallel()
	bs := startInProcessCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	seeds := kgo.SeedBrokers(bs[0].Addr().String(), bs[1].Addr().String(), bs[2].Addr().String())
	admCl, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "cg"); err != nil {
		t.Fatal(err)
	}

	coordinators := map[int32]bool{}
	for _, b := range bs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()))
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "cluster-group"
		var resp *kmsg.FindCoordinatorResponse
		testutil.WaitFor(t, 30*time.Second, func() error {
			raw, err := cl.Broker(int(b.cfg.NodeID)).Request(ctx, req)
			if err != nil {
				return err
			}
			resp = raw.(*kmsg.FindCoordinatorResponse)
			if resp.ErrorCode != 0 {
				return fmt.Errorf("find coordinator on node %d: code %d", b.cfg.NodeID, resp.ErrorCode)
			}
			return nil
		})
		coordinators[resp.NodeID] = true
		cl.Close()
	}
	if len(coordinators) != 1 {
		t.Fatalf("nodes name different coordinators: %v", coordinators)
	}

	prod, err := kgo.NewClient(seeds, kgo.DefaultProduceTopic("cg"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 300
	for i := 0; i < n; i++ {
		prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(seeds, kgo.ConsumerGroup("cluster-group"), kgo.ConsumeTopics("cg"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v (after %d records)", err, len(seen))
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	offs, err := adm.FetchOffsets(ctx, "cluster-group")
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != n {
		t.Fatalf("committed offsets sum %d, want %d", committed, n)
	}
}

// TestCoordinatorFailover moves the leadership of a group's __consumer_offsets partition (RF 3
// by default in a cluster) and then stops its new leader: each time the old coordinator lets
// the group go (NOT_COORDINATOR), FindCoordinator names the new leader, and the offsets
// committed before are all there.
func TestCoordinatorFailover(t *testing.T) {
	t.Parallel()
	bs, ctx, adm := replicatedCluster(t, "cf", 4, nil)
	const group = "failover-group"
	// coordinatorOf asks for the group's coordinator until it is one of nodes and, when want
	// is not -1, node want (the node answering may not have applied the latest leader yet),
	// with another in-sync replica to move the leadership to.
	coordinatorOf := func(nodes []*Broker, want int32) (*Broker, meta.Partition) {
		t.Helper()
		var out *Broker
		var pm meta.Partition
		testutil.WaitFor(t, 30*time.Second, func() error {
			out = nil
			c := adm.FindGroupCoordinators(ctx, group)[group]
			if c.Err != nil {
				return c.Err
			}
			if want >= 0 && c.NodeID != want {
				return fmt.Errorf("coordinator is node %d; want %d", c.NodeID, want)
			}
			for _, b := range nodes {
				if b.cfg.NodeID == c.NodeID {
					out = b
				}
			}
			if out == nil {
				return fmt.Errorf("coordinator %d is not among the live nodes", c.NodeID)
			}
			im := out.meta.Image()
			ot := im.Topics[offsetsTopic]
			pm = ot.Partitions[coord.PartitionFor(group, len(ot.Partitions))]
			if len(pm.Replicas) != 3 {
				return fmt.Errorf("%s partition %d has replicas %v; want 3", offsetsTopic, pm.Index, pm.Replicas)
			}
			// Followers of a new partition that fall behind for replica.lag.time.max.ms
			// (a busy machine) leave the ISR until they catch up again.
			if len(pm.ISR) < 2 {
				return fmt.Errorf("%s partition %d has ISR %v; want a member besides the leader", offsetsTopic, pm.Index, pm.ISR)
			}
			return nil
		})
		return out, pm
	}
	commit := func(at int64) {
		t.Helper()
		os := kadm.Offsets{}
		for p := range int32(4) {
			os.Add(kadm.Offset{Topic: "cf", Partition: p, At: at, LeaderEpoch: -1})
		}
		testutil.WaitFor(t, 30*time.Second, func() error {
			resp, err := adm.CommitOffsets(ctx, group, os)
			if err != nil {
				return err
			}
			return resp.Error()
		})
	}
	checkCommitted := func(want int64) {
		t.Helper()
		testutil.WaitFor(t, 30*time.Second, func() error {
			offs, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				return err
			}
			if err := offs.Error(); err != nil {
				return err
			}
			for p := range int32(4) {
				if o, ok := offs.Lookup("cf", p); !ok || o.At != want {
					return fmt.Errorf("partition %d: committed %+v; want %d", p, o, want)
				}
			}
			return nil
		})
	}
	commit(10)
	first, pm := coordinatorOf(bs, -1)

	// Leadership moves (as a preferred election would) while the first coordinator runs on.
	var next int32 = -1
	for _, r := range pm.ISR {
		if r != first.cfg.NodeID {
			next = r
			break
		}
	}
	if next < 0 {
		t.Fatalf("%s partition %d has ISR %v; want a second member", offsetsTopic, pm.Index, pm.ISR)
	}
	ot := first.meta.Image().Topics[offsetsTopic]
	if _, err := first.meta.Commit([]meta.Record{pm.Next(ot.ID, next, pm.LeaderEpoch+1, pm.ISR)}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, func() error {
		req := kmsg.NewPtrOffsetFetchRequest()
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = group
		req.Groups = append(req.Groups, g)
		raw, err := kgo.NewClient(kgo.SeedBrokers(first.Addr().String()))
		if err != nil {
			return err
		}
		defer raw.Close()
		resp, err := raw.Broker(int(first.cfg.NodeID)).Request(ctx, req)
		if err != nil {
			return err
		}
		gs := resp.(*kmsg.OffsetFetchResponse).Groups
		if len(gs) != 1 || gs[0].ErrorCode != kerr.NotCoordinator.Code {
			return fmt.Errorf("old coordinator %d answers OffsetFetch with %+v; want NOT_COORDINATOR", first.cfg.NodeID, gs)
		}
		return nil
	})
	second, _ := coordinatorOf(bs, next)
	checkCommitted(10)
	commit(20)

	// The second coordinator stops: another ISR member takes over with every commit.
	rest := stopOne(ctx, t, bs, second)
	adm = newAdmin(t, clusterSeeds(rest))
	third, _ := coordinatorOf(rest, -1)
	if third == second {
		t.Fatalf("coordinator still the stopped node %d", second.cfg.NodeID)
	}
	checkCommitted(20)
	commit(30)
	checkCommitted(30)
}
