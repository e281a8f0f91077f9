package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

// This file is the authorization of the group coordinator's APIs, done on the broker side before
// a request reaches the coordinator, as Kafka 4.1's KafkaApis does it before it calls its
// GroupCoordinator: the operation, resource, error code and granularity of each API are
// Kafka's. What the principal may not touch is either answered here at once, or taken out of
// the request handed on and put back, refused, into the coordinator's answer.

// coordGate is what authorization decided for one request of a coordinator (groups here,
// transactions in txnauthz.go): answer it at once (answer), or hand req on to the coordinator
// and pass its response through finish (nil: as it is).
type coordGate struct {
	answer kmsg.Response
	req    kmsg.Request
	finish func(kmsg.Response)
}

// passGate hands req on unchanged.
func passGate(req kmsg.Request) coordGate { return coordGate{req: req} }

// answerGate answers with resp without asking the coordinator.
func answerGate(resp kmsg.Response) coordGate { return coordGate{answer: resp} }

// gateGroupRequest authorizes a request of the group coordinator's APIs; im resolves the topic
// ids of the versions that name topics by id.
func gateGroupRequest(z requestAuthz, im *meta.Image, req kmsg.Request) coordGate {
	switch req := req.(type) {
	case *kmsg.JoinGroupRequest:
		if !z.may(acl.OpRead, acl.ResourceGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return answerGate(resp)
		}
	case *kmsg.SyncGroupRequest:
		if !z.may(acl.OpRead, acl.ResourceGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return answerGate(resp)
		}
	case *kmsg.HeartbeatRequest:
		if !z.may(acl.OpRead, acl.ResourceGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return answerGate(resp)
		}
	case *kmsg.LeaveGroupRequest:
		if !z.may(acl.OpRead, acl.ResourceGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return answerGate(resp)
		}
	case *kmsg.OffsetCommitRequest:
		return gateOffsetCommit(z, im, req)
	case *kmsg.TxnOffsetCommitRequest:
		return gateTxnOffsetCommit(z, req)
	case *kmsg.OffsetFetchRequest:
		if req.Version >= 8 {
			return gateOffsetFetchGroups(z, im, req)
		}
		return gateOffsetFetch(z, req)
	case *kmsg.DescribeGroupsRequest:
		return gateDescribeGroups(z, req)
	case *kmsg.ListGroupsRequest:
		return gateListGroups(z, req)
	case *kmsg.DeleteGroupsRequest:
		return gateDeleteGroups(z, req)
	case *kmsg.OffsetDeleteRequest:
		return gateOffsetDelete(z, req)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return gateConsumerGroupHeartbeat(z, req)
	case *kmsg.ConsumerGroupDescribeRequest:
		return gateConsumerGroupDescribe(z, req)
	}
	return passGate(req)
}

// topicNameOf is the name authorization asks about for a topic a request names by name, or, in
// the versions that name topics by id, by id; known is false for an id the image does not
// hold, which the coordinator answers (UNKNOWN_TOPIC_ID) without any authorization, as Kafka.
func topicNameOf(im *meta.Image, byID bool, name string, id [16]byte) (string, bool) {
	if !byID {
		return name, true
	}
	t := im.TopicsByID[meta.UUID(id)]
	if t == nil {
		return "", false
	}
	return t.Name, true
}

// gateOffsetCommit: READ on the group (GROUP_AUTHORIZATION_FAILED in every partition), then READ
// on each topic (TOPIC_AUTHORIZATION_FAILED in its partitions); with no topic left the
// coordinator is not asked.
func gateOffsetCommit(z requestAuthz, im *meta.Image, req *kmsg.OffsetCommitRequest) coordGate {
	if !z.may(acl.OpRead, acl.ResourceGroup, req.Group) {
		return answerGate(offsetCommitError(req, req.Topics, kerr.GroupAuthorizationFailed))
	}
	if !z.on() {
		return passGate(req)
	}
	readable := z.topicChecks(acl.OpRead)
	var keep, denied []kmsg.OffsetCommitRequestTopic
	for _, rt := range req.Topics {
		if name, known := topicNameOf(im, req.Version >= 10, rt.Topic, rt.TopicID); known && !readable.may(name) {
			denied = append(denied, rt)
			continue
		}
		keep = append(keep, rt)
	}
	if len(denied) == 0 {
		return passGate(req)
	}
	refused := offsetCommitError(req, denied, kerr.TopicAuthorizationFailed)
	if len(keep) == 0 {
		return answerGate(refused)
	}
	fwd := *req
	fwd.Topics = keep
	return coordGate{req: &fwd, finish: func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetCommitResponse)
		resp.Topics = append(resp.Topics, refused.Topics...)
	}}
}

