package coord

// DeleteGroups (key 42), versions 0-3.
//
// Behavior: deletes Empty groups with their committed offsets: tombstones for
// every offset, committed or pending in a transaction (which drops it, as in
// Kafka), and (if the group ever had a generation) for its metadata are
// written to __consumer_offsets, and each group's result is returned once
// they are durable. Groups with members get NON_EMPTY_GROUP, unknown ones
// GROUP_ID_NOT_FOUND. Groups on different shards are deleted in parallel.
//
// Version notes: v2 is the first flexible version; v1 and v3 are the same
// as the versions before them.

import (
	"cmp"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var deleteGroupsAPI = API{Key: kmsg.DeleteGroups, MinVersion: 0, MaxVersion: 3, handle: handleDeleteGroups}

func handleDeleteGroups(g *GroupCoordinator, _ RequestInfo, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(req.Groups))
	for i, id := range req.Groups {
		resp.Groups[i] = kmsg.NewDeleteGroupsResponseGroup()
		resp.Groups[i].Group = id
	}
	// Each shard's part finishes when its tombstones are durable, which may
	// be after the part returns: count parts done, not parts run.
	shardsUsed := make(map[int]bool)
	for _, id := range req.Groups {
		shardsUsed[int(PartitionFor(id, g.cfg.OffsetsPartitions))%len(g.shards)] = true
	}
	var remaining atomic.Int32
	remaining.Store(int32(max(len(shardsUsed), 1)))
	partDone := func() {
		if remaining.Add(-1) == 0 {
			respond(resp)
		}
	}
	g.fanOut(req.Groups, func(s *shard, idx []int, parts []int32) {
		s.deleteGroups(req.Groups, idx, parts, resp.Groups, partDone)
	}, func() {
		if len(req.Groups) == 0 {
			partDone()
		}
	})
}

// deleteGroups deletes groups[idx[j]] (of partition parts[j]) and writes each
// result into results; done runs once all are final.
func (s *shard) deleteGroups(groups []string, idx []int, parts []int32, results []kmsg.DeleteGroupsResponseGroup, done func()) {
	byPartition := make(map[int32][]Record)
	waiting := make(map[int32][]int)
	for j, i := range idx {
		p := parts[j]
		part, errc := s.owned(p)
		if errc != nil {
			results[i].ErrorCode = errc.Code
			continue
		}
		g := part.groups[groups[i]]
		switch {
		case g == nil || g.is(stateDead):
			results[i].ErrorCode = kerr.GroupIDNotFound.Code
			continue
		case !g.is(stateEmpty):
			results[i].ErrorCode = kerr.NonEmptyGroup.Code
			continue
		}
		tps := append(slices.Collect(maps.Keys(g.offsets)), g.txnPartitions()...)
		byPartition[p] = append(byPartition[p], deletionRecords(g, tps)...)
		waiting[p] = append(waiting[p], i)
		s.removeGroup(part, g)
	}
	if len(byPartition) == 0 {
		done()
		return
	}
	left := len(byPartition)
	for _, p := range slices.Sorted(maps.Keys(byPartition)) {
		s.appendRecords(p, byPartition[p], func(err error) {
			if err != nil {
				code := appendGroupError(err).Code
				for _, i := range waiting[p] {
					results[i].ErrorCode = code
				}
			}
			if left--; left == 0 {
				done()
			}
		})
	}
}

// deletionRecords returns tombstones for the given offsets of g and, once the
// group has had a generation, for its metadata.
func deletionRecords(g *group, tps []topicPartition) []Record {
	slices.SortFunc(tps, func(a, b topicPartition) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	var recs []Record
	for _, tp := range tps {
		recs = append(recs, offsetTombstone(g.id, tp))
	}
	if g.generation > 0 {
		recs = append(recs, Record{Key: groupMetadataKey(g.id)})
	}
	if g.cons != nil {
		recs = append(recs, consumerGroupTombstones(g.id)...)
	}
	return recs
}

// removeGroup marks g Dead and forgets it.
func (s *shard) removeGroup(part *partition, g *group) {
	g.stopTimers()
	g.transition(stateDead, s.nowMs())
	delete(part.groups, g.id)
}
