// Package coord implements Apache Kafka's consumer-group coordinator. Classic
// groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
// OffsetFetch, DescribeGroups, ListGroups, DeleteGroups and OffsetDelete, with
// Kafka's states (Empty, PreparingRebalance, CompletingRebalance, Stable,
// Dead), error codes, timeouts and static membership (KIP-345); KIP-848
// consumer groups beside them (see below). Offsets and group metadata are
// records in Kafka's __consumer_offsets format, written and replayed through
// an OffsetStore that the broker implements over its partitions: coord
// imports neither log nor wire. Each API is declared in the file named by its
// key (08_offset_commit.go, ...); APIs lists them for the broker's
// ApiVersions.
//
// Transactions (KIP-98, KIP-447): TxnOffsetCommit writes a group's offsets in
// a transactional batch of the producer; they stay pending until the broker
// reports the transaction's marker on that partition (CompleteTransaction),
// which commits or drops them, and a load replays markers the same way. See
// txn.go.
//
// The coordinator is split into shards. Each shard is one goroutine that owns
// every group of its __consumer_offsets partitions (partition % shards) and
// drains a lock-free MPSC queue of requests, store completions and timer
// wake-ups; group state has no locks. Requests are answered asynchronously:
// JoinGroup, for example, waits for the rebalance. Time comes from a Clock
// and deadlines live in a timing wheel per shard, so tests run on a fake
// clock.
//
// Group membership behaviour follows Kafka 4's GroupMetadataManager for
// classic groups; where it and the older Scala GroupCoordinator differ, the
// differences are noted beside the code. KIP-848 consumer groups
// (ConsumerGroupHeartbeat, ConsumerGroupDescribe) with the server-side
// uniform and range assignors live beside classic groups in the same shards:
// a group is one or the other, and an empty group converts on the first
// request of the other protocol, keeping its offsets.
package coord

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/eventloop"
)

// Config holds the coordinator's settings. Start from DefaultConfig: New
// uses the values as given, so that zero can mean zero (a test's initial
// rebalance delay, for instance).
type Config struct {
	// Shards is the number of shard goroutines.
	Shards int
	// OffsetsPartitions is offsets.topic.num.partitions: how many
	// __consumer_offsets partitions groups are spread over.
	OffsetsPartitions int
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: how long the
	// first rebalance of an empty group waits for more members to join.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout are group.min.session.timeout.ms
	// and group.max.session.timeout.ms; JoinGroup outside the range gets
	// INVALID_SESSION_TIMEOUT.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxGroupSize is group.max.size; joins beyond it get
	// GROUP_MAX_SIZE_REACHED.
	MaxGroupSize int
	// NewMemberJoinTimeout bounds how long a new member's first JoinGroup may
	// wait in a rebalance before the member is dropped (Kafka: 5 minutes).
	NewMemberJoinTimeout time.Duration
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes; larger commit
	// metadata gets OFFSET_METADATA_TOO_LARGE.
	OffsetMetadataMaxBytes int
	// MaxBatchBytes is the largest record batch one append to
	// __consumer_offsets may produce (the topic's max.message.bytes). A group
	// whose metadata would exceed it fails SyncGroup with
	// UNKNOWN_SERVER_ERROR, an offset commit fails with
	// INVALID_COMMIT_OFFSET_SIZE, as in Kafka.
	MaxBatchBytes int
	// OffsetsRetention is offsets.retention.minutes: committed offsets of an
	// empty group (or of topics a consumer group no longer subscribes to)
	// expire this long after their commit or the group becoming empty.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms:
	// how often each shard expires offsets and removes empty groups.
	OffsetsRetentionCheckInterval time.Duration
	// Clock is the time source. Nil means the system clock.
	Clock Clock
	// NewUUID returns the unique suffix of generated member ids
	// ("<client.id>-<uuid>"). Nil means random version 4 UUIDs; tests make
	// it deterministic.
	NewUUID func() string
	// PartitionExists reports whether a topic partition exists, so that
	// OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION like Kafka. It is called
	// from shard goroutines and must be safe for concurrent use. Nil accepts
	// every partition.
	PartitionExists func(topic string, partition int32) bool
	// Topics returns the current view of the cluster's topics, which KIP-848
	// groups resolve subscriptions against and OffsetCommit/OffsetFetch v10
	// map topic ids with. It is called from shard goroutines and must be
	// safe for concurrent use. Nil means no topics are known.
	Topics func() Topics
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms: how
	// often KIP-848 members heartbeat.
	ConsumerHeartbeatInterval time.Duration
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms: a KIP-848
	// member that does not heartbeat for this long is removed.
	ConsumerSessionTimeout time.Duration
	// GroupTimeouts returns a group's own heartbeat interval and session timeout
	// (its consumer.heartbeat.interval.ms and consumer.session.timeout.ms group
	// configs), zero for those it does not set. It is called from shard
	// goroutines at every heartbeat and must be safe for concurrent use. Nil
	// means no group sets them.
	GroupTimeouts func(group string) (heartbeat, session time.Duration)
	// ConsumerAssignors is group.consumer.assignors: the server-side
	// assignors members may ask for; the first is the default.
	ConsumerAssignors []string
}

