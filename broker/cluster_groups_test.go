package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// TestClusterGroupCoordinator consumes in a consumer group through a 3-node cluster: every node
// names the same coordinator, the leader of the group's __consumer_offsets partition, and the
// group reads everything and commits there.
func TestClusterGroupCoordinator(t *testing.T) {
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
