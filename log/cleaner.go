package log

// Log compaction (cleanup.policy=compact), after Kafka's LogCleaner.
//
// One Cleaner goroutine serves every compacted log of a broker. It picks the log with the
// largest dirty ratio above min.cleanable.dirty.ratio (or one whose max.compaction.lag.ms or
// delete horizon has passed), builds a map from key to latest offset over the dirty part
// (segments from the cleaner checkpoint up to the first uncleanable offset: the active segment
// or the first segment newer than min.compaction.lag.ms), then rewrites every segment below the
// map's end in groups that fit segment.bytes, keeping a record only when no later record has
// its key. Offsets never change: batches keep their base offset and last offset delta, records
// their offset deltas.
//
// Tombstones follow KIP-534: the first cleaning that keeps a tombstone rewrites its batch with
// the delete-horizon attribute (0x40) and baseTimestamp = now + delete.retention.ms (record
// timestamp deltas rebased onto it); a later cleaning after the horizon drops the tombstone.
// Records without a key are dropped, as Kafka does. A batch of an idempotent producer whose
// records are all dropped stays as an empty batch when it is that producer's last batch, so
// the producer's sequence survives. Control and transactional batches are copied unchanged
// (ringbroker has no transaction coordinator yet; no aborted data can exist).
//
// Compressed batches are decompressed with internal/codec and rewritten with the same codec
// and a fresh CRC. A cleaned group is written beside the log as %020d.log.cleaned (and
// .index.cleaned, .timeindex.cleaned), fsynced, renamed to .swap (the commit point), the old
// segments renamed to .deleted and the swap files to their final names. Open completes or
// discards an interrupted swap (recoverSwaps). Readers holding the old segments keep their
// mappings until they release them.

import (
	"bufio"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"ringbroker/internal/codec"
)

// CleanerOffsetCheckpointFile is the per-log-directory file holding each compacted partition's
// first dirty offset, Kafka's cleaner-offset-checkpoint.
const CleanerOffsetCheckpointFile = "cleaner-offset-checkpoint"

const (
	// cleanedSuffix marks files of a cleaned segment being written; Open removes them.
	cleanedSuffix = ".cleaned"
	// swapSuffix marks a complete cleaned segment about to replace the old ones; Open finishes
	// the replacement.
	swapSuffix = ".swap"
	// maxCleanerDecompressedBytes bounds the decompressed size of one batch the cleaner reads.
	maxCleanerDecompressedBytes = 128 << 20
	// offsetMapEntryBytes is the memory one key costs in the offset map (hash, offset and Go
	// map overhead); it turns CleanerConfig.DedupeBufferBytes into a key count.
	offsetMapEntryBytes = 64
	// cleanerWriteBuffer is the buffered-writer size for cleaned segments.
	cleanerWriteBuffer = 1 << 20
)

// errCleaningAborted says the segments being cleaned changed (retention, close) before the
// swap; the cleaned files are discarded and the log is cleaned again later.
var errCleaningAborted = errors.New("cleaning aborted")

// CompactionConfig holds a topic's compaction settings, named after Kafka's topic configs.
type CompactionConfig struct {
	// DeleteRetention is delete.retention.ms: how long tombstones stay readable after the
	// cleaning that first kept them.
	DeleteRetention time.Duration
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: a log is cleaned when its dirty
	// bytes exceed this fraction of its cleanable bytes.
	MinCleanableDirtyRatio float64
	// MinCompactionLag is min.compaction.lag.ms: segments with records newer than this are not
	// cleaned.
	MinCompactionLag time.Duration
	// MaxCompactionLag is max.compaction.lag.ms: a log whose oldest dirty segment is older than
	// this is cleaned whatever its dirty ratio. 0 disables.
	MaxCompactionLag time.Duration
}

// DefaultCompactionConfig returns Kafka's defaults: delete.retention.ms one day,
// min.cleanable.dirty.ratio 0.5, no compaction lags.
func DefaultCompactionConfig() CompactionConfig {
	return CompactionConfig{DeleteRetention: 24 * time.Hour, MinCleanableDirtyRatio: 0.5}
}

