package coord

// TxnOffsetCommit (key 28), versions 0-5.
//
// Behavior: a transactional producer commits a group's offsets as part of its transaction
// (KafkaProducer.sendOffsetsToTransaction), as Kafka's
// OffsetMetadataManager.commitTransactionalOffset. The offsets are written to the group's
// __consumer_offsets partition in a transactional batch carrying the request's producer id and
// epoch, and the request is answered once that batch is durable; they stay pending, invisible
// to OffsetFetch, until the producer's COMMIT marker lands on the partition (an ABORT marker
// drops them; see txn.go). Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION alone,
// metadata longer than offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE; an empty group id
// answers INVALID_GROUP_ID. The member fields are checked only when given: a classic group
// wants a current member (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and generation
// (ILLEGAL_GENERATION), and unlike OffsetCommit accepts the commit during a rebalance; a
// KIP-848 group wants a member at its epoch (ILLEGAL_GENERATION otherwise, as Kafka maps
// STALE_MEMBER_EPOCH). Without them the commit is accepted, creating a simple group if the
// group does not exist; a generation for a group that does not exist is ILLEGAL_GENERATION. A
// producer epoch older than the partition's fails with INVALID_PRODUCER_EPOCH from the log.
// Write failures map as Kafka's coordinator runtime maps them (NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE, UNKNOWN_SERVER_ERROR for a batch too large).
//
// Version notes: v1 is v0; v2 adds the leader epoch; v3 (flexible) adds the group generation,
// member id and group.instance.id (KIP-447); v4 allows TRANSACTION_ABORTABLE (KIP-890); v5 is
// transaction version 2's, whose client sends no AddOffsetsToTxn. The broker, before handing
// the request here, has the transaction coordinator verify (v4 and below) or add (v5) the
// group's partition in the producer's transaction (broker/txnverify.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var txnOffsetCommitAPI = API{Key: kmsg.TxnOffsetCommit, MinVersion: 0, MaxVersion: 5, handle: handleTxnOffsetCommit}

func handleTxnOffsetCommit(g *GroupCoordinator, _ RequestInfo, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.TxnOffsetCommitRequest)
	if req.Version < 3 {
		req.Generation, req.MemberID, req.InstanceID = -1, "", nil
	}
	g.toGroup(req.Group, func(s *shard, p int32) { s.txnOffsetCommit(p, req, respond) })
}

func (s *shard) txnOffsetCommit(p int32, req *kmsg.TxnOffsetCommitRequest, respond func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	now := s.nowMs()
	// commits are the partitions of known topics, in request order.
	var commits []offsetWrite
	resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		*st = kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			// Unknown partitions fail alone, as Kafka's request handler filters them before
			// the coordinator sees the request.
			if exists := s.c.cfg.PartitionExists; exists != nil && !exists(rt.Topic, rp.Partition) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			o := committedOffset{offset: rp.Offset, leaderEpoch: -1, metadata: stringOr(rp.Metadata, ""), commitTimestamp: now, expireTimestamp: -1}
			if req.Version >= 2 {
				o.leaderEpoch = rp.LeaderEpoch
			}
			commits = append(commits, offsetWrite{tp: topicPartition{rt.Topic, rp.Partition}, o: o, code: &sp.ErrorCode})
		}
	}
	fail := func(e *kerr.Error) {
		for _, c := range commits {
			*c.code = e.Code
		}
		respond(resp)
	}
	if len(commits) == 0 {
		respond(resp)
		return
	}
	part, errc := s.ownedFor(p, req.Group)
	if errc != nil {
		fail(errc)
		return
	}
	g := part.groups[req.Group]
	if g == nil {
		if req.Generation >= 0 {
			fail(kerr.IllegalGeneration)
			return
		}
		g = newGroup(req.Group, p, now)
		g.subscribed = nil
		part.groups[req.Group] = g
	}
	if errc := validateTxnCommit(g, req); errc != nil {
		fail(errc)
		return
	}

	written := make([]offsetWrite, 0, len(commits))
	records := make([]Record, 0, len(commits))
	for _, c := range commits {
		if len(c.o.metadata) > s.c.cfg.OffsetMetadataMaxBytes {
			*c.code = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		written = append(written, c)
		records = append(records, offsetCommitRecord(g.id, c.tp, c.o))
	}
	if len(records) == 0 {
		respond(resp)
		return
	}
	// An unload fails the append first, so part is still loaded when the offsets are.
	s.writeOffsets(g, p, req.ProducerID, req.ProducerEpoch, written, records, appendGroupError, func(applied []offsetWrite) {
		offs := make(map[topicPartition]committedOffset, len(applied))
		for _, c := range applied {
			offs[c.tp] = c.o
		}
		s.addTxnOffsets(part, req.Group, req.ProducerID, offs)
	}, func() { respond(resp) })
}

// validateTxnCommit checks who may commit transactionally, as Kafka's
// validateOffsetCommit with isTransactional set.
func validateTxnCommit(g *group, req *kmsg.TxnOffsetCommitRequest) *kerr.Error {
	if g.cons != nil && !g.is(stateDead) {
		return g.cons.validateTxnCommit(req)
	}
	return g.validateClassicCommit(req.MemberID, req.InstanceID, req.Generation, true)
}

// validateTxnCommit checks who may commit transactionally to a consumer group, as Kafka's
// ConsumerGroup.validateOffsetCommit with isTransactional set: anyone while the group has no
// members or when the request names no member, else a member at its current epoch; the
// STALE_MEMBER_EPOCH Kafka's consumer groups answer becomes ILLEGAL_GENERATION.
func (cg *consumerGroup) validateTxnCommit(req *kmsg.TxnOffsetCommitRequest) *kerr.Error {
	if req.Generation < 0 && len(cg.members) == 0 {
		return nil
	}
	if req.Generation == -1 && req.MemberID == "" && req.InstanceID == nil {
		return nil
	}
	m := cg.byID[req.MemberID]
	if m == nil {
		return kerr.UnknownMemberID
	}
	if req.Generation != m.epoch {
		return kerr.IllegalGeneration
	}
	return nil
}
