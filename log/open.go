package log

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"time"

	"ringbroker/internal/fsutil"
)

// Open opens or creates the partition directory dir (<log.dirs>/<topic>-<partition>). Without
// opts.CleanShutdown it recovers the tail: every segment from the one holding
// opts.RecoveryPoint on is CRC-checked, the log is truncated at the first bad batch (reported
// through the logger) and the indexes of scanned segments are rebuilt. It always rebuilds the
// producer state and the leader epochs of batches newer than the checkpoint by scanning batch
// headers.
func Open(dir string, cfg Config, opts Options) (*Log, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l := &Log{
		dir:         dir,
		cfg:         cfg,
		opts:        opts,
		logger:      opts.Logger.With("topic", opts.Topic, "partition", opts.Partition, "dir", dir),
		producers:   newProducers(),
		leaderEpoch: opts.LeaderEpoch,
	}
	l.writeAt = l.writeSegment
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	if err := l.loadTopicID(); err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	if err := l.recoverSwaps(); err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	bases, err := l.listSegments()
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l.loadEpochs()
	snapLimit := int64(math.MaxInt64)
	if !opts.CleanShutdown {
		snapLimit = opts.RecoveryPoint
	}
	if i := l.firstRebuilt(bases); i < len(bases) {
		// The .txnindex of a rebuilt segment is rebuilt from the producer state as of its base.
		snapLimit = min(snapLimit, bases[i])
	}
	l.snapOffset = l.loadSnapshot(snapLimit)
	var segs []*segment
	if len(bases) == 0 {
		s, err := createSegment(dir, 0, &l.cfg, l.logger, opts.Now())
		if err != nil {
			return nil, fmt.Errorf("open log %s: %w", dir, err)
		}
		segs = []*segment{s}
	} else if segs, err = l.loadSegments(bases); err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l.active = segs[len(segs)-1]
	// Snapshots past the end (recovery cut the log, or a truncation was interrupted) describe
	// batches that are gone; a later crash must not load one.
	if err := l.removeSnapshotsAbove(l.active.next); err != nil {
		l.logger.Warn("stale producer snapshots left", "err", err)
	}
	if l.active.next < l.snapOffset {
		l.reloadProducers(segs, l.active.next) // recovery cut the log below the snapshot
	}
	var total int64
	for _, s := range segs {
		total += s.size.Load()
	}
	l.size.Store(total)
	l.logStart.Store(min(max(opts.LogStartOffset, segs[0].base), l.active.next))
	l.leo.Store(l.active.next)
	l.recoveryPoint.Store(l.active.next)
	if !opts.CleanShutdown {
		l.recoveryPoint.Store(min(l.active.next, max(opts.RecoveryPoint, segs[0].base)))
	}
	l.updateFirstUnstable()
	l.lastFlushNanos.Store(opts.Now().UnixNano())
	l.gc.enabled.Store(cfg.GroupCommit)
	l.segs.Store(&segs)
	// Past the end, not at it: an epoch a leader started at its log end before writing to it
	// (SetLeaderEpoch) survives the restart.
	if l.epochs.truncateFromEnd(l.active.next + 1) {
		l.logger.Warn("dropped leader epochs past the log end", "log_end_offset", l.active.next)
		l.epochsDirty = true
	}
	if err := l.writeEpochs(); err != nil {
		return nil, errors.Join(fmt.Errorf("open log %s: %w", dir, err), l.Close())
	}
	return l, nil
}

