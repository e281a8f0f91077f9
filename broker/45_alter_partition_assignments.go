package broker

// AlterPartitionAssignments (key 45), versions 0-1.
//
// Behavior: Kafka's AlterPartitionReassignments; moves partitions to new replicas (KIP-455), as KRaft's controller does (see
// reassign.go): the target replicas are validated like a manual assignment, the move is
// recorded with its adding and removing replicas, and the active controller completes it once
// the adding replicas are in sync. Null replicas cancel the reassignment in progress
// (NO_REASSIGNMENT_IN_PROGRESS without one). Unknown topics and partitions are
// UNKNOWN_TOPIC_OR_PARTITION. All accepted moves of a request commit together. A principal
// without ALTER on the cluster gets CLUSTER_AUTHORIZATION_FAILED at the top and in every
// partition, as Kafka's.
//
// Version notes: v1 adds AllowReplicationFactorChange (KIP-860); when false, a move that
// changes the partition's replica count is INVALID_REPLICATION_FACTOR.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

var alterPartitionReassignmentsAPI = &api{key: kmsg.AlterPartitionAssignments, minVersion: 0, maxVersion: 1, handle: handleAlterPartitionReassignments}

func handleAlterPartitionReassignments(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := kmsg.NewPtrAlterPartitionAssignmentsResponse()
	if !rc.authorizer().mayCluster(acl.OpAlter) {
		// As Kafka's AlterPartitionReassignmentsRequest.getErrorResponse: the error at the top
		// and in every partition.
		msg := kmsg.StringPtr(rc.clusterRefusal(acl.OpAlter))
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, msg
		for _, rt := range req.Topics {
			st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.ErrorMessage = rp.Partition, kerr.ClusterAuthorizationFailed.Code, msg
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		rc.respond(resp)
		return
	}
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	im := b.meta.Image()
	live := leaderCandidates(im)
	var recs []meta.Record
	var accepted []*kmsg.AlterPartitionAssignmentsResponseTopicPartition
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			rec, change, code, msg := b.planReassignment(im, live, rt.Topic, rp, req.Version < 1 || req.AllowReplicationFactorChange)
			if code != nil {
				sp.ErrorCode = code.Code
				if msg != "" {
					sp.ErrorMessage = kmsg.StringPtr(msg)
				}
			}
			st.Partitions = append(st.Partitions, sp)
			if change {
				recs = append(recs, rec)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if resp.Topics[i].Partitions[j].ErrorCode == 0 {
				accepted = append(accepted, &resp.Topics[i].Partitions[j])
			}
		}
	}
	if len(recs) > 0 {
		if _, err := b.meta.Commit(recs); err != nil {
			for _, sp := range accepted {
				sp.ErrorCode = kerr.UnknownServerError.Code
				sp.ErrorMessage = kmsg.StringPtr(err.Error())
			}
		}
	}
	rc.respond(resp)
}

// planReassignment decides one partition of an AlterPartitionReassignments request: the
// record to commit (change is false when there is nothing to record), or the partition's error.
func (b *Broker) planReassignment(im *meta.Image, live map[int32]bool, topic string, rp kmsg.AlterPartitionAssignmentsRequestTopicPartition, allowRFChange bool) (rec meta.Record, change bool, code *kerr.Error, msg string) {
	t := im.Topics[topic]
	if t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
		return meta.Record{}, false, kerr.UnknownTopicOrPartition, fmt.Sprintf("Unable to find partition %s-%d.", topic, rp.Partition)
	}
	p := t.Partitions[rp.Partition]
	if rp.Replicas == nil {
		rec, code, msg := cancelReassignment(t, p, live, b.uncleanElection(t))
		return rec, code == nil, code, msg
	}
	if code, msg := validateAssignment(im, rp.Replicas); code != nil {
		return meta.Record{}, false, code, msg
	}
	if cur := len(p.TargetReplicas()); !allowRFChange && cur != len(rp.Replicas) {
		return meta.Record{}, false, kerr.InvalidReplicationFactor, fmt.Sprintf("The replication factor is changed from %d to %d", cur, len(rp.Replicas))
	}
	rec, change = reassignRecord(t, p, rp.Replicas, live)
	return rec, change, nil, ""
}