// CleanerConfig holds the broker-wide cleaner settings, named after Kafka's log.cleaner.*.
type CleanerConfig struct {
	// Backoff is log.cleaner.backoff.ms: the sleep when no log needs cleaning.
	Backoff time.Duration
	// DedupeBufferBytes is log.cleaner.dedupe.buffer.size: the memory for the key map of one
	// cleaning; a dirty part with more keys is cleaned in several passes.
	DedupeBufferBytes int64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives cleaning reports; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultCleanerConfig returns Kafka's defaults: 15 s backoff, 128 MiB dedupe buffer.
func DefaultCleanerConfig() CleanerConfig {
	return CleanerConfig{Backoff: 15 * time.Second, DedupeBufferBytes: 128 << 20}
}

// CleanStats reports one cleaning of one log.
type CleanStats struct {
	// BytesRead and BytesWritten count segment bytes read by the rewrite and written to
	// cleaned segments.
	BytesRead, BytesWritten int64
	// RecordsRead and RecordsKept count records of the rewritten batches.
	RecordsRead, RecordsKept int64
	// Segments is how many old segments were replaced; Groups how many cleaned segments
	// replaced them.
	Segments, Groups int
	// FirstDirtyOffset is the cleaner checkpoint after the cleaning.
	FirstDirtyOffset int64
	// Duration is the wall time of the cleaning.
	Duration time.Duration
}

// Cleaner compacts the logs registered with Add on one background goroutine (Start, Stop).
// Clean runs one cleaning synchronously.
type Cleaner struct {
	cfg        CleanerConfig
	logger     *slog.Logger
	maxEntries int

	mu   sync.Mutex
	cond *sync.Cond // signalled when a cleaning ends
	logs map[*Log]*cleanerEntry

	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	started  atomic.Bool

	// cleanMu serialises cleanings; the scratch state below belongs to its holder.
	cleanMu sync.Mutex
	codecs  *codec.Codecs
	offsets map[[md5.Size]byte]int64
	payload []byte      // decompressed records
	raw     []byte      // kept records, uncompressed
	out     []byte      // the rewritten batch
	kept    []rawRecord // kept records of the current batch
}

// cleanerEntry is the cleaner's state for one log; guarded by Cleaner.mu.
type cleanerEntry struct {
	cc CompactionConfig
	// firstDirty is the first offset not yet covered by a cleaning (the checkpoint).
	firstDirty int64
	// nextHorizon is the earliest delete horizon (Unix ms) left by the last cleaning;
	// math.MaxInt64 when none.
	nextHorizon int64
	busy        bool
	// removed is set by Remove; a cleaning in progress stops at the next group.
	removed atomic.Bool
}

// NewCleaner returns a stopped cleaner with no logs.
func NewCleaner(cfg CleanerConfig) *Cleaner {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultCleanerConfig().Backoff
	}
	if cfg.DedupeBufferBytes <= 0 {
		cfg.DedupeBufferBytes = DefaultCleanerConfig().DedupeBufferBytes
	}
	c := &Cleaner{
		cfg:        cfg,
		logger:     cfg.Logger.With("component", "log-cleaner"),
		maxEntries: int(max(cfg.DedupeBufferBytes/offsetMapEntryBytes, 1)),
		logs:       map[*Log]*cleanerEntry{},
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		codecs:     codec.New(),
		offsets:    map[[md5.Size]byte]int64{},
	}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Start runs the cleaning loop on its own goroutine until Stop.
func (c *Cleaner) Start() {
	if c.started.Swap(true) {
		return
	}
	go c.run()
}

// Stop ends the loop, waiting for a cleaning in progress to finish its current group.
func (c *Cleaner) Stop() {
	c.stopOnce.Do(func() { close(c.stop) })
	if c.started.Load() {
		<-c.done
	}
}

// Add registers l for compaction with cc, or updates its settings; the broker calls it when a
// partition of a topic whose cleanup.policy includes compact is opened or reconfigured. The
// first dirty offset is read from the log directory's cleaner checkpoint.
func (c *Cleaner) Add(l *Log, cc CompactionConfig) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.logs[l]; ok {
		e.cc = cc
	} else {
		c.logs[l] = &cleanerEntry{cc: cc, firstDirty: c.readCheckpoint(l), nextHorizon: math.MaxInt64}
	}
	c.Wake()
}

// Remove unregisters l (partition closed or deleted, or cleanup.policy no longer compact),
// waiting until no cleaning of l is in progress.
func (c *Cleaner) Remove(l *Log) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.logs[l]
	if !ok {
		return
	}
	e.removed.Store(true)
	delete(c.logs, l)
	for e.busy {
		c.cond.Wait()
	}
}

