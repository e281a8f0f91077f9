package coord

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/eventloop"
	"ringbroker/internal/timingwheel"
)

// errLoadSuperseded is passed to a load's done callback when the partition
// was unloaded or loaded again before the load finished.
var errLoadSuperseded = errors.New("partition load superseded")

// partition is one __consumer_offsets partition owned by a shard.
type partition struct {
	id int32
	// loaded is false while the partition is being replayed from the store.
	loaded bool
	groups map[string]*group
	// txnGroups lists, per producer id, the groups holding pending
	// transactional offsets of that producer (group.txnOffsets), which its
	// transaction marker completes.
	txnGroups map[int64]map[string]struct{}
	// markers are the transaction markers that completed while the partition
	// was loading, applied once it is loaded.
	markers []txnMarker
}

func newPartition(id int32) *partition {
	return &partition{id: id, groups: make(map[string]*group), txnGroups: make(map[int64]map[string]struct{})}
}

// pendingAppend is a store append whose completion has not been processed.
type pendingAppend struct {
	partition int32
	then      func(base int64, err error)
}

// shard is one coordinator goroutine and everything it owns. All fields are
// accessed only from that goroutine.
type shard struct {
	c     *GroupCoordinator
	id    int
	loop  *eventloop.Loop
	parts map[int32]*partition
	// appends are in-flight store appends by id, answered with
	// NOT_COORDINATOR if their partition is unloaded first.
	appends    map[uint64]*pendingAppend
	nextAppend uint64
}

func newShard(c *GroupCoordinator, id int) (*shard, error) {
	l, err := eventloop.New(c.clock)
	if err != nil {
		return nil, fmt.Errorf("shard %d: %w", id, err)
	}
	s := &shard{c: c, id: id, loop: l, parts: make(map[int32]*partition), appends: make(map[uint64]*pendingAppend)}
	s.scheduleRetention()
	return s, nil
}

// push queues fn to run on the shard goroutine. Safe from any goroutine.
func (s *shard) push(fn func(*shard)) { s.loop.Push(func() { fn(s) }) }

func (s *shard) now() time.Time { return s.loop.Now() }

func (s *shard) nowMs() int64 { return s.now().UnixMilli() }

// schedule runs fn on the shard after d.
func (s *shard) schedule(d time.Duration, fn func()) *timingwheel.Timer {
	return s.loop.Schedule(d, fn)
}

// owned returns the loaded partition p, or the error for requests on it:
// NOT_COORDINATOR if the shard does not own it, COORDINATOR_LOAD_IN_PROGRESS
// while it loads.
func (s *shard) owned(p int32) (*partition, *kerr.Error) {
	part := s.parts[p]
	switch {
	case part == nil:
		return nil, kerr.NotCoordinator
	case !part.loaded:
		return nil, kerr.CoordinatorLoadInProgress
	}
	return part, nil
}

// ownedFor is owned for a request about group, which must be named: an empty
// group id is INVALID_GROUP_ID.
func (s *shard) ownedFor(p int32, group string) (*partition, *kerr.Error) {
	if group == "" {
		return nil, kerr.InvalidGroupID
	}
	return s.owned(p)
}

// ownedGroup returns group id of partition p, nil when the partition holds
// no such group, or the error owned reports for p.
func (s *shard) ownedGroup(p int32, id string) (*group, *kerr.Error) {
	part, errc := s.owned(p)
	if errc != nil {
		return nil, errc
	}
	return part.groups[id], nil
}

// appendRecords writes records to partition p's log as a plain batch and
// runs then on the shard with the outcome, as appendBatch.
func (s *shard) appendRecords(p int32, records []Record, then func(error)) {
	s.appendBatch(p, -1, -1, records, func(_ int64, err error) { then(err) })
}

// appendBatch writes records to partition p's log as one batch, transactional
// for a producerID >= 0, and runs then on the shard with the log offset of the
// first record or the error. then also runs, with NOT_COORDINATOR, if the
// partition is unloaded or the coordinator closes first. Records larger than
// MaxBatchBytes fail with RECORD_LIST_TOO_LARGE without reaching the store.
func (s *shard) appendBatch(p int32, producerID int64, producerEpoch int16, records []Record, then func(base int64, err error)) {
	s.nextAppend++
	id := s.nextAppend
	s.appends[id] = &pendingAppend{partition: p, then: then}
	finish := func(base int64, err error) {
		s.push(func(s *shard) {
			pa := s.appends[id]
			if pa == nil {
				return // already failed by unload or shutdown
			}
			delete(s.appends, id)
			pa.then(base, err)
		})
	}
	if size := batchSize(records); size > s.c.cfg.MaxBatchBytes {
		finish(-1, fmt.Errorf("append of %d bytes to partition %d exceeds max batch bytes %d: %w", size, p, s.c.cfg.MaxBatchBytes, kerr.RecordListTooLarge))
		return
	}
	s.c.store.Append(p, producerID, producerEpoch, records, finish)
}

