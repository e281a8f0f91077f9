package txn

// InitProducerId (key 22), versions 0-5, for requests with a transactional id (the broker hands
// out ids without one itself).
//
// Behavior: as Kafka's TransactionCoordinator.handleInitProducerId. A new transactional id gets a
// new producer id at epoch 0; a known one has its epoch bumped, fencing the producer that had it,
// and moves to a new producer id once the epoch is exhausted. A transaction still open is aborted
// first: its epoch is bumped and its ABORT markers written, and the request gets
// CONCURRENT_TRANSACTIONS, as while any transaction of the id is being prepared or completed,
// so that the client retries. An empty transactional id is INVALID_REQUEST; a timeout above
// transaction.max.timeout.ms (or not positive) INVALID_TRANSACTION_TIMEOUT.
//
// Version notes: v3 adds the producer id and epoch the client had (KIP-360): the same epoch is
// bumped again, the previous one (a retry of a bump that succeeded) gets the current epoch
// back, any other is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4, as Kafka's KafkaApis).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var initProducerIDAPI = API{Key: kmsg.InitProducerID, MinVersion: 0, MaxVersion: 5, handle: handleInitProducerID}

func handleInitProducerID(c *Coordinator, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = noProducerID, noProducerEpoch
	fail := func(code *kerr.Error) {
		if code == kerr.ProducerFenced && req.Version < 4 {
			code = kerr.InvalidProducerEpoch
		}
		resp.ErrorCode = code.Code
		respond(resp)
	}
	switch {
	case req.TransactionalID == nil:
		fail(kerr.InvalidRequest)
		return
	case *req.TransactionalID == "":
		fail(kerr.InvalidRequest)
		return
	case req.TransactionTimeoutMillis <= 0 || int64(req.TransactionTimeoutMillis) > c.cfg.MaxTimeout.Milliseconds():
		fail(kerr.InvalidTransactionTimeout)
		return
	}
	id := *req.TransactionalID
	expectedID, expectedEpoch := int64(noProducerID), int16(noProducerEpoch)
	if req.Version >= 3 {
		expectedID, expectedEpoch = req.ProducerID, req.ProducerEpoch
	}
	// Never lent: a new producer id may wait for the metadata log.
	c.queueOnShardOf(id, func(s *shard, p int32) {
		part, code := s.owned(p)
		if code != nil {
			fail(code)
			return
		}
		m := part.txns[id]
		if m == nil {
			pid, err := c.cfg.NewProducerID()
			if err != nil {
				c.log.Error("allocate producer id", "transactional_id", id, "err", err)
				fail(kerr.CoordinatorNotAvailable)
				return
			}
			now := s.nowMs()
			m = &metadata{id: id, producerID: pid, prevProducerID: noProducerID, nextProducerID: noProducerID, producerEpoch: noProducerEpoch,
				lastProducerEpoch: noProducerEpoch, timeoutMs: req.TransactionTimeoutMillis, state: Empty,
				partitions: make(map[TopicPartition]struct{}), startMs: -1, updatedMs: now}
			part.txns[id] = m
		}
		next, code := s.prepareInit(m, req.TransactionTimeoutMillis, expectedID, expectedEpoch)
		switch {
		case code == kerr.ConcurrentTransactions && m.state == Ongoing && !m.pending:
			s.fenceAndAbort(part, m)
			fail(code)
			return
		case code != nil:
			fail(code)
			return
		case next == m:
			// A retry of a bump that succeeded: the current epoch again, nothing written.
			resp.ProducerID, resp.ProducerEpoch = m.producerID, m.producerEpoch
			respond(resp)
			return
		}
		s.write(part, next, func(code *kerr.Error) {
			if code != nil {
				fail(code)
				return
			}
			resp.ProducerID, resp.ProducerEpoch = next.producerID, next.producerEpoch
			respond(resp)
		})
	})
}

// prepareInit returns the state InitProducerId moves m to, m itself for a retry that changes
// nothing, or the request's error: CONCURRENT_TRANSACTIONS while a transaction is open or
// being decided (an open one is then aborted by the caller).
func (s *shard) prepareInit(m *metadata, timeoutMs int32, expectedID int64, expectedEpoch int16) (*metadata, *kerr.Error) {
	if m.pending || m.markers {
		return nil, kerr.ConcurrentTransactions
	}
	if expectedID != noProducerID && expectedID != m.producerID &&
		!(expectedID == m.prevProducerID && epochExhausted(expectedEpoch)) {
		return nil, kerr.ProducerFenced
	}
	switch m.state {
	case PrepareCommit, PrepareAbort, Ongoing, PrepareEpochFence:
		return nil, kerr.ConcurrentTransactions
	case Dead:
		return nil, kerr.ConcurrentTransactions
	}
	next := m.clone()
	next.timeoutMs = timeoutMs
	next.state = Empty
	next.partitions = make(map[TopicPartition]struct{})
	next.startMs = -1
	next.updatedMs = s.nowMs()
	switch {
	case epochExhausted(m.producerEpoch):
		pid, err := s.c.cfg.NewProducerID()
		if err != nil {
			s.c.log.Error("allocate producer id", "transactional_id", m.id, "err", err)
			return nil, kerr.CoordinatorNotAvailable
		}
		next.prevProducerID = m.producerID
		next.producerID = pid
		next.producerEpoch = 0
		next.lastProducerEpoch = noProducerEpoch
	case m.producerEpoch == noProducerEpoch || expectedEpoch == noProducerEpoch || expectedEpoch == m.producerEpoch:
		next.producerEpoch = m.producerEpoch + 1
		next.lastProducerEpoch = noProducerEpoch
		if expectedEpoch != noProducerEpoch {
			next.lastProducerEpoch = m.producerEpoch
		}
	case expectedEpoch == m.lastProducerEpoch:
		return m, nil
	default:
		return nil, kerr.ProducerFenced
	}
	return next, nil
}

// fenceAndAbort aborts m's open transaction on the coordinator's own account: the epoch is bumped,
// fencing the producer that opened it, and ABORT markers are written with the new epoch, as
// Kafka's prepareAbortOrFenceTransaction.
func (s *shard) fenceAndAbort(part *partition, m *metadata) {
	next := m.clone()
	if !epochExhausted(m.producerEpoch) {
		next.producerEpoch = m.producerEpoch + 1
	}
	next.lastProducerEpoch = noProducerEpoch
	next.state = PrepareAbort
	next.fenceAbort = true
	next.updatedMs = s.nowMs()
	s.write(part, next, func(code *kerr.Error) {
		if code != nil {
			s.c.log.Warn("abort transaction", "transactional_id", m.id, "err", code)
			return
		}
		s.writeMarkers(part, next)
	})
}