// Wake makes the loop look for work now instead of after its backoff.
func (c *Cleaner) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// run is the cleaning loop: clean the dirtiest log while one qualifies, else sleep.
func (c *Cleaner) run() {
	defer close(c.done)
	timer := time.NewTimer(c.cfg.Backoff)
	defer timer.Stop()
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		if l := c.pick(); l != nil {
			if st, err := c.clean(l, false); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, errCleaningAborted) {
				c.logger.Warn("cleaning failed", "dir", l.dir, "err", err)
			} else if err == nil && st.Segments > 0 {
				c.logger.Info("cleaned log", "dir", l.dir, "segments", st.Segments, "groups", st.Groups,
					"bytes_read", st.BytesRead, "bytes_written", st.BytesWritten, "records_read", st.RecordsRead,
					"records_kept", st.RecordsKept, "first_dirty_offset", st.FirstDirtyOffset, "duration", st.Duration)
			}
			continue
		}
		timer.Reset(c.cfg.Backoff)
		select {
		case <-c.stop:
			return
		case <-c.wake:
		case <-timer.C:
		}
	}
}

// pick returns the log most in need of cleaning, or nil.
func (c *Cleaner) pick() *Log {
	type cand struct {
		l                       *Log
		cc                      CompactionConfig
		firstDirty, nextHorizon int64
	}
	c.mu.Lock()
	cands := make([]cand, 0, len(c.logs))
	for l, e := range c.logs {
		cands = append(cands, cand{l, e.cc, e.firstDirty, e.nextHorizon})
	}
	c.mu.Unlock()
	now := c.cfg.Now().UnixMilli()
	var best *Log
	bestRatio := -1.0
	for _, k := range cands {
		ratio, due, ok := k.l.cleanability(&k.cc, k.firstDirty, k.nextHorizon, now)
		if !ok || !(due || ratio > k.cc.MinCleanableDirtyRatio) {
			continue
		}
		if due {
			ratio = math.Inf(1)
		}
		if ratio > bestRatio {
			best, bestRatio = k.l, ratio
		}
	}
	return best
}

// cleanRange is the part of a log a cleaning may touch, taken under Log.mu.
type cleanRange struct {
	segs       []*segment // cleanable segments: below the active one and the compaction lag
	firstDirty int64
	end        int64 // first uncleanable offset
	cleanBytes int64
	dirtyBytes int64
	// dirtyMaxTs is the largest timestamp of the first dirty segment (max.compaction.lag.ms).
	dirtyMaxTs int64
}

// cleanableRange computes the cleanable segments of l. Called under l.mu.
func (l *Log) cleanableRange(cc *CompactionConfig, firstDirty, now int64) cleanRange {
	segs := *l.segs.Load()
	r := cleanRange{firstDirty: max(firstDirty, l.logStart.Load(), segs[0].base), end: l.active.base, dirtyMaxTs: -1}
	for _, s := range segs {
		if s == l.active || (cc.MinCompactionLag > 0 && s.maxTs > now-cc.MinCompactionLag.Milliseconds()) {
			r.end = s.base
			break
		}
		r.segs = append(r.segs, s)
		if s.next <= r.firstDirty {
			r.cleanBytes += s.size.Load()
			continue
		}
		if r.dirtyBytes == 0 {
			r.dirtyMaxTs = s.maxTs
		}
		r.dirtyBytes += s.size.Load()
	}
	return r
}

// cleanability says how dirty l is: the dirty ratio, whether max.compaction.lag.ms or a
// delete horizon makes a cleaning due regardless, and ok = false when nothing is cleanable.
func (l *Log) cleanability(cc *CompactionConfig, firstDirty, nextHorizon, now int64) (ratio float64, due, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, false, false
	}
	r := l.cleanableRange(cc, firstDirty, now)
	if len(r.segs) == 0 {
		return 0, false, false
	}
	if total := r.cleanBytes + r.dirtyBytes; total > 0 {
		ratio = float64(r.dirtyBytes) / float64(total)
	}
	due = now >= nextHorizon ||
		(cc.MaxCompactionLag > 0 && r.dirtyBytes > 0 && r.dirtyMaxTs >= 0 && now-r.dirtyMaxTs > cc.MaxCompactionLag.Milliseconds())
	return ratio, due, r.dirtyBytes > 0 || due
}

// Clean compacts l now, whatever its dirty ratio; l must have been added. It returns what the
// cleaning did. Tests, benchmarks and tools use it; the broker relies on the loop.
func (c *Cleaner) Clean(l *Log) (CleanStats, error) {
	return c.clean(l, true)
}

