package broker

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/broker/meta"
	"ringbroker/internal/recordbatch"
	rlog "ringbroker/log"
	"ringbroker/wire"
)

// partitionTable maps topics to the partitions this broker holds a replica of, leader or
// follower. It is immutable once published; syncPartitions builds a new one when the metadata
// image changes.
type partitionTable struct {
	imageOffset int64
	byName      map[string][]*partition
	byID        map[meta.UUID][]*partition
	// unopened are the replicas assigned here that are not open because their log dir is
	// offline (replicaHome): absent from byName and byID, answered KAFKA_STORAGE_ERROR.
	unopened map[replicaKey]bool
}

// unopenedAt reports whether this broker's replica of partition index of topic is in a log dir
// that was offline when it was to be opened.
func (t *partitionTable) unopenedAt(topic meta.UUID, index int32) bool {
	return t.unopened[replicaKey{topic, index}]
}

// offlineAt reports whether this broker's replica of partition index of topic is in an offline
// log dir, open or not: Kafka answers KAFKA_STORAGE_ERROR for it, led here or not.
func (t *partitionTable) offlineAt(topic meta.UUID, index int32) bool {
	p := t.lookupID(topic, index)
	return p != nil && p.offline() || t.unopenedAt(topic, index)
}

// partition is one partition this broker has a replica of: its log, its replication state,
// and the fetches waiting on it.
type partition struct {
	topic   string
	topicID meta.UUID
	index   int32
	// lg is the partition's log; an AlterReplicaLogDirs move replaces it (under appendMu) with
	// the copy it made in another dir. dir is the log dir lg lives in; move the move in
	// progress, nil when none.
	lg   atomic.Pointer[rlog.Log]
	dir  atomic.Pointer[logDir]
	move atomic.Pointer[logMove]
	// stats are the topic's BrokerTopicMetrics, which appends and fetches of p count in.
	stats *topicStats

	// st is this broker's role and the partition's ISR, from the latest image.
	st atomic.Pointer[replicaState]
	// hw is the high watermark: on the leader the smallest log end over the ISR, on a follower
	// the leader's as last fetched.
	hw atomic.Int64
	// openedEnd is the log end offset when the log was opened: on disk already, so durable
	// for group commit whatever the recovery point says.
	openedEnd int64
	// isrChanging is set while an ISR change is proposed (repl.pendingISR is set).
	isrChanging atomic.Bool
	// replMu guards repl.
	replMu sync.Mutex
	repl   replication

	// appendMu serialises the validate-and-append of Produce per partition, so that the high
	// watermark and the waiter wake-ups see appends in offset order.
	appendMu sync.Mutex

	waitMu sync.Mutex
	// waiters are the fetches parked on p (guarded by waitMu); each stays until it completes and
	// is woken by every append meanwhile (01_fetch.go).
	waiters map[*fetchOp]struct{}

	// configs are the topic configs the log was last given by syncPartitions, which alone uses
	// them (under partsMu): an image with others applies them to the log on every node.
	configs map[string]string
}

// log returns the partition's log as of now.
func (p *partition) log() *rlog.Log { return p.lg.Load() }

// lookup returns the partition, or nil when this broker does not have it.
func (t *partitionTable) lookup(topic string, index int32) *partition {
	ps := t.byName[topic]
	if index < 0 || int(index) >= len(ps) {
		return nil
	}
	return ps[index]
}

// leader returns the partition when this broker leads it, else nil.
func (t *partitionTable) leader(topic string, index int32) *partition {
	if p := t.lookup(topic, index); p != nil && p.isLeader() {
		return p
	}
	return nil
}

// leaderID is leader by topic id.
func (t *partitionTable) leaderID(id meta.UUID, index int32) *partition {
	if p := t.lookupID(id, index); p != nil && p.isLeader() {
		return p
	}
	return nil
}

// lookupID is lookup by topic id.
func (t *partitionTable) lookupID(id meta.UUID, index int32) *partition {
	ps := t.byID[id]
	if index < 0 || int(index) >= len(ps) {
		return nil
	}
	return ps[index]
}

// partitionDir is Kafka's directory name for a partition.
func partitionDir(logDir, topic string, index int32) string {
	return filepath.Join(logDir, topic+"-"+strconv.Itoa(int(index)))
}

