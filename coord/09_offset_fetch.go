package coord

// OffsetFetch (key 9), versions 1-10.
//
// Behavior: returns committed offsets regardless of the group's state, since
// simple groups commit without membership. Requested partitions without a
// commit get offset -1; a null topic list (v2+) returns every committed
// offset. With require_stable (v7+, KIP-447), partitions with a commit still
// being written or a transactional commit still pending get
// UNSTABLE_OFFSET_COMMIT; without it, pending transactional offsets are not
// seen.
//
// Version notes: v0 is not served (Kafka 4.0 removed it, KIP-896); v1
// reports group errors in every partition; v2-v7 in a top-level error code;
// v8+ fetch many groups at once, each with its own error (groups on
// different shards are fetched in parallel); v9's member id and epoch only
// matter to KIP-848 groups (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH or
// FENCED_MEMBER_EPOCH unless they name a current member); v10 addresses
// topics by id (UNKNOWN_TOPIC_ID for unknown ids; topics without an id any
// more are left out of an all-topics fetch).

import (
	"cmp"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var offsetFetchAPI = API{Key: kmsg.OffsetFetch, MinVersion: 1, MaxVersion: 10, handle: handleOffsetFetch}

func handleOffsetFetch(g *GroupCoordinator, _ RequestInfo, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		names := make([]string, len(req.Groups))
		for i, rg := range req.Groups {
			names[i] = rg.Group
		}
		eachGroup(g, names, func(s *shard, p int32, i int) kmsg.OffsetFetchResponseGroup {
			rg := req.Groups[i]
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group = rg.Group
			topics, unknownIDs := rg.Topics, [][16]byte(nil)
			var view Topics
			if req.Version >= 10 {
				view = s.topics()
				topics, unknownIDs = topicNamesForFetch(view, rg.Topics)
			}
			errc := s.checkFetchMember(p, rg.Group, rg.MemberID, rg.MemberEpoch)
			var got []kmsg.OffsetFetchResponseGroupTopic
			if errc == nil {
				errc, got = s.fetchOffsets(p, rg.Group, topics, rg.Topics == nil, req.RequireStable)
			}
			if req.Version >= 10 && errc == nil {
				got = topicIDsForFetch(view, got, unknownIDs, rg.Topics)
			}
			sg.ErrorCode = errCode(errc)
			sg.Topics = got
			return sg
		}, func(groups []kmsg.OffsetFetchResponseGroup) {
			resp.Groups = groups
			respond(resp)
		})
		return
	}
	var topics []kmsg.OffsetFetchRequestGroupTopic
	for _, rt := range req.Topics {
		topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: rt.Topic, Partitions: rt.Partitions})
	}
	all := req.Topics == nil && req.Version >= 2
	p := PartitionFor(req.Group, g.cfg.OffsetsPartitions)
	g.shardFor(p).push(func(s *shard) {
		errc, got := s.fetchOffsets(p, req.Group, topics, all, req.RequireStable)
		if errc != nil && req.Version < 2 {
			// No top-level error field: report it in every partition.
			got = requestedUnknown(topics)
			for i := range got {
				for j := range got[i].Partitions {
					got[i].Partitions[j].ErrorCode = errc.Code
				}
			}
		}
		resp.ErrorCode = errCode(errc)
		for _, t := range got {
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = t.Topic
			for _, gp := range t.Partitions {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		respond(resp)
	})
}

// fetchOffsets returns the group-level error or the offsets of the requested
// topics (all committed offsets if all is set).
func (s *shard) fetchOffsets(p int32, groupID string, topics []kmsg.OffsetFetchRequestGroupTopic, all, requireStable bool) (*kerr.Error, []kmsg.OffsetFetchResponseGroupTopic) {
	g, errc := s.ownedGroup(p, groupID)
	if errc != nil {
		return errc, nil
	}
	if g == nil || g.is(stateDead) {
		if all {
			return nil, nil
		}
		return nil, requestedUnknown(topics)
	}
	fill := func(tp topicPartition, sp *kmsg.OffsetFetchResponseGroupTopicPartition) {
		if requireStable && (g.pendingCommits[tp] > 0 || g.hasTxnOffset(tp)) {
			sp.ErrorCode = kerr.UnstableOffsetCommit.Code
			return
		}
		if o, ok := g.offsets[tp]; ok {
			sp.Offset, sp.LeaderEpoch = o.offset, o.leaderEpoch
			md := o.metadata
			sp.Metadata = &md
		}
	}
	if !all {
		out := requestedUnknown(topics)
		for i := range out {
			for j := range out[i].Partitions {
				sp := &out[i].Partitions[j]
				fill(topicPartition{out[i].Topic, sp.Partition}, sp)
			}
		}
		return nil, out
	}
	tps := slices.SortedFunc(maps.Keys(g.offsets), func(a, b topicPartition) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	var out []kmsg.OffsetFetchResponseGroupTopic
	for _, tp := range tps {
		if len(out) == 0 || out[len(out)-1].Topic != tp.topic {
			t := kmsg.NewOffsetFetchResponseGroupTopic()
			t.Topic = tp.topic
			out = append(out, t)
		}
		sp := unknownOffset(tp.partition)
		fill(tp, &sp)
		out[len(out)-1].Partitions = append(out[len(out)-1].Partitions, sp)
	}
	return nil, out
}

// requestedUnknown lists the requested partitions with no committed offset.
func requestedUnknown(topics []kmsg.OffsetFetchRequestGroupTopic) []kmsg.OffsetFetchResponseGroupTopic {
	out := make([]kmsg.OffsetFetchResponseGroupTopic, 0, len(topics))
	for _, rt := range topics {
		t := kmsg.NewOffsetFetchResponseGroupTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			t.Partitions = append(t.Partitions, unknownOffset(p))
		}
		out = append(out, t)
	}
	return out
}

func unknownOffset(partition int32) kmsg.OffsetFetchResponseGroupTopicPartition {
	sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
	sp.Partition = partition
	sp.Offset = -1
	sp.LeaderEpoch = -1
	empty := ""
	sp.Metadata = &empty
	return sp
}

// checkFetchMember validates the member id and epoch of an OffsetFetch v9+
// against a KIP-848 group, as Kafka's ConsumerGroup.validateOffsetFetch; an
// admin (no member id, epoch -1) and classic groups pass.
func (s *shard) checkFetchMember(p int32, groupID string, memberID *string, epoch int32) *kerr.Error {
	g := s.lookup(p, groupID)
	if g == nil || g.cons == nil || memberID == nil && epoch < 0 {
		return nil
	}
	m := g.cons.byID[stringOr(memberID, "")]
	if m == nil {
		return kerr.UnknownMemberID
	}
	return checkMemberEpoch(epoch, m.epoch)
}

// topicNamesForFetch maps a v10 request's topic ids to names; ids the view
// does not know are returned apart.
func topicNamesForFetch(view Topics, topics []kmsg.OffsetFetchRequestGroupTopic) ([]kmsg.OffsetFetchRequestGroupTopic, [][16]byte) {
	if topics == nil {
		return nil, nil
	}
	var unknown [][16]byte
	out := make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(topics))
	for _, rt := range topics {
		var ti TopicInfo
		ok := view != nil
		if ok {
			ti, ok = view.ByID(rt.TopicID)
		}
		if !ok {
			unknown = append(unknown, rt.TopicID)
			continue
		}
		out = append(out, kmsg.OffsetFetchRequestGroupTopic{Topic: ti.Name, TopicID: rt.TopicID, Partitions: rt.Partitions})
	}
	return out, unknown
}

// topicIDsForFetch sets the topic ids of a v10 response: unknown requested
// ids get UNKNOWN_TOPIC_ID in each partition, and topics of an all-topics
// fetch that no longer exist are left out.
func topicIDsForFetch(view Topics, got []kmsg.OffsetFetchResponseGroupTopic, unknownIDs [][16]byte, req []kmsg.OffsetFetchRequestGroupTopic) []kmsg.OffsetFetchResponseGroupTopic {
	out := got[:0]
	for _, t := range got {
		if view == nil {
			continue
		}
		ti, ok := view.ByName(t.Topic)
		if !ok {
			continue
		}
		t.TopicID = ti.ID
		out = append(out, t)
	}
	for _, id := range unknownIDs {
		for _, rt := range req {
			if rt.TopicID != id {
				continue
			}
			t := kmsg.NewOffsetFetchResponseGroupTopic()
			t.TopicID = id
			for _, p := range rt.Partitions {
				sp := unknownOffset(p)
				sp.ErrorCode = kerr.UnknownTopicID.Code
				t.Partitions = append(t.Partitions, sp)
			}
			out = append(out, t)
			break
		}
	}
	return out
}
