package broker

// OffsetForLeaderEpoch (key 23), versions 2-4.
//
// Behavior: returns, for a requested leader epoch, the largest epoch not above it and the end
// offset of that epoch from the log's leader-epoch cache; the Java consumer sends it to validate
// its position after a leader change. The client's current leader epoch is checked first.
// As Kafka's: a principal with CLUSTER_ACTION on the cluster may ask of any topic, any other
// needs DESCRIBE on the topic (TOPIC_AUTHORIZATION_FAILED for its partitions otherwise).
//
// Version notes: v3 adds the replica id; follower requests (replica id >= 0) have no followers to
// serve yet and are refused.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
)

var offsetForLeaderEpochAPI = &api{key: kmsg.OffsetForLeaderEpoch, minVersion: 2, maxVersion: 4, handle: handleOffsetForLeaderEpoch}

func handleOffsetForLeaderEpoch(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.OffsetForLeaderEpochRequest)
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	tbl := b.parts.Load()
	im := b.meta.Image()
	// KIP-320: CLUSTER_ACTION (a follower), or DESCRIBE on the topic (a consumer).
	z := rc.authorizer()
	clusterAction := z.mayCluster(acl.OpClusterAction)
	describable := z.topicChecks(acl.OpDescribe)
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		topic := im.Topics[rt.Topic]
		denied := !clusterAction && !describable.may(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch = -1
			sp.EndOffset = -1
			var p *partition
			if topic != nil {
				p = tbl.leaderID(topic.ID, rp.Partition)
			}
			switch {
			case denied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case req.ReplicaID >= 0:
				sp.ErrorCode = kerr.UnknownServerError.Code
			case p == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case checkLeaderEpoch(topic, rp.Partition, rp.CurrentLeaderEpoch) != nil:
				sp.ErrorCode = checkLeaderEpoch(topic, rp.Partition, rp.CurrentLeaderEpoch).Code
			default:
				sp.LeaderEpoch, sp.EndOffset = p.log().EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	rc.respond(resp)
}
