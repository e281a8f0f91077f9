package log

// A follower replica's side of replication, after Kafka's UnifiedLog: AppendAsFollower writes
// batches as the leader numbered them, TruncateTo cuts a tail that diverged from the leader's
// (KIP-101, KIP-320), TruncateFullyAndStartAt starts over at the leader's log start.
//
// A truncation never changes bytes a reader can still reach. The segment holding the cut is
// replaced by a new segment object: when no read holds the old one, its files are truncated in
// place; otherwise the kept prefix is copied to new files renamed over the old names, and the
// old object keeps its mapping and descriptor of the old files until released. Later segments
// are deleted as retention deletes them.

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	"ringbroker/internal/fsutil"
	"ringbroker/internal/recordbatch"
)

// AppendAsFollower appends record batches whose offsets and partitionLeaderEpoch the leader
// assigned, as Kafka's appendAsFollower: the bytes of a Fetch response, of which only the whole
// batches are written (a trailing partial batch, or batches past segment.bytes, come again with
// the next fetch). Nothing is rewritten: CRCs are verified, offsets must start at or past the
// log end offset and increase, producer state is replayed without validation so that it ends
// up as the leader's, and each batch of a newer epoch starts that epoch in the leader-epoch
// cache. max.message.bytes is not applied, as in Kafka.
//
// A log holding nothing (log end = log start) whose first batch starts below its end and
// reaches it starts over at that batch's base offset: the leader's log start fell inside the
// batch (Kafka's Partition does the same).
//
// Errors wrap ErrCorruptBatch (ErrIncompleteBatch when not one whole batch arrived), ErrOffsetOutOfOrder,
// ErrRecordListTooLarge (a single batch larger than segment.bytes) or ErrClosed, and leave the
// log as it was (but for such a restart), or report an I/O failure as Append's do.
func (l *Log) AppendAsFollower(records []byte) (AppendResult, error) {
	var gone []syncWaiter
	defer func() { l.failTruncated(gone) }() // after the unlock
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable("append to"); err != nil {
		return AppendResult{}, err
	}
	gone, err := l.restartBelowStart(records)
	if err != nil {
		return AppendResult{}, err
	}
	n, res, maxTs, err := l.stageReplicated(records)
	if err != nil {
		l.producers.discard()
		return AppendResult{}, err
	}
	return l.appendStaged(records[:n], res, maxTs)
}

// restartBelowStart starts an empty log over at the base offset of its first replicated
// batch when that batch straddles the log end offset. Called under mu.
func (l *Log) restartBelowStart(records []byte) ([]syncWaiter, error) {
	leo := l.leo.Load()
	if leo != l.logStart.Load() || partialBatch(records) {
		return nil, nil
	}
	h, err := checkBatch(records, false)
	if err != nil || h.baseOffset < 0 || h.baseOffset >= leo || h.lastOffset() < leo {
		return nil, nil // stageReplicated reports what is wrong, if anything
	}
	if _, err := checkBatch(records, true); err != nil {
		return nil, nil
	}
	l.logger.Info("first replicated batch starts below the log start: starting over at its base offset",
		"log_start_offset", leo, "base_offset", h.baseOffset, "last_offset", h.lastOffset())
	return l.startAt(h.baseOffset)
}

