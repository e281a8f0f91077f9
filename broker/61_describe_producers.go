package broker

// DescribeProducers (key 61), version 0.
//
// Behavior: for each requested partition of which this broker holds a replica, the producers
// its log tracks (the idempotent-producer and transaction state of log/producer.go): producer
// id, epoch, last sequence, last timestamp, the coordinator epoch of its last marker and the
// first offset of its ongoing transaction (-1 when none), as Kafka's
// KafkaApis.handleDescribeProducersRequest and Partition.activeProducerState. Like Kafka, a
// follower answers from its own replica; admin clients ask the leader. Errors are per
// partition: INVALID_TOPIC_EXCEPTION for an illegal topic name, TOPIC_AUTHORIZATION_FAILED for a
// topic the principal may not READ and UNKNOWN_TOPIC_OR_PARTITION for a topic the metadata does
// not hold (each with Kafka's message), then
// UNKNOWN_TOPIC_OR_PARTITION for a partition index the topic does not have and
// NOT_LEADER_OR_FOLLOWER for a partition without a replica here (no message). Producers are
// listed by producer id; Kafka lists them in its map's order.
//
// Version notes: v0 is flexible.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

var describeProducersAPI = &api{key: kmsg.DescribeProducers, minVersion: 0, maxVersion: 0, handle: handleDescribeProducers}

func handleDescribeProducers(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	im := b.meta.Image()
	tbl := b.parts.Load()
	readable := rc.authorizer().topicChecks(acl.OpRead)
	resp.Topics = make([]kmsg.DescribeProducersResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		topic := im.Topics[rt.Topic]
		// The topic's error, with its message, applies to each of its partitions.
		var topicCode *kerr.Error
		var topicMsg string
		if msg := validateTopicName(rt.Topic); msg != "" {
			topicCode, topicMsg = kerr.InvalidTopicException, msg
		} else if !readable.may(rt.Topic) {
			topicCode, topicMsg = kerr.TopicAuthorizationFailed, topicAuthzMessage
		} else if topic == nil {
			topicCode, topicMsg = kerr.UnknownTopicOrPartition, unknownTopicMessage
		}
		st.Partitions = make([]kmsg.DescribeProducersResponseTopicPartition, len(rt.Partitions))
		for j, index := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = index
			if topicCode != nil {
				sp.ErrorCode, sp.ErrorMessage = topicCode.Code, kmsg.StringPtr(topicMsg)
				continue
			}
			describePartitionProducers(sp, topic, tbl.lookupID(topic.ID, index))
		}
	}
	rc.respond(resp)
}

// unknownTopicMessage is Kafka's message of UNKNOWN_TOPIC_OR_PARTITION (Errors' default).
const unknownTopicMessage = "This server does not host this topic-partition."

// describePartitionProducers fills sp for partition sp.Partition of topic from p, this broker's
// replica of it (nil when there is none), as Kafka's ReplicaManager.activeProducerState.
func describePartitionProducers(sp *kmsg.DescribeProducersResponseTopicPartition, topic *meta.Topic, p *partition) {
	switch {
	case sp.Partition < 0 || int(sp.Partition) >= len(topic.Partitions):
		sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return
	case p == nil:
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		return
	}
	producers := p.log().ActiveProducers()
	sp.ActiveProducers = make([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, len(producers))
	for i, ps := range producers {
		ap := &sp.ActiveProducers[i]
		*ap = kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID = ps.ProducerID
		ap.ProducerEpoch = int32(ps.Epoch)
		ap.LastSequence = ps.LastSequence
		ap.LastTimestamp = ps.LastTimestamp
		ap.CoordinatorEpoch = ps.CoordinatorEpoch
		ap.CurrentTxnStartOffset = ps.TxnStartOffset
	}
}
