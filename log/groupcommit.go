package log

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// groupCommit batches durability waits into shared fsyncs: while one fsync runs, new waiters
// queue; the next fsync covers everything appended meanwhile and answers them together. At
// most one flusher goroutine runs per log, started on demand.
type groupCommit struct {
	// enabled mirrors Config.GroupCommit for lock-free reads on the produce path.
	enabled atomic.Bool
	// rounds counts completed group fsyncs (for tests and metrics).
	rounds atomic.Int64

	mu      sync.Mutex
	running bool         // a flusher goroutine owns the queue
	waiters []syncWaiter // callers not yet answered, in arrival order
}

// syncWaiter is one SyncAsync caller.
type syncWaiter struct {
	upto int64
	done func(error)
}

// GroupCommit reports whether the log is in group-commit mode (flush.group.commit): produce
// with acks >= 1 should answer only after SyncAsync confirms its batch.
func (l *Log) GroupCommit() bool { return l.gc.enabled.Load() }

// GroupCommitRounds returns how many group fsyncs SyncAsync has run; with many concurrent
// callers it grows far slower than the number of calls.
func (l *Log) GroupCommitRounds() int64 { return l.gc.rounds.Load() }

// SyncAsync calls done once every offset below upto (clamped to the log end offset) is
// fsynced and the recovery point has passed it, or with the error that prevented that. Callers
// that arrive while an fsync runs share the next one. done runs on the flusher goroutine, or
// at once when the offsets are already durable; it must not block. Safe from any goroutine.
func (l *Log) SyncAsync(upto int64, done func(error)) {
	upto = min(upto, l.leo.Load())
	if l.recoveryPoint.Load() >= upto {
		done(nil)
		return
	}
	g := &l.gc
	g.mu.Lock()
	if upto > l.leo.Load() {
		// Truncated since upto was clamped; the truncation answered the waiters queued before.
		g.mu.Unlock()
		done(fmt.Errorf("sync %s up to %d: %w", l.dir, upto, ErrTruncated))
		return
	}
	g.waiters = append(g.waiters, syncWaiter{upto: upto, done: done})
	if g.running {
		g.mu.Unlock()
		return
	}
	g.running = true
	g.mu.Unlock()
	go l.groupFlush()
}

// groupFlush runs fsync rounds until no waiter is left. Each round flushes up to the log end
// offset read at its start, so it covers every waiter queued before then.
func (l *Log) groupFlush() {
	g := &l.gc
	var ready []syncWaiter
	var errs []error
	for {
		upto := l.leo.Load()
		err := l.flushUpTo(upto)
		g.rounds.Add(1)
		durable := l.recoveryPoint.Load()
		ready, errs = ready[:0], errs[:0]
		g.mu.Lock()
		keep := g.waiters[:0]
		for _, w := range g.waiters {
			switch {
			case w.upto <= durable:
				ready, errs = append(ready, w), append(errs, nil)
			case err != nil && w.upto <= upto:
				ready, errs = append(ready, w), append(errs, err)
			default:
				keep = append(keep, w)
			}
		}
		clear(g.waiters[len(keep):])
		g.waiters = keep
		last := len(keep) == 0
		if last {
			g.running = false
		}
		g.mu.Unlock()
		for i, w := range ready {
			w.done(errs[i])
		}
		if last {
			return
		}
	}
}

// takeTruncated removes and returns the waiters for offsets past end, which a truncation
// removed; the caller answers them with failTruncated once it has released Log.mu. Called
// under Log.mu after the log end offset moved down to end.
func (g *groupCommit) takeTruncated(end int64) []syncWaiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	var gone []syncWaiter
	keep := g.waiters[:0]
	for _, w := range g.waiters {
		if w.upto > end {
			gone = append(gone, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(g.waiters[len(keep):])
	g.waiters = keep
	return gone
}

// failTruncated answers the waiters takeTruncated returned with ErrTruncated.
func (l *Log) failTruncated(gone []syncWaiter) {
	for _, w := range gone {
		w.done(fmt.Errorf("sync %s up to %d: %w", l.dir, w.upto, ErrTruncated))
	}
}
