package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"ringbroker/internal/crc32c"
	"ringbroker/internal/recordbatch"
)

// AppendResult describes a successful Append.
type AppendResult struct {
	// BaseOffset and LastOffset are the offsets of the first and last record written (for a
	// duplicate, those of the original batch).
	BaseOffset, LastOffset int64
	// LogAppendTime is the broker time stamped into the batches with Config.LogAppendTime,
	// else -1.
	LogAppendTime int64
	// LogStartOffset is the log start offset after the append.
	LogStartOffset int64
	// Duplicate says the batch repeated one of its producer's last five; nothing was written.
	Duplicate bool
}

// Append assigns offsets to the record batches in records, which the caller has already
// validated (magic, CRC): it rewrites each batch's baseOffset and partitionLeaderEpoch in place
// (both lie outside the CRC), checks idempotent producer sequences and writes the bytes as
// received to the active segment, rolling it first when needed. One append runs at a time.
//
// A batch repeating one of its producer's last five returns Duplicate with the original
// offsets and writes nothing. Errors wrap ErrCorruptBatch, ErrRecordTooLarge,
// ErrRecordListTooLarge, ErrOutOfOrderSequence, ErrInvalidProducerEpoch or ErrClosed, or
// report an I/O failure.
func (l *Log) Append(records []byte) (AppendResult, error) {
	return l.append(records, true, true)
}

// ErrWouldBlock is the refusal of TryAppend and ReadCached: the call needs work that may block
// (for a read, the disk). Nothing was done; call Append or Read where blocking is allowed.
var ErrWouldBlock = errors.New("would block")

// TryAppend is Append for a caller that must not block, such as an event loop thread that
// many connections share: where Append would wait for another append, roll the active segment,
// allocate index space, flush (flush.messages) or write the leader-epoch checkpoint, it writes
// nothing and returns ErrWouldBlock. What it does write is one positioned write to the page
// cache.
func (l *Log) TryAppend(records []byte) (AppendResult, error) {
	return l.append(records, true, false)
}

// AppendAsCoordinator is Append for a coordinator's own writes (the group coordinator's
// __consumer_offsets batches, transactional for TxnOffsetCommit), as Kafka appends with
// AppendOrigin.COORDINATOR: producer epochs and transactions are checked, but sequence numbers
// are not (coordinator batches carry none) and no batch is taken for a duplicate.
func (l *Log) AppendAsCoordinator(records []byte) (AppendResult, error) {
	return l.append(records, false, true)
}

// TryAppendAsCoordinator is AppendAsCoordinator for a caller that must not block, as TryAppend.
func (l *Log) TryAppendAsCoordinator(records []byte) (AppendResult, error) {
	return l.append(records, false, false)
}

// append is Append; client says the batches come from clients, whose sequences are checked,
// and mayBlock is false for TryAppend.
func (l *Log) append(records []byte, client, mayBlock bool) (AppendResult, error) {
	if mayBlock {
		l.mu.Lock()
	} else if !l.mu.TryLock() {
		return AppendResult{}, ErrWouldBlock
	}
	defer l.mu.Unlock()
	if err := l.writable("append to"); err != nil {
		return AppendResult{}, err
	}
	switch {
	case len(records) == 0:
		return AppendResult{}, fmt.Errorf("append to %s: %w: no batches", l.dir, ErrCorruptBatch)
	case int64(len(records)) > l.cfg.SegmentBytes:
		return AppendResult{}, fmt.Errorf("append to %s: %w: %d bytes, segment.bytes=%d",
			l.dir, ErrRecordListTooLarge, len(records), l.cfg.SegmentBytes)
	}
	appendTime := int64(-1)
	if l.cfg.LogAppendTime {
		appendTime = l.opts.Now().UnixMilli()
	}
	res, maxTs, err := l.stage(records, appendTime, client)
	if err != nil || res.Duplicate {
		l.producers.discard()
		return res, err
	}
	if !mayBlock && l.appendBlocks(int64(len(records)), maxTs, res.LastOffset) {
		l.producers.discard()
		return AppendResult{}, ErrWouldBlock
	}
	l.stamp(records, appendTime)
	return l.appendStaged(records, res, maxTs)
}

