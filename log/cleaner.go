package log

// Log compaction (cleanup.policy=compact), after Kafka's LogCleaner. This file schedules it;
// compact.go builds the key map and rewrites the batches, swap.go puts the cleaned segments in
// place of the old ones, crash-safely.
//
// One Cleaner goroutine serves every compacted log of a broker. It picks the log with the
// largest dirty ratio above min.cleanable.dirty.ratio (or one whose max.compaction.lag.ms or
// delete horizon has passed) and cleans it; the first dirty offset of each log is kept in the
// log directory's cleaner-offset-checkpoint.

import (
	"crypto/md5"
	"errors"
	"log/slog"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"ringbroker/internal/codec"
)

// CleanerOffsetCheckpointFile is the per-log-directory file holding each compacted partition's
// first dirty offset, Kafka's cleaner-offset-checkpoint.
const CleanerOffsetCheckpointFile = "cleaner-offset-checkpoint"

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
