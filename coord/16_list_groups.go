package coord

// ListGroups (key 16), versions 0-5.
//
// Behavior: lists the groups of every loaded partition, sorted by name. While
// any partition is still loading the response also carries
// COORDINATOR_LOAD_IN_PROGRESS, as Kafka does.
//
// Version notes: v4 adds a case-insensitive state filter and each group's
// state; v5 adds a type filter and each group's type ("classic" or
// "consumer").

import (
	"slices"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var listGroupsAPI = API{Key: kmsg.ListGroups, MinVersion: 0, MaxVersion: 5, handle: handleListGroups}

// groupTypeClassic is the KIP-848 group type name of classic groups.
const groupTypeClassic = "classic"

func handleListGroups(g *GroupCoordinator, _ RequestInfo, r kmsg.Request, respond func(kmsg.Response)) {
	req := r.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	states := lowerSet(req.StatesFilter)
	types := lowerSet(req.TypesFilter)
	perShard := make([][]kmsg.ListGroupsResponseGroup, len(g.shards))
	loading := make([]bool, len(g.shards))
	var remaining atomic.Int32
	remaining.Store(int32(len(g.shards)))
	for i, sh := range g.shards {
		sh.push(func(s *shard) {
			perShard[i], loading[i] = s.listGroups(states, types)
			if remaining.Add(-1) != 0 {
				return
			}
			for i := range perShard {
				resp.Groups = append(resp.Groups, perShard[i]...)
				if loading[i] {
					resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
				}
			}
			slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
			respond(resp)
		})
	}
}

func (s *shard) listGroups(states, types map[string]bool) (groups []kmsg.ListGroupsResponseGroup, loading bool) {
	for _, part := range s.parts {
		if !part.loaded {
			loading = true
			continue
		}
		for _, g := range part.groups {
			if g.is(stateDead) ||
				len(states) > 0 && !states[strings.ToLower(g.stateName())] ||
				len(types) > 0 && !types[g.typeName()] {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group = g.id
			lg.ProtocolType = g.protocolType
			lg.GroupState = g.stateName()
			lg.GroupType = g.typeName()
			groups = append(groups, lg)
		}
	}
	return groups, loading
}

func lowerSet(ss []string) map[string]bool {
	m := make(map[string]bool, len(ss))
	for _, s := range ss {
		m[strings.ToLower(s)] = true
	}
	return m
}
