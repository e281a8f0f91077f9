// Package txn implements Apache Kafka's transaction coordinator: the state of every
// transactional id in Kafka's __transaction_state format, InitProducerId for transactional ids
// (new ids, epoch bumps, fencing and KIP-360 recovery), AddPartitionsToTxn, AddOffsetsToTxn and
// EndTxn, the COMMIT and ABORT markers a decided transaction writes to its partitions,
// transactions aborted at their timeout, transactional ids expired after
// transactional.id.expiration.ms, and DescribeTransactions and ListTransactions.
//
// It is built like the group coordinator (package coord): shards, each one goroutine that owns
// the transactional ids of its __transaction_state partitions (partition % shards) and drains a
// lock-free MPSC queue of requests, log-append completions, marker completions and timer
// wake-ups, so transaction state has no locks. Records go through a Store and markers through a
// MarkerWriter, both implemented by the broker: txn imports neither log nor wire. Time comes from
// a Clock, so tests run on a fake clock.
//
// Transaction version 1 (KIP-890 part 1's verification of partitions, no epoch bump per
// transaction) is served; transaction version 2 (EndTxn v5, KIP-890 part 2) is not yet.
package txn

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/coord"
	"ringbroker/internal/eventloop"
)

// Config holds the coordinator's settings. Start from DefaultConfig.
type Config struct {
	// Shards is the number of shard goroutines; more than Partitions leaves some idle.
	Shards int
	// Partitions is transaction.state.log.num.partitions: how many __transaction_state
	// partitions transactional ids are spread over.
	Partitions int
	// OffsetsPartitions is offsets.topic.num.partitions, which places a group's offsets for
	// AddOffsetsToTxn.
	OffsetsPartitions int
	// MaxTimeout is transaction.max.timeout.ms: InitProducerId asking for more gets
	// INVALID_TRANSACTION_TIMEOUT.
	MaxTimeout time.Duration
	// AbortTimedOutInterval is transaction.abort.timed.out.transaction.cleanup.interval.ms: how
	// often each shard aborts transactions open longer than their timeout.
	AbortTimedOutInterval time.Duration
	// IDExpiration is transactional.id.expiration.ms: an id without a transaction for this long
	// is removed.
	IDExpiration time.Duration
	// RemoveExpiredInterval is transaction.remove.expired.transaction.cleanup.interval.ms.
	RemoveExpiredInterval time.Duration
	// MarkerRetryBackoff is how long a marker that failed waits before it is sent again.
	MarkerRetryBackoff time.Duration
	// Clock is the time source. Nil means the system clock.
	Clock eventloop.Clock
	// NewProducerID hands out a producer id that was never used. It is called from shard
	// goroutines and must be safe for concurrent use.
	NewProducerID func() (int64, error)
	// PartitionExists reports whether a topic partition exists: AddPartitionsToTxn refuses
	// others, and markers for a partition that no longer exists are dropped. Nil accepts every
	// partition.
	PartitionExists func(topic string, partition int32) bool
}

// DefaultConfig returns Kafka's defaults, with one shard per available CPU.
func DefaultConfig() Config {
	return Config{
		Shards:                runtime.GOMAXPROCS(0),
		Partitions:            50,
		OffsetsPartitions:     50,
		MaxTimeout:            15 * time.Minute,
		AbortTimedOutInterval: 10 * time.Second,
		IDExpiration:          7 * 24 * time.Hour,
		RemoveExpiredInterval: time.Hour,
		MarkerRetryBackoff:    100 * time.Millisecond,
	}
}

func (c *Config) validate() error {
	switch {
	case c.Shards < 1:
		return fmt.Errorf("transaction coordinator shards %d: want at least 1", c.Shards)
	case c.Partitions < 1 || c.OffsetsPartitions < 1:
		return fmt.Errorf("transaction state partitions %d, offsets partitions %d: want at least 1", c.Partitions, c.OffsetsPartitions)
	case c.MaxTimeout <= 0 || c.AbortTimedOutInterval <= 0 || c.IDExpiration <= 0 || c.RemoveExpiredInterval <= 0 || c.MarkerRetryBackoff <= 0:
		return errors.New("transaction coordinator timeouts and intervals must be positive")
	case c.NewProducerID == nil:
		return errors.New("transaction coordinator needs a producer id source")
	}
	return nil
}

// Store persists transaction state in the __transaction_state log; the broker implements it over
// its partitions.
type Store interface {
	// Append writes records to partition as one batch and calls done once when they are durable
	// (nil) or have failed, from any goroutine. A Kafka error (*kerr.Error, possibly wrapped)
	// is mapped to the client's error as Kafka maps it.
	Append(partition int32, records []Record, done func(error))
	// TryAppend is Append for a caller that must not block, such as an event loop thread the
	// coordinator's shard is lent to: it reports false, having written nothing, where the
	// append would wait or do more than a write to the page cache; done is not called then.
	TryAppend(partition int32, records []Record, done func(error)) bool
	// Load calls fn for every record of partition in log order.
	Load(partition int32, fn func(Record) error) error
}

// Markers is one transaction's decision, to be written to each of its partitions.
type Markers struct {
	// ProducerID and ProducerEpoch are the transaction's producer.
	ProducerID    int64
	ProducerEpoch int16
	// Commit is true for COMMIT markers, false for ABORT.
	Commit bool
	// CoordinatorEpoch is the leader epoch of the coordinator's __transaction_state partition,
	// which partitions use to refuse markers from a deposed coordinator.
	CoordinatorEpoch int32
	// Partitions are where the markers go.
	Partitions []TopicPartition
}