// offsetCommitError is an OffsetCommit response of topics, each partition failed with code.
func offsetCommitError(req *kmsg.OffsetCommitRequest, topics []kmsg.OffsetCommitRequestTopic, code *kerr.Error) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// gateTxnOffsetCommit: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED in
// every partition; the producer id needs nothing more, as Kafka says), READ on the group
// (GROUP_AUTHORIZATION_FAILED in every partition), READ on each topic.
func gateTxnOffsetCommit(z requestAuthz, req *kmsg.TxnOffsetCommitRequest) coordGate {
	switch {
	case !z.may(acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		return answerGate(txnOffsetCommitError(req, kerr.TransactionalIDAuthorizationFailed))
	case !z.may(acl.OpRead, acl.ResourceGroup, req.Group):
		return answerGate(txnOffsetCommitError(req, kerr.GroupAuthorizationFailed))
	case !z.on():
		return passGate(req)
	}
	readable := z.topicChecks(acl.OpRead)
	var keep, denied []kmsg.TxnOffsetCommitRequestTopic
	for _, rt := range req.Topics {
		if readable.may(rt.Topic) {
			keep = append(keep, rt)
		} else {
			denied = append(denied, rt)
		}
	}
	if len(denied) == 0 {
		return passGate(req)
	}
	only := *req
	only.Topics = denied
	refused := txnOffsetCommitError(&only, kerr.TopicAuthorizationFailed)
	if len(keep) == 0 {
		return answerGate(refused)
	}
	fwd := *req
	fwd.Topics = keep
	return coordGate{req: &fwd, finish: func(r kmsg.Response) {
		resp := r.(*kmsg.TxnOffsetCommitResponse)
		resp.Topics = append(resp.Topics, refused.Topics...)
	}}
}

// gateOffsetFetch is OffsetFetch before v8, one group: DESCRIBE on the group (its error, in
// every partition before v2), then DESCRIBE on each topic: a topic the principal may not
// describe is TOPIC_AUTHORIZATION_FAILED when named and left out of an all-topics answer.
func gateOffsetFetch(z requestAuthz, req *kmsg.OffsetFetchRequest) coordGate {
	if !z.may(acl.OpDescribe, acl.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		if req.Version >= 2 {
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		} else {
			for _, rt := range req.Topics {
				resp.Topics = append(resp.Topics, offsetFetchTopicError(rt.Topic, rt.Partitions, kerr.GroupAuthorizationFailed))
			}
		}
		return answerGate(resp)
	}
	if !z.on() {
		return passGate(req)
	}
	describable := z.topicChecks(acl.OpDescribe)
	if req.Topics == nil {
		return coordGate{req: req, finish: func(r kmsg.Response) {
			resp := r.(*kmsg.OffsetFetchResponse)
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if describable.may(t.Topic) {
					kept = append(kept, t)
				}
			}
			resp.Topics = kept
		}}
	}
	keep := make([]kmsg.OffsetFetchRequestTopic, 0, len(req.Topics))
	var refused []kmsg.OffsetFetchResponseTopic
	for _, rt := range req.Topics {
		if describable.may(rt.Topic) {
			keep = append(keep, rt)
			continue
		}
		refused = append(refused, offsetFetchTopicError(rt.Topic, rt.Partitions, kerr.TopicAuthorizationFailed))
	}
	if len(refused) == 0 {
		return passGate(req)
	}
	fwd := *req
	fwd.Topics = keep
	return coordGate{req: &fwd, finish: func(r kmsg.Response) {
		if resp := r.(*kmsg.OffsetFetchResponse); resp.ErrorCode == 0 {
			resp.Topics = append(resp.Topics, refused...)
		}
	}}
}

