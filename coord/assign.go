package coord

import "slices"

// Server-side assignor names (group.consumer.assignors).
const (
	assignorUniform = "uniform"
	assignorRange   = "range"
)

// assignMember is one member as an assignor sees it.
type assignMember struct {
	id     string
	topics []TopicInfo // subscribed, sorted by name
	prev   partSet     // previous target, for stickiness
}

// assignUniform spreads the partitions of the subscribed topics evenly over
// the members subscribed to them, keeping previous assignments where the
// balance allows (Kafka's "uniform" assignor): every partition goes to one
// member subscribed to its topic, and no partition can move to a member that
// has at least two fewer partitions and is subscribed to its topic.
func assignUniform(members []assignMember) map[string]partSet {
	out := make(map[string]partSet, len(members))
	// eligible lists, per topic, the members subscribed to it, in order.
	eligible := make(map[[16]byte][]int)
	counts := make(map[[16]byte]int32)
	var parts []tpID
	for i, m := range members {
		out[m.id] = make(partSet)
		for _, t := range m.topics {
			if len(eligible[t.ID]) == 0 {
				counts[t.ID] = t.Partitions
				for p := range t.Partitions {
					parts = append(parts, tpID{t.ID, p})
				}
			}
			eligible[t.ID] = append(eligible[t.ID], i)
		}
	}
	slices.SortFunc(parts, compareTP)
	if homogeneous(members) {
		return assignHomogeneous(members, parts, counts, out)
	}
	owner := make(map[tpID]int, len(parts))
	count := make([]int, len(members))
	// Keep previous assignments while the member stays subscribed.
	for i, m := range members {
		for tp := range m.prev {
			if _, taken := owner[tp]; !taken && tp.partition < counts[tp.topic] && slices.Contains(eligible[tp.topic], i) {
				owner[tp] = i
				count[i]++
			}
		}
	}
	least := func(cands []int) int {
		best := cands[0]
		for _, c := range cands[1:] {
			if count[c] < count[best] {
				best = c
			}
		}
		return best
	}
	for _, tp := range parts {
		if _, ok := owner[tp]; !ok {
			i := least(eligible[tp.topic])
			owner[tp] = i
			count[i]++
		}
	}
	// Move partitions from overfull to underfull members until no move
	// improves the balance. Each move lowers the sum of squared counts, so
	// the loop ends.
	for moved := true; moved; {
		moved = false
		for _, tp := range parts {
			from := owner[tp]
			to := least(eligible[tp.topic])
			if count[to]+1 < count[from] {
				owner[tp] = to
				count[from]--
				count[to]++
				moved = true
			}
		}
	}
	for tp, i := range owner {
		out[members[i].id][tp] = struct{}{}
	}
	return out
}

// homogeneous reports whether every member subscribes to the same topics.
func homogeneous(members []assignMember) bool {
	for _, m := range members[min(1, len(members)):] {
		if !slices.EqualFunc(m.topics, members[0].topics, func(a, b TopicInfo) bool { return a.ID == b.ID }) {
			return false
		}
	}
	return true
}

// assignHomogeneous is assignUniform when all members subscribe to the same
// topics, in O(partitions log partitions): every member gets
// partitions/members partitions and the first partitions%members that can,
// one more; members keep previous partitions up to that quota.
func assignHomogeneous(members []assignMember, parts []tpID, counts map[[16]byte]int32, out map[string]partSet) map[string]partSet {
	if len(members) == 0 {
		return out
	}
	quota, extra := len(parts)/len(members), len(parts)%len(members)
	// prevOwner maps each partition to the member that had it; parts is
	// sorted, so walking it keeps the choice deterministic.
	prevOwner := make(map[tpID]int, len(parts))
	for i, m := range members {
		for tp := range m.prev {
			if tp.partition < counts[tp.topic] {
				prevOwner[tp] = i
			}
		}
	}
	taken := make(map[tpID]bool, len(parts))
	for _, tp := range parts {
		if i, ok := prevOwner[tp]; ok && len(out[members[i].id]) < quota {
			taken[tp] = true
			out[members[i].id][tp] = struct{}{}
		}
	}
	for _, tp := range parts {
		if extra == 0 {
			break
		}
		if i, ok := prevOwner[tp]; ok && !taken[tp] && len(out[members[i].id]) == quota {
			taken[tp] = true
			out[members[i].id][tp] = struct{}{}
			extra--
		}
	}
	// Fill members below their quota, then hand the remaining extras out in
	// member order.
	next := 0
	for _, tp := range parts {
		if taken[tp] {
			continue
		}
		for next < len(members) && len(out[members[next].id]) >= quota {
			next++
		}
		if next < len(members) {
			out[members[next].id][tp] = struct{}{}
			continue
		}
		for i := range members {
			if s := out[members[i].id]; len(s) == quota {
				s[tp] = struct{}{}
				break
			}
		}
	}
	return out
}

// assignRange gives each member, per subscribed topic, a contiguous range of
// its partitions: the members subscribed to a topic, sorted by member id,
// get partitions/members each and the first partitions%members one more, as
// Kafka's server-side "range" assignor without co-partitioning rack logic.
func assignRange(members []assignMember) map[string]partSet {
	out := make(map[string]partSet, len(members))
	byTopic := make(map[[16]byte][]string)
	topics := make(map[[16]byte]TopicInfo)
	for _, m := range members {
		out[m.id] = make(partSet)
		for _, t := range m.topics {
			byTopic[t.ID] = append(byTopic[t.ID], m.id)
			topics[t.ID] = t
		}
	}
	for id, ids := range byTopic {
		slices.Sort(ids)
		n := topics[id].Partitions
		per, extra := n/int32(len(ids)), n%int32(len(ids))
		next := int32(0)
		for i, mid := range ids {
			k := per
			if int32(i) < extra {
				k++
			}
			for p := next; p < next+k; p++ {
				out[mid][tpID{id, p}] = struct{}{}
			}
			next += k
		}
	}
	return out
}
