package broker

// DescribeQuorum (key 55), versions 0-2.
//
// Behavior: the metadata quorum (kafka-metadata-quorum describe --status / --replication) as
// its leader, the active controller, sees it: leader, epoch (the Raft term), high watermark
// (the last committed index), and each voter's and observer's (learner's) log end with, from
// v1, when the leader last heard from it and last found it caught up. Any node answers: a node
// that is not the active controller forwards the request to it over the controller listener,
// as Kafka's brokers forward it. Offsets are Raft entry indexes, not record offsets. A request
// for another topic or partition than __cluster_metadata-0 gets UNKNOWN_TOPIC_OR_PARTITION;
// without a reachable leader the partition answers NOT_LEADER_OR_FOLLOWER. A principal without
// DESCRIBE on the cluster gets CLUSTER_AUTHORIZATION_FAILED (checked where it is received, with
// the client's principal, as Kafka's controller checks the forwarded one).
//
// Version notes: v2 adds the voters' controller endpoints (Nodes, under the first
// controller.listener.names) and every member's directory id: the one a member of a dynamic
// quorum joined with (its meta.properties directory.id); zero for a static quorum's voters,
// which are not formatted with one.

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

var describeQuorumAPI = &api{key: kmsg.DescribeQuorum, minVersion: 0, maxVersion: 2, handle: handleDescribeQuorum}

// describeQuorumVersion is the version a forwarded DescribeQuorum travels at.
const describeQuorumVersion = 2

// clusterMetadataTopic is the name Kafka gives the metadata log's topic.
const clusterMetadataTopic = "__cluster_metadata"

// describeQuorumTimeout bounds a DescribeQuorum forwarded to the active controller.
const describeQuorumTimeout = 5 * time.Second

func handleDescribeQuorum(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DescribeQuorumRequest)
	if !rc.authorizer().mayCluster(acl.OpDescribe) {
		// As Kafka's controller: the top-level error alone.
		resp := kmsg.NewPtrDescribeQuorumResponse()
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		rc.respond(resp)
		return
	}
	if len(req.Topics) != 1 || req.Topics[0].Topic != clusterMetadataTopic || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != 0 {
		resp := kmsg.NewPtrDescribeQuorumResponse()
		resp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		rc.respond(resp)
		return
	}
	fwd := kmsg.NewPtrDescribeQuorumRequest()
	fwd.Version = describeQuorumVersion
	fwd.Topics = req.Topics
	ctx, cancel := context.WithTimeout(context.Background(), describeQuorumTimeout)
	defer cancel()
	resp := kmsg.NewPtrDescribeQuorumResponse()
	resp.Version = describeQuorumVersion
	out, err := b.meta.ControllerAPI(ctx, kmsg.DescribeQuorum.Int16(), fwd.AppendTo(nil))
	if err == nil {
		err = resp.ReadFrom(out)
	}
	if err != nil {
		b.logger.Warn("DescribeQuorum", "err", err)
		resp = describeQuorumError(kerr.NotLeaderForPartition, err.Error())
	}
	resp.Version = req.Version
	rc.respond(resp)
}

// describeQuorumError is a DescribeQuorum response whose one partition failed with code.
func describeQuorumError(code *kerr.Error, msg string) *kmsg.DescribeQuorumResponse {
	resp := kmsg.NewPtrDescribeQuorumResponse()
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = clusterMetadataTopic
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	rp.ErrorCode, rp.ErrorMessage, rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = code.Code, &msg, -1, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	return resp
}

// serveDescribeQuorum is the active controller's DescribeQuorum (a meta.ControllerAPIHandler).
func (b *Broker) serveDescribeQuorum(body []byte) ([]byte, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = describeQuorumVersion
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode DescribeQuorum v%d: %w", describeQuorumVersion, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), describeQuorumTimeout)
	defer cancel()
	q, err := b.meta.QuorumStatus(ctx)
	if err != nil {
		return nil, err
	}
	resp := describeQuorumResponse(q, b.controllerListenerName())
	resp.Version = describeQuorumVersion
	return resp.AppendTo(nil), nil
}

// describeQuorumResponse renders q; voters with a known address get an endpoint named
// listener.
func describeQuorumResponse(q meta.QuorumStatus, listener string) *kmsg.DescribeQuorumResponse {
	resp := kmsg.NewPtrDescribeQuorumResponse()
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = clusterMetadataTopic
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = q.Leader, int32(q.Epoch), int64(q.HighWatermark)
	state := func(m meta.ReplicaStatus) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
		s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		s.ReplicaID, s.ReplicaDirectoryID, s.LogEndOffset = m.NodeID, m.DirectoryID, int64(m.LogEnd)
		s.LastFetchTimestamp, s.LastCaughtUpTimestamp = unixMillisOrNone(m.LastFetch), unixMillisOrNone(m.LastCaughtUp)
		return s
	}
	for _, m := range q.Voters {
		rp.CurrentVoters = append(rp.CurrentVoters, state(m))
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = m.NodeID
		if host, port, err := net.SplitHostPort(m.Addr); err == nil {
			if p, err := strconv.ParseUint(port, 10, 16); err == nil {
				l := kmsg.NewDescribeQuorumResponseNodeListener()
				l.Name, l.Host, l.Port = listener, host, uint16(p)
				n.Listeners = append(n.Listeners, l)
			}
		}
		resp.Nodes = append(resp.Nodes, n)
	}
	for _, m := range q.Observers {
		rp.Observers = append(rp.Observers, state(m))
	}
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	return resp
}

// unixMillisOrNone is t in milliseconds since the epoch, or -1 for the zero time.
func unixMillisOrNone(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

// controllerListenerName is the name under which DescribeQuorum lists the voters' endpoints.
func (b *Broker) controllerListenerName() string {
	if len(b.cfg.ControllerListenerNames) > 0 {
		return b.cfg.ControllerListenerNames[0]
	}
	return "CONTROLLER"
}
