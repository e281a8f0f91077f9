package broker

// CreateTopics (key 19), versions 2-7.
//
// Behavior: validates each topic (name, existence, '.'/'_' collisions, partitions, replication
// factor against the registered brokers, manual assignments, configs) and commits it to the
// metadata log; results are per topic, with Kafka's error codes and messages. validate_only checks
// without committing. Replicas are placed over the unfenced brokers as Kafka's rack-unaware
// assignment does; a manual assignment's ISR is its live replicas. Authorization, as Kafka's
// ControllerApis: CREATE on the cluster or on the topic (TOPIC_AUTHORIZATION_FAILED,
// "Authorization failed." otherwise); a created topic's partition count, replication factor and
// configs are returned only with DESCRIBE_CONFIGS on it (else its config error code is
// TOPIC_AUTHORIZATION_FAILED).
//
// Version notes: from v5 the response carries the partition count, replication factor and
// configs, and from v7 the topic id.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
)

var createTopicsAPI = &api{key: kmsg.CreateTopics, minVersion: 2, maxVersion: 7, keepsRequest: true, handle: handleCreateTopics}

func handleCreateTopics(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.CreateTopicsRequest)
	resp := kmsg.NewPtrCreateTopicsResponse()
	specs := make([]topicSpec, len(req.Topics))
	dup := map[string]int{}
	for i, t := range req.Topics {
		dup[t.Topic]++
		s := topicSpec{name: t.Topic, partitions: t.NumPartitions, rf: t.ReplicationFactor, configs: map[string]*string{}}
		if len(t.ReplicaAssignment) > 0 {
			s.assignment = map[int32][]int32{}
			for _, a := range t.ReplicaAssignment {
				s.assignment[a.Partition] = a.Replicas
			}
		}
		for _, c := range t.Configs {
			s.configs[c.Name] = c.Value
		}
		specs[i] = s
	}
	var results []topicResult
	var todo []topicSpec
	var idx []int
	results = make([]topicResult, len(specs))
	// As Kafka's ControllerApis: CREATE on the cluster, or else on each topic; the configs of a
	// created topic are returned only with DESCRIBE_CONFIGS on it.
	z := rc.authorizer()
	clusterCreate := z.mayCluster(acl.OpCreate)
	for i, s := range specs {
		if dup[s.name] > 1 {
			results[i] = topicResult{err: kerr.InvalidRequest, message: "Create topics request from client contains a duplicate topic: " + s.name}
			continue
		}
		if !clusterCreate && !z.may(acl.OpCreate, acl.ResourceTopic, s.name) {
			results[i] = topicResult{err: kerr.TopicAuthorizationFailed, message: "Authorization failed."}
			continue
		}
		todo = append(todo, s)
		idx = append(idx, i)
	}
	mq := rc.mutationQuota(req.ValidateOnly)
	var admitted []topicSpec
	var admittedIdx []int
	for j, s := range todo {
		if !mq.take(b.partitionsToCreate(s)) {
			results[idx[j]] = topicResult{err: kerr.ThrottlingQuotaExceeded, message: throttledMessage}
			continue
		}
		admitted, admittedIdx = append(admitted, s), append(admittedIdx, idx[j])
	}
	for j, res := range b.createTopics(admitted, req.ValidateOnly) {
		results[admittedIdx[j]] = res
	}
	resp.ThrottleMillis = mq.throttle(rc)
	for i, s := range specs {
		res := results[i]
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = s.name
		if res.err != nil {
			rt.ErrorCode = res.err.Code
			rt.ErrorMessage = kmsg.StringPtr(res.message)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		t := res.topic
		rt.TopicID = t.ID
		if !z.may(acl.OpDescribeConfigs, acl.ResourceTopic, s.name) {
			rt.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.NumPartitions = int32(len(t.Partitions))
		rt.ReplicationFactor = int16(len(t.Partitions[0].Replicas))
		for _, d := range topicConfigDefs {
			if _, set := t.Configs[d.name]; d.own && !set {
				continue
			}
			e := b.describeTopicEntry(b.meta.Image(), t, d, false, false)
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.Value, c.Source = e.Name, e.Value, int8(e.Source)
			rt.Configs = append(rt.Configs, c)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	rc.respond(resp)
}

// partitionsToCreate is how many partitions a CreateTopics entry asks for: its assignment's,
// its count, or num.partitions.
func (b *Broker) partitionsToCreate(s topicSpec) int {
	switch {
	case len(s.assignment) > 0:
		return len(s.assignment)
	case s.partitions > 0:
		return int(s.partitions)
	}
	return int(b.live().NumPartitions)
}