// writable refuses changes to a closed log, or to one whose failed write could not be undone.
func (l *Log) writable(op string) error {
	switch {
	case l.closed:
		return fmt.Errorf("%s %s: %w", op, l.dir, ErrClosed)
	case l.failed != nil:
		return fmt.Errorf("%s %s: log failed earlier: %w", op, l.dir, l.failed)
	}
	return nil
}

// appendStaged writes records, whose batches stage or stageReplicated put in l.hdrs with their
// final offsets and epochs and whose producer changes are staged, to the active segment (rolled
// first when needed); then it publishes them, records new leader epochs and applies
// flush.messages. Append and AppendAsFollower share it.
func (l *Log) appendStaged(records []byte, res AppendResult, maxTs int64) (AppendResult, error) {
	if err := l.maybeRoll(int64(len(records)), maxTs, res.BaseOffset, res.LastOffset); err != nil {
		l.producers.discard()
		return AppendResult{}, err
	}
	s := l.active
	pos := s.size.Load()
	if err := l.reserveIndexes(s); err != nil {
		l.producers.discard()
		return AppendResult{}, err
	}
	if err := l.write(s, records, pos); err != nil {
		l.producers.discard()
		return AppendResult{}, err
	}
	var nrec int64
	for i := range l.hdrs {
		h := &l.hdrs[i]
		s.noteBatch(pos, h.size(), h.lastOffset(), h.maxTimestamp, int64(l.cfg.IndexIntervalBytes), true)
		pos += h.size()
		nrec += int64(h.numRecords)
	}
	if err := l.noteTxns(l.producers.commit(), s, true); err != nil {
		l.logger.Error("aborted transaction not recorded on disk; a restart without clean shutdown rebuilds it", "err", err)
	}
	s.dirty.Store(true)
	// The log end offset first, then the size: a reader that loads the size and then the log
	// end offset knows every batch within that size lies below it (segment.read).
	l.leo.Store(res.LastOffset + 1)
	s.size.Store(pos)
	l.size.Add(int64(len(records)))
	l.noteWritten(int64(len(records)))
	// Kafka's maybeAssignEpochStartOffset: an epoch starts at its first batch.
	epochsChanged := false
	for i := range l.hdrs {
		epochsChanged = l.epochs.assignIfNewer(l.hdrs[i].leaderEpoch, l.hdrs[i].baseOffset) || epochsChanged
	}
	if epochsChanged {
		l.epochsDirty = true
		if err := l.writeEpochs(); err != nil {
			l.logger.Warn("leader-epoch checkpoint not written", "err", err)
		}
	}
	if !l.flushDueAfter(nrec) {
		l.unflushed += max(nrec, 1)
	} else {
		l.unflushed = 0
		if err := l.flushUpTo(res.LastOffset + 1); err != nil {
			return res, fmt.Errorf("append to %s: written at offsets %d..%d but not flushed: %w", l.dir, res.BaseOffset, res.LastOffset, err)
		}
	}
	res.LogStartOffset = l.logStart.Load()
	return res, nil
}

