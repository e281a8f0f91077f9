package broker

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/broker/meta"
)

// replicaState is this broker's view of one partition at one metadata image: whether it leads,
// who does, at which epochs, and the in-sync replica set. It is immutable; a partition swaps
// in a new one when the image changes (applyState).
type replicaState struct {
	leader         bool // this broker leads the partition
	leaderID       int32
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32
	// minISR is the topic's min.insync.replicas: acks=all Produce is refused below it.
	minISR int
}

// followerProgress is what the leader knows of one follower, from its fetches (Kafka's
// Replica state on the leader).
type followerProgress struct {
	// leo is the follower's log end offset: the offset of its last fetch; -1 until it fetched
	// in this leader epoch.
	leo int64
	// lastCaughtUp is the last time the follower had everything the leader had (Kafka's
	// lastCaughtUpTimeMs); a follower in the ISR not caught up for replica.lag.time.max.ms
	// leaves it.
	lastCaughtUp time.Time
	// lastFetch and lastFetchLeaderLEO are the time of its previous fetch and the leader's log
	// end offset then: a fetch reaching that offset proves it was caught up at that time.
	lastFetch          time.Time
	lastFetchLeaderLEO int64
	// epoch is the broker epoch the follower's last fetch gave (KIP-903), -1 when none.
	epoch int64
}

// hwWait is an acks=all Produce waiting for the high watermark to pass its batch.
type hwWait struct {
	upto int64
	done func(code *kerr.Error)
}

// replication is the leader's side of a partition's replication; guarded by partition.replMu.
type replication struct {
	followers map[int32]*followerProgress
	// pendingISR is the ISR of a change sent to the controller and not yet in the image; while
	// it is pending the high watermark counts the union of both sets (Kafka's maximal ISR), so
	// a follower added to the ISR never lacks what the high watermark covers.
	pendingISR []int32
	// hwWaits are acks=all Produce requests waiting, in offset order.
	hwWaits []hwWait
}

// state returns the partition's current replica state.
func (p *partition) state() *replicaState { return p.st.Load() }

// isLeader reports whether this broker leads the partition now.
func (p *partition) isLeader() bool {
	st := p.st.Load()
	return st != nil && st.leader
}

// highWatermark is the offset below which every record is on every in-sync replica: what
// consumers may read.
func (p *partition) highWatermark() int64 { return p.hw.Load() }

// applyState installs st, taken from a new metadata image. On becoming leader (a new leader
// epoch) the log starts the epoch at its end and the followers' progress restarts; on losing
// leadership waiting acks=all requests fail with NOT_LEADER_OR_FOLLOWER. A leadership older
// than the log's latest epoch is stale and taken as no leader at all. It returns the waits
// to fail, which the caller answers outside the lock.
func (p *partition) applyState(st *replicaState, self int32, now time.Time) ([]hwWait, error) {
	// A follower fetch in progress finishes its append first (replicaFetcher.apply).
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	p.replMu.Lock()
	defer p.replMu.Unlock()
	old := p.st.Load()
	if latest, ok := p.log().LatestEpoch(); ok && st.leader && latest > st.leaderEpoch {
		// The log holds a later leader epoch than the image names: the image predates what
		// this replica followed (a restart replays the metadata log it had, which may lag the
		// data it fetched). Neither lead nor follow until a newer image comes.
		stale := *st
		stale.leader, stale.leaderID = false, -1
		st = &stale
	}
	newEpoch := old == nil || old.leaderEpoch != st.leaderEpoch || old.leader != st.leader
	var failed []hwWait
	if st.leader {
		if newEpoch {
			if err := p.log().SetLeaderEpoch(st.leaderEpoch); err != nil {
				return nil, err
			}
			p.repl.followers = map[int32]*followerProgress{}
		}
		// Kafka starts the ISR's followers as caught up at the election, so they get a full
		// replica.lag.time.max.ms to show up; replicas a reassignment adds start the same way,
		// and the ones it removed are forgotten.
		for _, r := range st.replicas {
			if _, ok := p.repl.followers[r]; !ok && r != self {
				p.repl.followers[r] = &followerProgress{leo: -1, lastCaughtUp: now, lastFetchLeaderLEO: -1, epoch: -1}
			}
		}
		for r := range p.repl.followers {
			if !slices.Contains(st.replicas, r) {
				delete(p.repl.followers, r)
			}
		}
		if p.repl.pendingISR != nil && (old == nil || old.partitionEpoch != st.partitionEpoch) {
			p.repl.pendingISR = nil
			p.isrChanging.Store(false)
		}
	} else {
		failed = p.repl.hwWaits
		p.repl.hwWaits = nil
		p.repl.followers = nil
		p.repl.pendingISR = nil
		p.isrChanging.Store(false)
	}
	p.st.Store(st)
	if st.leader && p.advanceHWLocked(self) {
		p.wakeWaiters()
	}
	return failed, nil
}