// failAppends runs then with NOT_COORDINATOR for the in-flight appends of
// partition p, or of all partitions if p < 0.
func (s *shard) failAppends(p int32) {
	ids := make([]uint64, 0, len(s.appends))
	for id, pa := range s.appends {
		if p < 0 || pa.partition == p {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		pa := s.appends[id]
		delete(s.appends, id)
		pa.then(-1, kerr.NotLeaderForPartition)
	}
}

// lookup returns group id of partition p if p is loaded and has it.
func (s *shard) lookup(p int32, id string) *group {
	if part := s.parts[p]; part != nil && part.loaded {
		return part.groups[id]
	}
	return nil
}

// current reports whether g is still the live group object for its id.
func (s *shard) current(g *group) bool {
	return s.lookup(g.partition, g.id) == g
}

// startLoad begins replaying partition p, replacing any earlier state.
func (s *shard) startLoad(p int32, done func(error)) {
	if old := s.parts[p]; old != nil {
		s.drop(old)
	}
	part := newPartition(p)
	s.parts[p] = part
	store, log := s.c.store, s.c.log
	go func() {
		res, err := replay(store, p)
		if res != nil && res.skipped > 0 {
			log.Warn("skipped unreadable __consumer_offsets records", "partition", p, "skipped", res.skipped, "first_error", res.firstErr)
		}
		s.push(func(s *shard) { s.finishLoad(part, res, err, done) })
	}()
}

// finishLoad installs a replayed partition.
func (s *shard) finishLoad(part *partition, res *replayed, err error, done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	if s.parts[part.id] != part {
		done(fmt.Errorf("load partition %d: %w", part.id, errLoadSuperseded))
		return
	}
	if err != nil {
		delete(s.parts, part.id)
		s.c.log.Error("loading group coordinator partition failed", "partition", part.id, "error", err)
		done(fmt.Errorf("load partition %d: %w", part.id, err))
		return
	}
	for _, id := range res.groupIDs() {
		g := newGroup(id, part.id, s.nowMs())
		if c := res.consumers[id]; c != nil {
			s.restoreConsumerGroup(g, c)
		} else if v := res.groups[id]; v != nil {
			s.restoreGroup(g, v)
		}
		if offs := res.offsets[id]; offs != nil {
			g.offsets = offs
		}
		part.groups[id] = g
	}
	for _, pid := range slices.Sorted(maps.Keys(res.txns)) {
		for id, offs := range res.txns[pid] {
			if len(offs) > 0 {
				s.addTxnOffsets(part, id, pid, offs)
			}
		}
	}
	part.loaded = true
	for _, m := range part.markers {
		s.completeTxn(part, m)
	}
	part.markers = nil
	s.c.log.Info("loaded group coordinator partition", "partition", part.id, "groups", len(part.groups))
	done(nil)
}

// restoreGroup sets g from its last stored metadata, as Kafka's loadGroup:
// with members the group is Stable and their sessions start now.
func (s *shard) restoreGroup(g *group, v *kmsg.GroupMetadataValue) {
	g.generation = v.Generation
	g.protocolType = v.ProtocolType
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	g.stateTime = v.CurrentStateTimestamp
	for _, vm := range v.Members {
		m := &member{
			id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
			rebalanceTimeout: vm.RebalanceTimeoutMillis, sessionTimeout: vm.SessionTimeoutMillis,
			protocolType: v.ProtocolType,
			protocols:    []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: vm.Subscription}},
			assignment:   vm.Assignment,
		}
		if m.rebalanceTimeout < 0 { // version 0 values have no rebalance timeout
			m.rebalanceTimeout = m.sessionTimeout
		}
		g.add(m, nil)
	}
	if v.Leader != nil && g.byID[*v.Leader] != nil {
		g.leader = *v.Leader
	}
	if len(g.members) > 0 {
		g.state, g.prevState = stateStable, stateStable
		for _, m := range g.members {
			s.rescheduleHeartbeat(g, m, m.sessionTimeout)
		}
	}
	g.subscribed = g.computeSubscribed()
}

// restoreConsumerGroup installs a consumer group rebuilt from its records;
// its members' sessions (and pending revocations) start now.
func (s *shard) restoreConsumerGroup(g *group, c *replayedConsumer) {
	g.cons = c.restore()
	g.protocolType = protocolTypeConsumer
	for _, m := range g.cons.members {
		s.rescheduleConsumerSession(g, m)
		if m.state == memberUnrevoked {
			s.scheduleRevocation(g, m)
		}
	}
	g.cons.resolve(s.topics(), true)
	s.syncConsumerState(g)
}

// unload drops partition p.
func (s *shard) unload(p int32) {
	if part := s.parts[p]; part != nil {
		s.drop(part)
		s.c.log.Info("unloaded group coordinator partition", "partition", p)
	}
}