// stage parses the batches of records into l.hdrs with their future offsets and leader epoch,
// and checks them against the limits and the producer state (staging its changes). It returns
// the offsets, the largest timestamp the batches will carry and, for a duplicate, the original
// offsets. client selects the checks of client batches (see producers.check).
func (l *Log) stage(records []byte, appendTime int64, client bool) (res AppendResult, maxTs int64, err error) {
	l.hdrs = l.hdrs[:0]
	next := l.leo.Load()
	res = AppendResult{BaseOffset: next, LogAppendTime: appendTime}
	maxTs = -1
	for pos := 0; pos < len(records); {
		h, err := checkBatch(records[pos:], false)
		if err != nil {
			return AppendResult{}, 0, fmt.Errorf("append to %s: %w: batch %d at byte %d: %v", l.dir, ErrCorruptBatch, len(l.hdrs), pos, err)
		}
		if h.size() > int64(l.cfg.MaxMessageBytes) {
			return AppendResult{}, 0, fmt.Errorf("append to %s: %w: batch %d is %d bytes, max.message.bytes=%d",
				l.dir, ErrRecordTooLarge, len(l.hdrs), h.size(), l.cfg.MaxMessageBytes)
		}
		h.baseOffset, h.leaderEpoch = next, l.leaderEpoch
		if h.producerID >= 0 {
			dup, isDup, err := l.producers.check(&h, records[pos:pos+int(h.size())], next, h.lastOffset(), client)
			if err != nil {
				return AppendResult{}, 0, fmt.Errorf("append to %s: %w", l.dir, err)
			}
			if isDup {
				return AppendResult{BaseOffset: dup.firstOffset, LastOffset: dup.lastOffset, LogAppendTime: -1,
					LogStartOffset: l.logStart.Load(), Duplicate: true}, 0, nil
			}
		}
		if appendTime >= 0 {
			h.maxTimestamp = appendTime
		}
		maxTs = max(maxTs, h.maxTimestamp)
		l.hdrs = append(l.hdrs, h)
		next = h.lastOffset() + 1
		pos += int(h.size())
	}
	res.LastOffset = next - 1
	return res, maxTs, nil
}

// stamp writes the staged batches' base offset and leader epoch into records, and for
// LogAppendTime the timestamp type, maxTimestamp and CRC.
func (l *Log) stamp(records []byte, appendTime int64) {
	be := binary.BigEndian
	var pos int64
	for i := range l.hdrs {
		h := &l.hdrs[i]
		b := records[pos : pos+h.size()]
		be.PutUint64(b[recordbatch.OffBaseOffset:], uint64(h.baseOffset))
		be.PutUint32(b[recordbatch.OffLeaderEpoch:], uint32(h.leaderEpoch))
		if appendTime >= 0 {
			h.attributes |= recordbatch.AttrLogAppendTime
			be.PutUint16(b[recordbatch.OffAttributes:], uint16(h.attributes))
			be.PutUint64(b[recordbatch.OffMaxTimestamp:], uint64(appendTime))
			be.PutUint32(b[recordbatch.OffCRC:], crc32c.Checksum(b[recordbatch.OffAttributes:]))
		}
		pos += h.size()
	}
}

// indexEntriesAfter is how many entries each index of s (offset, time) must have room for once
// the staged batches are written: one each at most, and the time index's final entry.
func (l *Log) indexEntriesAfter(s *segment) (off, tim int64) {
	n := int64(len(l.hdrs))
	return s.offIdx.n.Load() + n, s.timIdx.n.Load() + n + 1
}

// reserveIndexes allocates the index blocks the staged batches may write (plus the time
// index's final entry), so a full disk fails the append instead of faulting on the mapping.
func (l *Log) reserveIndexes(s *segment) error {
	off, tim := l.indexEntriesAfter(s)
	if err := errors.Join(s.offIdx.ensure(off), s.timIdx.ensure(tim)); err != nil {
		return fmt.Errorf("append to %s: %w", l.dir, err)
	}
	return nil
}

// write puts b at pos in s, with zeros after it when it passes those written ahead (padFor). A
// failed write is undone by truncating back to pos; if that fails too the log refuses further
// appends.
func (l *Log) write(s *segment, b []byte, pos int64) error {
	zeros := padFor(s, pos+int64(len(b)))
	_, err := l.writeAt(s, b, zeros, pos)
	if err == nil {
		if zeros != nil {
			s.padEnd = pos + int64(len(b)+len(zeros))
		}
		return nil
	}
	s.padEnd = 0
	err = fmt.Errorf("write %d bytes to %s at %d: %w", len(b), s.path, pos, err)
	if terr := s.f.Truncate(pos); terr != nil {
		l.failed = errors.Join(err, fmt.Errorf("undo by truncating to %d: %w", pos, terr))
		l.logger.Error("log failed: a write could not be undone; appends refused until reopen", "err", l.failed)
		return l.failed
	}
	return err
}

