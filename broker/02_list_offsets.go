package broker

// ListOffsets (key 2), versions 1-11.
//
// Behavior: timestamp -2 is the log start offset (earliest), -1 the high watermark (latest; the
// last stable offset for isolation read_committed), -4 the earliest local
// offset (the log start: there is no tiered storage); a timestamp >= 0 finds the first batch whose
// max timestamp is at or after it, through the time index. Partitions are checked against the
// client's current leader epoch; a partition whose log dir is offline is KAFKA_STORAGE_ERROR. A
// topic the principal may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED for each of its
// partitions, as Kafka's.
//
// Version notes: v7 adds -3 (max timestamp), the last offset of the batch with the largest
// timestamp; -5 and -6 (tiered-storage offsets, v9 and v11) answer -1 as Kafka does without
// tiered storage.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

var listOffsetsAPI = &api{key: kmsg.ListOffsets, minVersion: 1, maxVersion: 11, handle: handleListOffsets}

func handleListOffsets(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.ListOffsetsRequest)
	resp := kmsg.NewPtrListOffsetsResponse()
	tbl := b.parts.Load()
	im := b.meta.Image()
	describable := rc.authorizer().topicChecks(acl.OpDescribe)
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		topic := im.Topics[rt.Topic]
		denied := !describable.may(rt.Topic)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp = -1
			sp.Offset = -1
			var p *partition
			if topic != nil {
				p = tbl.leaderID(topic.ID, rp.Partition)
			}
			switch {
			case denied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case p == nil && topic != nil && tbl.offlineAt(topic.ID, rp.Partition):
				sp.ErrorCode = kerr.KafkaStorageError.Code
			case p == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case checkLeaderEpoch(topic, rp.Partition, rp.CurrentLeaderEpoch) != nil:
				sp.ErrorCode = checkLeaderEpoch(topic, rp.Partition, rp.CurrentLeaderEpoch).Code
			case p.offline():
				sp.ErrorCode = kerr.KafkaStorageError.Code
			default:
				sp.LeaderEpoch = leaderEpochOf(topic, rp.Partition)
				switch ts := rp.Timestamp; {
				case ts == -2 || ts == -4:
					sp.Offset = p.log().LogStartOffset()
				case ts == -1 && req.IsolationLevel == 1:
					sp.Offset = p.log().LastStableOffset(p.highWatermark())
				case ts == -1:
					sp.Offset = p.highWatermark()
				case ts == -3:
					if off, t, ok := p.log().MaxTimestampOffset(); ok {
						sp.Offset, sp.Timestamp = off, t
					}
				case ts == -5 || ts == -6:
				case ts >= 0:
					off, t, ok := p.log().OffsetForTimestamp(ts)
					if ok {
						sp.Offset, sp.Timestamp = off, t
					}
				default:
					sp.ErrorCode = kerr.InvalidRequest.Code
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	rc.respond(resp)
}

// leaderEpochOf is the partition's leader epoch in the image, or -1.
func leaderEpochOf(t *meta.Topic, index int32) int32 {
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return -1
	}
	return t.Partitions[index].LeaderEpoch
}
