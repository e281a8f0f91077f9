package coord

// DescribeGroups (key 15), versions 0-6.
//
// Behavior: describes each requested group: state, protocol type and, when
// Stable, the selected protocol with every member's metadata and assignment;
// in other states members are listed without them. An unknown group is
// reported as Dead with no members. Groups on different shards are described
// in parallel.
//
// Version notes: v3 adds authorized operations (not computed: -2^31, "not
// requested", is left in place); v4 adds member instance ids; v6 adds error
// messages and reports an unknown group with GROUP_ID_NOT_FOUND.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var describeGroupsAPI = API{Key: kmsg.DescribeGroups, MinVersion: 0, MaxVersion: 6, handle: handleDescribeGroups}

func handleDescribeGroups(g *GroupCoordinator, _ RequestInfo, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	eachGroup(g, req.Groups, func(s *shard, p int32, i int) kmsg.DescribeGroupsResponseGroup {
		return s.describe(p, req.Groups[i], req.Version)
	}, func(groups []kmsg.DescribeGroupsResponseGroup) {
		resp.Groups = groups
		respond(resp)
	})
}

func (s *shard) describe(p int32, id string, version int16) kmsg.DescribeGroupsResponseGroup {
	out := kmsg.NewDescribeGroupsResponseGroup()
	out.Group = id
	g, errc := s.ownedGroup(p, id)
	if errc != nil {
		out.ErrorCode = errc.Code
		return out
	}
	if g == nil || g.is(stateDead) || g.cons != nil {
		// A KIP-848 consumer group is not a classic group: Kafka reports it
		// like an unknown one (clients describe it with ConsumerGroupDescribe).
		out.State = stateDead.String()
		if version >= 6 {
			out.ErrorCode = kerr.GroupIDNotFound.Code
			msg := fmt.Sprintf("Group %s not found.", id)
			if g != nil && g.cons != nil {
				msg = fmt.Sprintf("Group %s is not a classic group.", id)
			}
			out.ErrorMessage = &msg
		}
		return out
	}
	out.State = g.state.String()
	out.ProtocolType = g.protocolType
	stable := g.is(stateStable)
	if stable {
		out.Protocol = g.protocol
	}
	for _, m := range g.members {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID = m.instanceID
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		if stable {
			dm.ProtocolMetadata = m.metadata(g.protocol)
			dm.MemberAssignment = m.assignment
		}
		out.Members = append(out.Members, dm)
	}
	return out
}