// offsetFetchTopicError is a topic of an OffsetFetch response before v8 whose partitions failed
// with code, offset -1.
func offsetFetchTopicError(topic string, partitions []int32, code *kerr.Error) kmsg.OffsetFetchResponseTopic {
	st := kmsg.NewOffsetFetchResponseTopic()
	st.Topic = topic
	for _, p := range partitions {
		sp := kmsg.NewOffsetFetchResponseTopicPartition()
		sp.Partition, sp.Offset, sp.ErrorCode = p, -1, code.Code
		sp.Metadata = kmsg.StringPtr("")
		st.Partitions = append(st.Partitions, sp)
	}
	return st
}

// offsetFetchGroupGate is what gateOffsetFetchGroups decided for one group of the request.
type offsetFetchGroupGate struct {
	denied  bool                                 // no DESCRIBE on the group
	all     bool                                 // all topics: filter the answer
	refused []kmsg.OffsetFetchResponseGroupTopic // named topics without DESCRIBE
}

// gateOffsetFetchGroups is OffsetFetch v8+, many groups: each as gateOffsetFetch decides it,
// the groups the principal may describe asked of the coordinator together.
func gateOffsetFetchGroups(z requestAuthz, im *meta.Image, req *kmsg.OffsetFetchRequest) coordGate {
	if !z.on() {
		return passGate(req)
	}
	describable := z.topicChecks(acl.OpDescribe)
	byID := req.Version >= 10
	gates := make([]offsetFetchGroupGate, len(req.Groups))
	fwd := *req
	fwd.Groups = nil
	for i, rg := range req.Groups {
		if !z.may(acl.OpDescribe, acl.ResourceGroup, rg.Group) {
			gates[i].denied = true
			continue
		}
		if rg.Topics == nil {
			gates[i].all = true
			fwd.Groups = append(fwd.Groups, rg)
			continue
		}
		keep := make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(rg.Topics))
		for _, rt := range rg.Topics {
			if name, known := topicNameOf(im, byID, rt.Topic, rt.TopicID); known && !describable.may(name) {
				st := kmsg.NewOffsetFetchResponseGroupTopic()
				st.Topic, st.TopicID = rt.Topic, rt.TopicID
				for _, p := range rt.Partitions {
					sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					sp.Partition, sp.Offset, sp.ErrorCode = p, -1, kerr.TopicAuthorizationFailed.Code
					sp.Metadata = kmsg.StringPtr("")
					st.Partitions = append(st.Partitions, sp)
				}
				gates[i].refused = append(gates[i].refused, st)
				continue
			}
			keep = append(keep, rt)
		}
		rg.Topics = keep
		fwd.Groups = append(fwd.Groups, rg)
	}
	// merge puts the coordinator's groups (asked, in request order) back among the refused ones.
	merge := func(asked []kmsg.OffsetFetchResponseGroup) []kmsg.OffsetFetchResponseGroup {
		out := make([]kmsg.OffsetFetchResponseGroup, 0, len(req.Groups))
		j := 0
		for i, g := range gates {
			if g.denied {
				sg := kmsg.NewOffsetFetchResponseGroup()
				sg.Group, sg.ErrorCode = req.Groups[i].Group, kerr.GroupAuthorizationFailed.Code
				out = append(out, sg)
				continue
			}
			if j >= len(asked) {
				break
			}
			sg := asked[j]
			j++
			if sg.ErrorCode == 0 {
				if g.all {
					kept := sg.Topics[:0]
					for _, t := range sg.Topics {
						if name, known := topicNameOf(im, byID, t.Topic, t.TopicID); known && describable.may(name) {
							kept = append(kept, t)
						}
					}
					sg.Topics = kept
				} else {
					sg.Topics = append(sg.Topics, g.refused...)
				}
			}
			out = append(out, sg)
		}
		return out
	}
	if len(fwd.Groups) == 0 {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.Groups = merge(nil)
		return answerGate(resp)
	}
	return coordGate{req: &fwd, finish: func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetFetchResponse)
		resp.Groups = merge(resp.Groups)
	}}
}

