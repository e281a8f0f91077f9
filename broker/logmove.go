package broker

// Moving a partition's log to another log dir while it keeps serving (AlterReplicaLogDirs), as
// Kafka's ReplicaAlterLogDirsThread: the log is copied batch by batch, as a follower copies its
// leader's, into <topic>-<partition>.<uuid>-future in the target dir. Each step copies under
// the partition's appendMu, which Produce, WriteTxnMarkers, follower fetches and role changes
// take too, so the copy never misses an append and follows truncations (by leader epoch, as a
// diverged follower does). The step that finds the copy caught up swaps it in under the same
// lock: the copy is closed (flushed), the old log closed and renamed to
// <topic>-<partition>.<uuid>-delete, the copy renamed to <topic>-<partition> and reopened, and
// the old directory removed in the background. A crash between the two renames is finished on
// the next start (finishMoves); after a restart before, the move goes on from the copy as far
// as it got (resumeMoves), as Kafka resumes its future logs.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"ringbroker/broker/meta"
	"ringbroker/internal/fsutil"
	rlog "ringbroker/log"
)

// Sizes of a move's steps: each reads moveReadBytes at a time from the current log and copies
// up to moveStepBytes before it lets appends in again.
const (
	moveReadBytes = 1 << 20
	moveStepBytes = 8 << 20
)

// logMove is a move of a partition's log to another dir in progress.
type logMove struct {
	to *logDir
	// future is the copy being made; its getters may be read by DescribeLogDirs at any time.
	future   *rlog.Log
	stopOnce sync.Once
	stop     chan struct{} // closed to cancel the move
	done     chan struct{} // closed when the move's goroutine has finished
}

// cancel stops the move and waits until its goroutine has finished.
func (m *logMove) cancel() {
	m.stopOnce.Do(func() { close(m.stop) })
	<-m.done
}

// startMove starts moving p's log to dir to. The caller checked that p is held here, online,
// and not in to already.
func (b *Broker) startMove(p *partition, to *logDir) error {
	t := b.meta.Image().TopicsByID[p.topicID]
	if t == nil {
		return fmt.Errorf("move %s-%d: topic gone", p.topic, p.index)
	}
	b.cancelMove(p)
	dir := filepath.Join(to.path, movedDirName(partitionDir(to.path, p.topic, p.index), futureDirSuffix))
	f, err := rlog.Open(dir, b.logConfigFor(t), rlog.Options{TopicID: p.topicID, Topic: p.topic, Partition: p.index,
		Logger: b.logger, Writeback: b.writeback, OnFlush: b.metrics.flushed})
	if err != nil {
		b.noteStorageError(to, err)
		return fmt.Errorf("move %s-%d: create future log: %w", p.topic, p.index, err)
	}
	b.logger.Info("moving partition log", "topic", p.topic, "partition", p.index, "from", p.dir.Load().path, "to", to.path)
	b.goMove(p, to, f)
	return nil
}

// goMove runs the move of p's log to dir to, copying into f.
func (b *Broker) goMove(p *partition, to *logDir, f *rlog.Log) {
	m := &logMove{to: to, future: f, stop: make(chan struct{}), done: make(chan struct{})}
	p.move.Store(m)
	b.bg.Add(1)
	go b.runMove(p, m)
}

// resumeMoves goes on with the moves a restart interrupted, from their copies: a copy whose
// partition is not held here, is offline, already lives in the copy's dir or belongs to an
// earlier topic of the same name is removed instead. A copy is recovered in full when opened,
// as nothing says how far it was flushed.
func (b *Broker) resumeMoves(futures []futureLog) {
	tbl := b.parts.Load()
	for _, fl := range futures {
		var p *partition
		if i := strings.LastIndexByte(fl.part, '-'); i > 0 {
			if index, err := strconv.ParseInt(fl.part[i+1:], 10, 32); err == nil {
				p = tbl.lookup(fl.part[:i], int32(index))
			}
		}
		id, ok := readPartitionTopicID(fl.path)
		var t *meta.Topic
		if p != nil {
			t = b.meta.Image().TopicsByID[p.topicID]
		}
		if p == nil || t == nil || !ok || id != p.topicID || p.offline() || fl.dir.offline() || p.dir.Load() == fl.dir {
			b.logger.Info("removing the copy of a log dir move that cannot go on", "dir", fl.path)
			if err := os.RemoveAll(fl.path); err != nil {
				b.logger.Warn("remove the copy of a log dir move", "dir", fl.path, "err", err)
			}
			continue
		}
		f, err := rlog.Open(fl.path, b.logConfigFor(t), rlog.Options{TopicID: p.topicID, Topic: p.topic, Partition: p.index,
			Logger: b.logger, Writeback: b.writeback, OnFlush: b.metrics.flushed})
		if err != nil {
			b.noteStorageError(fl.dir, err)
			b.logger.Error("reopen the copy of a log dir move", "dir", fl.path, "err", err)
			continue
		}
		b.logger.Info("resuming a log dir move", "topic", p.topic, "partition", p.index, "to", fl.dir.path, "copied_to", f.LogEndOffset())
		b.goMove(p, fl.dir, f)
	}
}