// loadTopicID reconciles partition.metadata with opts.TopicID.
func (l *Log) loadTopicID() error {
	path := filepath.Join(l.dir, partitionMetadataFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if l.opts.TopicID == ([16]byte{}) {
			return nil
		}
		if err := fsutil.WriteFileAtomic(path, marshalPartitionMetadata(l.opts.TopicID)); err != nil {
			return fmt.Errorf("write partition metadata: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read partition metadata: %w", err)
	}
	id, err := parsePartitionMetadata(data)
	if err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	if l.opts.TopicID != ([16]byte{}) && id != l.opts.TopicID {
		return fmt.Errorf("%s holds topic id %x; want %x", path, id, l.opts.TopicID)
	}
	l.opts.TopicID = id
	return nil
}

// listSegments returns the base offsets of the .log files in ascending order, removing index
// files without a segment and leftover temporary files.
func (l *Log) listSegments() ([]int64, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	logs := map[int64]bool{}
	var bases []int64
	var orphans []string
	for _, e := range ents {
		name := e.Name()
		if ext := filepath.Ext(name); ext == fsutil.TmpSuffix || ext == deletedSuffix {
			orphans = append(orphans, name)
			continue
		}
		base, suffix, ok := parseSegmentName(name)
		switch {
		case !ok:
		case suffix == logSuffix:
			logs[base] = true
			bases = append(bases, base) // ReadDir sorts by name, and names are zero-padded
		default:
			orphans = append(orphans, name)
		}
	}
	for _, name := range orphans {
		if base, suffix, ok := parseSegmentName(name); ok && suffix != logSuffix && logs[base] {
			continue
		}
		l.logger.Warn("removing stray file", "file", name)
		// A *.deleted file may be going already: a released segment of a log closed before.
		if err := ignoreNotExist(os.Remove(filepath.Join(l.dir, name))); err != nil {
			return nil, fmt.Errorf("remove stray file: %w", err)
		}
	}
	return bases, nil
}

// parseSegmentName splits "%020d.log" (or .index, .timeindex) into base offset and suffix.
func parseSegmentName(name string) (int64, string, bool) {
	ext := filepath.Ext(name)
	if ext != logSuffix && ext != indexSuffix && ext != timeIndexSuffix && ext != txnIndexSuffix {
		return 0, "", false
	}
	digits := name[:len(name)-len(ext)]
	if len(digits) != 20 {
		return 0, "", false
	}
	var base int64
	for _, c := range digits {
		if c < '0' || c > '9' || base > (math.MaxInt64-9)/10 {
			return 0, "", false
		}
		base = base*10 + int64(c-'0')
	}
	return base, ext, true
}

// recoverFrom returns the index of the first segment to recover: the one holding the recovery
// point after an unclean shutdown, none (len(bases)) after a clean one.
func (l *Log) recoverFrom(bases []int64) int {
	if l.opts.CleanShutdown {
		return len(bases)
	}
	i := 0
	for i < len(bases)-1 && bases[i+1] <= l.opts.RecoveryPoint {
		i++
	}
	return i
}

// firstRebuilt returns the index of the first segment whose indexes Open will rebuild, as far
// as the files tell before reading them: the first recovered one, or one missing an index.
func (l *Log) firstRebuilt(bases []int64) int {
	from := l.recoverFrom(bases)
	for i, base := range bases[:from] {
		if !indexFilesExist(l.dir, base) {
			return i
		}
	}
	return from
}

// loadSegments opens the existing segments, scans them (with CRC checks from the first one
// needing recovery on), truncates a damaged tail and prepares the last segment for appends.
func (l *Log) loadSegments(bases []int64) (segs []*segment, err error) {
	defer func() {
		if err != nil {
			for _, s := range segs {
				s.decRef()
			}
			segs = nil
		}
	}()
	recoverFrom := l.recoverFrom(bases)
	now := l.opts.Now()
	expectNext := bases[0]
	for i, base := range bases {
		s, err := openSegment(l.dir, base, l.logger, now)
		if err != nil {
			return segs, err
		}
		segs = append(segs, s)
		recovering := i >= recoverFrom
		fileSize := s.size.Load()
		rebuild := recovering || !indexFilesExist(l.dir, base)
		if !rebuild {
			if err := s.openIndexes(0, false); err != nil {
				return segs, err
			}
			if err := errors.Join(s.offIdx.checkOffsets(fileSize), s.timIdx.checkTimes()); err != nil {
				l.logger.Warn("rebuilding damaged index", "segment", s.path, "err", err)
				rebuild = true
			}
		}
		if rebuild {
			if err := s.openIndexes(int64(l.cfg.MaxIndexBytes), true); err != nil {
				return segs, err
			}
			l.recovery.RebuiltIndexes++
		}
		if recovering {
			l.recovery.CheckedSegments++
		}
		rebuildTxn, err := l.prepareTxnIndex(s, rebuild)
		if err != nil {
			return segs, err
		}
		if !recovering && !rebuild && !rebuildTxn && i < len(bases)-1 && l.loadTrusted(s, expectNext, l.snapOffset) {
			expectNext = s.next
			s.sealed.Store(true)
			continue
		}
		end, scanErr := l.scanSegment(s, recovering, rebuild, rebuildTxn, expectNext)
		if scanErr != nil {
			if zeroTail(s, end, fileSize) && l.allEmpty(bases[i+1:]) {
				// The zeros appends wrote ahead of the data (padBytes), left by a crash: the
				// end of the data, not damage. The segment is the last, or a roll had created
				// the next one (empty, removed with the zeros) and not yet cut this one's.
				l.logger.Info("dropping the zeros written ahead of the data", "segment", s.path, "position", end,
					"bytes", fileSize-end, "empty_segments_after", len(bases)-i-1)
			} else {
				l.recovery.Truncated = true
				l.recovery.TruncatedSegment, l.recovery.TruncatedPosition = s.base, end
				l.recovery.DroppedBytes = fileSize - end
				l.recovery.DroppedSegments = len(bases) - i - 1
				l.recovery.Reason = scanErr.Error()
				for _, later := range bases[i+1:] {
					if fi, err := os.Stat(segmentPath(l.dir, later, logSuffix)); err == nil {
						l.recovery.DroppedBytes += fi.Size()
					}
				}
				l.logger.Warn("truncating log at a bad batch", "segment", s.path, "position", end,
					"dropped_bytes", fileSize-end, "dropped_segments", len(bases)-i-1, "verified_crc", recovering, "reason", scanErr)
			}
			if err := l.truncateTail(s, end, bases[i+1:]); err != nil {
				return segs, err
			}
			if err := s.truncateTxnIndex(s.next); err != nil {
				return segs, err
			}
			if !rebuild {
				if err := l.rebuildIndexes(s); err != nil {
					return segs, err
				}
			}
			break
		}
		expectNext = s.next
		if i < len(bases)-1 {
			s.sealed.Store(true)
			if rebuild {
				if err := s.deactivate(); err != nil {
					return segs, err
				}
			}
		}
	}
	return segs, l.activate(segs[len(segs)-1])
}

// allEmpty reports whether the log files of the segments at bases hold no data (or are gone).
func (l *Log) allEmpty(bases []int64) bool {
	for _, base := range bases {
		if fi, err := os.Stat(segmentPath(l.dir, base, logSuffix)); err == nil && fi.Size() > 0 {
			return false
		}
	}
	return true
}

// indexFilesExist reports whether both index files of the segment at base are present.
func indexFilesExist(dir string, base int64) bool {
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if _, err := os.Stat(segmentPath(dir, base, suffix)); err != nil {
			return false
		}
	}
	return true
}

