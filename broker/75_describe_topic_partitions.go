package broker

// DescribeTopicPartitions (key 75), version 0.
//
// Behavior: topics with their partitions, leaders, epochs, replicas and ISR, in name order,
// paginated by the response partition limit and the cursor (topic name and first partition) as
// Kafka does; kafka-topics --describe uses it. An empty topic list describes every topic.
//
// Version notes: only v0 exists.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var describeTopicPartitionsAPI = &api{key: kmsg.DescribeTopicPartitions, minVersion: 0, maxVersion: 0, handle: handleDescribeTopicPartitions}

// defaultPartitionLimit bounds the partitions of one response when the client asks for more.
const defaultPartitionLimit = 2000

func handleDescribeTopicPartitions(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DescribeTopicPartitionsRequest)
	resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
	im := b.meta.Image()
	var names []string
	if len(req.Topics) == 0 {
		names = im.SortedTopicNames()
	} else {
		for _, t := range req.Topics {
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
		startPartition = req.Cursor.Partition
	}
	count := 0
	for ti, name := range names {
		t := im.Topics[name]
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		if t == nil {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.TopicID = t.ID
		rt.IsInternal = isInternalTopic(name)
		rt.AuthorizedOperations = topicAllOperations
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
			rp.LeaderID = p.Leader
			rp.LeaderEpoch = p.LeaderEpoch
			rp.Replicas = p.Replicas
			rp.ISR = p.ISR
			rp.EligibleLeaderReplicas = []int32{}
			rp.LastKnownELR = []int32{}
			rp.OfflineReplicas = []int32{}
			rt.Partitions = append(rt.Partitions, rp)
			count++
		}
		resp.Topics = append(resp.Topics, rt)
		if resp.NextCursor != nil {
			break
		}
	}
	rc.respond(resp)
}