// gateDescribeGroups: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED, Kafka's groupError:
// no state, protocol or members), and, when asked (v3+), each described group's authorized
// operations.
func gateDescribeGroups(z requestAuthz, req *kmsg.DescribeGroupsRequest) coordGate {
	denied := make([]bool, len(req.Groups))
	fwd := *req
	fwd.Groups = nil
	for i, g := range req.Groups {
		if denied[i] = !z.may(acl.OpDescribe, acl.ResourceGroup, g); !denied[i] {
			fwd.Groups = append(fwd.Groups, g)
		}
	}
	ops := req.Version >= 3 && req.IncludeAuthorizedOperations
	if len(fwd.Groups) == len(req.Groups) && !ops {
		return passGate(req)
	}
	merge := func(asked []kmsg.DescribeGroupsResponseGroup) []kmsg.DescribeGroupsResponseGroup {
		out := make([]kmsg.DescribeGroupsResponseGroup, 0, len(req.Groups))
		j := 0
		for i, g := range req.Groups {
			if denied[i] {
				dg := kmsg.NewDescribeGroupsResponseGroup()
				dg.Group, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
				out = append(out, dg)
				continue
			}
			if j >= len(asked) {
				break
			}
			dg := asked[j]
			j++
			if ops && dg.ErrorCode == 0 {
				dg.AuthorizedOperations = z.operations(acl.ResourceGroup, dg.Group)
			}
			out = append(out, dg)
		}
		return out
	}
	if len(fwd.Groups) == 0 {
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		resp.Groups = merge(nil)
		return answerGate(resp)
	}
	return coordGate{req: &fwd, finish: func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeGroupsResponse)
		resp.Groups = merge(resp.Groups)
	}}
}

// gateListGroups: every group for a principal with DESCRIBE on the cluster, else only the
// groups it may DESCRIBE.
func gateListGroups(z requestAuthz, req *kmsg.ListGroupsRequest) coordGate {
	if z.mayCluster(acl.OpDescribe) {
		return passGate(req)
	}
	return coordGate{req: req, finish: func(r kmsg.Response) {
		resp := r.(*kmsg.ListGroupsResponse)
		kept := resp.Groups[:0]
		for _, g := range resp.Groups {
			if z.may(acl.OpDescribe, acl.ResourceGroup, g.Group) {
				kept = append(kept, g)
			}
		}
		resp.Groups = kept
	}}
}

// gateDeleteGroups: DELETE on each group; the refused ones (GROUP_AUTHORIZATION_FAILED) follow
// the coordinator's results, once per group as Kafka's distinct list.
func gateDeleteGroups(z requestAuthz, req *kmsg.DeleteGroupsRequest) coordGate {
	if !z.on() {
		return passGate(req)
	}
	var refused []kmsg.DeleteGroupsResponseGroup
	seen := make(map[string]bool, len(req.Groups))
	fwd := *req
	fwd.Groups = nil
	for _, g := range req.Groups {
		if seen[g] {
			continue
		}
		seen[g] = true
		if z.may(acl.OpDelete, acl.ResourceGroup, g) {
			fwd.Groups = append(fwd.Groups, g)
			continue
		}
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		refused = append(refused, dg)
	}
	if len(refused) == 0 {
		return passGate(req)
	}
	if len(fwd.Groups) == 0 {
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		resp.Groups = refused
		return answerGate(resp)
	}
	return coordGate{req: &fwd, finish: func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteGroupsResponse)
		resp.Groups = append(resp.Groups, refused...)
	}}
}

// gateOffsetDelete: DELETE on the group (the top-level GROUP_AUTHORIZATION_FAILED), READ on
// each topic (TOPIC_AUTHORIZATION_FAILED in its partitions); the coordinator is asked even with
// no topic left, as Kafka asks it.
func gateOffsetDelete(z requestAuthz, req *kmsg.OffsetDeleteRequest) coordGate {
	if !z.may(acl.OpDelete, acl.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return answerGate(resp)
	}
	if !z.on() {
		return passGate(req)
	}
	readable := z.topicChecks(acl.OpRead)
	var keep []kmsg.OffsetDeleteRequestTopic
	var refused []kmsg.OffsetDeleteResponseTopic
	for _, rt := range req.Topics {
		if readable.may(rt.Topic) {
			keep = append(keep, rt)
			continue
		}
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
			st.Partitions = append(st.Partitions, sp)
		}
		refused = append(refused, st)
	}
	if len(refused) == 0 {
		return passGate(req)
	}
	fwd := *req
	fwd.Topics = keep
	return coordGate{req: &fwd, finish: func(r kmsg.Response) {
		if resp := r.(*kmsg.OffsetDeleteResponse); resp.ErrorCode == 0 {
			resp.Topics = append(resp.Topics, refused...)
		}
	}}
}