// logConfigFor builds the log configuration of a topic from the broker defaults and the topic's
// overrides.
func (b *Broker) logConfigFor(t *meta.Topic) rlog.Config {
	c := rlog.DefaultConfig()
	get := func(name string) string {
		v, _ := b.live().effectiveTopicConfig(t.Configs, name)
		return v
	}
	num := func(name string) int64 {
		n, _ := strconv.ParseInt(get(name), 10, 64)
		return n
	}
	c.SegmentBytes = num("segment.bytes")
	// Produce refuses batches above max.message.bytes itself (wire.ValidateProduce); the log
	// holds the same limit, also for appends that do not come through Produce, and needs room
	// for at least one batch header (Kafka allows max.message.bytes=0).
	c.MaxMessageBytes = int(max(num("max.message.bytes"), recordbatch.HeaderSize))
	c.SegmentMs = time.Duration(num("segment.ms")) * time.Millisecond
	c.IndexIntervalBytes = int(num("index.interval.bytes"))
	c.MaxIndexBytes = int(num("segment.index.bytes"))
	c.FlushMessages = num("flush.messages")
	if ms := num("flush.ms"); ms > 0 && ms < 1<<53 {
		c.FlushInterval = time.Duration(ms) * time.Millisecond
	}
	c.RetentionMs = num("retention.ms")
	c.RetentionBytes = num("retention.bytes")
	c.GroupCommit = strings.EqualFold(strings.TrimSpace(get("flush.group.commit")), "true")
	c.DeletePolicy = contains(splitList(get("cleanup.policy")), "delete")
	return c
}

// syncPartitions makes the open logs match the current metadata image: it decides where the
// replicas not open yet live (homeReplicas), opens their logs, brings each one's role (leader or
// follower) and ISR in line, points the follower fetchers at the leaders, and closes and deletes
// logs of removed topics and of replicas moved away; then it publishes a new table.
func (b *Broker) syncPartitions() error {
	b.partsMu.Lock()
	defer b.partsMu.Unlock()
	im := b.meta.Image()
	b.applyDynamicConfig(im)
	old := b.parts.Load()
	next := &partitionTable{imageOffset: im.Offset, byName: map[string][]*partition{}, byID: map[meta.UUID][]*partition{},
		unopened: map[replicaKey]bool{}}
	self := b.cfg.NodeID
	now := time.Now()
	var failed []hwWait
	var moved, gone []*partition
	follow := map[int32][]*partition{}
	homes, firstErr := b.homeReplicas(im, old)
	early := map[*partition]bool{} // dropped before the new table is built
	for _, name := range im.SortedTopicNames() {
		t := im.Topics[name]
		prev := old.byID[t.ID]
		if prev == nil {
			// A topic of this name deleted in the same image change holds the directories
			// the new one's logs are about to open: its logs go first.
			var stale []*partition
			for _, p := range old.byName[name] {
				if p != nil && p.topicID != t.ID {
					stale = append(stale, p)
					early[p] = true
				}
			}
			b.dropPartitions(stale)
		}
		ps := make([]*partition, len(t.Partitions))
		for i, pm := range t.Partitions {
			var p *partition
			if i < len(prev) {
				p = prev[i]
			}
			if !slices.Contains(pm.Replicas, self) {
				if p != nil {
					gone = append(gone, p)
				}
				continue
			}
			if p == nil {
				d, ok := homes[replicaKey{t.ID, int32(i)}]
				if !ok {
					continue
				}
				if d == nil {
					next.unopened[replicaKey{t.ID, int32(i)}] = true
					continue
				}
				var err error
				if p, err = b.openPartition(t, int32(i), d); err != nil {
					firstErr = cmp.Or(firstErr, err)
					continue
				}
			}
			if !maps.Equal(p.configs, t.Configs) {
				// Altered topic configs reach the logs of every replica, not only those of the
				// node that took the request.
				if err := p.log().SetConfig(b.logConfigFor(t)); err != nil && !errors.Is(err, rlog.ErrClosed) {
					b.logger.Error("apply topic config to open log", "topic", t.Name, "partition", i, "err", err)
				}
				b.registerCompaction(p, t)
				p.configs = t.Configs
			}
			st := b.stateFor(t, pm)
			was := p.state()
			fw, err := p.applyState(st, self, now)
			if err != nil {
				firstErr = cmp.Or(firstErr, fmt.Errorf("partition %s-%d: %w", t.Name, i, err))
			}
			failed = append(failed, fw...)
			if was != nil && (was.leader != st.leader || was.leaderEpoch != st.leaderEpoch) {
				moved = append(moved, p)
			}
			if !st.leader && st.leaderID >= 0 && !p.offline() {
				follow[st.leaderID] = append(follow[st.leaderID], p)
			}
			ps[i] = p
		}
		next.byName[name] = ps
		next.byID[t.ID] = ps
	}
	b.parts.Store(next)
	b.signalDirReport()
	b.fetchers.assign(follow)
	for _, w := range failed {
		w.done(kerr.NotLeaderForPartition)
	}
	for _, p := range moved {
		p.wakeWaiters()
	}
	for id, ps := range old.byID {
		if _, ok := next.byID[id]; ok {
			continue
		}
		for _, p := range ps {
			if p != nil && !early[p] {
				gone = append(gone, p)
			}
		}
	}
	b.dropPartitions(gone)
	return firstErr
}

// dropPartitions lets go of partitions no longer assigned here: their waiters are woken, their
// moves cancelled and their compaction stopped, and their logs deleted (deletePartitionLogs).
func (b *Broker) dropPartitions(ps []*partition) {
	for _, p := range ps {
		p.wakeWaiters()
		b.cancelMove(p)
		p.dir.Load().parts.Add(-1)
		b.cleaner.Remove(p.log())
	}
	b.deletePartitionLogs(ps)
}

