package txn

// EndTxn (key 26), versions 0-5.
//
// Behavior: as Kafka's TransactionCoordinator.handleEndTransaction. An Ongoing transaction is
// written PrepareCommit or PrepareAbort and the request answered; the markers are then written to
// every partition of the transaction, and the transaction is written CompleteCommit or
// CompleteAbort once they all are. A retry of a decision already complete is answered NONE; of
// one being written, CONCURRENT_TRANSACTIONS; the opposite decision, or any on an Empty
// transaction, INVALID_TXN_STATE. An unknown id or another producer id is
// INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2).
//
// Version notes: v5 is transaction version 2 (KIP-890 part 2): the decision bumps the producer's
// epoch (to a new producer id once the epoch is exhausted), the markers carry the new epoch,
// and the response returns it, so that nothing of the producer's next transaction can be taken
// for this one's. A retry with the epoch before the bump gets the decision's outcome and the
// new epoch; an abort without an Ongoing transaction (every produce failed before adding a
// partition) bumps the epoch and completes at once.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var endTxnAPI = API{Key: kmsg.EndTxn, MinVersion: 0, MaxVersion: 5, handle: handleEndTxn}

func handleEndTxn(c *Coordinator, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = noProducerID, noProducerEpoch
	fail := func(code *kerr.Error) {
		if code == kerr.ProducerFenced && req.Version < 2 {
			code = kerr.InvalidProducerEpoch
		}
		if code != nil {
			resp.ErrorCode = code.Code
		}
		respond(resp)
	}
	// succeed answers NONE with the producer id and epoch of m's next transaction (v5).
	succeed := func(m *metadata) {
		resp.ProducerID, resp.ProducerEpoch = m.producerID, m.producerEpoch
		if m.nextProducerID >= 0 {
			resp.ProducerID, resp.ProducerEpoch = m.nextProducerID, 0
		}
		respond(resp)
	}
	if req.TransactionalID == "" {
		fail(kerr.InvalidRequest)
		return
	}
	tv2 := req.Version >= 5
	var attempt func(s *shard, p int32)
	attempt = func(s *shard, p int32) {
		part, code := s.owned(p)
		if code != nil {
			fail(code)
			return
		}
		m := part.txns[req.TransactionalID]
		if tv2 && m != nil && epochExhausted(m.producerEpoch) && s.handOff(func(s *shard) { attempt(s, p) }) {
			// The bump allocates a producer id, which may wait for the metadata log.
			return
		}
		decided, deciding := CompleteAbort, PrepareAbort
		if req.Commit {
			decided, deciding = CompleteCommit, PrepareCommit
		}
		if tv2 && m != nil && isBumpedRetry(m, req.ProducerID, req.ProducerEpoch) {
			switch m.state {
			case decided:
				succeed(m)
			case deciding:
				fail(kerr.ConcurrentTransactions)
			case CompleteCommit, CompleteAbort, PrepareCommit, PrepareAbort:
				// The other decision: a commit of a transaction the coordinator aborted at its
				// timeout, for one.
				fail(kerr.InvalidTxnState)
			default:
				fail(kerr.ProducerFenced)
			}
			return
		}
		switch {
		case m != nil && m.nextProducerID >= 0 && m.nextProducerID == req.ProducerID:
			// The producer continues with its new id before the transaction it ended completes.
			fail(kerr.ConcurrentTransactions)
			return
		case m == nil || m.producerID != req.ProducerID:
			fail(kerr.InvalidProducerIDMapping)
			return
		case m.producerEpoch != req.ProducerEpoch:
			fail(kerr.ProducerFenced)
			return
		case m.pending:
			fail(kerr.ConcurrentTransactions)
			return
		}
		switch {
		case m.state == Ongoing:
		case tv2 && !req.Commit && (m.state == Empty || m.state == CompleteCommit || m.state == CompleteAbort):
			s.abortEmpty(part, m, succeed, fail)
			return
		case m.state == decided && !tv2:
			fail(nil)
			return
		case m.state == deciding || (tv2 && m.markers):
			fail(kerr.ConcurrentTransactions)
			return
		default:
			fail(kerr.InvalidTxnState)
			return
		}
		next := m.clone()
		next.state = deciding
		next.updatedMs = s.nowMs()
		if tv2 {
			next.clientTV = 2
			if err := s.bumpForNext(next, m); err != nil {
				fail(err)
				return
			}
		}
		s.write(part, next, func(code *kerr.Error) {
			if code != nil {
				fail(code)
				return
			}
			succeed(next)
			s.writeMarkers(part, next)
		})
	}
	c.onShardOf(req.TransactionalID, attempt)
}

// isBumpedRetry reports whether a transaction version 2 EndTxn from producer pid at epoch comes
// after a bump of m's epoch, by its decision or by the coordinator aborting it: the epoch just
// before the current one, or the exhausted epoch of the id m moved on from, as Kafka's
// retryOnEpochBump.
func isBumpedRetry(m *metadata, pid int64, epoch int16) bool {
	if pid == m.producerID && epoch == m.producerEpoch-1 {
		return true
	}
	return pid == m.prevProducerID && m.producerEpoch == 0 && epochExhausted(epoch)
}

// bumpForNext gives next, the decision of m's transaction, the epoch m's producer continues with:
// one more, or a new producer id when the epoch is exhausted (nextProducerID, used once the
// transaction completes; its markers keep the exhausted epoch).
func (s *shard) bumpForNext(next, m *metadata) *kerr.Error {
	if epochExhausted(m.producerEpoch) {
		pid, err := s.c.cfg.NewProducerID()
		if err != nil {
			s.c.log.Error("allocate producer id", "transactional_id", m.id, "err", err)
			return kerr.CoordinatorNotAvailable
		}
		next.nextProducerID = pid
		return nil
	}
	next.producerEpoch = m.producerEpoch + 1
	next.lastProducerEpoch = m.producerEpoch
	return nil
}

// abortEmpty answers a transaction version 2 abort of a transaction that added no partition:
// the epoch is bumped and the transaction written CompleteAbort, with no markers to write.
func (s *shard) abortEmpty(part *partition, m *metadata, succeed func(*metadata), fail func(*kerr.Error)) {
	next := m.clone()
	next.clientTV = 2
	if err := s.bumpForNext(next, m); err != nil {
		fail(err)
		return
	}
	if next.nextProducerID >= 0 {
		next.prevProducerID, next.producerID, next.producerEpoch = m.producerID, next.nextProducerID, 0
		next.nextProducerID = noProducerID
	}
	next.state = CompleteAbort
	next.partitions = make(map[TopicPartition]struct{})
	next.updatedMs = s.nowMs()
	s.write(part, next, func(code *kerr.Error) {
		if code != nil {
			fail(code)
			return
		}
		succeed(next)
	})
}