// DefaultConfig returns Kafka's defaults, with one shard per available CPU.
func DefaultConfig() Config {
	return Config{
		Shards:                        runtime.GOMAXPROCS(0),
		OffsetsPartitions:             50,
		InitialRebalanceDelay:         3 * time.Second,
		MinSessionTimeout:             6 * time.Second,
		MaxSessionTimeout:             30 * time.Minute,
		MaxGroupSize:                  math.MaxInt32,
		NewMemberJoinTimeout:          5 * time.Minute,
		OffsetMetadataMaxBytes:        4096,
		MaxBatchBytes:                 1048588,
		OffsetsRetention:              7 * 24 * time.Hour,
		OffsetsRetentionCheckInterval: 10 * time.Minute,
		ConsumerHeartbeatInterval:     5 * time.Second,
		ConsumerSessionTimeout:        45 * time.Second,
		ConsumerAssignors:             []string{assignorUniform, assignorRange},
	}
}

func (c *Config) validate() error {
	switch {
	case c.Shards < 1:
		return fmt.Errorf("coordinator shards %d: want at least 1", c.Shards)
	case c.OffsetsPartitions < 1:
		return fmt.Errorf("offsets partitions %d: want at least 1", c.OffsetsPartitions)
	case c.InitialRebalanceDelay < 0:
		return fmt.Errorf("initial rebalance delay %v: must not be negative", c.InitialRebalanceDelay)
	case c.MinSessionTimeout < 0 || c.MaxSessionTimeout < c.MinSessionTimeout:
		return fmt.Errorf("session timeout range [%v, %v] is invalid", c.MinSessionTimeout, c.MaxSessionTimeout)
	case c.MaxGroupSize < 1:
		return fmt.Errorf("max group size %d: want at least 1", c.MaxGroupSize)
	case c.NewMemberJoinTimeout <= 0:
		return fmt.Errorf("new member join timeout %v: must be positive", c.NewMemberJoinTimeout)
	case c.OffsetMetadataMaxBytes < 0:
		return fmt.Errorf("offset metadata max bytes %d: must not be negative", c.OffsetMetadataMaxBytes)
	case c.MaxBatchBytes < 1:
		return fmt.Errorf("max batch bytes %d: want at least 1", c.MaxBatchBytes)
	case c.OffsetsRetention <= 0 || c.OffsetsRetentionCheckInterval <= 0:
		return fmt.Errorf("offsets retention %v / check interval %v: must be positive", c.OffsetsRetention, c.OffsetsRetentionCheckInterval)
	case c.ConsumerHeartbeatInterval <= 0 || c.ConsumerSessionTimeout <= c.ConsumerHeartbeatInterval:
		return fmt.Errorf("consumer heartbeat interval %v / session timeout %v: want 0 < interval < session timeout", c.ConsumerHeartbeatInterval, c.ConsumerSessionTimeout)
	case len(c.ConsumerAssignors) == 0:
		return errors.New("consumer assignors: want at least one")
	}
	for _, a := range c.ConsumerAssignors {
		if a != assignorUniform && a != assignorRange {
			return fmt.Errorf("consumer assignor %q: want %s or %s", a, assignorUniform, assignorRange)
		}
	}
	return nil
}