// filter is what deciding on one record needs.
type filter struct {
	mapEnd          int64              // records at or past it are kept unexamined
	now             int64              // Unix ms
	deleteRetention int64              // ms
	producerLast    map[int64]int64    // producer id -> last offset of its newest batch
	minHorizon      int64              // smallest delete horizon among the kept batches
	stats           *CleanStats        // counters
	offsets         map[[16]byte]int64 // key hash -> latest offset
}

// clean runs one cleaning of l; without force, only when something is dirty or due.
func (c *Cleaner) clean(l *Log, force bool) (CleanStats, error) {
	c.cleanMu.Lock()
	defer c.cleanMu.Unlock()
	start := time.Now()
	c.mu.Lock()
	e, ok := c.logs[l]
	if !ok {
		c.mu.Unlock()
		return CleanStats{}, fmt.Errorf("clean %s: log not registered with the cleaner", l.dir)
	}
	e.busy = true
	cc, firstDirty, nextHorizon := e.cc, e.firstDirty, e.nextHorizon
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		e.busy = false
		c.cond.Broadcast()
		c.mu.Unlock()
	}()

	now := c.cfg.Now().UnixMilli()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return CleanStats{}, fmt.Errorf("clean %s: %w", l.dir, ErrClosed)
	}
	r := l.cleanableRange(&cc, firstDirty, now)
	var held []*segment
	for _, s := range r.segs {
		if !s.tryRef() {
			break
		}
		held = append(held, s)
	}
	producerLast := make(map[int64]int64, len(l.producers.entries))
	for id, pe := range l.producers.entries {
		if pe.n > 0 {
			producerLast[id] = pe.batches[pe.n-1].lastOffset
		}
	}
	cfg := l.cfg
	l.mu.Unlock()
	defer func() {
		for _, s := range held {
			s.decRef()
		}
	}()
	if len(held) < len(r.segs) {
		return CleanStats{}, fmt.Errorf("clean %s: %w: a segment was dropped meanwhile", l.dir, errCleaningAborted)
	}
	st := CleanStats{FirstDirtyOffset: r.firstDirty}
	if len(held) == 0 || (r.dirtyBytes == 0 && !force && now < nextHorizon) {
		return st, nil
	}

	mapEnd, err := c.buildOffsetMap(held, r)
	if err != nil {
		return st, fmt.Errorf("clean %s: build offset map: %w", l.dir, err)
	}
	f := &filter{mapEnd: mapEnd, now: now, deleteRetention: cc.DeleteRetention.Milliseconds(),
		producerLast: producerLast, minHorizon: math.MaxInt64, stats: &st, offsets: c.offsets}
	var toClean []*segment
	for _, s := range held {
		if s.base < mapEnd {
			toClean = append(toClean, s)
		}
	}
	for _, group := range groupSegments(toClean, cfg.SegmentBytes) {
		if e.removed.Load() {
			return st, fmt.Errorf("clean %s: %w: log removed from the cleaner", l.dir, errCleaningAborted)
		}
		cleaned, err := c.cleanGroup(l, group, &cfg, f)
		if err != nil {
			return st, fmt.Errorf("clean %s: %w", l.dir, err)
		}
		if cleaned == nil {
			continue
		}
		if err := l.replaceSegments(group, cleaned); err != nil {
			if errors.Is(err, errCleaningAborted) || errors.Is(err, ErrClosed) {
				discardCleaned(cleaned)
			}
			return st, fmt.Errorf("clean %s: %w", l.dir, err)
		}
		st.Segments += len(group)
		st.Groups++
	}
	st.FirstDirtyOffset = mapEnd
	st.Duration = time.Since(start)
	c.mu.Lock()
	if !e.removed.Load() {
		e.firstDirty = mapEnd
		e.nextHorizon = f.minHorizon
	}
	c.mu.Unlock()
	if err := c.writeCheckpoint(l); err != nil {
		c.logger.Warn("cleaner checkpoint not written", "dir", l.dir, "err", err)
	}
	return st, nil
}

