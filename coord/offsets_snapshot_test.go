package coord

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// simpleCommit commits offsets of topic's partitions (index: offset) for group as a consumer
// without a group membership does (generation -1), and fails the test on an error code.
func simpleCommit(t *testing.T, d *driver, group, topic string, offsets map[int32]int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 9, group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := d.roundTrip(RequestInfo{}, req).(*kmsg.OffsetCommitResponse)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("commit %s %s-%d: %s", group, topic, p.Partition, errName(p.ErrorCode))
		}
	}
}

// TestCommittedOffsets lists what groups on several shards committed, sorted, and drops the
// groups of a partition once it is unloaded.
func TestCommittedOffsets(t *testing.T) {
	cfg := testConfig()
	cfg.OffsetsPartitions = 4
	d := newDriver(t, cfg)
	simpleCommit(t, d, "g1", "t0", map[int32]int64{1: 7, 0: 5})
	simpleCommit(t, d, "g2", "t1", map[int32]int64{0: 3})
	simpleCommit(t, d, "g1", "a", map[int32]int64{2: 9})
	simpleCommit(t, d, "g1", "t0", map[int32]int64{0: 6})
	d.settle()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := d.c.CommittedOffsets(ctx)
	if err != nil {
		t.Fatalf("CommittedOffsets: %v", err)
	}
	want := []CommittedOffset{
		{Group: "g1", Topic: "a", Partition: 2, Offset: 9},
		{Group: "g1", Topic: "t0", Partition: 0, Offset: 6},
		{Group: "g1", Topic: "t0", Partition: 1, Offset: 7},
		{Group: "g2", Topic: "t1", Partition: 0, Offset: 3},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("CommittedOffsets = %+v; want %+v", got, want)
	}
	if PartitionFor("g1", 4) == PartitionFor("g2", 4) {
		t.Fatalf("g1 and g2 share partition %d; the test needs them apart", PartitionFor("g1", 4))
	}

	if err := d.c.UnloadPartition(PartitionFor("g1", 4)); err != nil {
		t.Fatal(err)
	}
	d.settle()
	got, err = d.c.CommittedOffsets(ctx)
	if err != nil {
		t.Fatalf("CommittedOffsets after unload: %v", err)
	}
	if !slices.Equal(got, want[3:]) {
		t.Fatalf("CommittedOffsets after unloading g1's partition = %+v; want %+v", got, want[3:])
	}

	d.c.Close()
	if _, err := d.c.CommittedOffsets(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("CommittedOffsets after Close: %v; want ErrClosed", err)
	}
}