// read is Log.Read of p's log (Log.ReadCached with cachedOnly), again on the new log when a
// move replaced it meanwhile.
func (p *partition) read(offset int64, maxBytes int, maxOffset int64, minOneBatch, cachedOnly bool) (rlog.ReadResult, error) {
	for {
		l := p.log()
		read := l.Read
		if cachedOnly {
			read = l.ReadCached
		}
		rr, err := read(offset, maxBytes, maxOffset, minOneBatch)
		if err == nil || !errors.Is(err, rlog.ErrClosed) || p.log() == l {
			return rr, err
		}
	}
}

// cancelMove stops p's move in progress, if any, and removes its copy.
func (b *Broker) cancelMove(p *partition) {
	if m := p.move.Load(); m != nil {
		m.cancel()
	}
}

// runMove copies p's log into m.future step by step until a step swaps it in, or the move is
// cancelled, the broker stops or a dir fails. While the moves copy faster than
// replica.alter.log.dirs.io.max.bytes.per.second, it waits instead, as Kafka's
// ReplicaAlterLogDirsThread skips a throttled partition.
func (b *Broker) runMove(p *partition, m *logMove) {
	defer b.bg.Done()
	defer close(m.done)
	quota := b.quotas.alterLogDirs
	for {
		select {
		case <-m.stop:
			b.dropMove(p, m, nil)
			return
		case <-b.stop:
			b.dropMove(p, m, nil)
			return
		default:
		}
		if quota.bounded() && quota.exceeded(time.Now()) {
			select {
			case <-m.stop:
			case <-b.stop:
			case <-time.After(moveThrottleWait):
			}
			continue
		}
		limit := moveStepBytes
		if quota.bounded() {
			// One read per step, so the throttle is looked at every moveReadBytes at most.
			limit = moveReadBytes
		}
		copied, swapped, err := b.moveStep(p, m, limit)
		if quota.bounded() {
			quota.record(time.Now(), copied)
		}
		if err != nil {
			b.dropMove(p, m, err)
			return
		}
		if swapped {
			return
		}
	}
}

// moveThrottleWait is how long a throttled move waits before it looks at its rate again.
const moveThrottleWait = 100 * time.Millisecond

// dropMove abandons m: the copy is closed and removed.
func (b *Broker) dropMove(p *partition, m *logMove, cause error) {
	if cause != nil {
		b.logger.Error("log dir move abandoned", "topic", p.topic, "partition", p.index, "to", m.to.path, "err", cause)
	}
	p.move.CompareAndSwap(m, nil)
	if err := m.future.Delete(); err != nil {
		b.logger.Warn("remove the copy of an abandoned log dir move", "dir", m.future.Dir(), "err", err)
	}
}

// moveStep copies up to limit bytes of p's log into the copy under p.appendMu, and swaps the
// copy in when it has caught up. copied is how many bytes it copied.
func (b *Broker) moveStep(p *partition, m *logMove, limit int) (copied int, swapped bool, err error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	cur, f := p.log(), m.future
	if from := p.dir.Load(); from.offline() || m.to.offline() {
		return 0, false, fmt.Errorf("a log dir went offline: %w", errors.Join(from.err(), m.to.err()))
	}
	if err := followCurrent(cur, f); err != nil {
		b.noteStorageError(m.to, err)
		return 0, false, err
	}
	for copied < limit {
		if f.LogEndOffset() >= cur.LogEndOffset() {
			return copied, true, b.swapLog(p, m, cur)
		}
		rr, err := cur.Read(f.LogEndOffset(), moveReadBytes, -1, true)
		if errors.Is(err, rlog.ErrOffsetOutOfRange) {
			// Retention or DeleteRecords, which do not take appendMu, moved the log start past
			// the copy's end meanwhile: the next step starts the copy over there.
			return copied, false, nil
		}
		if err != nil {
			b.noteStorageError(p.dir.Load(), err)
			return copied, false, fmt.Errorf("read %s at %d: %w", cur.Dir(), f.LogEndOffset(), err)
		}
		if len(rr.Data) == 0 {
			rr.Release()
			return copied, false, fmt.Errorf("read %s at %d: nothing below the log end %d", cur.Dir(), f.LogEndOffset(), cur.LogEndOffset())
		}
		_, err = f.AppendAsFollower(rr.Data)
		copied += len(rr.Data)
		rr.Release()
		if err != nil {
			b.noteStorageError(m.to, err)
			return copied, false, fmt.Errorf("copy into %s: %w", f.Dir(), err)
		}
	}
	return copied, false, nil
}

