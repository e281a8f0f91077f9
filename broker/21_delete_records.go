package broker

// DeleteRecords (key 21), versions 0-2.
//
// Behavior: moves each partition's log start offset (low watermark) up to the requested offset; -1
// means the high watermark. Records below it are no longer served: fetches there get
// OFFSET_OUT_OF_RANGE, and the segments wholly below it are deleted by the next retention check,
// as in Kafka. An offset past the high watermark (or below -1) is OFFSET_OUT_OF_RANGE, a topic
// whose cleanup.policy lacks delete is POLICY_VIOLATION, an offset at or below the current start
// changes nothing and reports the current low watermark. With one replica there is no follower to
// wait for, so the timeout is not used. The log start offsets are checkpointed before the
// response, so a restart keeps them. A topic the principal may not DELETE answers
// TOPIC_AUTHORIZATION_FAILED for each of its partitions, as Kafka's.
//
// Version notes: v2 is flexible.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	rlog "ringbroker/log"
)

var deleteRecordsAPI = &api{key: kmsg.DeleteRecords, minVersion: 0, maxVersion: 2, keepsRequest: true, handle: handleDeleteRecords}

// deleteRecordsHighWatermark is the offset that asks to delete everything below the high
// watermark (DeleteRecordsRequest.HIGH_WATERMARK).
const deleteRecordsHighWatermark = -1

func handleDeleteRecords(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DeleteRecordsRequest)
	resp := kmsg.NewPtrDeleteRecordsResponse()
	tbl := b.parts.Load()
	im := b.meta.Image()
	moved := false
	deletable := rc.authorizer().topicChecks(acl.OpDelete)
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		topic := im.Topics[rt.Topic]
		denied := !deletable.may(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			var p *partition
			if topic != nil {
				p = tbl.leaderID(topic.ID, rp.Partition)
			}
			switch {
			case denied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case topic == nil || rp.Partition < 0 || int(rp.Partition) >= len(topic.Partitions):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p == nil:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				offset := rp.Offset
				if offset == deleteRecordsHighWatermark {
					offset = p.highWatermark()
				}
				if offset > p.highWatermark() {
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
					break
				}
				before := p.log().LogStartOffset()
				low, err := p.log().DeleteRecordsBefore(offset)
				if err != nil {
					sp.ErrorCode = deleteRecordsErrorCode(err).Code
					if !errors.Is(err, rlog.ErrOffsetOutOfRange) && !errors.Is(err, rlog.ErrPolicyViolation) {
						b.logger.Error("delete records", "topic", p.topic, "partition", p.index, "offset", rp.Offset, "err", err)
					}
					break
				}
				sp.LowWatermark = low
				moved = moved || low != before
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if moved {
		if err := b.writeCheckpoints(); err != nil {
			b.logger.Error("write log-start-offset checkpoint after DeleteRecords", "err", err)
		}
	}
	rc.respond(resp)
}

// deleteRecordsErrorCode maps a DeleteRecordsBefore error to Kafka's code.
func deleteRecordsErrorCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, rlog.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange
	case errors.Is(err, rlog.ErrPolicyViolation):
		return kerr.PolicyViolation
	case errors.Is(err, rlog.ErrClosed):
		return kerr.NotLeaderForPartition
	default:
		return kerr.KafkaStorageError
	}
}