// buildOffsetMap fills c.offsets with the latest offset of every key in the dirty segments of
// r, stopping at a batch boundary when the map is full. It returns the offset after the last
// mapped batch (the end of what this cleaning may drop records for).
func (c *Cleaner) buildOffsetMap(segs []*segment, r cleanRange) (int64, error) {
	clear(c.offsets)
	end := r.end
	for _, s := range segs {
		if s.next <= r.firstDirty {
			continue
		}
		size := s.size.Load()
		for pos := int64(0); pos < size; {
			h, err := checkBatch(s.data[pos:size], true)
			if err != nil {
				return 0, fmt.Errorf("segment %s position %d: %w", s.path, pos, err)
			}
			b := s.data[pos : pos+h.size()]
			pos += h.size()
			if h.lastOffset() < r.firstDirty || h.isControl() || h.attributes&attrTransactional != 0 {
				continue
			}
			if len(c.offsets) >= c.maxEntries {
				return h.baseOffset, nil
			}
			err = c.eachRecord(b, &h, func(rec *rawRecord) {
				if rec.key != nil {
					c.offsets[md5.Sum(rec.key)] = h.baseOffset + int64(rec.offsetDelta)
				}
			})
			if err != nil {
				return 0, fmt.Errorf("segment %s batch at offset %d: %w", s.path, h.baseOffset, err)
			}
		}
	}
	return end, nil
}

// eachRecord calls fn for every record of batch b, decompressing into c.payload when needed.
func (c *Cleaner) eachRecord(b []byte, h *batchHeader, fn func(*rawRecord)) error {
	payload := b[batchHeaderSize:]
	if id := codec.Codec(h.attributes & attrCompression); id != codec.None {
		var err error
		c.payload, err = c.codecs.Decompress(id, payload, c.payload[:0], maxCleanerDecompressedBytes)
		if err != nil {
			return fmt.Errorf("decompress %s: %w", id, err)
		}
		payload = c.payload
	}
	for i := int32(0); i < h.numRecords; i++ {
		rec, n, err := nextRecord(payload)
		if err != nil {
			return fmt.Errorf("record %d of %d: %w", i, h.numRecords, err)
		}
		fn(&rec)
		payload = payload[n:]
	}
	if len(payload) != 0 {
		return fmt.Errorf("%d bytes after %d records", len(payload), h.numRecords)
	}
	return nil
}

// groupSegments splits segs into runs that can become one segment: at most segmentBytes in
// total and with every offset within 32 bits of the first base, as Kafka's groupSegmentsBySize.
func groupSegments(segs []*segment, segmentBytes int64) [][]*segment {
	var groups [][]*segment
	for i := 0; i < len(segs); {
		j, size := i+1, segs[i].size.Load()
		for j < len(segs) && size+segs[j].size.Load() <= segmentBytes && segs[j].next-1-segs[i].base <= math.MaxInt32 {
			size += segs[j].size.Load()
			j++
		}
		groups = append(groups, segs[i:j])
		i = j
	}
	return groups
}

// cleanedPath names a file of the cleaned segment at base.
func cleanedPath(dir string, base int64, suffix string) string {
	return segmentPath(dir, base, suffix) + cleanedSuffix
}

// cleanGroup writes the cleaned copy of group as a sealed, fsynced segment under .cleaned
// names. It returns nil when the group is one segment that cleaning would not change.
func (c *Cleaner) cleanGroup(l *Log, group []*segment, cfg *Config, f *filter) (cleaned *segment, err error) {
	base := group[0].base
	file, err := os.OpenFile(cleanedPath(l.dir, base, logSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create cleaned segment: %w", err)
	}
	s := newSegment(base, file.Name(), file, l.logger, l.opts.Now())
	defer func() {
		if cleaned == nil {
			discardCleaned(s)
		}
	}()
	if s.offIdx, err = openIndex(cleanedPath(l.dir, base, indexSuffix), offsetEntrySize, int64(cfg.MaxIndexBytes), true); err != nil {
		return nil, err
	}
	if s.timIdx, err = openIndex(cleanedPath(l.dir, base, timeIndexSuffix), timeEntrySize, int64(cfg.MaxIndexBytes), true); err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(file, cleanerWriteBuffer)
	var pos int64
	changed := len(group) > 1
	for _, old := range group {
		size := old.size.Load()
		f.stats.BytesRead += size
		for p := int64(0); p < size; {
			h, err := checkBatch(old.data[p:size], true)
			if err != nil {
				return nil, fmt.Errorf("segment %s position %d: %w", old.path, p, err)
			}
			in := old.data[p : p+h.size()]
			p += h.size()
			out, same, err := c.filterBatch(in, &h, f)
			if err != nil {
				return nil, fmt.Errorf("segment %s batch at offset %d: %w", old.path, h.baseOffset, err)
			}
			changed = changed || !same
			if out == nil {
				continue
			}
			if pos+int64(len(out)) > math.MaxInt32 {
				return nil, fmt.Errorf("cleaned segment at %d would pass 32-bit positions", base)
			}
			if err := errors.Join(s.offIdx.ensure(s.offIdx.n.Load()+1), s.timIdx.ensure(s.timIdx.n.Load()+2)); err != nil {
				return nil, err
			}
			if _, err := w.Write(out); err != nil {
				return nil, fmt.Errorf("write cleaned segment %s: %w", s.path, err)
			}
			oh := parseHeader(out)
			s.noteBatch(pos, oh.size(), oh.lastOffset(), oh.maxTimestamp, int64(cfg.IndexIntervalBytes), true)
			pos += oh.size()
		}
	}
	if !changed {
		return nil, nil
	}
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("write cleaned segment %s: %w", s.path, err)
	}
	f.stats.BytesWritten += pos
	if err := s.deactivate(); err != nil {
		return nil, err
	}
	if err := s.mapData(0); err != nil {
		return nil, err
	}
	if err := errors.Join(file.Sync(), s.offIdx.sync(), s.timIdx.sync()); err != nil {
		return nil, fmt.Errorf("fsync cleaned segment %s: %w", s.path, err)
	}
	s.dirty.Store(false)
	return s, nil
}

