package broker

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
	"ringbroker/coord"
	"ringbroker/internal/recordbatch"
	"ringbroker/wire"
)

// This file is KIP-890 on the partition side, as Kafka's transaction.partition.verification:
// before a transactional batch that would begin its producer's transaction in a partition is
// written, the partition's leader asks the transaction coordinator whether the producer added the
// partition to its Ongoing transaction (AddPartitionsToTxn v5, VerifyOnly), or, for a transaction
// version 2 producer (Produce v12+ with transaction.version 2 finalized), adds it. A batch of a
// transaction that has ended, or of a zombie producer, is refused instead of beginning a
// transaction that nothing would ever end (a hanging transaction, holding the last stable offset
// back for ever).

// txnVerifyTimeout bounds the wait for the coordinator's answer.
const txnVerifyTimeout = 10 * time.Second

// unverifiedTxn is one partition of a Produce request to verify.
type unverifiedTxn struct {
	rp    *kmsg.ProduceRequestTopicPartition
	topic string
}

// verifyTxnPartitions returns the error of each partition of req whose transactional batch would
// begin a transaction here and that the coordinator did not verify: INVALID_TXN_STATE for a
// partition not in the producer's transaction, INVALID_PRODUCER_EPOCH for a fenced producer,
// NOT_ENOUGH_REPLICAS (which every client retries) while the coordinator cannot answer, as
// Kafka's AddPartitionsToTxnManager maps them. Nil when nothing needs verifying. Topics the
// principal may not write to (writable) are left out: they fail before any append.
func (b *Broker) verifyTxnPartitions(req *kmsg.ProduceRequest, im *meta.Image, tbl *partitionTable, writable *topicNames) map[*kmsg.ProduceRequestTopicPartition]*kerr.Error {
	if req.TransactionID == nil || !b.live().TxnPartitionVerification {
		return nil
	}
	var todo []unverifiedTxn
	pid, epoch := int64(-1), int16(-1)
	for i := range req.Topics {
		rt := &req.Topics[i]
		topic := im.Topics[rt.Topic]
		if req.Version >= 13 {
			topic = im.TopicsByID[meta.UUID(rt.TopicID)]
		}
		if topic == nil || !writable.may(topic.Name) {
			continue
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			batch := wire.Batch(rp.Records)
			if len(batch) < recordbatch.HeaderSize || !batch.IsTransactional() {
				continue
			}
			p := tbl.leaderID(topic.ID, rp.Partition)
			if p == nil || p.log().InTransaction(batch.ProducerID(), batch.ProducerEpoch()) {
				continue
			}
			pid, epoch = batch.ProducerID(), batch.ProducerEpoch()
			todo = append(todo, unverifiedTxn{rp: rp, topic: topic.Name})
		}
	}
	if len(todo) == 0 {
		return nil
	}
	// A Produce v12+ client of a cluster at transaction.version 2 adds no partition itself
	// (KIP-890 part 2): the leader adds it on its behalf (v5) instead of only verifying (v4,
	// whose refusal is INVALID_TXN_STATE, which clients of Produce before v12 know).
	add := req.Version >= 12 && featureLevel(im, featureTransactionVersion) >= 2
	verify := kmsg.NewPtrAddPartitionsToTxnRequest()
	verify.Version = 4
	if add {
		verify.Version = 5
	}
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = *req.TransactionID, pid, epoch, !add
	for _, u := range todo {
		if n := len(tx.Topics); n > 0 && tx.Topics[n-1].Topic == u.topic {
			tx.Topics[n-1].Partitions = append(tx.Topics[n-1].Partitions, u.rp.Partition)
			continue
		}
		t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		t.Topic, t.Partitions = u.topic, []int32{u.rp.Partition}
		tx.Topics = append(tx.Topics, t)
	}
	verify.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
	resp, err := b.askTxnCoordinator(*req.TransactionID, verify)
	out := make(map[*kmsg.ProduceRequestTopicPartition]*kerr.Error, len(todo))
	if err != nil {
		b.logger.Warn("verify transactional produce", "transactional_id", *req.TransactionID, "err", err)
		for _, u := range todo {
			out[u.rp] = kerr.NotEnoughReplicas
		}
		return out
	}
	codes := make(map[string]map[int32]int16)
	if len(resp.Transactions) == 1 {
		for _, t := range resp.Transactions[0].Topics {
			for _, p := range t.Partitions {
				if codes[t.Topic] == nil {
					codes[t.Topic] = make(map[int32]int16)
				}
				codes[t.Topic][p.Partition] = p.ErrorCode
			}
		}
	}
	for _, u := range todo {
		code, ok := codes[u.topic][u.rp.Partition]
		switch {
		case !ok:
			out[u.rp] = kerr.NotEnoughReplicas
		case code == 0:
		case add && code == kerr.ConcurrentTransactions.Code:
			// The producer's last transaction is still being completed: transaction version 2
			// clients retry this on Produce, as Kafka returns it to them.
			out[u.rp] = kerr.ConcurrentTransactions
		default:
			out[u.rp] = verifyError(code, kerr.NotEnoughReplicas)
		}
	}
	return out
}