// Clock is the coordinator's time source; tests substitute a manual clock.
type Clock = eventloop.Clock

// RequestInfo is what the coordinator needs from a request's envelope.
type RequestInfo struct {
	// ClientID is the request header's client id; it prefixes generated
	// member ids and is reported by DescribeGroups.
	ClientID string
	// ClientHost is the client's address as Kafka reports it ("/10.0.0.7").
	ClientHost string
}

// ErrClosed is returned by Handle after Close.
var ErrClosed = errors.New("group coordinator closed")

// ErrUnsupported is returned by Handle for requests it does not serve: other
// API keys, or versions outside the ranges APIs lists.
var ErrUnsupported = errors.New("request not served by the group coordinator")

// GroupCoordinator is the sharded group coordinator. Its methods are safe
// for concurrent use.
type GroupCoordinator struct {
	cfg    Config
	store  OffsetStore
	log    *slog.Logger
	clock  Clock
	newID  func() string
	shards []*shard
	apis   *apiTable

	// closed is set by Close; inflight counts Handle calls between their
	// closed check and their push, so that Close can wait them out and no
	// request is queued after a shard has stopped.
	closed   atomic.Bool
	inflight atomic.Int64
	wg       sync.WaitGroup
}

// New starts a coordinator with cfg's shards. It owns no __consumer_offsets
// partition until LoadPartition is called: requests for groups of other
// partitions get NOT_COORDINATOR. A nil logger discards logs.
func New(cfg Config, store OffsetStore, logger *slog.Logger) (*GroupCoordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("group coordinator needs an offset store")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	g := &GroupCoordinator{cfg: cfg, store: store, log: logger, clock: cfg.Clock, newID: cfg.NewUUID, apis: newAPITable()}
	if g.clock == nil {
		g.clock = eventloop.SystemClock{}
	}
	if g.newID == nil {
		g.newID = randomUUID
	}
	for i := range cfg.Shards {
		s, err := newShard(g, i)
		if err != nil {
			return nil, err
		}
		g.shards = append(g.shards, s)
	}
	for _, s := range g.shards {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			s.loop.Run()
		}()
	}
	return g, nil
}

