package log

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Log is one partition's storage. Append, roll, SetLeaderEpoch and Close are serialised by a
// mutex; Read and the offset getters are lock-free.
type Log struct {
	dir    string
	cfg    Config
	opts   Options
	logger *slog.Logger
	// writeAt writes data and then zeros (often none) to a segment file at off; tests replace it
	// to inject write failures. It is writeSegment outside tests.
	writeAt func(s *segment, data, zeros []byte, off int64) (int, error)
	// iov is writeSegment's scratch, so a padded write allocates nothing. Guarded by mu.
	iov [2]unix.Iovec

	// Read side, lock-free. segs is nil after Close.
	segs           atomic.Pointer[[]*segment] // ascending base offsets; the last is active
	leo            atomic.Int64               // log end offset; stored after the bytes are visible
	logStart       atomic.Int64
	size           atomic.Int64 // bytes in all segments
	recoveryPoint  atomic.Int64 // offsets below it are fsynced
	lastFlushNanos atomic.Int64 // Now() of the last completed flush
	dirDirty       atomic.Bool  // segment files were created or removed since the last flush
	wbQueued       atomic.Bool  // the log waits in Options.Writeback's queue
	wbStepDue      atomic.Bool  // the log grew by a writeback step since its last pass
	// wbDirtySince is when (Unix nanoseconds) the first byte appended since the log's last
	// writeback pass was written, 0 when none was; wbAging says the log is on
	// Options.Writeback's list of logs whose bytes age towards a pass (writebackMaxAge).
	wbDirtySince atomic.Int64
	wbAging      atomic.Bool
	readerAt     atomic.Int64 // the furthest offset a consumer asked to read from (NoteReader)
	readerSeen   atomic.Int64 // Now() in Unix nanoseconds of the last NoteReader
	// wbLastStep is Now() in Unix nanoseconds of the log's last writeback pass for a step;
	// only the Writeback goroutine uses it.
	wbLastStep int64

	mu        sync.Mutex
	active    *segment
	producers producers
	epochs    epochCache
	// epochsDirty says the epoch cache changed since the checkpoint was last written.
	epochsDirty bool
	leaderEpoch int32
	unflushed   int64         // records appended since the last Flush or flush.messages flush
	wbPending   int64         // bytes appended since the log last queued for Options.Writeback
	hdrs        []batchHeader // scratch for Append, reused
	closed      bool
	// failed is set when a failed write could not be undone; appends refuse until reopen,
	// which recovers the tail.
	failed error
	// abandoned is set when a truncation failed halfway through changing files and closed the
	// log as a crash would; Close reports it, so that no clean-shutdown marker is written.
	abandoned error

	// flushMu serialises fsyncs so that the recovery point only moves over flushed data.
	flushMu sync.Mutex
	// flushes tracks the background flushes of rolled segments; Close waits for them.
	flushes sync.WaitGroup

	// gc batches SyncAsync callers into shared fsyncs (flush.group.commit).
	gc groupCommit
	// recovery is what Open found and repaired; written only by Open.
	recovery RecoveryReport
	// txnMu guards unreplicated; taken under mu, or alone by LastStableOffset.
	txnMu sync.Mutex
	// unreplicated lists completed transactions whose marker the high watermark may not have
	// passed yet (Kafka's unreplicatedTxns): they hold the last stable offset back until it has.
	unreplicated []completedTxn
	// firstUnstable is the smallest first offset of an ongoing or unreplicated transaction,
	// math.MaxInt64 when none; ongoingMin that of the ongoing ones only.
	firstUnstable, ongoingMin atomic.Int64

	// snapOffset is the offset of the producer snapshot Open loaded: batches below it are
	// already in the producer state (0: none). Written only by Open.
	snapOffset int64
}

// LogStartOffset returns the first offset the log holds.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LogEndOffset returns the offset the next appended record gets.
func (l *Log) LogEndOffset() int64 { return l.leo.Load() }

// RecoveryPoint returns the offset below which the log is fsynced. The broker stores it in
// the recovery-point-offset-checkpoint file and passes it back as Options.RecoveryPoint.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// Size returns the bytes held in all segments.
func (l *Log) Size() int64 { return l.size.Load() }

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// TopicID returns the topic id from partition.metadata (or Options), zero when unknown.
func (l *Log) TopicID() [16]byte { return l.opts.TopicID }

// Close flushes the log, finishes the active segment's indexes and writes the leader-epoch
// checkpoint: a clean close, after which the broker may write the clean-shutdown marker.
// Segments still referenced by reads stay mapped until released. Closing twice is a no-op.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		if l.abandoned != nil {
			return fmt.Errorf("close %s: %w", l.dir, l.abandoned)
		}
		return nil
	}
	l.closed = true
	l.flushes.Wait()
	var errs []error
	if l.active != nil {
		errs = append(errs, l.active.deactivate())
	}
	if l.segs.Load() != nil {
		errs = append(errs, l.flushUpTo(l.leo.Load()), l.writeEpochs(),
			l.writeSnapshot(l.leo.Load(), encodeSnapshot(l.producers.entries)))
		segs := l.segs.Swap(nil)
		for _, s := range *segs {
			s.decRef()
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close %s: %w", l.dir, err)
	}
	return nil
}

// Discard closes a log whose files are about to be removed (a deleted topic, an abandoned
// copy): unlike Close it neither flushes, nor finishes the active segment's indexes, nor
// writes checkpoints, so closing a large log costs no writes, as Kafka closes a deleted log's
// files without flushing them. It waits only for the background work that writes into the
// log's directory by name (a rolled segment's flush, a producer snapshot), so that nothing is
// written there once the caller renames or removes it. A SyncAsync waiter whose offsets no
// fsync covered yet is answered with ErrClosed. Reads still holding segments keep their
// mappings until released. Discarding a closed log is a no-op.
func (l *Log) Discard() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	l.flushes.Wait()
	if segs := l.segs.Swap(nil); segs != nil {
		for _, s := range *segs {
			s.decRef()
		}
	}
}

// Delete discards the log and removes its directory. Reads still holding segments keep their
// mappings until released.
func (l *Log) Delete() error {
	l.Discard()
	if err := os.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("delete %s: %w", l.dir, err)
	}
	return nil
}