// stageReplicated parses the whole batches at the start of records into l.hdrs, checking their
// CRCs, that their offsets follow the log end offset, and that they fit one segment (in bytes,
// and in offsets relative to the first), and stages their producer state. It returns how many
// bytes they take and their offsets.
func (l *Log) stageReplicated(records []byte) (n int, res AppendResult, maxTs int64, err error) {
	l.hdrs = l.hdrs[:0]
	next := l.leo.Load()
	maxTs = -1
	for n < len(records) && !partialBatch(records[n:]) {
		h, err := checkBatch(records[n:], true)
		if err != nil {
			return 0, AppendResult{}, 0, fmt.Errorf("append to %s as follower: %w: batch %d at byte %d: %v", l.dir, ErrCorruptBatch, len(l.hdrs), n, err)
		}
		if h.baseOffset < next {
			return 0, AppendResult{}, 0, fmt.Errorf("append to %s as follower: %w: batch %d at byte %d has base offset %d; want at least %d",
				l.dir, ErrOffsetOutOfOrder, len(l.hdrs), n, h.baseOffset, next)
		}
		if int64(n)+h.size() > l.cfg.SegmentBytes || (n > 0 && h.lastOffset()-l.hdrs[0].baseOffset > math.MaxInt32) {
			if n == 0 {
				return 0, AppendResult{}, 0, fmt.Errorf("append to %s as follower: %w: batch at offset %d is %d bytes, segment.bytes=%d",
					l.dir, ErrRecordListTooLarge, h.baseOffset, h.size(), l.cfg.SegmentBytes)
			}
			break // the next fetch brings the rest
		}
		if h.producerID >= 0 {
			l.producers.replay(&h, records[n:n+int(h.size())])
		}
		maxTs = max(maxTs, h.maxTimestamp)
		l.hdrs = append(l.hdrs, h)
		next = h.lastOffset() + 1
		n += int(h.size())
	}
	if n == 0 {
		return 0, AppendResult{}, 0, fmt.Errorf("append to %s as follower: %w in %d bytes", l.dir, ErrIncompleteBatch, len(records))
	}
	return n, AppendResult{BaseOffset: l.hdrs[0].baseOffset, LastOffset: next - 1, LogAppendTime: -1}, maxTs, nil
}

// partialBatch reports whether b does not start with a whole batch by its length field, as
// Kafka's ByteBufferLogInputStream decides where fetched records end: fewer bytes than the
// framing, or than the length says. A length too small to be a batch is not partial but
// corrupt.
func partialBatch(b []byte) bool {
	if len(b) < recordbatch.LogOverhead {
		return true
	}
	length := int32(beUint32(b[recordbatch.OffBatchLength:]))
	return length >= recordbatch.MinBatchLength && int64(len(b)) < recordbatch.LogOverhead+int64(length)
}

