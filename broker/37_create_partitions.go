package broker

// CreatePartitions (key 37), versions 0-3.
//
// Behavior: raises a topic's partition count; the new partitions are placed on the registered
// brokers or where the request's assignment says. A count not above the current one is
// INVALID_PARTITIONS, as in Kafka. validate_only checks without committing. A topic the principal
// may not ALTER is TOPIC_AUTHORIZATION_FAILED, as Kafka's.
//
// Version notes: v2 is flexible; v1 and v3 are the same as the versions before them.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

var createPartitionsAPI = &api{key: kmsg.CreatePartitions, minVersion: 0, maxVersion: 3, keepsRequest: true, handle: handleCreatePartitions}

func handleCreatePartitions(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.CreatePartitionsRequest)
	resp := kmsg.NewPtrCreatePartitionsResponse()
	b.controllerMu.Lock()
	changed := false
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	alterable := rc.authorizer().topicChecks(acl.OpAlter)
	mq := rc.mutationQuota(req.ValidateOnly)
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		if seen[t.Topic] == 1 && !alterable.may(t.Topic) {
			// As Kafka's ControllerApis: after duplicates, before anything else, no message.
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		code, msg, recs := b.planPartitions(b.meta.Image(), t, seen[t.Topic] > 1)
		if code == nil && !mq.take(len(recs)) {
			code, msg = kerr.ThrottlingQuotaExceeded, throttledMessage
		}
		if code == nil && !req.ValidateOnly {
			if _, err := b.meta.Commit(recs); err != nil {
				code, msg = kerr.UnknownServerError, err.Error()
			} else {
				changed = true
			}
		}
		if code != nil {
			rt.ErrorCode = code.Code
			rt.ErrorMessage = kmsg.StringPtr(msg)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if changed {
		if err := b.syncPartitions(); err != nil {
			b.logger.Error("open new partitions", "err", err)
		}
	}
	b.controllerMu.Unlock()
	resp.ThrottleMillis = mq.throttle(rc)
	rc.respond(resp)
}

// planPartitions validates one CreatePartitions topic and returns the records that add them.
func (b *Broker) planPartitions(im *meta.Image, t kmsg.CreatePartitionsRequestTopic, duplicate bool) (*kerr.Error, string, []meta.Record) {
	if duplicate {
		return kerr.InvalidRequest, "Duplicate topic in request.", nil
	}
	topic := im.Topics[t.Topic]
	if topic == nil {
		return kerr.UnknownTopicOrPartition, "The topic '" + t.Topic + "' does not exist.", nil
	}
	cur := int32(len(topic.Partitions))
	if t.Count < cur {
		return kerr.InvalidPartitions, fmt.Sprintf("Topic currently has %d partitions, which is higher than the requested %d.", cur, t.Count), nil
	}
	if t.Count == cur {
		return kerr.InvalidPartitions, fmt.Sprintf("Topic already has %d partitions.", cur), nil
	}
	add := t.Count - cur
	if t.Assignment != nil && int32(len(t.Assignment)) != add {
		return kerr.InvalidReplicaAssignment, fmt.Sprintf("Increasing the number of partitions by %d but %d assignments provided.", add, len(t.Assignment)), nil
	}
	rf := len(topic.Partitions[0].Replicas)
	var placed [][]int32
	if t.Assignment != nil {
		for _, a := range t.Assignment {
			if msg := b.checkReplicas(im, a.Replicas); msg != "" {
				return kerr.InvalidReplicaAssignment, msg, nil
			}
			placed = append(placed, a.Replicas)
		}
		if msg := checkSameReplicationFactor(placed, rf); msg != "" {
			return kerr.InvalidReplicaAssignment, msg, nil
		}
	} else {
		var code *kerr.Error
		var msg string
		if placed, code, msg = b.placeReplicas(im, cur, add, int16(rf)); code != nil {
			return code, msg, nil
		}
	}
	var recs []meta.Record
	for i, reps := range placed {
		isr := liveReplicas(im, reps, b.cfg.NodeID)
		if len(isr) == 0 {
			return kerr.InvalidReplicaAssignment, fmt.Sprintf("All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", cur+int32(i)), nil
		}
		recs = append(recs, newPartitionRecord(topic.ID, meta.Partition{Index: cur + int32(i), Leader: isr[0], Replicas: reps, ISR: isr}))
	}
	return nil, "", recs
}