// discardCleaned closes and removes the files of a cleaned segment that will not be used.
func discardCleaned(s *segment) {
	dir := filepath.Dir(s.path)
	if err := s.closeFiles(); err != nil {
		s.logger.Warn("close discarded cleaned segment", "segment", s.path, "err", err)
	}
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		for _, path := range []string{cleanedPath(dir, s.base, suffix), segmentPath(dir, s.base, suffix) + swapSuffix} {
			if err := ignoreNotExist(os.Remove(path)); err != nil {
				s.logger.Warn("remove discarded cleaned segment", "file", path, "err", err)
			}
		}
	}
}

// filterBatch decides what of batch b (header h, CRC checked) survives. It returns b itself
// with same = true when the batch is kept byte for byte, nil when it goes entirely, or a
// rewritten batch (valid until the next call).
func (c *Cleaner) filterBatch(b []byte, h *batchHeader, f *filter) (out []byte, same bool, err error) {
	hasHorizon := h.attributes&attrDeleteHorizon != 0
	if hasHorizon {
		f.minHorizon = min(f.minHorizon, h.baseTimestamp)
	}
	if h.isControl() || h.attributes&attrTransactional != 0 || h.numRecords == 0 {
		return b, true, nil
	}
	c.kept = c.kept[:0]
	tombstones := false
	err = c.eachRecord(b, h, func(rec *rawRecord) {
		f.stats.RecordsRead++
		off := h.baseOffset + int64(rec.offsetDelta)
		if off < f.mapEnd {
			if rec.key == nil {
				return // Kafka drops records without a key from compacted logs
			}
			if latest, ok := f.offsets[md5.Sum(rec.key)]; ok && off < latest {
				return
			}
			if rec.tombstone && hasHorizon && f.now >= h.baseTimestamp {
				return
			}
		}
		tombstones = tombstones || rec.tombstone
		c.kept = append(c.kept, *rec)
	})
	if err != nil {
		return nil, false, err
	}
	f.stats.RecordsKept += int64(len(c.kept))
	setHorizon := tombstones && !hasHorizon
	switch {
	case len(c.kept) == int(h.numRecords) && !setHorizon:
		return b, true, nil
	case len(c.kept) == 0:
		if last, ok := f.producerLast[h.producerID]; ok && h.producerID >= 0 && last == h.lastOffset() {
			return c.emptyBatch(b, h), false, nil
		}
		return nil, false, nil
	}
	horizon := int64(-1)
	if setHorizon {
		horizon = f.now + f.deleteRetention
		f.minHorizon = min(f.minHorizon, horizon)
	}
	c.raw = c.raw[:0]
	maxTs := int64(-1)
	for i := range c.kept {
		rec := &c.kept[i]
		ts := h.baseTimestamp + rec.tsDelta
		maxTs = max(maxTs, ts)
		if setHorizon {
			c.raw = appendRebased(c.raw, rec, ts-horizon)
		} else {
			c.raw = append(c.raw, rec.whole...)
		}
	}
	be := binary.BigEndian
	c.out = append(c.out[:0], b[:batchHeaderSize]...)
	attrs := h.attributes
	if setHorizon {
		attrs |= attrDeleteHorizon
		be.PutUint16(c.out[offAttributes:], uint16(attrs))
		be.PutUint64(c.out[offBaseTimestamp:], uint64(horizon))
	}
	if attrs&attrLogAppendTime == 0 {
		be.PutUint64(c.out[offMaxTimestamp:], uint64(maxTs))
	}
	be.PutUint32(c.out[offNumRecords:], uint32(len(c.kept)))
	if c.out, err = c.codecs.Compress(codec.Codec(attrs&attrCompression), c.raw, c.out); err != nil {
		return nil, false, fmt.Errorf("recompress: %w", err)
	}
	be.PutUint32(c.out[offBatchLength:], uint32(len(c.out)-logOverhead))
	be.PutUint32(c.out[offCRC:], crc32.Checksum(c.out[offAttributes:], castagnoli))
	return c.out, false, nil
}