// TruncateTo removes every batch holding offset or a later one, as Kafka's truncateTo does when
// a follower's log diverged from the leader's: a batch that offset falls inside goes whole, and
// the log end offset becomes the offset after the last batch kept (Kafka's becomes offset). Later segments are deleted,
// the one holding the cut becomes the active segment, leader epochs starting at or after the
// new end are dropped, producer state is rebuilt for the remaining batches, the recovery point
// is lowered to the new end, and SyncAsync waiters for removed offsets get ErrTruncated.
//
// An offset at or past the log end offset removes nothing, but still drops the epochs that
// start at the log end, as Kafka does: a replica that led an epoch without writing to it would
// otherwise keep reporting that epoch as its last fetched one. A truncation that would keep
// nothing at or past the log start offset empties the log, leaving it at its log start offset
// (Kafka's moves the log start down to offset).
//
// Reads in progress are safe and see the batches as they were. An I/O failure after files were
// changed closes the log, as a crash would; Open then recovers it.
func (l *Log) TruncateTo(offset int64) error {
	var gone []syncWaiter
	defer func() { l.failTruncated(gone) }() // after the unlock
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable("truncate"); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("truncate %s to %d: negative offset", l.dir, offset)
	}
	leo := l.leo.Load()
	switch {
	case offset >= leo:
		return l.truncateEpochs(leo)
	case offset <= l.logStart.Load():
		var err error
		gone, err = l.startAt(l.logStart.Load())
		return err
	}
	segs := *l.segs.Load()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
	s, later := segs[i], segs[i+1:]
	pos, end := s.cutPosition(offset)
	if start := l.logStart.Load(); end <= start {
		// The batch holding offset holds the log start too (or a gap does).
		var err error
		gone, err = l.startAt(start)
		return err
	}
	// Background flushes and snapshot writes of rolls must not land after the cut.
	l.flushes.Wait()
	l.flushMu.Lock()
	c, err := l.prepareCut(s, offset, pos)
	if err != nil {
		l.flushMu.Unlock()
		return err
	}
	// The later segments go first: on disk the log is a prefix of the old one at every step.
	_, derr := markAllDeleted(later)
	ns, err := l.commitCut(c)
	if err != nil {
		l.flushMu.Unlock()
		return err
	}
	next := append(segs[:i:i], ns)
	l.leo.Store(end) // before the list: readers of the old list stop at the new end
	l.segs.Store(&next)
	l.recoveryPoint.Store(min(l.recoveryPoint.Load(), end))
	// Still under flushMu, so that no flush counts the kept bytes as durable before this; after
	// publishing, so that reads retrying on s do not wait for it.
	serr := ns.sync()
	if serr != nil {
		ns.dirty.Store(true)
	}
	l.flushMu.Unlock()
	if !c.exclusive {
		s.decRef()
	}
	for _, s := range later {
		s.decRef()
	}
	l.active = ns
	var total int64
	for _, s := range next {
		total += s.size.Load()
	}
	l.size.Store(total)
	l.dirDirty.Store(true)
	perr := errors.Join(l.removeSnapshotsAbove(end), ns.truncateTxnIndex(end))
	l.reloadProducers(next, end)
	gone = l.gc.takeTruncated(end)
	l.logger.Info("truncated log", "offset", offset, "log_end_offset", end, "previous_log_end_offset", leo,
		"deleted_segments", len(later), "copied", !c.exclusive)
	if err := errors.Join(derr, serr, perr, l.truncateEpochs(end), fsutil.SyncDir(l.dir)); err != nil {
		return fmt.Errorf("truncate %s to %d: %w", l.dir, offset, err)
	}
	return nil
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log whose log start and
// end offsets are offset, as Kafka does when a follower's log end falls below the leader's log
// start: the leader-epoch cache, the producer state and its snapshots are cleared, and
// SyncAsync waiters for offsets past offset get ErrTruncated. Reads in progress keep the
// deleted segments until released. An I/O failure after files were changed closes the log, as
// a crash would; Open then recovers it.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	var gone []syncWaiter
	defer func() { l.failTruncated(gone) }() // after the unlock
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable("truncate"); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("start %s over at %d: negative offset", l.dir, offset)
	}
	var err error
	gone, err = l.startAt(offset)
	return err
}

// startAt replaces all segments by an empty one at offset, which becomes the log start and end
// offset. Called under mu; the caller answers the returned waiters after unlocking.
func (l *Log) startAt(offset int64) ([]syncWaiter, error) {
	l.flushes.Wait()
	if err := l.removeSnapshotsAbove(-1); err != nil {
		return nil, fmt.Errorf("start %s over at %d: %w", l.dir, offset, err)
	}
	old := *l.segs.Load()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	// Renamed first: the new segment may take the name of an old one.
	bytes, derr := markAllDeleted(old)
	ns, err := createSegment(l.dir, offset, &l.cfg, l.logger, l.opts.Now())
	if err != nil {
		return nil, l.abandon(fmt.Errorf("start %s over at %d: %w", l.dir, offset, errors.Join(derr, err)), nil)
	}
	// Log start before log end, as in dropSegments: readers see out-of-range, not a gap.
	l.logStart.Store(offset)
	l.leo.Store(offset)
	next := []*segment{ns}
	l.segs.Store(&next)
	l.size.Store(0)
	l.recoveryPoint.Store(offset)
	for _, s := range old {
		s.decRef()
	}
	l.active = ns
	l.unflushed = 0
	l.dirDirty.Store(true)
	l.epochs = epochCache{}
	l.epochsDirty = true
	l.producers = newProducers()
	l.resetTxns()
	l.logger.Info("started log over", "offset", offset, "deleted_segments", len(old), "deleted_bytes", bytes)
	if err := errors.Join(derr, l.writeEpochs(), fsutil.SyncDir(l.dir)); err != nil {
		return l.gc.takeTruncated(offset), fmt.Errorf("start %s over at %d: %w", l.dir, offset, err)
	}
	return l.gc.takeTruncated(offset), nil
}

