package coord

import (
	"cmp"
	"slices"
)

// This file expires committed offsets after offsets.retention.minutes and
// removes Empty groups left without offsets, as Kafka's periodic
// cleanupGroupMetadata does. As in Kafka, an offset with a pending
// transactional offset of its partition does not expire, and a group with
// pending transactional offsets is not removed.

func (s *shard) scheduleRetention() {
	s.schedule(s.c.cfg.OffsetsRetentionCheckInterval, func() {
		s.expireOffsets()
		s.scheduleRetention()
	})
}

// expireOffsets runs one retention pass over the shard's loaded partitions.
func (s *shard) expireOffsets() {
	now := s.nowMs()
	retention := s.c.cfg.OffsetsRetention.Milliseconds()
	for _, part := range s.parts {
		if !part.loaded {
			continue
		}
		var records []Record
		groups := make([]*group, 0, len(part.groups))
		for _, g := range part.groups {
			groups = append(groups, g)
		}
		slices.SortFunc(groups, func(a, b *group) int { return cmp.Compare(a.id, b.id) })
		for _, g := range groups {
			expired := g.expiredOffsets(now, retention)
			for _, tp := range expired {
				delete(g.offsets, tp)
			}
			remove := g.is(stateEmpty) && len(g.offsets) == 0 && len(g.pending) == 0 && len(g.pendingCommits) == 0 && len(g.txnOffsets) == 0
			if len(expired) == 0 && !remove {
				continue
			}
			if remove {
				records = append(records, deletionRecords(g, expired)...)
				s.removeGroup(part, g)
			} else {
				records = append(records, deletionRecords(&group{id: g.id}, expired)...)
			}
			s.c.log.Info("expired group offsets", "group", g.id, "offsets", len(expired), "group_removed", remove)
		}
		if len(records) > 0 {
			p := part.id
			s.appendRecords(p, records, func(err error) {
				if err != nil {
					s.c.log.Warn("failed to write offset expiration tombstones", "partition", p, "error", err)
				}
			})
		}
	}
}

// expiredOffsets returns the offsets of g due to expire at now, following
// Kafka's GroupMetadata.removeExpiredOffsets: an Empty group's offsets expire
// retention after the group became empty; a Stable consumer group's offsets
// of unsubscribed topics retention after their commit; a simple group's
// offsets retention after their commit. Offsets with an explicit expire
// timestamp expire then. Offsets being written, or with a pending
// transactional offset, never expire.
func (g *group) expiredOffsets(now, retention int64) []topicPartition {
	var base func(committedOffset) int64
	var subscribed map[string]struct{}
	switch {
	case g.protocolType != "" && g.is(stateEmpty):
		base = func(o committedOffset) int64 {
			if g.stateTime >= 0 {
				return g.stateTime
			}
			return o.commitTimestamp
		}
	case g.protocolType == protocolTypeConsumer && g.subscribed != nil && g.is(stateStable):
		base = func(o committedOffset) int64 { return o.commitTimestamp }
		subscribed = g.subscribed
	case g.protocolType == "":
		base = func(o committedOffset) int64 { return o.commitTimestamp }
	default:
		return nil
	}
	var out []topicPartition
	for tp, o := range g.offsets {
		if _, ok := subscribed[tp.topic]; ok || g.pendingCommits[tp] > 0 || g.hasTxnOffset(tp) {
			continue
		}
		if o.expireTimestamp >= 0 && now >= o.expireTimestamp || o.expireTimestamp < 0 && now-base(o) >= retention {
			out = append(out, tp)
		}
	}
	return out
}
