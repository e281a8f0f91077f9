package broker

// DescribeTopicPartitions (key 75), version 0.
//
// Behavior: topics with their partitions, leaders, epochs, replicas and ISR, in name order,
// paginated by the response partition limit and the cursor (topic name and first partition) as
// Kafka does; kafka-topics --describe uses it. An empty topic list describes every topic.
// Authorization, as Kafka's DescribeTopicPartitionsRequestHandler: topics the principal may not
// DESCRIBE are left out of an all-topics answer and, when named, answered
// TOPIC_AUTHORIZATION_FAILED after the others; each described topic carries its authorized
// operations. A partition this broker leads from an offline log dir has leader -1, as Kafka's
// controller makes it; offline replicas are not listed, as Kafka 4.1 lists none here.
//
// Version notes: only v0 exists.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
)

var describeTopicPartitionsAPI = &api{key: kmsg.DescribeTopicPartitions, minVersion: 0, maxVersion: 0, handle: handleDescribeTopicPartitions}

// defaultPartitionLimit bounds the partitions of one response when the client asks for more.
const defaultPartitionLimit = 2000

func handleDescribeTopicPartitions(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DescribeTopicPartitionsRequest)
	resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
	im := b.meta.Image()
	z := rc.authorizer()
	describable := z.topicChecks(acl.OpDescribe)
	var names, denied []string
	if len(req.Topics) == 0 {
		// Every topic the principal may DESCRIBE; the others are left out.
		for _, name := range im.SortedTopicNames() {
			if describable.may(name) {
				names = append(names, name)
			}
		}
	} else {
		for _, t := range req.Topics {
			if !describable.may(t.Topic) {
				denied = append(denied, t.Topic)
				continue
			}
			names = append(names, t.Topic)
		}
		sort.Strings(names)
	}
	limit := int(req.ResponsePartitionLimit)
	if limit <= 0 || limit > defaultPartitionLimit {
		limit = defaultPartitionLimit
	}
	startPartition := int32(0)
	if req.Cursor != nil {
		i := sort.SearchStrings(names, req.Cursor.Topic)
		names = names[i:]
		// As Kafka: the cursor's partition counts only for a topic the principal may describe.
		if describable.may(req.Cursor.Topic) {
			startPartition = req.Cursor.Partition
		}
	}
	count := 0
	tbl := b.parts.Load()
	for ti, name := range names {
		t := im.Topics[name]
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		rt.AuthorizedOperations = z.operations(acl.ResourceTopic, name)
		if t == nil {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.TopicID = t.ID
		rt.IsInternal = isInternalTopic(name)
		first := int32(0)
		if ti == 0 {
			first = startPartition
		}
		for pi := first; pi < int32(len(t.Partitions)); pi++ {
			if count >= limit {
				cur := kmsg.NewDescribeTopicPartitionsResponseNextCursor()
				cur.Topic = name
				cur.Partition = pi
				resp.NextCursor = &cur
				break
			}
			p := t.Partitions[pi]
			rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			rp.Partition = p.Index
			rp.LeaderID, _ = b.offlineView(tbl, t.ID, p)
			rp.OfflineReplicas = []int32{}
			rp.LeaderEpoch = p.LeaderEpoch
			rp.Replicas = p.Replicas
			rp.ISR = p.ISR
			rp.EligibleLeaderReplicas = []int32{}
			rp.LastKnownELR = []int32{}
			rt.Partitions = append(rt.Partitions, rp)
			count++
		}
		resp.Topics = append(resp.Topics, rt)
		if resp.NextCursor != nil {
			break
		}
	}
	// Named topics the principal may not DESCRIBE come last, without their id.
	for _, name := range denied {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		resp.Topics = append(resp.Topics, rt)
	}
	rc.respond(resp)
}
