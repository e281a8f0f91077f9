package txn

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/internal/eventloop"
)

// partition is one __transaction_state partition owned by a shard.
type partition struct {
	id int32
	// epoch is the partition's leader epoch when it was loaded: the coordinator epoch of its
	// markers.
	epoch int32
	// loaded is false while the partition is being replayed from the store.
	loaded bool
	txns   map[string]*metadata
}

// shard is one coordinator goroutine and everything it owns. All fields are accessed only from
// that goroutine.
type shard struct {
	c     *Coordinator
	id    int
	loop  *eventloop.Loop
	parts map[int32]*partition
}

func newShard(c *Coordinator, id int) (*shard, error) {
	l, err := eventloop.New(c.cfg.Clock)
	if err != nil {
		return nil, fmt.Errorf("transaction coordinator shard %d: %w", id, err)
	}
	s := &shard{c: c, id: id, loop: l, parts: make(map[int32]*partition)}
	s.scheduleTimeouts()
	s.scheduleExpiration()
	return s, nil
}

// push queues fn to run on the shard goroutine. Safe from any goroutine.
func (s *shard) push(fn func(*shard)) { s.loop.Push(func() { fn(s) }) }

func (s *shard) now() time.Time { return s.loop.Now() }

func (s *shard) nowMs() int64 { return s.now().UnixMilli() }

// schedule runs fn on the shard after d.
func (s *shard) schedule(d time.Duration, fn func()) { s.loop.Schedule(d, fn) }

// owned returns the loaded partition p, or the error for requests on it: NOT_COORDINATOR if the
// shard does not own it, COORDINATOR_LOAD_IN_PROGRESS while it loads.
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

// load replays partition p on a goroutine of its own and installs the result, unless the
// partition was unloaded or loaded again meanwhile.
func (s *shard) load(p int32, epoch int32, done func(error)) {
	part := &partition{id: p, epoch: epoch, txns: make(map[string]*metadata)}
	s.parts[p] = part
	go func() {
		txns := make(map[string]*metadata)
		err := s.c.store.Load(p, func(r Record) error {
			id, m, err := decodeRecord(r)
			if err != nil {
				return err
			}
			if m == nil {
				delete(txns, id)
			} else {
				txns[id] = m
			}
			return nil
		})
		s.push(func(s *shard) {
			if s.parts[p] != part {
				done(fmt.Errorf("load transaction state partition %d: superseded", p))
				return
			}
			if err != nil {
				delete(s.parts, p)
				done(fmt.Errorf("load transaction state partition %d: %w", p, err))
				return
			}
			part.txns = txns
			part.loaded = true
			s.c.log.Info("loaded transaction coordinator partition", "partition", p, "epoch", epoch, "transactional_ids", len(txns))
			for _, id := range slices.Sorted(maps.Keys(txns)) {
				if m := txns[id]; m.state == PrepareCommit || m.state == PrepareAbort {
					s.writeMarkers(part, m)
				}
			}
			done(nil)
		})
	}()
}

// unload forgets partition p; its in-flight appends and markers find it gone when they finish.
func (s *shard) unload(p int32) {
	if _, ok := s.parts[p]; ok {
		delete(s.parts, p)
		s.c.log.Info("unloaded transaction coordinator partition", "partition", p)
	}
}

// write appends next, the new state of a transactional id of part, marks the id pending meanwhile
// and, once the append is done, installs next and calls then with nil, or calls then with the
// client's error (the state stays as it was).
func (s *shard) write(part *partition, next *metadata, then func(*kerr.Error)) {
	if cur := part.txns[next.id]; cur != nil {
		cur.pending = true
	}
	next.pending = false
	var rec Record
	if next.state == Dead {
		rec = tombstone(next.id)
	} else {
		rec = next.record()
	}
	s.c.store.Append(part.id, []Record{rec}, func(err error) {
		s.push(func(s *shard) {
			cur := part.txns[next.id]
			var waiters []func()
			if cur != nil {
				cur.pending = false
				waiters, cur.waiters = cur.waiters, nil
			}
			if s.parts[part.id] != part {
				// Unloaded meanwhile: the waiters learn it when they run again.
				then(kerr.NotCoordinator)
			} else if err != nil {
				s.c.log.Warn("append transaction state", "transactional_id", next.id, "partition", part.id, "err", err)
				then(appendErrorCode(err))
			} else {
				if next.state == Dead {
					delete(part.txns, next.id)
				} else {
					part.txns[next.id] = next
				}
				then(nil)
			}
			for _, w := range waiters {
				w()
			}
		})
	})
}

// appendErrorCode maps a failed append to the error its client gets, as Kafka's
// TransactionStateManager.appendTransactionToLog.
func appendErrorCode(err error) *kerr.Error {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.UnknownServerError
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return kerr.CoordinatorNotAvailable
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError, kerr.NotCoordinator:
		return kerr.NotCoordinator
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return kerr.UnknownServerError
	}
	return ke
}