// verifyError maps the coordinator's refusal code to the error of the request it verified:
// retriable, the coordinator being unavailable, busy or moving; INVALID_PRODUCER_EPOCH for a
// fenced producer; the coordinator's own error otherwise.
func verifyError(code int16, retriable *kerr.Error) *kerr.Error {
	switch code {
	case kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.ConcurrentTransactions.Code, kerr.UnknownServerError.Code:
		return retriable
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e
	}
	return kerr.InvalidTxnState
}

// errNoTxnCoordinator is returned when the transactional id's coordinator is not known.
var errNoTxnCoordinator = errors.New("the transaction coordinator is not available")

// askTxnCoordinator sends req to the transaction coordinator of id, this broker's own or
// another's, and waits for its answer.
func (b *Broker) askTxnCoordinator(id string, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	coordinator, ok := txnCoordinatorFor(b, id, "")
	if !ok {
		return nil, errNoTxnCoordinator
	}
	if coordinator.nodeID != b.cfg.NodeID {
		resp := kmsg.NewPtrAddPartitionsToTxnResponse()
		if err := b.verifySender.send(coordinator.nodeID, req, resp, txnVerifyTimeout); err != nil {
			return nil, err
		}
		return resp, nil
	}
	answer := make(chan kmsg.Response, 1)
	if err := b.txns.Handle(req, func(r kmsg.Response) { answer <- r }); err != nil {
		return nil, err
	}
	select {
	case r := <-answer:
		return r.(*kmsg.AddPartitionsToTxnResponse), nil
	case <-time.After(txnVerifyTimeout):
		return nil, errors.New("the transaction coordinator did not answer")
	}
}

// verifyTxnOffsetCommit has the transaction coordinator verify that the group's
// __consumer_offsets partition is in the producer's transaction (AddOffsetsToTxn added it), or,
// for TxnOffsetCommit v5 at transaction.version 2, whose client sends no AddOffsetsToTxn, add it;
// it returns the request's error otherwise, as Kafka's group coordinator service does.
func (b *Broker) verifyTxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest) *kerr.Error {
	if !b.live().TxnPartitionVerification {
		return nil
	}
	add := req.Version >= 5 && featureLevel(b.meta.Image(), featureTransactionVersion) >= 2
	ask := kmsg.NewPtrAddPartitionsToTxnRequest()
	ask.Version = 4
	if add {
		ask.Version = 5
	}
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = req.TransactionalID, req.ProducerID, req.ProducerEpoch, !add
	t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	t.Topic, t.Partitions = offsetsTopic, []int32{coord.PartitionFor(req.Group, int(b.cfg.OffsetsPartitions))}
	tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{t}
	ask.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
	resp, err := b.askTxnCoordinator(req.TransactionalID, ask)
	if err != nil {
		b.logger.Warn("verify transactional offset commit", "transactional_id", req.TransactionalID, "group", req.Group, "err", err)
		return kerr.CoordinatorLoadInProgress
	}
	var code int16
	if len(resp.Transactions) == 1 && len(resp.Transactions[0].Topics) == 1 && len(resp.Transactions[0].Topics[0].Partitions) == 1 {
		code = resp.Transactions[0].Topics[0].Partitions[0].ErrorCode
	} else {
		code = kerr.CoordinatorLoadInProgress.Code
	}
	if code == 0 {
		return nil
	}
	// COORDINATOR_LOAD_IN_PROGRESS is retriable for TxnOffsetCommit clients, which keep their
	// group coordinator.
	return verifyError(code, kerr.CoordinatorLoadInProgress)
}

// txnOffsetCommitError answers every partition of req with code.
func txnOffsetCommitError(req *kmsg.TxnOffsetCommitRequest, code *kerr.Error) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