// initHW sets the high watermark of a partition just opened: the checkpointed one, within the
// log.
func (p *partition) initHW(checkpointed int64) {
	p.openedEnd = p.log().LogEndOffset()
	p.hw.Store(max(min(checkpointed, p.log().LogEndOffset()), p.log().LogStartOffset()))
	p.log().NoteHighWatermark(p.hw.Load())
}

// setFollowerHW moves a follower's high watermark to the leader's, within its own log.
func (p *partition) setFollowerHW(leaderHW int64) {
	p.hw.Store(max(min(leaderHW, p.log().LogEndOffset()), p.log().LogStartOffset()))
	p.log().NoteHighWatermark(p.hw.Load())
}

// hwMembersLocked returns the replicas whose log end offsets bound the high watermark: the
// ISR, with the members of a pending ISR change added.
func (p *partition) hwMembersLocked(st *replicaState) []int32 {
	if p.repl.pendingISR == nil {
		return st.isr
	}
	out := slices.Clone(st.isr)
	for _, r := range p.repl.pendingISR {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// advanceHWLocked moves the high watermark to the smallest log end offset over the ISR, never
// back, and answers the acks=all requests it now covers. It reports whether it moved.
func (p *partition) advanceHWLocked(self int32) bool {
	st := p.st.Load()
	hw := p.durableEnd()
	for _, r := range p.hwMembersLocked(st) {
		if r == self {
			continue
		}
		f := p.repl.followers[r]
		if f == nil || f.leo < 0 {
			return false
		}
		hw = min(hw, f.leo)
	}
	if hw <= p.hw.Load() {
		return false
	}
	p.hw.Store(hw)
	p.log().NoteHighWatermark(hw)
	n := 0
	for _, w := range p.repl.hwWaits {
		if w.upto > hw {
			break
		}
		n++
		if len(st.isr) < st.minISR {
			w.done(kerr.NotEnoughReplicasAfterAppend)
		} else {
			w.done(nil)
		}
	}
	p.repl.hwWaits = p.repl.hwWaits[n:]
	return true
}

// durableEnd is how far the leader's own log counts toward the high watermark: its end, or in
// group-commit mode the fsynced part, so consumers never read what a crash could take back.
func (p *partition) durableEnd() int64 {
	if p.log().GroupCommit() {
		// What the log held when opened survived whatever came before.
		return min(p.log().LogEndOffset(), max(p.log().RecoveryPoint(), p.openedEnd))
	}
	return p.log().LogEndOffset()
}

// afterLeaderAppend moves the high watermark after an append by the leader: at once when the
// leader is the only in-sync replica, else when followers fetch.
func (p *partition) afterLeaderAppend(self int32) {
	st := p.st.Load()
	if st != nil && len(st.isr) == 1 && st.isr[0] == self && !p.isrChanging.Load() && !p.log().GroupCommit() {
		p.hw.Store(p.log().LogEndOffset())
		p.log().NoteHighWatermark(p.hw.Load())
		return
	}
	p.replMu.Lock()
	p.advanceHWLocked(self)
	p.replMu.Unlock()
}

// waitHW calls done once the high watermark reaches upto (nil, or
// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min.insync.replicas meanwhile),
// or with NOT_LEADER_OR_FOLLOWER when leadership moves first. It reports false, calling
// nothing, when upto is already covered. done must not block: it may run under the
// partition's replication lock. A request that times out first stays queued until one of
// those happens; its done must then do nothing.
func (p *partition) waitHW(upto int64, done func(*kerr.Error)) bool {
	p.replMu.Lock()
	defer p.replMu.Unlock()
	if p.hw.Load() >= upto {
		return false
	}
	st := p.st.Load()
	if st == nil || !st.leader {
		done(kerr.NotLeaderForPartition)
		return true
	}
	p.repl.hwWaits = append(p.repl.hwWaits, hwWait{upto: upto, done: done})
	return true
}

// followerFetched records a follower's fetch from offset at now: its log end offset, whether it
// is caught up, and from that the high watermark. It returns whether the follower, outside the
// ISR, has now caught up enough to join it (its log end reaches the high watermark and the
// current leader epoch's start).
func (p *partition) followerFetched(replica int32, brokerEpoch, offset int64, now time.Time, self int32, epochStart int64) (hwMoved, joinISR bool) {
	p.replMu.Lock()
	defer p.replMu.Unlock()
	st := p.st.Load()
	f := p.repl.followers[replica]
	if st == nil || !st.leader || f == nil {
		return false, false
	}
	f.epoch = brokerEpoch
	leo := p.log().LogEndOffset()
	switch {
	case offset >= leo:
		f.lastCaughtUp = now
	case f.lastFetchLeaderLEO >= 0 && offset >= f.lastFetchLeaderLEO:
		f.lastCaughtUp = f.lastFetch
	}
	f.leo = offset
	f.lastFetch, f.lastFetchLeaderLEO = now, leo
	hwMoved = p.advanceHWLocked(self)
	inISR := slices.Contains(st.isr, replica) || slices.Contains(p.repl.pendingISR, replica)
	return hwMoved, !inISR && p.repl.pendingISR == nil && offset >= p.hw.Load() && offset >= epochStart
}

// followerEpoch is the broker epoch of replica's last fetch, or -1.
func (p *partition) followerEpoch(replica int32) int64 {
	p.replMu.Lock()
	defer p.replMu.Unlock()
	if f := p.repl.followers[replica]; f != nil {
		return f.epoch
	}
	return -1
}

// laggingISR returns the ISR members (other than this leader) not caught up for lagMax: the
// followers to drop from the ISR.
func (p *partition) laggingISR(self int32, now time.Time, lagMax time.Duration) []int32 {
	p.replMu.Lock()
	defer p.replMu.Unlock()
	st := p.st.Load()
	if st == nil || !st.leader || p.repl.pendingISR != nil {
		return nil
	}
	var out []int32
	for _, r := range st.isr {
		if r == self {
			continue
		}
		if f := p.repl.followers[r]; f == nil || now.Sub(f.lastCaughtUp) > lagMax {
			out = append(out, r)
		}
	}
	return out
}

// beginISRChange marks isr as the ISR being proposed, unless a change is pending already. The
// high watermark counts its members from now until the image has the outcome.
func (p *partition) beginISRChange(isr []int32) bool {
	p.replMu.Lock()
	defer p.replMu.Unlock()
	if p.repl.pendingISR != nil {
		return false
	}
	p.repl.pendingISR = isr
	p.isrChanging.Store(true)
	return true
}

// endISRChange clears a pending ISR change that failed to commit.
func (p *partition) endISRChange() {
	p.replMu.Lock()
	p.repl.pendingISR = nil
	p.isrChanging.Store(false)
	p.replMu.Unlock()
}

// stateFor builds this broker's replica state of partition pm of topic t.
func (b *Broker) stateFor(t *meta.Topic, pm meta.Partition) *replicaState {
	minISR := 1
	v, _ := b.live().effectiveTopicConfig(t.Configs, "min.insync.replicas")
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
		minISR = n
	}
	return &replicaState{leader: pm.Leader == b.cfg.NodeID, leaderID: pm.Leader, leaderEpoch: pm.LeaderEpoch,
		partitionEpoch: pm.PartitionEpoch, replicas: pm.Replicas, isr: pm.ISR, minISR: minISR}
}

// followerFetched records a follower's fetch of p from offset and acts on it: consumers parked
// on p look again when the high watermark moved, and a follower that caught up is proposed
// back into the ISR.
func (b *Broker) followerFetched(p *partition, replica int32, brokerEpoch, offset int64, now time.Time) {
	st := p.state()
	_, epochStart := p.log().EndOffsetForEpoch(st.leaderEpoch - 1)
	moved, join := p.followerFetched(replica, brokerEpoch, offset, now, b.cfg.NodeID, epochStart)
	if moved {
		p.wakeWaiters()
	}
	if join && b.eligibleForISR(replica) {
		b.changeISR(p, st, append(slices.Clone(st.isr), replica))
	}
}

// eligibleForISR reports whether broker replica may join an ISR: registered, unfenced and not
// in controlled shutdown, as Kafka's controller requires of an AlterPartition.
func (b *Broker) eligibleForISR(replica int32) bool {
	br, ok := b.meta.Image().Brokers[replica]
	return ok && !br.Fenced && !br.InControlledShutdown
}

// shrinkISRs drops from the ISR of every partition led here the followers that have not caught
// up for replica.lag.time.max.ms (Kafka's maybeShrinkIsr, run every half of it).
func (b *Broker) shrinkISRs(now time.Time) {
	for _, ps := range b.parts.Load().byID {
		for _, p := range ps {
			if p == nil || !p.isLeader() {
				continue
			}
			st := p.state()
			if len(st.isr) < 2 {
				continue
			}
			lagging := p.laggingISR(b.cfg.NodeID, now, b.cfg.ReplicaLagTimeMax)
			if len(lagging) == 0 {
				continue
			}
			isr := slices.DeleteFunc(slices.Clone(st.isr), func(r int32) bool { return slices.Contains(lagging, r) })
			b.logger.Info("shrinking ISR", "topic", p.topic, "partition", p.index, "from", st.isr, "to", isr)
			b.changeISR(p, st, isr)
		}
	}
}

// changeISR proposes isr as p's in-sync replica set to the active controller with an
// AlterPartition, based on the partition state st: the controller refuses it when another
// change came first (a stale partition epoch), and the next image brings the outcome either way. One change per
// partition is in flight at a time; the high watermark counts both sets meanwhile.
func (b *Broker) changeISR(p *partition, st *replicaState, isr []int32) {
	if !p.beginISRChange(isr) {
		return
	}
	go func() {
		im := b.meta.Image()
		t := im.TopicsByID[p.topicID]
		if t == nil || int(p.index) >= len(t.Partitions) {
			p.endISRChange()
			return
		}
		pm := t.Partitions[p.index]
		if pm.PartitionEpoch != st.partitionEpoch || pm.Leader != b.cfg.NodeID || pm.LeaderEpoch != st.leaderEpoch {
			// The image moved on since st; the next fetch or lag check decides again.
			p.endISRChange()
			return
		}
		if err := b.alterISR(context.Background(), p, t.ID, pm, isr); err != nil {
			b.logger.Warn("ISR change not committed", "topic", p.topic, "partition", p.index, "isr", isr, "err", err)
			p.endISRChange()
		}
	}()
}
