package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Log is one partition's storage. Append, roll, SetLeaderEpoch and Close are serialised by a
// mutex; Read and the offset getters are lock-free.
type Log struct {
	dir    string
	cfg    Config
	opts   Options
	logger *slog.Logger
	// writeAt writes segment bytes; tests replace it to inject write failures.
	writeAt func(f *os.File, b []byte, off int64) (int, error)

	// Read side, lock-free. segs is nil after Close.
	segs           atomic.Pointer[[]*segment] // ascending base offsets; the last is active
	leo            atomic.Int64               // log end offset; stored after the bytes are visible
	logStart       atomic.Int64
	size           atomic.Int64 // bytes in all segments
	recoveryPoint  atomic.Int64 // offsets below it are fsynced
	lastFlushNanos atomic.Int64 // Now() of the last completed flush
	dirDirty       atomic.Bool  // segment files were created or removed since the last flush

	mu        sync.Mutex
	active    *segment
	producers producers
	epochs    epochCache
	// epochsDirty says the epoch cache changed since the checkpoint was last written.
	epochsDirty bool
	leaderEpoch int32
	unflushed   int64         // records appended since the last Flush or flush.messages flush
	hdrs        []batchHeader // scratch for Append, reused
	closed      bool
	// failed is set when a failed write could not be undone; appends refuse until reopen,
	// which recovers the tail.
	failed error

	// flushMu serialises fsyncs so that the recovery point only moves over flushed data.
	flushMu sync.Mutex
	// flushes tracks the background flushes of rolled segments; Close waits for them.
	flushes sync.WaitGroup

	// gc batches SyncAsync callers into shared fsyncs (flush.group.commit).
	gc groupCommit
	// recovery is what Open found and repaired; written only by Open.
	recovery RecoveryReport
	// snapOffset is the offset of the producer snapshot Open loaded: batches below it are
	// already in the producer state (0: none). Written only by Open.
	snapOffset int64
}

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

// ReadResult holds the batches a Read found.
type ReadResult struct {
	// Data is whole record batches, a slice of the mmap'd segment, valid until Release. It is
	// empty when there is nothing to read. Only when minOneBatch is false and the first batch
	// is larger than maxBytes does it hold that batch's first maxBytes bytes, as Kafka does.
	Data []byte
	// Release drops the segment reference that keeps Data mapped. Call it exactly once, after
	// the last use of Data (for SEND_ZC, after the kernel's notification). Never nil.
	Release func()
}

