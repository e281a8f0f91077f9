package broker

// ListPartitionReassignments (key 46), version 0.
//
// Behavior: lists the partitions with a reassignment in progress, each with its replicas
// (the target ones followed by the removing ones) and its adding and removing replicas; null
// topics means every partition. Requested topics or partitions that do not exist or are not
// being reassigned are left out, as KRaft's controller does. A principal without DESCRIBE on
// the cluster gets CLUSTER_AUTHORIZATION_FAILED, as Kafka's.
//
// Version notes: v0 is flexible.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
)

var listPartitionReassignmentsAPI = &api{key: kmsg.ListPartitionReassignments, minVersion: 0, maxVersion: 0, handle: handleListPartitionReassignments}

func handleListPartitionReassignments(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.ListPartitionReassignmentsRequest)
	resp := kmsg.NewPtrListPartitionReassignmentsResponse()
	if !rc.authorizer().mayCluster(acl.OpDescribe) {
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr(rc.clusterRefusal(acl.OpDescribe))
		rc.respond(resp)
		return
	}
	im := b.meta.Image()
	type wanted struct {
		topic      string
		partitions []int32 // nil: all
	}
	var ask []wanted
	if req.Topics == nil {
		for _, name := range im.SortedTopicNames() {
			ask = append(ask, wanted{topic: name})
		}
	} else {
		for _, rt := range req.Topics {
			ask = append(ask, wanted{topic: rt.Topic, partitions: rt.Partitions})
			if ask[len(ask)-1].partitions == nil {
				ask[len(ask)-1].partitions = []int32{}
			}
		}
	}
	for _, w := range ask {
		t := im.Topics[w.topic]
		if t == nil {
			continue
		}
		st := kmsg.NewListPartitionReassignmentsResponseTopic()
		st.Topic = t.Name
		for _, p := range t.Partitions {
			if !p.Reassigning() || (w.partitions != nil && !slices.Contains(w.partitions, p.Index)) {
				continue
			}
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition = p.Index
			sp.Replicas = slices.Clone(p.Replicas)
			sp.AddingReplicas = nonNil(p.AddingReplicas)
			sp.RemovingReplicas = nonNil(p.RemovingReplicas)
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			resp.Topics = append(resp.Topics, st)
		}
	}
	rc.respond(resp)
}

// nonNil returns a copy of s, empty rather than nil: the response's arrays are not nullable.
func nonNil(s []int32) []int32 {
	return append([]int32{}, s...)
}
