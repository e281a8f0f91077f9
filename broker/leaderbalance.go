package broker

// Preferred and unclean leader elections on demand (ElectLeaders, 43_elect_leaders.go) and the
// active controller's automatic return of leadership to preferred replicas
// (auto.leader.rebalance.enable), after KRaft's ReplicationControlManager.electLeader and
// PartitionChangeBuilder. The decisions are plain functions of an image; the callers commit
// what they decide, and a record decided on an image that another change overtook is refused
// by its partition epoch.

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

// The election types of ElectLeaders v1+ (Kafka's ElectionType); v0 elects preferred leaders.
const (
	electionPreferred int8 = 0
	electionUnclean   int8 = 1
)

// electionTypeName is how Kafka's tools name an election type.
func electionTypeName(typ int8) string {
	switch typ {
	case electionPreferred:
		return "PREFERRED"
	case electionUnclean:
		return "UNCLEAN"
	}
	return fmt.Sprintf("type %d", typ)
}

// maxElectionsPerBalance bounds the elections one commit of the automatic rebalance carries,
// as Kafka's controller bounds one pass; the rest follow in further commits at once.
const maxElectionsPerBalance = 1000

// leaderCandidates returns the brokers that may become a partition's leader: registered,
// unfenced and not in controlled shutdown (KRaft's LeaderAcceptor).
func leaderCandidates(im *meta.Image) map[int32]bool {
	live := make(map[int32]bool, len(im.Brokers))
	for id, br := range im.Brokers {
		if !br.Fenced && !br.InControlledShutdown {
			live[id] = true
		}
	}
	return live
}

// preferredReplica is the replica that should lead p: its first one, or -1 without replicas.
func preferredReplica(p meta.Partition) int32 {
	if len(p.Replicas) == 0 {
		return -1
	}
	return p.Replicas[0]
}

// electionOutcome is the decision of an election for one partition: the record that gives it
// its new leader when code is nil, else the error the partition is answered with (msg empty:
// the error's own message, as Kafka sends none).
type electionOutcome struct {
	rec  meta.Record
	code *kerr.Error
	msg  string
}

// electPartition decides an election of type typ for partition part of topic on image im,
// live being leaderCandidates(im) (less the partition's offline replicas), as KRaft's
// controller answers ElectLeaders:
//
//   - an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION;
//   - preferred: ELECTION_NOT_NEEDED when the preferred replica leads; else the preferred
//     replica leads if it is live and in the ISR; else, if the current leader is not live any
//     more, the next live replica of the ISR in replica order; else (nothing changes)
//     PREFERRED_LEADER_NOT_AVAILABLE. A preferred election never takes a partition offline.
//   - unclean: ELECTION_NOT_NEEDED when the partition has a leader; else the first live
//     replica in the ISR, else the first live replica at all with the ISR reset to it alone
//     (what only the old ISR had is lost), else ELIGIBLE_LEADERS_NOT_AVAILABLE. The topic's
//     unclean.leader.election.enable does not matter: the request is the operator's consent.
//
// A new leader comes with the next leader epoch; the ISR is kept but for an unclean election.
func electPartition(im *meta.Image, live map[int32]bool, topic string, part int32, typ int8) electionOutcome {
	t := im.Topics[topic]
	if t == nil {
		return electionOutcome{code: kerr.UnknownTopicOrPartition, msg: "No such topic as " + topic}
	}
	if part < 0 || int(part) >= len(t.Partitions) {
		return electionOutcome{code: kerr.UnknownTopicOrPartition, msg: fmt.Sprintf("No such partition as %s-%d", topic, part)}
	}
	p := t.Partitions[part]
	live = withoutOffline(live, p)
	inISR := func(r int32) bool { return r >= 0 && live[r] && p.InISR(r) }
	switch typ {
	case electionPreferred:
		if p.Leader == preferredReplica(p) {
			return electionOutcome{code: kerr.ElectionNotNeeded}
		}
		leader := int32(-1)
		switch {
		case len(p.Replicas) > 0 && inISR(p.Replicas[0]):
			leader = p.Replicas[0]
		case inISR(p.Leader):
			leader = p.Leader
		default:
			for _, r := range p.Replicas {
				if inISR(r) {
					leader = r
					break
				}
			}
		}
		if leader < 0 || leader == p.Leader {
			return electionOutcome{code: kerr.PreferredLeaderNotAvailable}
		}
		return electionOutcome{rec: p.Next(t.ID, leader, p.LeaderEpoch+1, p.ISR)}
	case electionUnclean:
		if p.Leader >= 0 {
			return electionOutcome{code: kerr.ElectionNotNeeded}
		}
		for _, r := range p.Replicas {
			if inISR(r) {
				return electionOutcome{rec: p.Next(t.ID, r, p.LeaderEpoch+1, p.ISR)}
			}
		}
		for _, r := range p.Replicas {
			if live[r] {
				return electionOutcome{rec: p.Next(t.ID, r, p.LeaderEpoch+1, []int32{r})}
			}
		}
		return electionOutcome{code: kerr.EligibleLeadersNotAvailable}
	}
	return electionOutcome{code: kerr.InvalidRequest, msg: fmt.Sprintf("Unknown election type %d", typ)}
}

