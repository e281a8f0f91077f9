package txn

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// This file aborts transactions open longer than their timeout, as Kafka's
// abortTimedOutTransactions, and removes transactional ids idle longer than
// transactional.id.expiration.ms, as its removeExpiredTransactionalIds.

func (s *shard) scheduleTimeouts() {
	s.schedule(s.c.cfg.AbortTimedOutInterval, func() {
		s.abortTimedOut()
		s.scheduleTimeouts()
	})
}

func (s *shard) scheduleExpiration() {
	s.schedule(s.c.cfg.RemoveExpiredInterval, func() {
		s.removeExpired()
		s.scheduleExpiration()
	})
}

// abortTimedOut fences and aborts every Ongoing transaction started more than its timeout ago.
func (s *shard) abortTimedOut() {
	now := s.nowMs()
	s.eachLoaded(func(part *partition, m *metadata) {
		if m.state != Ongoing || m.pending || m.startMs < 0 || now < m.startMs+int64(m.timeoutMs) {
			return
		}
		s.c.log.Info("aborting transaction past its timeout", "transactional_id", m.id, "producer_id", m.producerID,
			"producer_epoch", m.producerEpoch, "timeout_ms", m.timeoutMs)
		s.fenceAndAbort(part, m)
	})
}

// removeExpired writes tombstones for transactional ids with no transaction that were last
// updated more than IDExpiration ago.
func (s *shard) removeExpired() {
	now := s.nowMs()
	expiration := s.c.cfg.IDExpiration.Milliseconds()
	s.eachLoaded(func(part *partition, m *metadata) {
		idle := m.state == Empty || m.state == CompleteCommit || m.state == CompleteAbort
		if !idle || m.pending || now < m.updatedMs+expiration {
			return
		}
		next := m.clone()
		next.state = Dead
		s.write(part, next, func(*kerr.Error) {})
	})
}

// eachLoaded calls fn for every transactional id of the shard's loaded partitions, in partition
// and id order.
func (s *shard) eachLoaded(fn func(*partition, *metadata)) {
	for _, p := range slices.Sorted(maps.Keys(s.parts)) {
		part := s.parts[p]
		if !part.loaded {
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(part.txns)) {
			fn(part, part.txns[id])
		}
	}
}