// followCurrent brings the copy f in line with what happened to the current log cur since the
// last step: a log start moved past the copy's end starts the copy over there; a truncation
// (a follower that diverged from its leader) cuts the copy where the leader epochs of the two
// part, as a follower's log is cut; a log start moved by DeleteRecords or retention moves the
// copy's.
func followCurrent(cur, f *rlog.Log) error {
	if start := cur.LogStartOffset(); f.LogEndOffset() < start {
		return f.TruncateFullyAndStartAt(start)
	}
	target := min(f.LogEndOffset(), cur.LogEndOffset())
	if epoch, ok := f.LatestEpoch(); ok {
		if ce, end := cur.EndOffsetForEpoch(epoch); ce != epoch {
			target = min(target, max(end, cur.LogStartOffset()))
		} else {
			target = min(target, end)
		}
	}
	if target < f.LogEndOffset() {
		if err := f.TruncateTo(target); err != nil {
			return err
		}
	}
	if start := cur.LogStartOffset(); f.LogStartOffset() < start {
		if _, err := f.DeleteRecordsBefore(min(start, f.LogEndOffset())); err != nil {
			return err
		}
	}
	return nil
}

// swapLog puts the caught-up copy in place of cur, under p.appendMu.
func (b *Broker) swapLog(p *partition, m *logMove, cur *rlog.Log) error {
	from, f := p.dir.Load(), m.future
	if ce, ok := cur.LatestEpoch(); ok {
		// An epoch the current log started at its end, with no batch of it yet.
		if fe, fok := f.LatestEpoch(); !fok || fe < ce {
			if err := f.SetLeaderEpoch(ce); err != nil {
				return err
			}
		}
	}
	if err := f.Close(); err != nil {
		b.noteStorageError(m.to, err)
		return fmt.Errorf("close the copy %s: %w", f.Dir(), err)
	}
	t := b.meta.Image().TopicsByID[p.topicID]
	if t == nil {
		return fmt.Errorf("topic %s gone", p.topic)
	}
	b.cleaner.Remove(cur)
	if err := cur.Close(); err != nil {
		// Every byte of cur was copied from its page cache and flushed in the copy: the move
		// goes on, and cur's dir is offline.
		b.noteStorageError(from, err)
		b.logger.Error("close the log being replaced", "dir", cur.Dir(), "err", err)
	}
	final := partitionDir(m.to.path, p.topic, p.index)
	deleted := filepath.Join(from.path, movedDirName(cur.Dir(), deleteDirSuffix))
	epoch := t.Partitions[p.index].LeaderEpoch
	if st := p.state(); st != nil {
		epoch = st.leaderEpoch
	}
	reopen := func(dir string, d *logDir) error {
		l, err := b.openPartitionLog(d, dir, t, p.index, epoch, startupState{clean: true})
		if err != nil {
			b.noteStorageError(d, err)
			return err
		}
		p.lg.Store(l)
		p.dir.Store(d)
		b.registerCompaction(p, t)
		return nil
	}
	// The record names the target before the swap: found wins over it at start, and a copy
	// left in the target while the old dir is offline is parked (replicadirs.go).
	key := replicaKey{p.topicID, p.index}
	if err := b.replicaDirs.update(map[replicaKey]meta.UUID{key: m.to.id}, nil, false); err != nil {
		return errors.Join(err, reopen(cur.Dir(), from))
	}
	back := func() error { return b.replicaDirs.update(map[replicaKey]meta.UUID{key: from.id}, nil, false) }
	if err := renameSynced(cur.Dir(), deleted); err != nil {
		b.noteStorageError(from, err)
		return errors.Join(err, back(), reopen(cur.Dir(), from))
	}
	if err := renameSynced(f.Dir(), final); err != nil {
		b.noteStorageError(m.to, err)
		if rerr := renameSynced(deleted, cur.Dir()); rerr != nil {
			return errors.Join(err, rerr)
		}
		return errors.Join(err, back(), reopen(cur.Dir(), from))
	}
	if err := reopen(final, m.to); err != nil {
		return fmt.Errorf("reopen the moved log: %w", err)
	}
	from.parts.Add(-1)
	m.to.parts.Add(1)
	p.move.CompareAndSwap(m, nil)
	b.logger.Info("moved partition log", "topic", p.topic, "partition", p.index, "from", from.path, "to", m.to.path,
		"log_end_offset", p.log().LogEndOffset())
	b.dirRemover.add(deleted)
	return nil
}

// renameSynced renames from to to and syncs both parent directories.
func renameSynced(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	return errors.Join(fsutil.SyncDir(filepath.Dir(from)), fsutil.SyncDir(filepath.Dir(to)))
}
