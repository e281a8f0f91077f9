package txn

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file writes a decided transaction's markers and completes it, as Kafka's
// TransactionMarkerChannelManager: every partition of the transaction gets a COMMIT or ABORT
// marker; those that fail are retried after MarkerRetryBackoff until they are written, the
// partition no longer exists, or the coordinator no longer owns the transactional id; then the
// transaction is written CompleteCommit or CompleteAbort with no partitions.

// writeMarkers sends the markers of m, which is PrepareCommit or PrepareAbort, to the partitions
// still without them.
func (s *shard) writeMarkers(part *partition, m *metadata) {
	m.markers = true
	ms := Markers{ProducerID: m.producerID, ProducerEpoch: m.producerEpoch, Commit: m.state == PrepareCommit,
		CoordinatorEpoch: part.epoch, Partitions: m.sortedPartitions()}
	if len(ms.Partitions) == 0 {
		s.completeTxn(part, m)
		return
	}
	s.c.markers.WriteMarkers(ms, func(failed []TopicPartition) {
		s.push(func(s *shard) { s.markersWritten(part, m, failed) })
	})
}

// markersWritten handles the outcome of one round of m's markers.
func (s *shard) markersWritten(part *partition, m *metadata, failed []TopicPartition) {
	if s.parts[part.id] != part || part.txns[m.id] != m {
		return
	}
	left := make(map[TopicPartition]struct{}, len(failed))
	for _, tp := range failed {
		if s.c.cfg.PartitionExists(tp.Topic, tp.Partition) {
			left[tp] = struct{}{}
		}
	}
	if len(left) == 0 {
		s.completeTxn(part, m)
		return
	}
	s.c.log.Warn("transaction markers not written, retrying", "transactional_id", m.id, "producer_id", m.producerID,
		"commit", m.state == PrepareCommit, "partitions", len(left))
	// The partitions that have their marker are not sent it again.
	m.partitions = left
	s.schedule(s.c.cfg.MarkerRetryBackoff, func() {
		if s.parts[part.id] == part && part.txns[m.id] == m {
			s.writeMarkers(part, m)
		}
	})
}

// completeTxn writes m's transaction complete once every marker is written.
func (s *shard) completeTxn(part *partition, m *metadata) {
	next := m.clone()
	next.markers = false
	next.fenceAbort = false
	next.state = CompleteAbort
	if m.state == PrepareCommit {
		next.state = CompleteCommit
	}
	next.partitions = make(map[TopicPartition]struct{})
	next.updatedMs = s.nowMs()
	if m.nextProducerID >= 0 {
		// A transaction version 2 producer whose epoch was exhausted continues with the new id.
		next.prevProducerID, next.producerID, next.producerEpoch = m.producerID, m.nextProducerID, 0
		next.nextProducerID = noProducerID
	}
	s.write(part, next, func(code *kerr.Error) {
		if code == nil || code == kerr.NotCoordinator {
			return
		}
		// The markers are written; only the state record failed. Try it again.
		s.schedule(s.c.cfg.MarkerRetryBackoff, func() {
			if s.parts[part.id] == part && part.txns[m.id] == m {
				s.completeTxn(part, m)
			}
		})
	})
}