// gateConsumerGroupHeartbeat: READ on the group, then DESCRIBE on every subscribed topic name
// (one the principal may not describe fails the whole request with TOPIC_AUTHORIZATION_FAILED).
func gateConsumerGroupHeartbeat(z requestAuthz, req *kmsg.ConsumerGroupHeartbeatRequest) coordGate {
	code := (*kerr.Error)(nil)
	if !z.may(acl.OpRead, acl.ResourceGroup, req.Group) {
		code = kerr.GroupAuthorizationFailed
	} else {
		describable := z.topicChecks(acl.OpDescribe)
		for _, t := range req.SubscribedTopicNames {
			if !describable.may(t) {
				code = kerr.TopicAuthorizationFailed
				break
			}
		}
	}
	if code == nil {
		return passGate(req)
	}
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = code.Code
	return answerGate(resp)
}

// consumerGroupTopicsRefusal is Kafka's message for a described consumer group one of whose
// members is assigned a topic the principal may not describe.
const consumerGroupTopicsRefusal = "The group has described topic(s) that the client is not authorized to describe."

// gateConsumerGroupDescribe: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED), the
// authorized operations when asked, and, with an authorizer, a group whose members' current or
// target assignments hold a topic the principal may not DESCRIBE answered
// TOPIC_AUTHORIZATION_FAILED without its members.
func gateConsumerGroupDescribe(z requestAuthz, req *kmsg.ConsumerGroupDescribeRequest) coordGate {
	denied := make([]bool, len(req.Groups))
	fwd := *req
	fwd.Groups = nil
	for i, g := range req.Groups {
		if denied[i] = !z.may(acl.OpDescribe, acl.ResourceGroup, g); !denied[i] {
			fwd.Groups = append(fwd.Groups, g)
		}
	}
	if len(fwd.Groups) == len(req.Groups) && !req.IncludeAuthorizedOperations && !z.on() {
		return passGate(req)
	}
	merge := func(asked []kmsg.ConsumerGroupDescribeResponseGroup) []kmsg.ConsumerGroupDescribeResponseGroup {
		describable := z.topicChecks(acl.OpDescribe)
		out := make([]kmsg.ConsumerGroupDescribeResponseGroup, 0, len(req.Groups))
		j := 0
		for i, g := range req.Groups {
			if denied[i] {
				dg := kmsg.NewConsumerGroupDescribeResponseGroup()
				dg.Group, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
				out = append(out, dg)
				continue
			}
			if j >= len(asked) {
				break
			}
			dg := asked[j]
			j++
			if req.IncludeAuthorizedOperations && dg.ErrorCode == 0 {
				dg.AuthorizedOperations = z.operations(acl.ResourceGroup, dg.Group)
			}
			if z.on() && !assignedTopicsDescribable(dg.Members, &describable) {
				hidden := kmsg.NewConsumerGroupDescribeResponseGroup()
				hidden.Group, hidden.ErrorCode = dg.Group, kerr.TopicAuthorizationFailed.Code
				hidden.ErrorMessage = kmsg.StringPtr(consumerGroupTopicsRefusal)
				dg = hidden
			}
			out = append(out, dg)
		}
		return out
	}
	if len(fwd.Groups) == 0 {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		resp.Groups = merge(nil)
		return answerGate(resp)
	}
	return coordGate{req: &fwd, finish: func(r kmsg.Response) {
		resp := r.(*kmsg.ConsumerGroupDescribeResponse)
		resp.Groups = merge(resp.Groups)
	}}
}

// assignedTopicsDescribable reports whether every topic of the members' current and target
// assignments is one the principal may describe.
func assignedTopicsDescribable(members []kmsg.ConsumerGroupDescribeResponseGroupMember, describable *topicNames) bool {
	for _, m := range members {
		for _, a := range [2]*kmsg.Assignment{&m.Assignment, &m.TargetAssignment} {
			for _, tp := range a.TopicPartitions {
				if !describable.may(tp.Topic) {
					return false
				}
			}
		}
	}
	return true
}
