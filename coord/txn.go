package coord

// Transactional offsets, as Kafka's OffsetMetadataManager keeps them (KIP-98, KIP-447):
// TxnOffsetCommit writes offsets in a transactional batch of the producer; they stay pending,
// unseen by OffsetFetch (require_stable answers UNSTABLE_OFFSET_COMMIT for them), until the
// producer's transaction marker lands on the partition. A COMMIT marker makes each the
// committed offset unless a plain commit was written after it; an ABORT marker drops them. A
// tombstone (DeleteGroups, OffsetDelete) drops the pending offsets of its partition too, and
// offset expiration spares partitions with pending offsets and groups with open transactions.

import (
	"fmt"
	"maps"
	"slices"
)

// txnMarker is a transaction marker written to a __consumer_offsets partition.
type txnMarker struct {
	producerID int64
	commit     bool
	// offset is the marker's log offset: it ends the producer's offsets written before it.
	offset int64
}

// CompleteTransaction ends producerID's transaction on __consumer_offsets partition p: the
// broker calls it once the transaction's COMMIT (commit true) or ABORT marker, written at
// markerOffset, has reached the high watermark. The producer's pending offsets written before
// the marker become the group's committed offsets, or are dropped. A partition this
// coordinator does not own is ignored (its next load replays the marker); one still loading
// applies the marker once loaded.
func (g *GroupCoordinator) CompleteTransaction(p int32, producerID int64, commit bool, markerOffset int64) error {
	if p < 0 || int(p) >= g.cfg.OffsetsPartitions {
		return fmt.Errorf("complete transaction of producer %d on partition %d: out of range [0, %d)", producerID, p, g.cfg.OffsetsPartitions)
	}
	m := txnMarker{producerID: producerID, commit: commit, offset: markerOffset}
	return g.post(g.shardFor(p), func(s *shard) {
		switch part := s.parts[p]; {
		case part == nil:
			// Not owned here: the partition's next load replays the marker.
		case !part.loaded:
			part.markers = append(part.markers, m)
		default:
			s.completeTxn(part, m)
		}
	})
}

// addTxnOffsets adds producerID's pending offsets of group id in part, creating the group (a
// simple group, as Kafka's replay of an offset record does) if it does not exist.
func (s *shard) addTxnOffsets(part *partition, id string, producerID int64, offs map[topicPartition]committedOffset) {
	g := part.groups[id]
	if g == nil {
		g = newGroup(id, part.id, s.nowMs())
		g.subscribed = nil
		part.groups[id] = g
	}
	pending := g.txnOffsets[producerID]
	if pending == nil {
		pending = make(map[topicPartition]committedOffset, len(offs))
		g.txnOffsets[producerID] = pending
	}
	maps.Copy(pending, offs)
	groups := part.txnGroups[producerID]
	if groups == nil {
		groups = make(map[string]struct{})
		part.txnGroups[producerID] = groups
	}
	groups[id] = struct{}{}
}

// completeTxn applies marker m to its producer's pending offsets in part that were written
// before it, as Kafka's replayEndTransactionMarker: on commit each replaces the group's
// committed offset unless that one was written later.
func (s *shard) completeTxn(part *partition, m txnMarker) {
	groups := part.txnGroups[m.producerID]
	for _, id := range slices.Sorted(maps.Keys(groups)) {
		g := part.groups[id]
		if g == nil {
			delete(groups, id)
			continue
		}
		pending := g.txnOffsets[m.producerID]
		n := 0
		for tp, o := range pending {
			if o.recordOffset > m.offset {
				continue // the producer's next transaction
			}
			delete(pending, tp)
			n++
			if cur, ok := g.offsets[tp]; m.commit && (!ok || o.recordOffset > cur.recordOffset) {
				g.offsets[tp] = o
			}
		}
		if len(pending) == 0 {
			delete(g.txnOffsets, m.producerID)
			delete(groups, id)
		}
		if n > 0 {
			s.c.log.Debug("completed transactional offsets", "group", id, "producer_id", m.producerID, "commit", m.commit, "offsets", n)
		}
	}
	if len(groups) == 0 {
		delete(part.txnGroups, m.producerID)
	}
}

// hasTxnOffset reports whether an open transaction holds a pending offset of tp in g.
func (g *group) hasTxnOffset(tp topicPartition) bool {
	for _, pending := range g.txnOffsets {
		if _, ok := pending[tp]; ok {
			return true
		}
	}
	return false
}

// dropTxnOffsets removes the pending offsets of tp, as a tombstone does in Kafka's replay.
func (g *group) dropTxnOffsets(tp topicPartition) {
	for pid, pending := range g.txnOffsets {
		delete(pending, tp)
		if len(pending) == 0 {
			delete(g.txnOffsets, pid)
		}
	}
}

// txnPartitions returns the partitions with pending offsets in g that have no committed
// offset: those a group deletion writes tombstones for besides its committed offsets.
func (g *group) txnPartitions() []topicPartition {
	var out []topicPartition
	seen := make(map[topicPartition]struct{})
	for _, pending := range g.txnOffsets {
		for tp := range pending {
			if _, ok := g.offsets[tp]; ok {
				continue
			}
			if _, ok := seen[tp]; !ok {
				seen[tp] = struct{}{}
				out = append(out, tp)
			}
		}
	}
	return out
}