// emptyBatch rewrites b as a batch without records that keeps its offsets, producer id, epoch
// and sequences, as Kafka's DefaultRecordBatch.writeEmptyHeader: uncompressed, both timestamps
// the original maxTimestamp.
func (c *Cleaner) emptyBatch(b []byte, h *batchHeader) []byte {
	be := binary.BigEndian
	c.out = append(c.out[:0], b[:batchHeaderSize]...)
	attrs := h.attributes &^ (attrCompression | attrDeleteHorizon)
	be.PutUint32(c.out[offBatchLength:], uint32(batchHeaderSize-logOverhead))
	be.PutUint16(c.out[offAttributes:], uint16(attrs))
	be.PutUint64(c.out[offBaseTimestamp:], uint64(h.maxTimestamp))
	be.PutUint32(c.out[offNumRecords:], 0)
	be.PutUint32(c.out[offCRC:], crc32.Checksum(c.out[offAttributes:], castagnoli))
	return c.out
}

// replaceSegments swaps group, a run of l's sealed segments, for cleaned: on disk through the
// .swap commit point, then in the segment list. Old segments stay mapped for their readers.
// errCleaningAborted means the run is no longer in the log; nothing changed.
func (l *Log) replaceSegments(group []*segment, cleaned *segment) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("replace segments of %s: %w", l.dir, ErrClosed)
	}
	segs := *l.segs.Load()
	at := slices.Index(segs, group[0])
	if at < 0 || at+len(group) >= len(segs) || !slices.Equal(segs[at:at+len(group)], group) {
		return fmt.Errorf("replace segments of %s at %d: %w: segments changed", l.dir, group[0].base, errCleaningAborted)
	}
	base := cleaned.base
	suffixes := []string{indexSuffix, timeIndexSuffix, logSuffix} // the log last: its .swap commits
	for _, suffix := range suffixes {
		if err := os.Rename(cleanedPath(l.dir, base, suffix), segmentPath(l.dir, base, suffix)+swapSuffix); err != nil {
			return fmt.Errorf("replace segments of %s: %w: %w", l.dir, errCleaningAborted, err)
		}
	}
	if err := syncDir(l.dir); err != nil {
		return fmt.Errorf("replace segments of %s: %w: %w", l.dir, errCleaningAborted, err)
	}
	// Committed: from here on a restart completes the swap, so the list changes even if a
	// rename below fails.
	var errs []error
	var oldBytes int64
	for _, old := range group {
		oldBytes += old.size.Load()
		errs = append(errs, old.markDeleted())
	}
	for _, suffix := range suffixes {
		final := segmentPath(l.dir, base, suffix)
		if err := os.Rename(final+swapSuffix, final); err != nil {
			errs = append(errs, fmt.Errorf("rename swap file: %w", err))
		}
	}
	errs = append(errs, syncDir(l.dir))
	cleaned.path = segmentPath(l.dir, base, logSuffix)
	cleaned.offIdx.path = segmentPath(l.dir, base, indexSuffix)
	cleaned.timIdx.path = segmentPath(l.dir, base, timeIndexSuffix)
	next := make([]*segment, 0, len(segs)-len(group)+1)
	next = append(append(append(next, segs[:at]...), cleaned), segs[at+len(group):]...)
	l.segs.Store(&next)
	l.size.Add(cleaned.size.Load() - oldBytes)
	for _, old := range group {
		old.decRef()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("replace segments of %s (swap committed): %w", l.dir, err)
	}
	return nil
}