// cut is the truncation of one segment, prepared by prepareCut and carried out by commitCut.
type cut struct {
	s      *segment
	offset int64
	// exclusive says no read holds s, nor can take it (its count is 0): its files are
	// truncated in place. Otherwise each file's kept prefix was copied to path+TmpSuffix.
	exclusive bool
	files     [3]cutFile // log, offset index, time index
}

// cutFile is one file of a cut segment and the bytes of it kept.
type cutFile struct {
	path string
	keep int64
}

// prepareCut prepares the truncation of s at offset, keeping its batches that end before
// offset (the pos bytes cutPosition found) and their index entries, without changing the log:
// a failure leaves it as it was. When no read holds s it takes s from the log (readers that
// loaded the segment list retry until the new one is published); otherwise it copies the kept
// prefixes to temporary files. Called under mu and flushMu.
func (l *Log) prepareCut(s *segment, offset, pos int64) (*cut, error) {
	rel := offset - s.base
	c := &cut{s: s, offset: offset, files: [3]cutFile{
		{s.path, pos},
		{s.offIdx.path, s.offIdx.entriesBelow(rel) * offsetEntrySize},
		{s.timIdx.path, s.timIdx.entriesBelow(rel) * timeEntrySize},
	}}
	if c.exclusive = s.refs.CompareAndSwap(1, 0); c.exclusive {
		return c, nil
	}
	fills := [3]func(*os.File) error{
		func(dst *os.File) error { return copyPrefix(dst, s.path, c.files[0].keep) },
		func(dst *os.File) error { _, err := dst.Write(s.offIdx.mm[:c.files[1].keep]); return err },
		func(dst *os.File) error { _, err := dst.Write(s.timIdx.mm[:c.files[2].keep]); return err },
	}
	for i, f := range c.files {
		if err := writeTemp(f.path, fills[i]); err != nil {
			for _, g := range c.files[:i] {
				if rerr := ignoreNotExist(os.Remove(g.path + fsutil.TmpSuffix)); rerr != nil {
					l.logger.Warn("remove temporary copy", "file", g.path+fsutil.TmpSuffix, "err", rerr)
				}
			}
			return nil, fmt.Errorf("truncate %s to %d: copy %s: %w", l.dir, offset, f.path, err)
		}
	}
	return c, nil
}

// commitCut carries out a prepared cut and returns the cut segment reopened as the active
// one. s keeps what readers hold: taken exclusively, it is closed before its files are
// truncated; otherwise the copies are renamed over its files, whose old contents it keeps
// until released. A failure abandons the log. Called under mu and flushMu.
func (l *Log) commitCut(c *cut) (*segment, error) {
	var dead *segment // released already: the abandoned log must not release it again
	if c.exclusive {
		dead = c.s
		if err := c.s.closeFiles(); err != nil {
			l.logger.Warn("close truncated segment", "segment", c.s.path, "err", err)
		}
		for _, f := range c.files {
			if err := os.Truncate(f.path, f.keep); err != nil {
				return nil, l.abandon(fmt.Errorf("truncate %s to %d: %w", l.dir, c.offset, err), dead)
			}
		}
	} else {
		// The indexes first: a crash before the log's rename leaves it whole, with indexes
		// that Open checks against it.
		for _, f := range []cutFile{c.files[1], c.files[2], c.files[0]} {
			if err := os.Rename(f.path+fsutil.TmpSuffix, f.path); err != nil {
				return nil, l.abandon(fmt.Errorf("truncate %s to %d: %w", l.dir, c.offset, err), nil)
			}
		}
	}
	ns, err := l.reopenActive(c.s.base)
	if err != nil {
		return nil, l.abandon(fmt.Errorf("truncate %s to %d: reopen segment: %w", l.dir, c.offset, err), dead)
	}
	return ns, nil
}