// prepareTxnIndex loads the segment's .txnindex, or empties it to be rebuilt by the scan (it
// returns true then): when the other indexes are rebuilt or it is damaged, provided the
// producer state is that of the segment's base (no snapshot past it was loaded).
func (l *Log) prepareTxnIndex(s *segment, rebuild bool) (bool, error) {
	err := s.loadTxnIndex()
	if err != nil {
		l.logger.Warn("damaged transaction index", "segment", s.path, "err", err)
	}
	if !(rebuild || err != nil) {
		return false, nil
	}
	if s.base < l.snapOffset {
		l.logger.Warn("transaction index not rebuilt: the producer snapshot lies past the segment's base", "segment", s.path, "snapshot", l.snapOffset)
		return false, nil
	}
	return true, s.resetTxnIndex()
}

// scanSegment walks the batches of a freshly opened segment, checking framing (and CRCs when
// verifyCRC), rebuilding producer state, leader epochs and, when rebuild, the indexes (the
// .txnindex when rebuildTxn). It returns the end of the valid prefix and, if it stopped early,
// why.
func (l *Log) scanSegment(s *segment, verifyCRC, rebuild, rebuildTxn bool, expectNext int64) (int64, error) {
	// A scan touches every page of the segment through the mapping: give them back after.
	defer s.dropPages()
	end := s.size.Load()
	var pos int64
	for pos < end {
		h, err := checkBatch(s.data[pos:end], verifyCRC)
		if err != nil {
			return pos, err
		}
		switch {
		case h.baseOffset < max(expectNext, s.base):
			return pos, fmt.Errorf("base offset %d; want at least %d", h.baseOffset, max(expectNext, s.base))
		case h.lastOffset()-s.base > math.MaxInt32:
			return pos, fmt.Errorf("last offset %d too far from segment base %d", h.lastOffset(), s.base)
		case pos+h.size() > math.MaxInt32:
			return pos, fmt.Errorf("batch ends at byte %d, past 32-bit positions", pos+h.size())
		}
		s.noteBatch(pos, h.size(), h.lastOffset(), h.maxTimestamp, int64(l.cfg.IndexIntervalBytes), rebuild)
		if h.producerID >= 0 && h.baseOffset >= l.snapOffset {
			if err := l.noteTxns(l.producers.load(&h, s.data[pos:pos+h.size()]), s, rebuildTxn); err != nil {
				l.logger.Warn("rebuilding the transaction index", "segment", s.path, "err", err)
			}
		}
		if l.epochs.assignIfNewer(h.leaderEpoch, h.baseOffset) {
			l.epochsDirty = true
		}
		expectNext = h.lastOffset() + 1
		pos += h.size()
	}
	return pos, nil
}

