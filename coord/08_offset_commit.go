package coord

// OffsetCommit (key 8), versions 2-10.
//
// Behavior: members commit with their member id and generation, which must be
// current; a request with generation -1 and no member id commits for a group
// that does not use the coordinator for membership (a "simple" group),
// allowed only while the group is Empty. Commits are answered after the
// offset records are durable in __consumer_offsets. Commits in a Stable or
// PreparingRebalance group also keep the member's session alive. In a
// KIP-848 consumer group the generation field carries the member epoch: a
// larger epoch than the member's is FENCED_MEMBER_EPOCH, a smaller one
// STALE_MEMBER_EPOCH, and members must commit with v9 or later.
//
// Version notes: v0-v1 are not served (Kafka 4.0 removed them, KIP-896);
// v2-v4 carry a retention time (stored as an explicit expire timestamp); v6
// adds leader epochs; v7 adds group.instance.id; v8 is flexible; v9 answers
// GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION for an unknown group; v10
// addresses topics by id (UNKNOWN_TOPIC_ID for ids the metadata image does
// not know).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var offsetCommitAPI = API{Key: kmsg.OffsetCommit, MinVersion: 2, MaxVersion: 10, handle: handleOffsetCommit}

func handleOffsetCommit(g *GroupCoordinator, _ RequestInfo, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.OffsetCommitRequest)
	g.toGroup(req.Group, func(s *shard, p int32) { s.offsetCommit(p, req, respond) })
}

func (s *shard) offsetCommit(p int32, req *kmsg.OffsetCommitRequest, respond func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	// codes points at every partition's error code in the response, in
	// request order.
	codes := make([]*int16, 0, n)
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, 0, len(req.Topics))
	if req.Version >= 10 {
		s.topicNamesForCommit(req)
	}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, 0, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			codes = append(codes, &resp.Topics[i].Partitions[j].ErrorCode)
		}
	}
	// Unknown partitions fail alone, as Kafka's request handler filters them
	// before the coordinator sees the request.
	valid := make([]bool, len(codes))
	k := 0
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if req.Version >= 10 && rt.Topic == "" {
				*codes[k] = kerr.UnknownTopicID.Code
			} else if exists := s.c.cfg.PartitionExists; exists != nil && !exists(rt.Topic, rp.Partition) {
				*codes[k] = kerr.UnknownTopicOrPartition.Code
			} else {
				valid[k] = true
			}
			k++
		}
	}
	failValid := func(e *kerr.Error) {
		for i, c := range codes {
			if valid[i] {
				*c = e.Code
			}
		}
		respond(resp)
	}

	part, errc := s.owned(p)
	if errc != nil {
		failValid(errc)
		return
	}
	g := part.groups[req.Group]
	if g == nil {
		switch {
		case req.Generation < 0:
			g = newGroup(req.Group, p, s.nowMs())
			g.subscribed = nil
			part.groups[req.Group] = g
		case req.Version >= 9:
			failValid(kerr.GroupIDNotFound)
			return
		default:
			failValid(kerr.IllegalGeneration)
			return
		}
	}
	if errc := validateCommit(g, req); errc != nil {
		failValid(errc)
		return
	}
	if g.cons == nil && (g.is(stateStable) || g.is(statePreparingRebalance)) {
		if m := g.byID[req.MemberID]; m != nil {
			s.rescheduleHeartbeat(g, m, m.sessionTimeout)
		}
	}

	now := s.nowMs()
	expire := int64(-1)
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis >= 0 {
		expire = now + req.RetentionTimeMillis
	}
	commits := make([]offsetWrite, 0, n)
	records := make([]Record, 0, n)
	k = 0
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			code := codes[k]
			ok := valid[k]
			k++
			if !ok {
				continue
			}
			md := ""
			if rp.Metadata != nil {
				md = *rp.Metadata
			}
			if len(md) > s.c.cfg.OffsetMetadataMaxBytes {
				*code = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			o := committedOffset{offset: rp.Offset, leaderEpoch: -1, metadata: md, commitTimestamp: now, expireTimestamp: expire}
			if req.Version >= 6 {
				o.leaderEpoch = rp.LeaderEpoch
			}
			if req.Version == 1 && rp.Timestamp != -1 {
				o.commitTimestamp = rp.Timestamp
			}
			tp := topicPartition{rt.Topic, rp.Partition}
			commits = append(commits, offsetWrite{tp, o, code})
			records = append(records, offsetCommitRecord(g.id, tp, o))
		}
	}
	if len(records) == 0 {
		respond(resp)
		return
	}
	s.writeOffsets(g, p, -1, -1, commits, records, appendOffsetError, func(written []offsetWrite) {
		if s.current(g) {
			for _, c := range written {
				g.offsets[c.tp] = c.o
			}
		}
	}, func() { respond(resp) })
}

