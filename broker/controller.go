package broker

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"ringbroker/broker/meta"
)

// sortedBrokers returns the registered brokers by node id.
func sortedBrokers(im *meta.Image) []meta.Broker {
	out := make([]meta.Broker, 0, len(im.Brokers))
	for _, br := range im.Brokers {
		out = append(out, br)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

// controllerLoop runs while the broker is up: it brings the open logs in line with every new
// image, heartbeats to the active controller, and, while this node is the active controller,
// fences and unfences brokers.
func (b *Broker) controllerLoop() {
	defer b.bg.Done()
	b.bg.Add(2)
	go b.leaderBalanceLoop()
	go b.tokenExpiryLoop()
	hb := time.NewTicker(b.cfg.BrokerHeartbeatInterval)
	defer hb.Stop()
	check := time.NewTicker(b.cfg.BrokerHeartbeatInterval / 2)
	defer check.Stop()
	c := &controllerState{registered: map[meta.UUID]time.Time{}, refused: map[int32]meta.Heartbeat{},
		probing: map[int32]bool{}, probed: make(chan probeResult, 8)}
	for {
		select {
		case <-b.stop:
			return
		case <-b.imageChanged:
			if err := b.syncPartitions(); err != nil {
				b.logger.Error("open partitions for the new metadata image", "err", err)
			}
			if err := b.loadOffsetsPartitions(); err != nil {
				b.logger.Error("load offsets partitions", "err", err)
			}
			if err := b.loadTxnPartitions(); err != nil {
				b.logger.Error("load transaction state partitions", "err", err)
			}
			b.completeReassignments()
		case <-hb.C:
			if b.cfg.hasRole("broker") {
				go b.heartbeat()
			}
		case <-check.C:
			b.controllerCheck(c, time.Now())
			b.completeReassignments()
		case sus := <-b.meta.Suspects():
			b.probeSuspect(c, sus)
		case res := <-c.probed:
			delete(c.probing, res.NodeID)
			if !res.refused {
				b.logger.Info("broker reported unreachable accepts connections", "node", res.NodeID)
				continue
			}
			b.logger.Info("broker refuses connections: fencing it now", "node", res.NodeID)
			c.refused[res.NodeID] = res.Heartbeat
			b.controllerCheck(c, time.Now())
		}
	}
}

// everyWhileActive runs fn every interval while this node is the active controller, until
// the broker stops.
func (b *Broker) everyWhileActive(interval time.Duration, fn func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
			if b.meta.IsLeader() {
				fn()
			}
		}
	}
}

// controllerState is what the controller loop keeps between its checks.
type controllerState struct {
	// leaderSince is when this node became the active controller; zero while it is not.
	leaderSince time.Time
	// registered holds when this controller first saw each registration: a registration is
	// as good as a heartbeat.
	registered map[meta.UUID]time.Time
	// refused holds the registrations found not listening, and when.
	refused map[int32]meta.Heartbeat
	// probing marks the brokers being probed; probed receives the outcomes.
	probing map[int32]bool
	probed  chan probeResult
}

// probeResult is the outcome of probing a suspect: whether its endpoint refused a connection.
type probeResult struct {
	meta.Heartbeat
	NodeID  int32
	refused bool
}

// controllerCheck is the active controller's periodic decision (fenceRecords), committed.
func (b *Broker) controllerCheck(c *controllerState, now time.Time) {
	if !b.meta.IsLeader() {
		if !c.leaderSince.IsZero() {
			b.logger.Info("no longer the active controller", "node", b.cfg.NodeID)
		}
		c.leaderSince = time.Time{}
		return
	}
	if c.leaderSince.IsZero() {
		b.logger.Info("became the active controller", "node", b.cfg.NodeID)
		c.leaderSince = now
		b.meta.ResetHeartbeats()
	}
	im := b.meta.Image()
	hbs := b.meta.Heartbeats()
	for _, br := range im.Brokers {
		if _, ok := c.registered[br.Incarnation]; !ok {
			c.registered[br.Incarnation] = now
		}
		if hb, ok := hbs[br.NodeID]; !ok || c.registered[br.Incarnation].After(hb.At) {
			hbs[br.NodeID] = meta.Heartbeat{Incarnation: br.Incarnation, At: c.registered[br.Incarnation]}
		}
	}
	if b.cfg.hasRole("broker") {
		// The controller runs, so the broker of its own process is alive: a late tick
		// (a long stall of this process) must not fence it.
		hbs[b.cfg.NodeID] = meta.Heartbeat{Incarnation: b.incarnation, At: now, WantShutdown: b.shuttingDown.Load()}
	}
	dead := deadBrokers(im, c.refused, b.meta.Heartbeats())
	recs := fenceRecords(im, hbs, dead, c.leaderSince, now, b.cfg.BrokerSessionTimeout, b.uncleanElection)
	if len(recs) == 0 {
		return
	}
	if _, err := b.meta.Commit(recs); err != nil {
		b.logger.Warn("commit broker fencing", "err", err)
	}
}