// truncateTail cuts s at end, rebuilds its indexes and deletes the segments after it.
func (l *Log) truncateTail(s *segment, end int64, later []int64) error {
	if err := s.f.Truncate(end); err != nil {
		return fmt.Errorf("truncate segment %s to %d bytes: %w", s.path, end, err)
	}
	s.size.Store(end)
	for _, base := range later {
		for _, suffix := range segmentSuffixes() {
			if err := ignoreNotExist(os.Remove(segmentPath(l.dir, base, suffix))); err != nil {
				return fmt.Errorf("delete segment after truncation: %w", err)
			}
		}
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("fsync truncated segment %s: %w", s.path, err)
	}
	return fsutil.SyncDir(l.dir)
}

// rebuildIndexes recreates both indexes of s from its batches, which were already checked.
func (l *Log) rebuildIndexes(s *segment) error {
	if err := s.openIndexes(int64(l.cfg.MaxIndexBytes), true); err != nil {
		return err
	}
	s.maxTs, s.maxTsOffset, s.firstTs, s.sinceIndex, s.next = -1, -1, -1, 0, s.base
	size := s.size.Load()
	for pos := int64(0); pos < size; {
		h := parseHeader(s.data[pos:])
		s.noteBatch(pos, h.size(), h.lastOffset(), h.maxTimestamp, int64(l.cfg.IndexIntervalBytes), true)
		pos += h.size()
	}
	return nil
}

// activate prepares a loaded segment for appends: its mapping covers segment.bytes and its
// indexes are preallocated.
func (l *Log) activate(s *segment) error {
	if err := s.mapData(l.cfg.SegmentBytes); err != nil {
		return err
	}
	s.sinceIndex = s.size.Load()
	if n := s.offIdx.n.Load(); n > 0 {
		_, pos := s.offIdx.offsetEntry(n - 1)
		s.sinceIndex -= pos
	}
	return errors.Join(s.offIdx.grow(int64(l.cfg.MaxIndexBytes)), s.timIdx.grow(int64(l.cfg.MaxIndexBytes)))
}