// recoverSwaps finishes or discards the cleanings a crash interrupted, before the segments are
// listed: .cleaned files are removed; each %020d.log.swap replaces the segments whose base
// offsets it covers, as Kafka's LogLoader does; index .swap files without their log are
// removed.
func (l *Log) recoverSwaps() error {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("list %s for interrupted cleanings: %w", l.dir, err)
	}
	type swap struct{ base, next int64 }
	var swaps []swap
	var stray []string
	for _, e := range ents {
		name := e.Name()
		switch filepath.Ext(name) {
		case cleanedSuffix:
			stray = append(stray, name)
		case swapSuffix:
			base, suffix, ok := parseSegmentName(name[:len(name)-len(swapSuffix)])
			switch {
			case !ok:
				stray = append(stray, name)
			case suffix == logSuffix:
				next, err := swapNextOffset(filepath.Join(l.dir, name), base)
				if err != nil {
					return err
				}
				swaps = append(swaps, swap{base, next})
			}
		}
	}
	if len(swaps) == 0 && len(stray) == 0 {
		return nil
	}
	hasSwap := func(base int64) bool {
		return slices.ContainsFunc(swaps, func(s swap) bool { return s.base == base })
	}
	for _, e := range ents {
		name := e.Name()
		if filepath.Ext(name) == swapSuffix {
			if base, suffix, ok := parseSegmentName(name[:len(name)-len(swapSuffix)]); ok && suffix != logSuffix && !hasSwap(base) {
				stray = append(stray, name)
			}
			continue
		}
		base, suffix, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		for _, s := range swaps {
			inRange := base >= s.base && base < max(s.next, s.base+1)
			// The swap's own index files may already have their final names.
			replaced := base != s.base || suffix == logSuffix || fileExists(filepath.Join(l.dir, name+swapSuffix))
			if inRange && replaced {
				stray = append(stray, name)
			}
		}
	}
	for _, name := range stray {
		l.logger.Warn("removing file of an interrupted cleaning", "file", name)
		if err := ignoreNotExist(os.Remove(filepath.Join(l.dir, name))); err != nil {
			return fmt.Errorf("remove %s: %w", name, err)
		}
	}
	for _, s := range swaps {
		for _, suffix := range []string{indexSuffix, timeIndexSuffix, logSuffix} {
			final := segmentPath(l.dir, s.base, suffix)
			if err := ignoreNotExist(os.Rename(final+swapSuffix, final)); err != nil {
				return fmt.Errorf("complete interrupted cleaning: %w", err)
			}
		}
		l.logger.Warn("completed an interrupted cleaning", "base_offset", s.base, "next_offset", s.next)
	}
	return syncDir(l.dir)
}

// swapNextOffset returns the offset after the last batch of the swap file at path (its base
// when empty). The file was fsynced before it got its name, so its framing is trusted.
func swapNextOffset(path string, base int64) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read swap file: %w", err)
	}
	next := base
	for pos := 0; pos < len(data); {
		h, err := checkBatch(data[pos:], false)
		if err != nil {
			break
		}
		next = h.lastOffset() + 1
		pos += int(h.size())
	}
	return next, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readCheckpoint returns l's first dirty offset from its log directory's cleaner checkpoint,
// or 0 when unknown.
func (c *Cleaner) readCheckpoint(l *Log) int64 {
	if l.opts.Topic == "" {
		return 0
	}
	path := filepath.Join(filepath.Dir(l.dir), CleanerOffsetCheckpointFile)
	offsets, err := ReadOffsetCheckpoint(path)
	if err != nil {
		c.logger.Warn("ignoring cleaner checkpoint", "file", path, "err", err)
		return 0
	}
	return offsets[TopicPartition{Topic: l.opts.Topic, Partition: l.opts.Partition}]
}

// writeCheckpoint rewrites the cleaner checkpoint of l's log directory with the first dirty
// offsets of every registered log in it.
func (c *Cleaner) writeCheckpoint(l *Log) error {
	if l.opts.Topic == "" {
		return nil
	}
	parent := filepath.Dir(l.dir)
	c.mu.Lock()
	offsets := map[TopicPartition]int64{}
	for other, e := range c.logs {
		if other.opts.Topic != "" && filepath.Dir(other.dir) == parent {
			offsets[TopicPartition{Topic: other.opts.Topic, Partition: other.opts.Partition}] = e.firstDirty
		}
	}
	c.mu.Unlock()
	return WriteOffsetCheckpoint(filepath.Join(parent, CleanerOffsetCheckpointFile), offsets)
}