// homeReplicas decides where each replica assigned here and not open in old lives
// (replicaHome), nil for one that is offline, and records those dirs, and forgets the replicas
// no longer assigned here, before any log is created. A replica left out could not be placed,
// or the record could not be written; the error says why.
func (b *Broker) homeReplicas(im *meta.Image, old *partitionTable) (map[replicaKey]*logDir, error) {
	self := b.cfg.NodeID
	homes := map[replicaKey]*logDir{}
	set := map[replicaKey]meta.UUID{}
	pending := map[*logDir]int32{}
	var firstErr error
	for _, name := range im.SortedTopicNames() {
		t := im.Topics[name]
		prev := old.byID[t.ID]
		for i, pm := range t.Partitions {
			if !slices.Contains(pm.Replicas, self) || i < len(prev) && prev[i] != nil {
				continue
			}
			k := replicaKey{t.ID, int32(i)}
			d, err := b.replicaHome(t, int32(i), pending)
			if err != nil {
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			homes[k] = d
			if d != nil {
				pending[d]++
				set[k] = d.id
			} else if _, ok, _ := b.replicaDirs.lookup(k); !ok {
				set[k] = lostDirID
			}
		}
	}
	assigned := func(k replicaKey) bool {
		t := im.TopicsByID[k.topic]
		return t != nil && int(k.index) < len(t.Partitions) && slices.Contains(t.Partitions[k.index].Replicas, self)
	}
	var del []replicaKey
	for id, ps := range old.byID {
		for i, p := range ps {
			if k := (replicaKey{id, int32(i)}); p != nil && !assigned(k) {
				del = append(del, k)
			}
		}
	}
	for k := range old.unopened {
		if !assigned(k) {
			del = append(del, k)
		}
	}
	if err := b.replicaDirs.update(set, del, firstErr == nil); err != nil {
		return nil, cmp.Or(firstErr, err)
	}
	return homes, firstErr
}

// openPartition opens the log of one partition in dir d. A directory left by an earlier topic
// of the same name (a different topic id, for example one deleted while this broker was down)
// is set aside for the background remover first.
func (b *Broker) openPartition(t *meta.Topic, index int32, d *logDir) (*partition, error) {
	l, err := b.openPartitionLog(d, partitionDir(d.path, t.Name, index), t, index, t.Partitions[index].LeaderEpoch, d.startup)
	if err != nil {
		b.noteStorageError(d, err)
		return nil, err
	}
	p := &partition{topic: t.Name, topicID: t.ID, index: index, configs: t.Configs, stats: b.metrics.topics.of(t.Name)}
	p.lg.Store(l)
	p.dir.Store(d)
	d.parts.Add(1)
	p.initHW(d.startup.highWatermarks[rlog.TopicPartition{Topic: t.Name, Partition: index}])
	b.registerCompaction(p, t)
	return p, nil
}

// openPartitionLog opens the log of partition index of t at dir, in log dir d, with st, what the
// last run left in d.
func (b *Broker) openPartitionLog(d *logDir, dir string, t *meta.Topic, index, leaderEpoch int32, st startupState) (*rlog.Log, error) {
	if id, ok := readPartitionTopicID(dir); ok && id != t.ID {
		b.logger.Warn("removing stale partition dir of an earlier topic", "dir", dir, "stale_topic_id", id, "topic_id", t.ID)
		if err := b.setAside(dir); err != nil {
			return nil, fmt.Errorf("remove stale partition dir %s: %w", dir, err)
		}
	}
	tp := rlog.TopicPartition{Topic: t.Name, Partition: index}
	opts := rlog.Options{TopicID: t.ID, Topic: t.Name, Partition: index, Logger: b.logger,
		LeaderEpoch: leaderEpoch, CleanShutdown: st.clean,
		RecoveryPoint: st.recoveryPoints[tp], LogStartOffset: st.logStarts[tp],
		Writeback: b.writeback, OnFlush: b.metrics.flushed}
	l, err := rlog.Open(dir, b.logConfigFor(t), opts)
	if err != nil {
		return nil, fmt.Errorf("open partition %s-%d in %s: %w", t.Name, index, d.path, err)
	}
	return l, nil
}

// readPartitionTopicID reads the topic id from Kafka's partition.metadata file.
func readPartitionTopicID(dir string) (meta.UUID, bool) {
	data, err := os.ReadFile(filepath.Join(dir, "partition.metadata"))
	if err != nil {
		return meta.UUID{}, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "topic_id" {
			id, err := meta.ParseUUID(strings.TrimSpace(v))
			return id, err == nil
		}
	}
	return meta.UUID{}, false
}

// abortedTxns lists the aborted transactions of p overlapping offsets from..upto-1, for a
// read_committed Fetch response.
func (p *partition) abortedTxns(from, upto int64) []wire.FetchAbortedTxn {
	list := p.log().AbortedTransactions(from, upto)
	out := make([]wire.FetchAbortedTxn, len(list))
	for i, a := range list {
		out[i] = wire.FetchAbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
	}
	return out
}
