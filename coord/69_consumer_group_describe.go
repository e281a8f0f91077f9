package coord

// ConsumerGroupDescribe (key 69), versions 0-1 (KIP-848).
//
// Behavior: describes consumer groups: state, group and assignment epochs,
// the assignor, and every member with its epoch, subscription, current and
// target assignment. A classic or unknown group gets GROUP_ID_NOT_FOUND,
// which makes Kafka's admin client fall back to DescribeGroups. Groups on
// different shards are described in parallel.
//
// Version notes: v1 adds each member's type (1, consumer protocol).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var consumerGroupDescribeAPI = API{Key: kmsg.ConsumerGroupDescribe, MinVersion: 0, MaxVersion: 1, handle: handleConsumerGroupDescribe}

// memberTypeConsumer is ConsumerGroupDescribe's MemberType of a member
// using the consumer protocol.
const memberTypeConsumer = 1

func handleConsumerGroupDescribe(g *GroupCoordinator, _ RequestInfo, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	eachGroup(g, req.Groups, func(s *shard, p int32, i int) kmsg.ConsumerGroupDescribeResponseGroup {
		return s.describeConsumer(p, req.Groups[i], req.Version)
	}, func(groups []kmsg.ConsumerGroupDescribeResponseGroup) {
		resp.Groups = groups
		respond(resp)
	})
}

func (s *shard) describeConsumer(p int32, id string, version int16) kmsg.ConsumerGroupDescribeResponseGroup {
	out := kmsg.NewConsumerGroupDescribeResponseGroup()
	out.Group = id
	g, errc := s.ownedGroup(p, id)
	if errc != nil {
		out.ErrorCode = errc.Code
		return out
	}
	if g == nil || g.is(stateDead) || g.cons == nil {
		out.ErrorCode = kerr.GroupIDNotFound.Code
		msg := fmt.Sprintf("Group %s not found.", id)
		if g != nil && !g.is(stateDead) {
			msg = fmt.Sprintf("Group %s is not a consumer group.", id)
		}
		out.ErrorMessage = &msg
		return out
	}
	cg := g.cons
	out.State = cg.state().String()
	out.Epoch = cg.epoch
	out.AssignmentEpoch = cg.assignmentEpoch
	out.AssignorName = cg.assignorName
	if out.AssignorName == "" {
		out.AssignorName = s.c.cfg.ConsumerAssignors[0]
	}
	names := make(map[[16]byte]string)
	for name, ti := range cg.resolved {
		names[ti.ID] = name
	}
	if t := s.topics(); t != nil {
		for _, m := range cg.members {
			for tp := range m.assigned {
				if _, ok := names[tp.topic]; !ok {
					if ti, ok := t.ByID(tp.topic); ok {
						names[tp.topic] = ti.Name
					}
				}
			}
		}
	}
	for _, m := range cg.members {
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID, dm.RackID = m.instanceID, m.rackID
		dm.MemberEpoch = m.epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.SubscribedTopics = append([]string{}, m.topics...)
		if m.regex != "" {
			re := m.regex
			dm.SubscribedTopicRegex = &re
		}
		dm.Assignment = describeAssignment(m.assigned, names)
		dm.TargetAssignment = describeAssignment(cg.target[m.id], names)
		if version >= 1 {
			dm.MemberType = memberTypeConsumer
		}
		out.Members = append(out.Members, dm)
	}
	return out
}
