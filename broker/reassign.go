package broker

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/broker/meta"
)

// Partition reassignment (KIP-455) as KRaft's controller does it: a reassignment to target
// replicas T of a partition with replicas C records Replicas = T followed by C−T, adding T−C
// and removing C−T. The adding replicas open the log and follow the leader like any other
// follower; once each of them is in the ISR the active controller completes the move with a
// record whose replicas are T and whose ISR leaves out the removed ones, electing a new leader
// from T when the old one is leaving. Removing a replica bumps the leader epoch, so a removed
// follower's fetches are fenced. Cancelling reverts to C without the adding replicas.

// validateAssignment checks target replicas as Kafka's controller checks a manual assignment:
// not empty, no broker twice, every broker registered.
func validateAssignment(im *meta.Image, target []int32) (*kerr.Error, string) {
	if len(target) == 0 {
		return kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list."
	}
	for i, r := range target {
		if slices.Contains(target[:i], r) {
			return kerr.InvalidReplicaAssignment, fmt.Sprintf("The manual partition assignment includes the broker %d more than once.", r)
		}
		if _, ok := im.Brokers[r]; !ok {
			return kerr.InvalidReplicaAssignment, fmt.Sprintf("The manual partition assignment includes broker %d, but no such broker is registered.", r)
		}
	}
	return nil, ""
}

// reassignRecord returns the record that moves partition p of topic t to target (which
// validateAssignment accepted), or false when p already has exactly those replicas and no
// reassignment is in progress. A reassignment in progress is replaced: the replicas it was
// adding that target keeps are still adding (they may not have caught up), the others become
// removing ones. A move that adds no replica (a removal or a new order) completes in the
// same record, if the ISR keeps a member.
func reassignRecord(t *meta.Topic, p meta.Partition, target []int32, live map[int32]bool) (meta.Record, bool) {
	if !p.Reassigning() && slices.Equal(p.Replicas, target) {
		return meta.Record{}, false
	}
	next := p
	next.Replicas = slices.Clone(target)
	next.AddingReplicas, next.RemovingReplicas = nil, nil
	for _, r := range target {
		if !slices.Contains(p.Replicas, r) || slices.Contains(p.AddingReplicas, r) {
			next.AddingReplicas = append(next.AddingReplicas, r)
		}
	}
	for _, r := range p.Replicas {
		if !slices.Contains(target, r) {
			next.Replicas = append(next.Replicas, r)
			next.RemovingReplicas = append(next.RemovingReplicas, r)
		}
	}
	if done, ok := completeReassignment(t, next, live); ok {
		return done, true
	}
	return next.Next(t.ID, p.Leader, p.LeaderEpoch, p.ISR), true
}

// completeReassignment returns the record that completes p's reassignment, if one is in
// progress and every adding replica is in the ISR: replicas without the removing ones, the
// ISR without them, and the first live in-sync target replica as leader when the leader is
// leaving (or is not live). The leader epoch moves on when the leader changes or a replica
// leaves. It returns false while the move must wait, also when no target replica of the ISR
// could lead.
func completeReassignment(t *meta.Topic, p meta.Partition, live map[int32]bool) (meta.Record, bool) {
	if !p.Reassigning() {
		return meta.Record{}, false
	}
	live = withoutOffline(live, p)
	for _, r := range p.AddingReplicas {
		if !p.InISR(r) {
			return meta.Record{}, false
		}
	}
	target := p.TargetReplicas()
	isr := slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return !slices.Contains(target, r) })
	if len(isr) == 0 {
		return meta.Record{}, false
	}
	leader := keepOrElect(p.Leader, target, isr, live)
	if leader < 0 {
		return meta.Record{}, false
	}
	epoch := p.LeaderEpoch
	if leader != p.Leader || len(p.RemovingReplicas) > 0 {
		epoch++
	}
	done := p
	done.Replicas = target
	done.AddingReplicas, done.RemovingReplicas = nil, nil
	return done.Next(t.ID, leader, epoch, isr), true
}

// cancelReassignment returns the record that reverts p's reassignment in progress: its
// replicas and ISR without the adding replicas and with a leader among what is left. The error
// is NO_REASSIGNMENT_IN_PROGRESS without one, and INVALID_REPLICA_ASSIGNMENT when only an
// adding replica is in sync and the topic does not allow an unclean election, as Kafka's.
func cancelReassignment(t *meta.Topic, p meta.Partition, live map[int32]bool, unclean bool) (meta.Record, *kerr.Error, string) {
	if !p.Reassigning() {
		return meta.Record{}, kerr.NoReassignmentInProgress, ""
	}
	live = withoutOffline(live, p)
	notAdding := func(r int32) bool { return !slices.Contains(p.AddingReplicas, r) }
	replicas := slices.DeleteFunc(slices.Clone(p.Replicas), func(r int32) bool { return !notAdding(r) })
	isr := slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return !notAdding(r) })
	if len(isr) == 0 {
		if !unclean {
			return meta.Record{}, kerr.InvalidReplicaAssignment, fmt.Sprintf("Unable to revert partition assignment for %s:%d because it would require an unclean leader election.", t.Name, p.Index)
		}
		for _, r := range replicas {
			if live[r] {
				isr = []int32{r}
				break
			}
		}
	}
	leader := keepOrElect(p.Leader, replicas, isr, live)
	epoch := p.LeaderEpoch
	if leader != p.Leader || len(p.AddingReplicas) > 0 {
		epoch++
	}
	reverted := p
	reverted.Replicas = replicas
	reverted.AddingReplicas, reverted.RemovingReplicas = nil, nil
	return reverted.Next(t.ID, leader, epoch, isr), nil, ""
}

// keepOrElect returns leader while it is live and in isr, else the first live replica in isr,
// else -1.
func keepOrElect(leader int32, replicas, isr []int32, live map[int32]bool) int32 {
	if live[leader] && slices.Contains(isr, leader) {
		return leader
	}
	for _, r := range replicas {
		if live[r] && slices.Contains(isr, r) {
			return r
		}
	}
	return -1
}

// reassignmentRecords returns the records that complete every reassignment ready to complete.
func reassignmentRecords(im *meta.Image) []meta.Record {
	live := leaderCandidates(im)
	var recs []meta.Record
	for _, name := range im.SortedTopicNames() {
		t := im.Topics[name]
		for _, p := range t.Partitions {
			if rec, ok := completeReassignment(t, p, live); ok {
				recs = append(recs, rec)
			}
		}
	}
	return recs
}

// completeReassignments commits, on the active controller, the completion of every
// reassignment whose adding replicas have joined the ISR, one partition per commit: a record
// that lost a race with another change of its partition is refused by the partition epoch
// without holding back the others, and is decided again on the next image.
func (b *Broker) completeReassignments() {
	if !b.meta.IsLeader() {
		return
	}
	for _, r := range reassignmentRecords(b.meta.Image()) {
		if _, err := b.meta.Commit([]meta.Record{r}); err != nil {
			b.logger.Warn("commit a completed partition reassignment", "topic_id", r.TopicID, "partition", r.Partition, "err", err)
			continue
		}
		b.logger.Info("partition reassignment completed", "topic_id", r.TopicID, "partition", r.Partition, "replicas", r.Replicas, "leader", r.Leader)
	}
}