// deadBrokers returns the brokers whose registration refused connections (refused, by node)
// and did not heartbeat since, and forgets refusals of registrations that were replaced. The
// registration itself does not count as a heartbeat here: the controller may see it only after
// the process already died.
func deadBrokers(im *meta.Image, refused, hbs map[int32]meta.Heartbeat) map[int32]bool {
	dead := map[int32]bool{}
	for id, r := range refused {
		br, ok := im.Brokers[id]
		if !ok || br.Incarnation != r.Incarnation {
			delete(refused, id)
			continue
		}
		if hb, ok := hbs[id]; !ok || hb.Incarnation != r.Incarnation || !hb.At.After(r.At) {
			dead[id] = true
		}
	}
	return dead
}

// probeSuspect checks a broker reported unreachable by dialing its registered endpoint: only a
// refused connection (nothing listens: the process is gone) counts, not a timeout, which a
// slow or cut-off broker also gives and which the session timeout is for.
func (b *Broker) probeSuspect(c *controllerState, sus meta.Suspect) {
	br, ok := b.meta.Image().Brokers[sus.NodeID]
	if !ok || br.Fenced || br.Incarnation != sus.Incarnation || c.probing[sus.NodeID] || sus.NodeID == b.cfg.NodeID {
		return
	}
	c.probing[sus.NodeID] = true
	addr := endpoint(br)
	go func() {
		at := time.Now()
		res := probeResult{Heartbeat: meta.Heartbeat{Incarnation: br.Incarnation, At: at}, NodeID: br.NodeID,
			refused: refusesConnections(addr)}
		select {
		case c.probed <- res:
		case <-b.stop:
		}
	}()
}

// controllerIDFor is the controller id that Metadata and DescribeCluster name: the active
// controller when it is also a live broker (a combined node), which clients can reach; else,
// as Kafka's KRaft brokers answer, a live broker (this one).
func (b *Broker) controllerIDFor(im *meta.Image) int32 {
	if l := b.meta.Leader(); l >= 0 {
		if br, ok := im.Brokers[l]; ok && !br.Fenced {
			return l
		}
	}
	return b.cfg.NodeID
}

// heartbeat tells the active controller this broker is alive.
func (b *Broker) heartbeat() {
	if !b.heartbeating.CompareAndSwap(false, true) {
		return
	}
	defer b.heartbeating.Store(false)
	if _, ok := b.meta.Image().Brokers[b.cfg.NodeID]; !ok && b.cfg.hasRole("broker") && !b.shuttingDown.Load() {
		// Unregistered while running (UnregisterBroker): register again, as Kafka's broker
		// does when the controller refuses its heartbeat.
		if err := b.registerSelf(); err != nil {
			b.logger.Warn("register again after being unregistered", "err", err)
		}
		return
	}
	sent := time.Now()
	if _, err := b.meta.Heartbeat(context.Background(), b.cfg.NodeID, b.incarnation, b.shuttingDown.Load()); err != nil {
		b.logger.Warn("broker heartbeat", "err", err)
		return
	}
	b.renewLease(sent)
}

// controlledShutdown moves this broker's leadership to other replicas before it stops, as
// Kafka's controlled shutdown does, so that clients fail over at once instead of after the
// session timeout: it heartbeats with WantShutdown until the controller answers that nothing
// is led here any more, for at most one session timeout or until ctx ends. A broker with no
// live peer to hand leadership to stops at once.
func (b *Broker) controlledShutdown(ctx context.Context) {
	if !b.cfg.hasRole("broker") || !b.hasLivePeer() {
		return
	}
	b.shuttingDown.Store(true)
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, b.cfg.BrokerSessionTimeout)
	defer cancel()
	for {
		ok, err := b.meta.Heartbeat(ctx, b.cfg.NodeID, b.incarnation, true)
		switch {
		case err == nil && ok:
			b.logger.Info("controlled shutdown: leadership moved away", "node", b.cfg.NodeID, "took", time.Since(start).Round(time.Millisecond))
			return
		case ctx.Err() != nil:
			b.logger.Warn("controlled shutdown did not complete; stopping anyway", "node", b.cfg.NodeID, "after", time.Since(start).Round(time.Millisecond), "err", err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(controlledShutdownPoll):
		}
	}
}