// offsetWrite is one partition of an offset commit on its way to the log, with where its
// response error code goes.
type offsetWrite struct {
	tp   topicPartition
	o    committedOffset
	code *int16
}

// writeOffsets appends records, records[i] holding writes[i], to partition p of group g: a
// transactional batch of producerID when it is >= 0. Meanwhile the partitions count as being
// written, for require_stable. Once durable, applied gets the writes with their record
// offsets set; a failed append gives every write the code failed maps the error to. respond
// runs last, either way.
func (s *shard) writeOffsets(g *group, p int32, producerID int64, producerEpoch int16, writes []offsetWrite, records []Record,
	failed func(error) *kerr.Error, applied func([]offsetWrite), respond func()) {
	for _, w := range writes {
		g.pendingCommits[w.tp]++
	}
	s.appendBatch(p, producerID, producerEpoch, records, func(base int64, err error) {
		for _, w := range writes {
			if g.pendingCommits[w.tp]--; g.pendingCommits[w.tp] <= 0 {
				delete(g.pendingCommits, w.tp)
			}
		}
		if err != nil {
			code := failed(err).Code
			for _, w := range writes {
				*w.code = code
			}
			respond()
			return
		}
		for i := range writes {
			writes[i].o.recordOffset = base + int64(i)
		}
		applied(writes)
		respond()
	})
}

// validateCommit checks who may commit.
func validateCommit(g *group, req *kmsg.OffsetCommitRequest) *kerr.Error {
	if g.cons != nil && !g.is(stateDead) {
		return g.cons.validateCommit(req)
	}
	return g.validateClassicCommit(req.MemberID, req.InstanceID, req.Generation, false)
}

// validateClassicCommit checks who may commit to g, as Kafka's
// ClassicGroup.validateOffsetCommit. A transactional commit (TxnOffsetCommit,
// whose versions before 3 carry no member) need not name a member, and a
// rebalance does not stop it.
func (g *group) validateClassicCommit(memberID string, instanceID *string, generation int32, transactional bool) *kerr.Error {
	if g.is(stateDead) {
		return kerr.CoordinatorNotAvailable
	}
	if generation < 0 && g.is(stateEmpty) {
		return nil // a simple group, or an admin resetting offsets
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if errc := g.validateMember(memberID, instanceID); errc != nil {
			return errc
		}
		if generation != g.generation {
			return kerr.IllegalGeneration
		}
	} else if !transactional && !g.is(stateEmpty) {
		// Only members may commit for a group with members.
		return kerr.UnknownMemberID
	}
	if !transactional && g.is(stateCompletingRebalance) {
		// The member has the new generation but not its assignment yet.
		return kerr.RebalanceInProgress
	}
	return nil
}

// validateCommit checks who may commit to a consumer group, as Kafka's
// ConsumerGroup.validateOffsetCommit: without a member id and epoch only
// while the group has no members (an admin or a simple consumer), else a
// member at its current epoch.
func (cg *consumerGroup) validateCommit(req *kmsg.OffsetCommitRequest) *kerr.Error {
	if req.Generation < 0 && req.MemberID == "" && req.InstanceID == nil && len(cg.members) == 0 {
		return nil
	}
	m := cg.byID[req.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID
	case req.Version < 9:
		return kerr.UnsupportedVersion
	}
	return checkMemberEpoch(req.Generation, m.epoch)
}

// checkMemberEpoch compares a request's member epoch with the member's.
func checkMemberEpoch(got, want int32) *kerr.Error {
	switch {
	case got > want:
		return kerr.FencedMemberEpoch
	case got < want:
		return kerr.StaleMemberEpoch
	}
	return nil
}

// topicNamesForCommit fills the topic names of a v10 request from its topic
// ids; unknown ids keep an empty name.
func (s *shard) topicNamesForCommit(req *kmsg.OffsetCommitRequest) {
	topics := s.topics()
	for i := range req.Topics {
		req.Topics[i].Topic = ""
		if topics == nil {
			continue
		}
		if ti, ok := topics.ByID(req.Topics[i].TopicID); ok {
			req.Topics[i].Topic = ti.Name
		}
	}
}