func noRelease() {}

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
		writeAt:     (*os.File).WriteAt,
		producers:   newProducers(),
		leaderEpoch: opts.LeaderEpoch,
	}
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
	l.snapOffset = l.loadSnapshot()
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
	if l.active.next < l.snapOffset {
		l.rebuildProducers(segs) // recovery cut the log below the snapshot
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
	l.lastFlushNanos.Store(opts.Now().UnixNano())
	l.gc.enabled.Store(cfg.GroupCommit)
	l.segs.Store(&segs)
	if l.epochs.truncateFromEnd(l.active.next) {
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
		if err := writeFileAtomic(path, marshalPartitionMetadata(l.opts.TopicID)); err != nil {
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
		if ext := filepath.Ext(name); ext == tmpSuffix || ext == deletedSuffix {
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
		if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
			return nil, fmt.Errorf("remove stray file: %w", err)
		}
	}
	return bases, nil
}

// parseSegmentName splits "%020d.log" (or .index, .timeindex) into base offset and suffix.
func parseSegmentName(name string) (int64, string, bool) {
	ext := filepath.Ext(name)
	if ext != logSuffix && ext != indexSuffix && ext != timeIndexSuffix {
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

// loadEpochs reads the leader-epoch checkpoint; a damaged one is dropped and rebuilt from the
// batches.
func (l *Log) loadEpochs() {
	path := filepath.Join(l.dir, leaderEpochFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		l.epochs, err = parseEpochCheckpoint(data)
	}
	if err != nil {
		l.logger.Warn("ignoring leader-epoch checkpoint; rebuilding it from the batches", "file", path, "err", err)
		l.epochs = epochCache{}
		l.epochsDirty = true
	}
}

// writeEpochs durably writes the leader-epoch checkpoint if it changed.
func (l *Log) writeEpochs() error {
	if !l.epochsDirty {
		return nil
	}
	if err := writeFileAtomic(filepath.Join(l.dir, leaderEpochFile), l.epochs.marshal()); err != nil {
		return fmt.Errorf("write leader-epoch checkpoint: %w", err)
	}
	l.epochsDirty = false
	return nil
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
	recoverFrom := len(bases)
	if !l.opts.CleanShutdown {
		recoverFrom = 0
		for recoverFrom < len(bases)-1 && bases[recoverFrom+1] <= l.opts.RecoveryPoint {
			recoverFrom++
		}
	}
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
		if !recovering && !rebuild && i < len(bases)-1 && l.loadTrusted(s, expectNext, l.snapOffset) {
			expectNext = s.next
			s.sealed.Store(true)
			continue
		}
		end, scanErr := l.scanSegment(s, recovering, rebuild, expectNext)
		if scanErr != nil {
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
			if err := l.truncateTail(s, end, bases[i+1:]); err != nil {
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

// indexFilesExist reports whether both index files of the segment at base are present.
func indexFilesExist(dir string, base int64) bool {
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if _, err := os.Stat(segmentPath(dir, base, suffix)); err != nil {
			return false
		}
	}
	return true
}

// scanSegment walks the batches of a freshly opened segment, checking framing (and CRCs when
// verifyCRC), rebuilding producer state, leader epochs and, when rebuild, the indexes. It
// returns the end of the valid prefix and, if it stopped early, why.
func (l *Log) scanSegment(s *segment, verifyCRC, rebuild bool, expectNext int64) (int64, error) {
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
			l.producers.load(&h)
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
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if err := ignoreNotExist(os.Remove(segmentPath(l.dir, base, suffix))); err != nil {
				return fmt.Errorf("delete segment after truncation: %w", err)
			}
		}
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("fsync truncated segment %s: %w", s.path, err)
	}
	return syncDir(l.dir)
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
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return AppendResult{}, fmt.Errorf("append to %s: %w", l.dir, ErrClosed)
	case l.failed != nil:
		return AppendResult{}, fmt.Errorf("append to %s: log failed earlier: %w", l.dir, l.failed)
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
	res, maxTs, err := l.stage(records, appendTime)
	if err != nil || res.Duplicate {
		l.producers.discard()
		return res, err
	}
	if err := l.maybeRoll(int64(len(records)), maxTs, res.LastOffset); err != nil {
		l.producers.discard()
		return AppendResult{}, err
	}
	s := l.active
	pos := s.size.Load()
	if err := l.reserveIndexes(s); err != nil {
		l.producers.discard()
		return AppendResult{}, err
	}
	l.stamp(records, appendTime)
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
	l.producers.commit()
	s.dirty.Store(true)
	s.size.Store(pos)
	l.size.Add(int64(len(records)))
	l.leo.Store(res.LastOffset + 1)
	if l.epochs.assignIfNewer(l.leaderEpoch, res.BaseOffset) {
		l.epochsDirty = true
		if err := l.writeEpochs(); err != nil {
			l.logger.Warn("leader-epoch checkpoint not written", "err", err)
		}
	}
	l.unflushed += max(nrec, 1)
	if l.unflushed >= l.cfg.FlushMessages {
		l.unflushed = 0
		if err := l.flushUpTo(res.LastOffset + 1); err != nil {
			return res, fmt.Errorf("append to %s: written at offsets %d..%d but not flushed: %w", l.dir, res.BaseOffset, res.LastOffset, err)
		}
	}
	res.LogStartOffset = l.logStart.Load()
	return res, nil
}

// stage parses the batches of records into l.hdrs with their future offsets, and checks them
// against the limits and the producer state (staging its changes). It returns the offsets, the
// largest timestamp the batches will carry and, for a duplicate, the original offsets.
func (l *Log) stage(records []byte, appendTime int64) (res AppendResult, maxTs int64, err error) {
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
		h.baseOffset = next
		if h.producerID >= 0 {
			dup, isDup, err := l.producers.check(&h, next, h.lastOffset())
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

// stamp rewrites the staged batches in place: base offset and leader epoch, and for
// LogAppendTime the timestamp type, maxTimestamp and CRC.
func (l *Log) stamp(records []byte, appendTime int64) {
	be := binary.BigEndian
	var pos int64
	for i := range l.hdrs {
		h := &l.hdrs[i]
		b := records[pos : pos+h.size()]
		be.PutUint64(b[offBaseOffset:], uint64(h.baseOffset))
		be.PutUint32(b[offLeaderEpoch:], uint32(l.leaderEpoch))
		if appendTime >= 0 {
			h.attributes |= attrLogAppendTime
			be.PutUint16(b[offAttributes:], uint16(h.attributes))
			be.PutUint64(b[offMaxTimestamp:], uint64(appendTime))
			be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
		}
		pos += h.size()
	}
}

// reserveIndexes allocates the index blocks the staged batches may write (plus the time
// index's final entry), so a full disk fails the append instead of faulting on the mapping.
func (l *Log) reserveIndexes(s *segment) error {
	n := int64(len(l.hdrs))
	if err := errors.Join(s.offIdx.ensure(s.offIdx.n.Load()+n), s.timIdx.ensure(s.timIdx.n.Load()+n+1)); err != nil {
		return fmt.Errorf("append to %s: %w", l.dir, err)
	}
	return nil
}

// write puts b at pos in s. A failed write is undone by truncating back to pos; if that fails
// too the log refuses further appends.
func (l *Log) write(s *segment, b []byte, pos int64) error {
	_, err := l.writeAt(s.f, b, pos)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("write %d bytes to %s at %d: %w", len(b), s.path, pos, err)
	if terr := s.f.Truncate(pos); terr != nil {
		l.failed = errors.Join(err, fmt.Errorf("undo by truncating to %d: %w", pos, terr))
		l.logger.Error("log failed: a write could not be undone; appends refused until reopen", "err", l.failed)
		return l.failed
	}
	return err
}

// maybeRoll starts a new segment when the active one is not empty and the append of n bytes
// would pass segment.bytes, an index is full, the offsets would not fit 32-bit relative
// offsets, or segment.ms has passed (measured on batch timestamps as Kafka does, or on the
// clock before the segment has one).
func (l *Log) maybeRoll(n, maxTs, lastOffset int64) error {
	s := l.active
	size := s.size.Load()
	if size == 0 {
		return nil
	}
	var reason string
	switch {
	case size+n > l.cfg.SegmentBytes:
		reason = "size"
	case s.offIdx.offsetFull() || s.timIdx.timeFull():
		reason = "index full"
	case lastOffset-s.base > math.MaxInt32:
		reason = "relative offset"
	case size+n > int64(len(s.data)):
		reason = "mapping" // segment.bytes grew after the segment was mapped
	case l.cfg.SegmentMs > 0 && s.firstTs >= 0 && maxTs-s.firstTs > l.cfg.SegmentMs.Milliseconds():
		reason = "segment.ms"
	case l.cfg.SegmentMs > 0 && s.firstTs < 0 && l.opts.Now().Sub(s.created) > l.cfg.SegmentMs:
		reason = "segment.ms"
	default:
		return nil
	}
	return l.roll(reason)
}

// roll makes a new active segment at the log end offset and flushes the old one in the
// background, as Kafka does, advancing the recovery point.
func (l *Log) roll(reason string) error {
	old := l.active
	base := l.leo.Load()
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

// Read returns the batches starting with the one that contains offset, up to maxBytes (but
// always at least one whole batch when minOneBatch, as KIP-74), never past maxOffset (the high
// watermark or last stable offset; negative or past the log end means the log end). Reads stay
// within one segment, as Kafka's do. An offset at or past maxOffset (but not past the log end)
// reads nothing. The result's Data stays valid until its Release is called.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64, minOneBatch bool) (ReadResult, error) {
	for {
		leo := l.leo.Load()
		segsp := l.segs.Load()
		if segsp == nil {
			return ReadResult{Release: noRelease}, fmt.Errorf("read %s at %d: %w", l.dir, offset, ErrClosed)
		}
		segs := *segsp
		if start := l.logStart.Load(); offset < start || offset > leo {
			return ReadResult{Release: noRelease}, fmt.Errorf("read %s at %d: %w: log start %d, log end %d",
				l.dir, offset, ErrOffsetOutOfRange, start, leo)
		}
		if maxOffset < 0 || maxOffset > leo {
			maxOffset = leo
		}
		if offset >= maxOffset {
			return ReadResult{Release: noRelease}, nil
		}
		lo, hi := 0, len(segs) // find the first segment with base > offset
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if segs[mid].base <= offset {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		retry := false
		for i := max(lo-1, 0); i < len(segs); i++ {
			s := segs[i]
			if !s.tryRef() {
				retry = true // dropped by a concurrent roll, retention or close; reload
				break
			}
			data, stop := s.read(offset, maxBytes, maxOffset, minOneBatch)
			if stop && len(data) > 0 {
				return ReadResult{Data: data, Release: s.release}, nil
			}
			s.decRef()
			if stop {
				break
			}
		}
		if !retry {
			return ReadResult{Release: noRelease}, nil
		}
	}
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

// SetLeaderEpoch sets the epoch stamped into appended batches and records, as Kafka does when
// a replica becomes leader, that the epoch starts at the current log end offset. An epoch older
// than the latest known one is refused.
func (l *Log) SetLeaderEpoch(epoch int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("set leader epoch of %s: %w", l.dir, ErrClosed)
	}
	if n := len(l.epochs.entries); n > 0 && epoch < l.epochs.entries[n-1].epoch {
		return fmt.Errorf("set leader epoch of %s: epoch %d is older than the latest known epoch %d", l.dir, epoch, l.epochs.entries[n-1].epoch)
	}
	l.leaderEpoch = epoch
	if l.epochs.assign(epoch, l.leo.Load()) {
		l.epochsDirty = true
	}
	return l.writeEpochs()
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch from the leader-epoch cache: the largest
// epoch <= epoch that the log knows and the offset where the next epoch starts (the log end
// offset for the current epoch); (-1, -1) when unknown.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epochs.endOffsetFor(epoch, l.leo.Load())
}

// OffsetForTimestamp finds the earliest record with a timestamp >= ts (ListOffsets): the
// first segment whose largest timestamp reaches ts, then the time index, the offset index and
// a scan of batch headers. Within an uncompressed batch it returns the exact record; within a
// compressed one, the batch's first offset and its maxTimestamp. ok is false when no record is
// that late.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, 0, false
	}
	start := l.logStart.Load()
	for _, s := range *l.segs.Load() {
		if s.maxTs < ts {
			continue
		}
		var pos int64
		if rel := s.timIdx.lookupBeforeTime(ts); rel >= 0 {
			pos = s.offIdx.lookupPosition(rel)
		}
		end := s.size.Load()
		for {
			size, base, last, found := s.batchAt(pos, end)
			if !found {
				break
			}
			b := s.data[pos : pos+size]
			if maxTs := int64(beUint64(b[offMaxTimestamp:])); last >= start && maxTs >= ts {
				if off, rts, exact := firstRecordAtOrAfter(b, ts, start); exact {
					return off, rts, true
				}
				return max(base, start), maxTs, true
			}
			pos += size
		}
	}
	return 0, 0, false
}

// Flush fsyncs every segment written since the last flush and advances the recovery point to
// the log end offset.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("flush %s: %w", l.dir, ErrClosed)
	}
	l.unflushed = 0
	return l.flushUpTo(l.leo.Load())
}

// FlushIfDue flushes when Config.FlushInterval has passed since the last flush and there is
// unflushed data. The broker's flush scheduler calls it (log.flush.scheduler.interval.ms).
func (l *Log) FlushIfDue() error {
	l.mu.Lock()
	interval := l.cfg.FlushInterval
	l.mu.Unlock()
	if interval <= 0 || l.recoveryPoint.Load() >= l.leo.Load() {
		return nil
	}
	if l.opts.Now().UnixNano()-l.lastFlushNanos.Load() < int64(interval) {
		return nil
	}
	return l.Flush()
}

// flushUpTo fsyncs the dirty segments holding offsets below upto, then moves the recovery
// point to upto. Flushes are serialised, and each covers every dirty segment below its bound,
// so the recovery point never passes unflushed data.
func (l *Log) flushUpTo(upto int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	segsp := l.segs.Load()
	if segsp == nil {
		return fmt.Errorf("flush %s: %w", l.dir, ErrClosed)
	}
	for _, s := range *segsp {
		if s.base >= upto {
			break
		}
		if !s.dirty.Load() || !s.tryRef() {
			continue
		}
		s.dirty.Store(false)
		err := s.sync()
		s.decRef()
		if err != nil {
			s.dirty.Store(true)
			return fmt.Errorf("flush %s: %w", l.dir, err)
		}
	}
	if l.dirDirty.Swap(false) {
		if err := syncDir(l.dir); err != nil {
			l.dirDirty.Store(true)
			return fmt.Errorf("flush %s: %w", l.dir, err)
		}
	}
	if upto > l.recoveryPoint.Load() {
		l.recoveryPoint.Store(upto)
	}
	l.lastFlushNanos.Store(l.opts.Now().UnixNano())
	return nil
}

// Close flushes the log, finishes the active segment's indexes and writes the leader-epoch
// checkpoint: a clean close, after which the broker may write the clean-shutdown marker.
// Segments still referenced by reads stay mapped until released. Closing twice is a no-op.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
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

// Delete closes the log and removes its directory (DeleteTopics). Reads still holding
// segments keep their mappings until released.
func (l *Log) Delete() error {
	err := l.Close()
	if rerr := os.RemoveAll(l.dir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("delete %s: %w", l.dir, rerr))
	}
	return err
}

// MaxTimestampOffset answers ListOffsets' MAX_TIMESTAMP (-3, KIP-734): the largest timestamp in
// the log and the last offset of the batch that holds it (the first such batch when several
// share it). ok is false for an empty log.
func (l *Log) MaxTimestampOffset() (offset int64, timestamp int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, 0, false
	}
	start := l.logStart.Load()
	best := int64(-1)
	for _, s := range *l.segs.Load() {
		if s.maxTs > best && s.maxTsOffset >= start {
			best, offset, ok = s.maxTs, s.maxTsOffset, true
		}
	}
	return offset, best, ok
}