// controlledShutdownPoll is how often a stopping broker asks the controller whether its
// leadership has moved.
const controlledShutdownPoll = 100 * time.Millisecond

// hasLivePeer reports whether another registered broker is unfenced and not stopping itself,
// one that could take over this broker's leadership.
func (b *Broker) hasLivePeer() bool {
	for _, br := range b.meta.Image().Brokers {
		if br.NodeID != b.cfg.NodeID && !br.Fenced && !br.InControlledShutdown {
			return true
		}
	}
	return false
}

// fenceRecords is the active controller's decision: fence the unfenced brokers not heard from
// (with their registered incarnation) for sessionTimeout, unfence fenced ones heard from again,
// record the controlled shutdown of those whose heartbeat asks for it, and bring each partition
// in line (KIP-841): fenced and shutting-down brokers leave its ISR, unless one is the last
// member, and a partition whose leader is fenced, shutting down or missing gets the first live replica of
// its ISR as leader; with none, an unclean election (unclean says whether the topic allows it)
// takes any live replica, else the partition goes offline (leader -1). A replica in a log dir
// its broker reported offline counts as not live for its partition (dirfailover.go). A broker's silence is
// counted from when this controller began leading at the earliest, as heartbeats went to the
// previous leader before. The brokers in dead (found not listening) are not alive either.
func fenceRecords(im *meta.Image, hbs map[int32]meta.Heartbeat, dead map[int32]bool, leaderSince, now time.Time, sessionTimeout time.Duration, unclean func(*meta.Topic) bool) []meta.Record {
	var recs []meta.Record
	live := map[int32]bool{}
	for _, br := range sortedBrokers(im) {
		last := leaderSince
		hb, heard := hbs[br.NodeID]
		heard = heard && hb.Incarnation == br.Incarnation
		if heard && hb.At.After(last) {
			last = hb.At
		}
		alive := now.Sub(last) < sessionTimeout && !dead[br.NodeID]
		if alive == br.Fenced {
			recs = append(recs, meta.Record{Type: meta.TypeFence, NodeID: br.NodeID, Fenced: !alive})
		}
		stopping := br.InControlledShutdown
		if heard && alive && !stopping && hb.WantShutdown {
			recs = append(recs, meta.Record{Type: meta.TypeControlledShutdown, NodeID: br.NodeID, Incarnation: br.Incarnation})
			stopping = true
		}
		live[br.NodeID] = alive && !stopping
	}
	for _, name := range im.SortedTopicNames() {
		t := im.Topics[name]
		for _, p := range t.Partitions {
			if rec, ok := electLeader(t, p, live, unclean); ok {
				recs = append(recs, rec)
			}
		}
	}
	return recs
}

// electLeader returns the record that brings partition p of t in line with the live brokers,
// if it needs one (see fenceRecords).
func electLeader(t *meta.Topic, p meta.Partition, live map[int32]bool, unclean func(*meta.Topic) bool) (meta.Record, bool) {
	live = withoutOffline(live, p)
	isr := make([]int32, 0, len(p.ISR))
	for _, r := range p.ISR {
		if live[r] {
			isr = append(isr, r)
		}
	}
	if len(isr) == 0 && len(p.ISR) > 0 {
		isr = append(isr, p.ISR[len(p.ISR)-1])
	}
	leader := p.Leader
	if leader < 0 || !live[leader] {
		leader = -1
		for _, r := range p.Replicas {
			if live[r] && slices.Contains(isr, r) {
				leader = r
				break
			}
		}
		if leader < 0 && unclean(t) {
			for _, r := range p.Replicas {
				if live[r] {
					leader, isr = r, []int32{r}
					break
				}
			}
		}
	}
	if leader == p.Leader && slices.Equal(isr, p.ISR) {
		return meta.Record{}, false
	}
	epoch := p.LeaderEpoch
	if leader != p.Leader {
		epoch++
	}
	return p.Next(t.ID, leader, epoch, isr), true
}

// uncleanElection reports whether topic t allows electing a replica outside the ISR
// (unclean.leader.election.enable).
func (b *Broker) uncleanElection(t *meta.Topic) bool {
	v, _ := b.live().effectiveTopicConfig(t.Configs, "unclean.leader.election.enable")
	return strings.EqualFold(strings.TrimSpace(v), "true")
}