// PartitionFor returns the __consumer_offsets partition of groupID among n
// partitions: abs(javaStringHash(groupID)) % n, as Kafka computes it, so
// that FindCoordinator and clients agree with Kafka. It returns 0 if n < 1.
func PartitionFor(groupID string, n int) int32 {
	if n < 1 {
		return 0
	}
	var h int32
	for _, u := range utf16.Encode([]rune(groupID)) {
		h = 31*h + int32(u)
	}
	if h == math.MinInt32 { // Kafka's Utils.abs maps MIN_VALUE to 0
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % int32(n)
}

func (g *GroupCoordinator) shardFor(partition int32) *shard {
	return g.shards[int(partition)%len(g.shards)]
}

// LoadPartition makes the coordinator the owner of __consumer_offsets
// partition p, for example after this broker became its leader. The owning
// shard replays the partition from the store on a separate goroutine; until
// that finishes, requests for its groups get COORDINATOR_LOAD_IN_PROGRESS.
// done, if not nil, is called once from the shard goroutine with the load's
// outcome, unless the coordinator closes first. Loading a partition that is
// loaded or loading restarts the load. The store's Load runs on its own
// goroutine, so a long replay does not stall the shard's other partitions.
func (g *GroupCoordinator) LoadPartition(p int32, done func(error)) error {
	if p < 0 || int(p) >= g.cfg.OffsetsPartitions {
		return fmt.Errorf("load partition %d: out of range [0, %d)", p, g.cfg.OffsetsPartitions)
	}
	return g.post(g.shardFor(p), func(s *shard) { s.startLoad(p, done) })
}

// UnloadPartition gives up ownership of partition p, for example after
// losing its leadership: its groups are dropped from memory and requests
// waiting on them are answered with NOT_COORDINATOR.
func (g *GroupCoordinator) UnloadPartition(p int32) error {
	if p < 0 || int(p) >= g.cfg.OffsetsPartitions {
		return fmt.Errorf("unload partition %d: out of range [0, %d)", p, g.cfg.OffsetsPartitions)
	}
	return g.post(g.shardFor(p), func(s *shard) { s.unload(p) })
}

// post queues fn on shard s unless the coordinator is closed.
func (g *GroupCoordinator) post(s *shard, fn func(*shard)) error {
	g.inflight.Add(1)
	defer g.inflight.Add(-1)
	if g.closed.Load() {
		return ErrClosed
	}
	s.push(fn)
	return nil
}

// Handle serves one group request. It returns at once; respond is called
// exactly once, from a shard goroutine, when the answer is ready, which for
// JoinGroup and SyncGroup may be after a whole rebalance. Protocol errors are
// error codes inside the response. Handle returns an error, and never calls
// respond, for requests it does not serve (ErrUnsupported) or after Close
// (ErrClosed).
//
// The coordinator keeps parts of req (group ids, member metadata copies are
// taken where bytes are kept), so req must be decoded with ReadFrom, not
// UnsafeReadFrom, and not be modified after the call.
func (g *GroupCoordinator) Handle(info RequestInfo, req kmsg.Request, respond func(kmsg.Response)) error {
	a := g.apis.lookup(req.Key())
	if a == nil || req.GetVersion() < a.MinVersion || req.GetVersion() > a.MaxVersion {
		return fmt.Errorf("%w: api key %d version %d", ErrUnsupported, req.Key(), req.GetVersion())
	}
	g.inflight.Add(1)
	defer g.inflight.Add(-1)
	if g.closed.Load() {
		return ErrClosed
	}
	a.handle(g, info, req, respond)
	return nil
}

// toGroup queues fn on the shard owning group's partition.
func (g *GroupCoordinator) toGroup(group string, fn func(*shard, int32)) {
	p := PartitionFor(group, g.cfg.OffsetsPartitions)
	g.shardFor(p).push(func(s *shard) { fn(s, p) })
}

// fanOut runs part on every shard that owns at least one of the groups and
// calls finish, from the shard goroutine that completes last, when all parts
// are done. part receives the indexes of groups that shard owns; parts write
// disjoint results, and the atomic countdown orders them before finish.
func (g *GroupCoordinator) fanOut(groups []string, part func(s *shard, idx []int, parts []int32), finish func()) {
	byShard := make(map[int][]int)
	for i, group := range groups {
		p := PartitionFor(group, g.cfg.OffsetsPartitions)
		sh := int(p) % len(g.shards)
		byShard[sh] = append(byShard[sh], i)
	}
	if len(byShard) == 0 {
		g.shards[0].push(func(*shard) { finish() })
		return
	}
	var remaining atomic.Int32
	remaining.Store(int32(len(byShard)))
	for sh, idx := range byShard {
		parts := make([]int32, len(idx))
		for j, i := range idx {
			parts[j] = PartitionFor(groups[i], g.cfg.OffsetsPartitions)
		}
		g.shards[sh].push(func(s *shard) {
			part(s, idx, parts)
			if remaining.Add(-1) == 0 {
				finish()
			}
		})
	}
}

// eachGroup answers a request about many groups at once (DescribeGroups,
// ConsumerGroupDescribe, OffsetFetch v8+): one runs on the shard that owns
// group i, with the group's partition, and its result goes to index i; done
// gets every result once the last shard is finished.
func eachGroup[T any](g *GroupCoordinator, groups []string, one func(s *shard, p int32, i int) T, done func([]T)) {
	out := make([]T, len(groups))
	g.fanOut(groups, func(s *shard, idx []int, parts []int32) {
		for j, i := range idx {
			out[i] = one(s, parts[j], i)
		}
	}, func() { done(out) })
}

// Close stops the shards. Requests still waiting (a JoinGroup in a
// rebalance, a commit waiting for its append) are answered with
// NOT_COORDINATOR, so the client looks for the coordinator again. Close
// waits for the shard goroutines to exit; later calls to Handle return
// ErrClosed.
func (g *GroupCoordinator) Close() {
	if g.closed.Swap(true) {
		g.wg.Wait()
		return
	}
	for g.inflight.Load() != 0 {
		runtime.Gosched()
	}
	for _, s := range g.shards {
		s.push(func(s *shard) { s.shutdown() })
	}
	g.wg.Wait()
}
