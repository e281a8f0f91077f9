package coord

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// CommittedOffset is one offset a group has committed for a partition, as CommittedOffsets
// reports it.
type CommittedOffset struct {
	Group     string
	Topic     string
	Partition int32
	Offset    int64
}

// CommittedOffsets returns the committed offsets of every group of the __consumer_offsets
// partitions this coordinator has loaded, sorted by group, topic and partition, so that the
// broker can export each group's lag as kafka_exporter does. Each shard reads its own groups
// on its goroutine; offsets of transactions not yet committed are left out, as OffsetFetch
// leaves them out. It waits for every shard, or returns ctx's error once ctx is done, and
// returns ErrClosed after Close.
func (g *GroupCoordinator) CommittedOffsets(ctx context.Context) ([]CommittedOffset, error) {
	parts := make(chan []CommittedOffset, len(g.shards))
	for _, s := range g.shards {
		if err := g.post(s, func(s *shard) { parts <- s.committedOffsets() }); err != nil {
			return nil, fmt.Errorf("committed offsets: %w", err)
		}
	}
	var out []CommittedOffset
	for range g.shards {
		select {
		case p := <-parts:
			out = append(out, p...)
		case <-ctx.Done():
			return nil, fmt.Errorf("committed offsets of %d shards: %w", len(g.shards), ctx.Err())
		}
	}
	slices.SortFunc(out, func(a, b CommittedOffset) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}

// committedOffsets lists the committed offsets of the groups of the shard's loaded partitions.
func (s *shard) committedOffsets() []CommittedOffset {
	var out []CommittedOffset
	for _, part := range s.parts {
		if !part.loaded {
			continue
		}
		for _, grp := range part.groups {
			for tp, o := range grp.offsets {
				out = append(out, CommittedOffset{Group: grp.id, Topic: tp.topic, Partition: tp.partition, Offset: o.offset})
			}
		}
	}
	return out
}
