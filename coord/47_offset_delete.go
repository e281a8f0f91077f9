package coord

// OffsetDelete (key 47), version 0 (KIP-496).
//
// Behavior: deletes committed offsets of a group. An Empty group may delete
// any; a consumer group with members may delete offsets of topics none of
// its members subscribes to (GROUP_SUBSCRIBED_TO_TOPIC for the others);
// other groups with members get NON_EMPTY_GROUP. A tombstone is written for
// a committed offset or one pending in a transaction (dropping it, as in
// Kafka). The response waits for the tombstones to be durable.
//
// Version notes: only v0 exists.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var offsetDeleteAPI = API{Key: kmsg.OffsetDelete, MinVersion: 0, MaxVersion: 0, handle: handleOffsetDelete}

func handleOffsetDelete(g *GroupCoordinator, _ RequestInfo, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.OffsetDeleteRequest)
	g.toGroup(req.Group, func(s *shard, p int32) { s.offsetDelete(p, req, respond) })
}

func (s *shard) offsetDelete(p int32, req *kmsg.OffsetDeleteRequest, respond func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	fail := func(e *kerr.Error) {
		resp.ErrorCode = e.Code
		respond(resp)
	}
	part, errc := s.ownedFor(p, req.Group)
	if errc != nil {
		fail(errc)
		return
	}
	g := part.groups[req.Group]
	if g == nil || g.is(stateDead) {
		fail(kerr.GroupIDNotFound)
		return
	}
	if !g.is(stateEmpty) && g.protocolType != protocolTypeConsumer {
		fail(kerr.NonEmptyGroup)
		return
	}
	var deleted []topicPartition
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		_, subscribed := g.subscribed[rt.Topic]
		subscribed = subscribed && !g.is(stateEmpty)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			tp := topicPartition{rt.Topic, rp.Partition}
			if subscribed {
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			} else if _, ok := g.offsets[tp]; ok || g.hasTxnOffset(tp) {
				delete(g.offsets, tp)
				g.dropTxnOffsets(tp)
				deleted = append(deleted, tp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(deleted) == 0 {
		respond(resp)
		return
	}
	var recs []Record
	for _, tp := range deleted {
		recs = append(recs, offsetTombstone(g.id, tp))
	}
	s.appendRecords(p, recs, func(err error) {
		if err != nil {
			fail(appendOffsetError(err))
			return
		}
		respond(resp)
	})
}