// reopenActive opens the segment at base, whose files hold whole batches and their index
// entries, as the active segment.
func (l *Log) reopenActive(base int64) (*segment, error) {
	s, err := openSegment(l.dir, base, l.logger, l.opts.Now())
	if err != nil {
		return nil, err
	}
	if err = s.openIndexes(0, false); err == nil {
		s.loadTail()
		err = l.activate(s)
	}
	if err == nil {
		err = s.loadTxnIndex()
	}
	if err != nil {
		s.decRef()
		return nil, err
	}
	return s, nil
}

// abandon gives the log up after a truncation failed halfway through changing its files: it is
// closed without flushing or checkpoints, as a crash would leave it, so that Open recovers it,
// and Close reports err. dead is a segment the truncation already released, or nil. Called
// under mu.
func (l *Log) abandon(err error, dead *segment) error {
	l.closed = true
	l.abandoned = err
	l.logger.Error("log closed: a truncation failed halfway; reopening recovers it", "err", err)
	if segs := l.segs.Swap(nil); segs != nil {
		for _, s := range *segs {
			if s != dead {
				s.decRef()
			}
		}
	}
	return err
}

// writeTemp writes path+fsutil.TmpSuffix with what fill writes, fsynced; on failure it is
// removed. Open removes one a crash left behind.
func writeTemp(path string, fill func(*os.File) error) error {
	tmp := path + fsutil.TmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	err = fill(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", tmp, err), ignoreNotExist(os.Remove(tmp)))
	}
	return nil
}

// copyPrefix copies the first n bytes of the file at path to dst, in the kernel
// (copy_file_range) where the file system allows.
func copyPrefix(dst *os.File, path string, n int64) error {
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	copied, err := dst.ReadFrom(io.LimitReader(src, n))
	if cerr := src.Close(); err == nil {
		err = cerr
	}
	if err == nil && copied != n {
		err = fmt.Errorf("copied %d of %d bytes of %s", copied, n, path)
	}
	return err
}

// cutPosition returns the position of the first batch of s whose last offset is at least
// offset (the segment's size when there is none), and the offset after the batches before it,
// which the log ends at once they are cut. Called under Log.mu.
func (s *segment) cutPosition(offset int64) (pos, end int64) {
	size := s.size.Load()
	// The index entry below offset is a batch that stays, unless there is none.
	pos, end = s.offIdx.lookupPosition(offset-1-s.base), s.base
	for {
		n, _, last, ok := s.batchAt(pos, size)
		if !ok || last >= offset {
			return pos, end
		}
		pos, end = pos+n, last+1
	}
}

// loadTail sets the writer state of a segment reopened after a cut from the batches starting
// at the offset index position of the last time index entry: that entry points at the batch
// holding the largest timestamp up to it, so they give the segment's largest timestamp and its
// offset, and the next offset. The first batch gives firstTs.
func (s *segment) loadTail() {
	end := s.size.Load()
	var pos int64
	if n := s.timIdx.n.Load(); n > 0 {
		_, rel := s.timIdx.timeEntry(n - 1)
		pos = s.offIdx.lookupPosition(rel)
	}
	for pos < end {
		h := parseHeader(s.data[pos:end])
		if h.maxTimestamp > s.maxTs {
			s.maxTs, s.maxTsOffset = h.maxTimestamp, h.lastOffset()
		}
		s.next = h.lastOffset() + 1
		pos += h.size()
	}
	if end > 0 {
		s.firstTs = parseHeader(s.data[:end]).maxTimestamp
	}
}
