package txn

// AddPartitionsToTxn (key 24), versions 0-5.
//
// Behavior: as Kafka's TransactionCoordinator.handleAddPartitionsToTransaction. The partitions
// join the producer's transaction, which becomes Ongoing (its start time set if it was not);
// partitions already in an Ongoing transaction are answered without a write. Every partition
// gets the request's error: INVALID_PRODUCER_ID_MAPPING for an id the coordinator does not know
// or with another producer id, PRODUCER_FENCED for another epoch (INVALID_PRODUCER_EPOCH before
// v2), CONCURRENT_TRANSACTIONS while the transaction is being decided or written; partitions of
// topics that do not exist get UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED.
//
// Version notes: v4+ batch transactions and are what partition leaders send (KIP-890): without
// VerifyOnly, on behalf of a transaction version 2 producer, which adds no partition itself;
// a transaction with VerifyOnly set is not changed: each partition answers NONE if it is in the
// producer's Ongoing transaction and INVALID_TXN_STATE otherwise (TRANSACTION_ABORTABLE from v5
// when the epoch matches but the partition is not in it).

import (
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var addPartitionsToTxnAPI = API{Key: kmsg.AddPartitionsToTxn, MinVersion: 0, MaxVersion: 5, handle: handleAddPartitionsToTxn}

// txnPartitions is one transaction's request to add (or verify) partitions, in request order.
type txnPartitions struct {
	id         string
	producerID int64
	epoch      int16
	verifyOnly bool
	topics     []string
	partitions [][]int32
}

// answer is a per-partition error code, in the request's topic and partition order.
type answer [][]int16

func handleAddPartitionsToTxn(c *Coordinator, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		tp := txnPartitions{id: req.TransactionalID, producerID: req.ProducerID, epoch: req.ProducerEpoch}
		for _, t := range req.Topics {
			tp.topics = append(tp.topics, t.Topic)
			tp.partitions = append(tp.partitions, t.Partitions)
		}
		c.addPartitions(tp, req.Version, func(a answer) {
			for i, t := range tp.topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = t
				for j, p := range tp.partitions[i] {
					rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, a[i][j]
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			respond(resp)
		})
		return
	}
	resp.Transactions = make([]kmsg.AddPartitionsToTxnResponseTransaction, len(req.Transactions))
	if len(req.Transactions) == 0 {
		respond(resp)
		return
	}
	// Each transaction is answered on its own shard, into its own slot; the last to finish
	// responds.
	var left atomic.Int32
	left.Store(int32(len(req.Transactions)))
	for i, t := range req.Transactions {
		tp := txnPartitions{id: t.TransactionalID, producerID: t.ProducerID, epoch: t.ProducerEpoch, verifyOnly: t.VerifyOnly}
		for _, rt := range t.Topics {
			tp.topics = append(tp.topics, rt.Topic)
			tp.partitions = append(tp.partitions, rt.Partitions)
		}
		c.addPartitions(tp, req.Version, func(a answer) {
			out := kmsg.NewAddPartitionsToTxnResponseTransaction()
			out.TransactionalID = tp.id
			for j, topic := range tp.topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rt.Topic = topic
				for k, p := range tp.partitions[j] {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition, rp.ErrorCode = p, a[j][k]
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
			resp.Transactions[i] = out
			if left.Add(-1) == 0 {
				respond(resp)
			}
		})
	}
}

// uniform answers every partition of tp with code.
func (tp *txnPartitions) uniform(code int16) answer {
	a := make(answer, len(tp.topics))
	for i := range tp.topics {
		a[i] = make([]int16, len(tp.partitions[i]))
		for j := range a[i] {
			a[i][j] = code
		}
	}
	return a
}

// addPartitions adds (or verifies) tp's partitions and calls then with each one's error.
func (c *Coordinator) addPartitions(tp txnPartitions, version int16, then func(answer)) {
	fail := func(code *kerr.Error) {
		if code == kerr.ProducerFenced && version < 2 {
			code = kerr.InvalidProducerEpoch
		}
		then(tp.uniform(code.Code))
	}
	if tp.id == "" {
		fail(kerr.InvalidRequest)
		return
	}
	if !tp.verifyOnly {
		a := tp.uniform(kerr.OperationNotAttempted.Code)
		unknown := false
		for i, t := range tp.topics {
			for j, p := range tp.partitions[i] {
				if !c.cfg.PartitionExists(t, p) {
					a[i][j] = kerr.UnknownTopicOrPartition.Code
					unknown = true
				}
			}
		}
		if unknown {
			then(a)
			return
		}
	}
	retried := false
	var attempt func(s *shard, p int32)
	attempt = func(s *shard, p int32) {
		part, code := s.owned(p)
		if code != nil {
			fail(code)
			return
		}
		m := part.txns[tp.id]
		switch {
		case m != nil && m.nextProducerID >= 0 && m.nextProducerID == tp.producerID:
			// A transaction version 2 producer on its new id before its last transaction completes.
			fail(kerr.ConcurrentTransactions)
			return
		case m == nil || m.producerID != tp.producerID:
			fail(kerr.InvalidProducerIDMapping)
			return
		case m.producerEpoch != tp.epoch:
			fail(kerr.ProducerFenced)
			return
		case tp.verifyOnly:
			then(s.verify(m, tp, version))
			return
		case m.pending:
			// Partition leaders add the partitions of one transaction at once (transaction
			// version 2): each waits for the write before it instead of failing.
			m.waiters = append(m.waiters, func() { attempt(s, p) })
			return
		case (m.markers || m.state == PrepareCommit || m.state == PrepareAbort) && !retried:
			// The producer's previous transaction is being completed: rather than have the
			// client back off (CONCURRENT_TRANSACTIONS), wait for it, up to addWaitMax.
			s.park(m, func() {
				retried = true
				attempt(s, p)
			})
			return
		case m.markers || m.state == PrepareCommit || m.state == PrepareAbort || m.state == PrepareEpochFence:
			fail(kerr.ConcurrentTransactions)
			return
		case m.state == Dead:
			fail(kerr.InvalidTxnState)
			return
		}
		next := m.clone()
		added := false
		for i, t := range tp.topics {
			for _, p := range tp.partitions[i] {
				k := TopicPartition{t, p}
				if _, ok := next.partitions[k]; !ok {
					next.partitions[k] = struct{}{}
					added = true
				}
			}
		}
		if !added && m.state == Ongoing {
			then(tp.uniform(0))
			return
		}
		now := s.nowMs()
		if m.state != Ongoing {
			next.startMs = now
		}
		next.state = Ongoing
		next.updatedMs = now
		s.write(part, next, func(code *kerr.Error) {
			if code != nil {
				fail(code)
				return
			}
			then(tp.uniform(0))
		})
	}
	c.onShardOf(tp.id, attempt)
}

// verify answers whether each partition of tp is in m's Ongoing transaction.
func (s *shard) verify(m *metadata, tp txnPartitions, version int16) answer {
	a := tp.uniform(0)
	for i, t := range tp.topics {
		for j, p := range tp.partitions[i] {
			if _, ok := m.partitions[TopicPartition{t, p}]; ok && m.state == Ongoing {
				continue
			}
			a[i][j] = kerr.InvalidTxnState.Code
			if version >= 5 {
				a[i][j] = kerr.TransactionAbortable.Code
			}
		}
	}
	return a
}

// addWaitMax bounds how long an AddPartitionsToTxn waits for the producer's previous transaction
// to complete before it is answered CONCURRENT_TRANSACTIONS.
const addWaitMax = 2 * time.Second

// park runs fn once m's current write finishes or addWaitMax passes, whichever comes first.
func (s *shard) park(m *metadata, fn func()) {
	done := false
	once := func() {
		if !done {
			done = true
			fn()
		}
	}
	m.waiters = append(m.waiters, once)
	s.schedule(addWaitMax, once)
}