// electLeaders answers the topics of an ElectLeaders request with elections of type typ on
// image im (live being leaderCandidates(im)), and returns the records of the elections made.
// Partitions are answered in request order; a partition named twice is elected once. With
// topics nil (Kafka's "all partitions") every topic is answered, by name, and its partitions
// that need no election are left out, as Kafka's controller does, so that a balanced cluster
// answers with no partition at all.
func electLeaders(im *meta.Image, live map[int32]bool, typ int8, topics []kmsg.ElectLeadersRequestTopic) ([]kmsg.ElectLeadersResponseTopic, []meta.Record) {
	all := topics == nil
	if all {
		for _, name := range im.SortedTopicNames() {
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic = name
			for _, p := range im.Topics[name].Partitions {
				rt.Partitions = append(rt.Partitions, p.Index)
			}
			topics = append(topics, rt)
		}
	}
	type tp struct {
		topic string
		part  int32
	}
	elected := map[tp]bool{}
	var recs []meta.Record
	out := make([]kmsg.ElectLeadersResponseTopic, 0, len(topics))
	for _, t := range topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, part := range t.Partitions {
			o := electPartition(im, live, t.Topic, part, typ)
			if all && o.code == kerr.ElectionNotNeeded {
				continue
			}
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = part
			if o.code != nil {
				rp.ErrorCode = o.code.Code
				if o.msg != "" {
					rp.ErrorMessage = kmsg.StringPtr(o.msg)
				}
			} else if k := (tp{t.Topic, part}); !elected[k] {
				elected[k] = true
				recs = append(recs, o.rec)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out, recs
}

// balanceRecords returns the records of one pass of the automatic rebalance on image im (live
// being leaderCandidates(im)): a preferred election (electPartition) for every partition not
// led by its preferred replica, by topic name and partition, of which at most limit are
// returned; more says that others are left for another pass. Partitions whose election
// changes nothing are skipped, as KRaft's controller skips them.
func balanceRecords(im *meta.Image, live map[int32]bool, limit int) (recs []meta.Record, more bool) {
	for _, name := range im.SortedTopicNames() {
		for _, p := range im.Topics[name].Partitions {
			if p.Leader == preferredReplica(p) {
				continue
			}
			o := electPartition(im, live, name, p.Index, electionPreferred)
			if o.code != nil {
				continue
			}
			if len(recs) == limit {
				return recs, true
			}
			recs = append(recs, o.rec)
		}
	}
	return recs, false
}

// leaderBalanceLoop runs while the broker is up: while auto.leader.rebalance.enable is on, the
// active controller moves leadership back to preferred replicas every
// leader.imbalance.check.interval.seconds, as KRaft's controller does. Kafka's
// leader.imbalance.per.broker.percentage threshold is not applied, as KRaft applies none.
func (b *Broker) leaderBalanceLoop() {
	defer b.bg.Done()
	if !b.cfg.AutoLeaderRebalance || !b.cfg.hasRole("controller") {
		return
	}
	b.everyWhileActive(b.cfg.LeaderImbalanceCheckInterval, b.balanceLeaders)
}

// balanceLeaders commits the automatic rebalance's preferred elections, in commits of at most
// maxElectionsPerBalance, until none is left or a commit fails (the next check tries again).
func (b *Broker) balanceLeaders() {
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	for {
		select {
		case <-b.stop:
			return
		default:
		}
		im := b.meta.Image()
		recs, more := balanceRecords(im, leaderCandidates(im), maxElectionsPerBalance)
		if len(recs) == 0 {
			return
		}
		if _, err := b.meta.Commit(recs); err != nil {
			b.logger.Warn("commit preferred leader elections", "partitions", len(recs), "err", err)
			return
		}
		b.logger.Info("moved leadership back to preferred replicas", "partitions", describeElections(im, recs))
		if !more {
			return
		}
	}
}

// describeElections names the partitions of election records and their new leaders, for logs:
// "topic-0→1 topic-3→2".
func describeElections(im *meta.Image, recs []meta.Record) string {
	var sb strings.Builder
	for i, r := range recs {
		if i == 20 {
			fmt.Fprintf(&sb, " and %d more", len(recs)-i)
			break
		}
		if i > 0 {
			sb.WriteByte(' ')
		}
		name := r.TopicID.String()
		if t := im.TopicsByID[r.TopicID]; t != nil {
			name = t.Name
		}
		fmt.Fprintf(&sb, "%s-%d→%d", name, r.Partition, r.Leader)
	}
	return sb.String()
}
