package txn

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
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
// functions its loop runs: on that goroutine, or on one the loop is lent to.
type shard struct {
	c     *Coordinator
	id    int
	loop  *eventloop.Loop
	parts map[int32]*partition
	// lent is true while the shard runs on a goroutine it was lent to (run), where nothing may
	// block: appends are tried (Store.TryAppend) and the rest is handed off (handOff).
	lent bool
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

// run runs fn on the calling goroutine where the shard's goroutine waits idle, else queues it
// there: a request then does not wait for that goroutine to be scheduled, which on a busy
// machine takes longer than the request's work. fn must not block while s.lent.
func (s *shard) run(fn func(*shard)) {
	if s.loop.Lend(func() {
		s.lent = true
		fn(s)
		s.lent = false
	}) {
		return
	}
	s.push(fn)
}

// handOff queues fn on the shard's goroutine and reports true where the shard is lent; fn is work
// that may block. Where it reports false, the caller does the work itself.
func (s *shard) handOff(fn func(*shard)) bool {
	if !s.lent {
		return false
	}
	s.push(fn)
	return true
}

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
	s.appendRecord(part.id, rec, func(s *shard, err error) {
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
}

// appendRecord appends rec to partition p and calls finish on the shard with the outcome: before
// it returns where the store reports at once (a partition without followers to wait for), else
// on the shard's goroutine once the store reports (from wherever that is, possibly under the
// partition's locks, so not lent there). A lent shard only tries the append, and hands it to
// the shard's goroutine where it would block.
func (s *shard) appendRecord(p int32, rec Record, finish func(*shard, error)) {
	// reported is set by the first of: the store's report (reportedEarly), or this function's
	// return (returned); whichever comes second finishes.
	const (
		returned int32 = iota + 1
		reportedEarly
	)
	var (
		reported atomic.Int32
		outcome  error
	)
	done := func(err error) {
		outcome = err
		if reported.CompareAndSwap(0, reportedEarly) {
			return
		}
		s.push(func(s *shard) { finish(s, err) })
	}
	recs := []Record{rec}
	if s.lent {
		if !s.c.store.TryAppend(p, recs, done) {
			s.push(func(s *shard) { s.appendRecord(p, rec, finish) })
			return
		}
	} else {
		s.c.store.Append(p, recs, done)
	}
	if !reported.CompareAndSwap(0, returned) {
		finish(s, outcome)
	}
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
