package txn

// EndTxn (key 26), versions 0-4.
//
// Behavior: as Kafka's TransactionCoordinator.handleEndTransaction for transaction version 1. An
// Ongoing transaction is written PrepareCommit or PrepareAbort and the request answered; the
// markers are then written to every partition of the transaction, and the transaction is written
// CompleteCommit or CompleteAbort once they all are. A retry of a decision already complete is
// answered NONE; of one being written, CONCURRENT_TRANSACTIONS; the opposite decision, or any on
// an Empty transaction, INVALID_TXN_STATE. An unknown id or another producer id is
// INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2).
//
// Version notes: v5 (transaction version 2, KIP-890 part 2: an epoch bump per transaction) is not
// served yet.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var endTxnAPI = API{Key: kmsg.EndTxn, MinVersion: 0, MaxVersion: 4, handle: handleEndTxn}

func handleEndTxn(c *Coordinator, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	fail := func(code *kerr.Error) {
		if code == kerr.ProducerFenced && req.Version < 2 {
			code = kerr.InvalidProducerEpoch
		}
		if code != nil {
			resp.ErrorCode = code.Code
		}
		respond(resp)
	}
	if req.TransactionalID == "" {
		fail(kerr.InvalidRequest)
		return
	}
	c.onShardOf(req.TransactionalID, func(s *shard, p int32) {
		part, code := s.owned(p)
		if code != nil {
			fail(code)
			return
		}
		m := part.txns[req.TransactionalID]
		switch {
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
		decided, deciding := CompleteAbort, PrepareAbort
		if req.Commit {
			decided, deciding = CompleteCommit, PrepareCommit
		}
		switch m.state {
		case Ongoing:
		case decided:
			fail(nil)
			return
		case deciding:
			fail(kerr.ConcurrentTransactions)
			return
		default:
			fail(kerr.InvalidTxnState)
			return
		}
		next := m.clone()
		next.state = deciding
		next.updatedMs = s.nowMs()
		s.write(part, next, func(code *kerr.Error) {
			fail(code)
			if code == nil {
				s.writeMarkers(part, next)
			}
		})
	})
}