// maybeRoll starts a new segment at firstOffset, the first offset of an append of n bytes
// (the log end offset, or past it for a follower whose leader's log has gaps), when the active
// one is not empty and the append would pass segment.bytes, an index is full, or segment.ms
// has passed (measured on batch timestamps as Kafka does, or on the clock before the segment
// has one); and, even when it is empty, when lastOffset would not fit a 32-bit offset relative
// to its base.
func (l *Log) maybeRoll(n, maxTs, firstOffset, lastOffset int64) error {
	if reason := l.rollReason(n, maxTs, lastOffset); reason != "" {
		return l.roll(reason, firstOffset)
	}
	return nil
}

// rollReason says why an append of n bytes up to lastOffset, with batch timestamps up to
// maxTs, needs a new active segment first, or "" when it does not (maybeRoll).
func (l *Log) rollReason(n, maxTs, lastOffset int64) string {
	s := l.active
	size := s.size.Load()
	switch {
	case lastOffset-s.base > math.MaxInt32:
		return "relative offset"
	case size == 0:
		return ""
	case size+n > l.cfg.SegmentBytes:
		return "size"
	case s.offIdx.offsetFull() || s.timIdx.timeFull():
		return "index full"
	case size+n > int64(len(s.data)):
		return "mapping" // segment.bytes grew after the segment was mapped
	case l.cfg.SegmentMs > 0 && s.firstTs >= 0 && maxTs-s.firstTs > l.cfg.SegmentMs.Milliseconds():
		return "segment.ms"
	case l.cfg.SegmentMs > 0 && s.firstTs < 0 && l.opts.Now().Sub(s.created) > l.cfg.SegmentMs:
		return "segment.ms"
	}
	return ""
}

// appendBlocks reports whether writing the staged batches, n bytes up to lastOffset, would do
// more than write them to the page cache: roll the active segment, reserve index space, flush
// for flush.messages or write the leader-epoch checkpoint (TryAppend).
func (l *Log) appendBlocks(n, maxTs, lastOffset int64) bool {
	if l.rollReason(n, maxTs, lastOffset) != "" {
		return true
	}
	s := l.active
	if off, tim := l.indexEntriesAfter(s); s.offIdx.needsReserve(off) || s.timIdx.needsReserve(tim) {
		return true
	}
	var nrec int64
	for i := range l.hdrs {
		nrec += int64(l.hdrs[i].numRecords)
		if l.epochs.isNewer(l.hdrs[i].leaderEpoch) {
			return true
		}
	}
	return l.flushDueAfter(nrec)
}

// flushDueAfter reports whether appending nrec records reaches flush.messages.
func (l *Log) flushDueAfter(nrec int64) bool {
	return l.unflushed+max(nrec, 1) >= l.cfg.FlushMessages
}

// roll makes a new active segment at base (the log end offset, or the first offset of the
// append about to be written) and flushes the old one in the background, as Kafka does,
// advancing the recovery point.
func (l *Log) roll(reason string, base int64) error {
	old := l.active
	s, err := createSegment(l.dir, base, &l.cfg, l.logger, l.opts.Now())
	if err != nil {
		return fmt.Errorf("roll %s: %w", l.dir, err)
	}
	if err := old.deactivate(); err != nil {
		l.logger.Warn("finishing indexes of rolled segment", "segment", old.path, "err", err)
	}
	segs := *l.segs.Load()
	next := make([]*segment, len(segs), len(segs)+1)
	copy(next, segs)
	next = append(next, s)
	l.segs.Store(&next)
	l.active = s
	l.takeSnapshot(base)
	l.dirDirty.Store(true)
	l.logger.Debug("rolled segment", "reason", reason, "base_offset", base, "previous_bytes", old.size.Load())
	l.flushes.Go(func() {
		if err := l.flushUpTo(base); err != nil {
			l.logger.Warn("flush of rolled segment", "upto", base, "err", err)
		}
	})
	return nil
}