// MarkerWriter writes transaction markers to the leaders of their partitions; the broker
// implements it, appending locally or sending WriteTxnMarkers.
type MarkerWriter interface {
	// WriteMarkers writes m and calls done once, from any goroutine, with the partitions whose
	// marker failed (to be retried); an empty list means every marker is written. It is called
	// from a shard goroutine and must not block it on the writes.
	WriteMarkers(m Markers, done func(failed []TopicPartition))
}

// ErrClosed is returned by Handle after Close.
var ErrClosed = errors.New("transaction coordinator closed")

// ErrUnsupported is returned by Handle for requests it does not serve.
var ErrUnsupported = errors.New("request not served by the transaction coordinator")

// Coordinator is the sharded transaction coordinator. Its methods are safe for concurrent use.
type Coordinator struct {
	cfg     Config
	store   Store
	markers MarkerWriter
	log     *slog.Logger
	shards  []*shard
	wg      sync.WaitGroup
	closed  atomic.Bool
}

// New starts a coordinator with cfg's shards; Close stops them.
func New(cfg Config, store Store, markers MarkerWriter, log *slog.Logger) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = eventloop.SystemClock{}
	}
	if cfg.PartitionExists == nil {
		cfg.PartitionExists = func(string, int32) bool { return true }
	}
	c := &Coordinator{cfg: cfg, store: store, markers: markers, log: log}
	for i := range cfg.Shards {
		s, err := newShard(c, i)
		if err != nil {
			return nil, err
		}
		c.shards = append(c.shards, s)
	}
	for _, s := range c.shards {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			s.loop.Run()
		}()
	}
	return c, nil
}

// Close stops the shards; requests in flight are not answered.
func (c *Coordinator) Close() {
	if c.closed.Swap(true) {
		return
	}
	for _, s := range c.shards {
		s.push(func(s *shard) { s.loop.Stop() })
	}
	c.wg.Wait()
}

// PartitionFor returns the __transaction_state partition of a transactional id among n, as
// Kafka: abs(Java's String.hashCode) % n.
func PartitionFor(id string, n int) int32 { return coord.PartitionFor(id, n) }

func (c *Coordinator) shardOf(partition int32) *shard {
	return c.shards[int(partition)%len(c.shards)]
}

// LoadPartition makes the coordinator own partition under coordinatorEpoch (its leader epoch)
// and replays it from the store; requests for its ids get COORDINATOR_LOAD_IN_PROGRESS until
// the replay is done. Transactions found prepared get their markers written again; done is
// called when the load has finished.
func (c *Coordinator) LoadPartition(partition int32, coordinatorEpoch int32, done func(error)) error {
	if c.closed.Load() {
		return ErrClosed
	}
	c.shardOf(partition).push(func(s *shard) { s.load(partition, coordinatorEpoch, done) })
	return nil
}

// UnloadPartition drops partition's transactional ids: another broker leads it now, and its
// requests get NOT_COORDINATOR.
func (c *Coordinator) UnloadPartition(partition int32) error {
	if c.closed.Load() {
		return ErrClosed
	}
	c.shardOf(partition).push(func(s *shard) { s.unload(partition) })
	return nil
}

// API is one Kafka API the coordinator serves, with the versions it implements.
type API struct {
	// Key is the Kafka API key.
	Key kmsg.Key
	// MinVersion and MaxVersion bound the versions Handle accepts.
	MinVersion, MaxVersion int16
	handle                 func(c *Coordinator, req kmsg.Request, respond func(kmsg.Response))
}

// APIs returns the Kafka APIs Handle accepts, in key order. InitProducerId is among them for
// requests with a transactional id only.
func APIs() []API {
	return []API{initProducerIDAPI, addPartitionsToTxnAPI, addOffsetsToTxnAPI, endTxnAPI, describeTransactionsAPI, listTransactionsAPI}
}

// Handle serves req, calling respond exactly once, unless it returns an error: ErrUnsupported
// for an API or version outside APIs, ErrClosed after Close. respond is called from a shard
// goroutine, or from the caller's own: where the shard of the request is idle, Handle runs the
// request on the caller (eventloop.Loop.Lend) rather than wake the shard, and then never blocks;
// what would block is handed to the shard's goroutine.
func (c *Coordinator) Handle(req kmsg.Request, respond func(kmsg.Response)) error {
	if c.closed.Load() {
		return ErrClosed
	}
	for _, a := range APIs() {
		if int16(a.Key) != req.Key() {
			continue
		}
		if v := req.GetVersion(); v < a.MinVersion || v > a.MaxVersion {
			return ErrUnsupported
		}
		a.handle(c, req, respond)
		return nil
	}
	return ErrUnsupported
}

// onShardOf runs fn on the shard that owns transactional id, on the caller where the shard is
// idle (shard.run).
func (c *Coordinator) onShardOf(id string, fn func(s *shard, partition int32)) {
	p := PartitionFor(id, c.cfg.Partitions)
	c.shardOf(p).run(func(s *shard) { fn(s, p) })
}

// queueOnShardOf runs fn on the goroutine of the shard that owns transactional id, for work that
// may block.
func (c *Coordinator) queueOnShardOf(id string, fn func(s *shard, partition int32)) {
	p := PartitionFor(id, c.cfg.Partitions)
	c.shardOf(p).push(func(s *shard) { fn(s, p) })
}