// drop fails the partition's in-flight appends, answers its parked requests
// with NOT_COORDINATOR and forgets it.
func (s *shard) drop(part *partition) {
	s.failAppends(part.id)
	for _, id := range slices.Sorted(maps.Keys(part.groups)) {
		g := part.groups[id]
		for _, m := range g.members {
			if m.join != nil {
				respondJoinError(m.join, m.id, kerr.NotCoordinator)
				m.join = nil
			}
			if m.sync != nil {
				respondSyncError(m.sync, kerr.NotCoordinator)
				m.sync = nil
			}
		}
		g.stopTimers()
		g.state = stateDead
	}
	delete(s.parts, part.id)
}

// shutdown answers everything parked and stops the shard.
func (s *shard) shutdown() {
	for _, p := range slices.Sorted(maps.Keys(s.parts)) {
		s.drop(s.parts[p])
	}
	s.loop.Stop()
}

// replayed is a partition's state rebuilt from its records.
type replayed struct {
	groups    map[string]*kmsg.GroupMetadataValue
	consumers map[string]*replayedConsumer
	offsets   map[string]map[topicPartition]committedOffset
	// txns are the transactional offsets whose transaction has not ended by
	// the end of the log, by producer id and group.
	txns     map[int64]map[string]map[topicPartition]committedOffset
	skipped  int
	firstErr error
}

func newReplayed() *replayed {
	return &replayed{groups: make(map[string]*kmsg.GroupMetadataValue), consumers: make(map[string]*replayedConsumer),
		offsets: make(map[string]map[topicPartition]committedOffset), txns: make(map[int64]map[string]map[topicPartition]committedOffset)}
}

// groupIDs returns, sorted, every group with metadata, offsets or pending
// transactional offsets.
func (r *replayed) groupIDs() []string {
	ids := make(map[string]struct{}, len(r.groups)+len(r.offsets))
	for id := range r.groups {
		ids[id] = struct{}{}
	}
	for id, offs := range r.offsets {
		if len(offs) > 0 {
			ids[id] = struct{}{}
		}
	}
	for id := range r.consumers {
		ids[id] = struct{}{}
	}
	for _, groups := range r.txns {
		for id, offs := range groups {
			if len(offs) > 0 {
				ids[id] = struct{}{}
			}
		}
	}
	return slices.Sorted(maps.Keys(ids))
}

// replay reads partition p from store. Records that do not decode, and
// record types this coordinator does not use, are skipped and counted.
func replay(store OffsetStore, p int32) (*replayed, error) {
	r := newReplayed()
	err := store.Load(p, func(rec LoggedRecord) error {
		r.apply(rec)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replay __consumer_offsets partition %d: %w", p, err)
	}
	return r, nil
}

// apply replays one entry, as Kafka's OffsetMetadataManager.replay and
// replayEndTransactionMarker: offsets of a transactional batch are held per
// producer until its marker commits or drops them, and a tombstone removes the
// partition's offset, committed or pending.
func (r *replayed) apply(rec LoggedRecord) {
	if rec.Marker != NoMarker {
		r.endTxn(rec.ProducerID, rec.Marker == CommitMarker)
		return
	}
	d, err := decodeRecord(rec.Record)
	if err != nil {
		r.skipped++
		if r.firstErr == nil {
			r.firstErr = err
		}
		return
	}
	switch {
	case d.consumer != nil:
		r.applyConsumer(*d.consumer)
	case d.isOffset && d.tombstone:
		delete(r.offsets[d.group], d.tp)
		for _, groups := range r.txns {
			delete(groups[d.group], d.tp)
		}
	case d.isOffset && rec.ProducerID >= 0:
		d.offset.recordOffset = rec.Offset
		groups := r.txns[rec.ProducerID]
		if groups == nil {
			groups = make(map[string]map[topicPartition]committedOffset)
			r.txns[rec.ProducerID] = groups
		}
		setOffset(groups, d.group, d.tp, d.offset)
	case d.isOffset:
		d.offset.recordOffset = rec.Offset
		setOffset(r.offsets, d.group, d.tp, d.offset)
	case d.tombstone:
		delete(r.groups, d.group)
	default:
		r.groups[d.group] = d.groupMeta
	}
}

// endTxn ends producerID's transaction: on commit its offsets replace the
// committed ones they were written after.
func (r *replayed) endTxn(producerID int64, commit bool) {
	groups := r.txns[producerID]
	delete(r.txns, producerID)
	if !commit {
		return
	}
	for id, offs := range groups {
		for tp, o := range offs {
			if cur, ok := r.offsets[id][tp]; !ok || o.recordOffset > cur.recordOffset {
				setOffset(r.offsets, id, tp, o)
			}
		}
	}
}

// setOffset sets m[group][tp], creating the group's map.
func setOffset(m map[string]map[topicPartition]committedOffset, group string, tp topicPartition, o committedOffset) {
	offs := m[group]
	if offs == nil {
		offs = make(map[topicPartition]committedOffset)
		m[group] = offs
	}
	offs[tp] = o
}
