package log

import (
	"errors"
	"fmt"
)

// ApplyRetention deletes whole segments as Kafka's retention check does
// (log.retention.check.interval.ms): first those wholly below the log start offset (after
// DeleteRecords), then, when cleanup.policy includes delete, the oldest segments while the log
// would still hold retention.bytes without them, then those whose newest timestamp is older
// than retention.ms. Only segments below the log end offset go; when the active segment itself
// breaches retention it is rolled, as Kafka does, and deleted by the next check. The log start
// offset moves to the first remaining segment. Files are renamed to *.deleted at once and
// removed when the last in-flight read releases them. It returns the number of segments
// deleted.
func (l *Log) ApplyRetention() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, fmt.Errorf("apply retention to %s: %w", l.dir, ErrClosed)
	}
	deleted, err := l.deleteSegments("log start offset", func(s, next *segment) bool {
		return next != nil && next.base <= l.logStart.Load()
	})
	if err != nil || !l.cfg.DeletePolicy {
		return deleted, err
	}
	if l.cfg.RetentionBytes >= 0 && l.size.Load() >= l.cfg.RetentionBytes {
		excess := l.size.Load() - l.cfg.RetentionBytes
		n, err := l.deleteSegments("retention.bytes", func(s, _ *segment) bool {
			if size := s.size.Load(); excess-size >= 0 {
				excess -= size
				return true
			}
			return false
		})
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	if l.cfg.RetentionMs >= 0 {
		now := l.opts.Now().UnixMilli()
		n, err := l.deleteSegments("retention.ms", func(s, _ *segment) bool {
			return now-s.largestTimestamp() > l.cfg.RetentionMs
		})
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// deleteSegments deletes the longest prefix of segments that breach, as Kafka's
// deletableSegments: a breaching non-empty active segment is rolled instead. Called under mu.
func (l *Log) deleteSegments(reason string, breach func(s, next *segment) bool) (int, error) {
	segs := *l.segs.Load()
	n := 0
	for i, s := range segs {
		var next *segment
		if i+1 < len(segs) {
			next = segs[i+1]
		}
		if !breach(s, next) {
			break
		}
		if next == nil {
			if s.size.Load() > 0 {
				if err := l.roll(reason, l.leo.Load()); err != nil {
					return n, fmt.Errorf("apply %s to %s: %w", reason, l.dir, err)
				}
			}
			break
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	return n, l.dropSegments(n, reason)
}

// dropSegments removes the first n segments (never the active one) from the log: the log start
// offset and recovery point move to the first remaining segment, the files are renamed for
// deletion and the log's references dropped. Called under mu.
func (l *Log) dropSegments(n int, reason string) error {
	segs := *l.segs.Load()
	doomed := segs[:n]
	rest := append([]*segment(nil), segs[n:]...)
	newStart := rest[0].base
	if newStart > l.logStart.Load() {
		l.logStart.Store(newStart) // before the list, so readers see out-of-range, not a gap
	}
	l.flushMu.Lock()
	if l.recoveryPoint.Load() < newStart {
		l.recoveryPoint.Store(newStart)
	}
	l.flushMu.Unlock()
	l.segs.Store(&rest)
	bytes, err := markAllDeleted(doomed)
	for _, s := range doomed {
		s.decRef()
	}
	l.size.Add(-bytes)
	l.dirDirty.Store(true)
	l.logger.Info("deleted segments", "reason", reason, "segments", n, "bytes", bytes,
		"first_base_offset", doomed[0].base, "log_start_offset", l.logStart.Load())
	if err != nil {
		return fmt.Errorf("delete segments of %s: %w", l.dir, err)
	}
	return nil
}

// markAllDeleted renames the files of segments leaving the log for deletion; they are removed
// when the log and the last reader have released them. It returns the bytes the segments hold.
func markAllDeleted(doomed []*segment) (int64, error) {
	var errs []error
	var bytes int64
	for _, s := range doomed {
		bytes += s.size.Load()
		errs = append(errs, s.markDeleted())
	}
	return bytes, errors.Join(errs...)
}

// DeleteRecordsBefore answers DeleteRecords (API 21): it moves the log start offset up to
// offset, so that reads below it fail with ErrOffsetOutOfRange, and returns the new log start
// offset (the low watermark). An offset at or below the current start changes nothing. The
// segments wholly below are deleted by the next ApplyRetention, as in Kafka. Errors wrap
// ErrOffsetOutOfRange for an offset past the log end (the caller resolves -1, "high
// watermark", first), ErrPolicyViolation when cleanup.policy lacks delete, or ErrClosed.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch leo := l.leo.Load(); {
	case l.closed:
		return -1, fmt.Errorf("delete records of %s: %w", l.dir, ErrClosed)
	case !l.cfg.DeletePolicy:
		return -1, fmt.Errorf("delete records of %s: %w: cleanup.policy does not include delete", l.dir, ErrPolicyViolation)
	case offset < 0 || offset > leo:
		return -1, fmt.Errorf("delete records of %s before %d: %w: log end %d", l.dir, offset, ErrOffsetOutOfRange, leo)
	}
	if offset > l.logStart.Load() {
		l.logStart.Store(offset)
		l.logger.Info("log start offset moved by DeleteRecords", "log_start_offset", offset)
	}
	return l.logStart.Load(), nil
}

// Config returns the log's current configuration.
func (l *Log) Config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

// SetConfig applies a changed topic configuration to the open log (IncrementalAlterConfigs):
// retention, flush policy, group commit, index interval, segment.ms and message limits take
// effect with the next append, flush or retention check; segment.bytes with the next roll (a
// segment mapped for a smaller size rolls early when it would outgrow its mapping).
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("set config of %s: %w", l.dir, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("set config of %s: %w", l.dir, ErrClosed)
	}
	l.cfg = cfg
	l.gc.enabled.Store(cfg.GroupCommit)
	if s := l.active; s.size.Load() == 0 && cfg.SegmentBytes > int64(len(s.data)) {
		// No reader touches the mapping of an empty segment, so it can be replaced in place.
		if err := s.mapData(cfg.SegmentBytes); err != nil {
			return fmt.Errorf("set config of %s: %w", l.dir, err)
		}
	}
	if l.unflushed >= cfg.FlushMessages {
		l.unflushed = 0
		if err := l.flushUpTo(l.leo.Load()); err != nil {
			return fmt.Errorf("set config of %s: %w", l.dir, err)
		}
	}
	return nil
}

// RecoveryReport says what Open found in the log directory and what it repaired.
type RecoveryReport struct {
	// CheckedSegments is how many segments were scanned with CRC checks (those from the
	// recovery point on after an unclean shutdown; none after a clean one).
	CheckedSegments int
	// RebuiltIndexes is how many segments had their offset and time indexes rebuilt.
	RebuiltIndexes int
	// Truncated says the log was cut at a bad batch; the fields below say where and why.
	Truncated bool
	// TruncatedSegment and TruncatedPosition locate the first bad byte: the base offset of the
	// segment and the byte position in it where the log now ends.
	TruncatedSegment  int64
	TruncatedPosition int64
	// DroppedBytes counts the bytes removed: the rest of that segment plus every later one.
	DroppedBytes int64
	// DroppedSegments counts the whole segments removed after the truncated one.
	DroppedSegments int
	// Reason is why the scan stopped (bad length, magic, CRC or offsets).
	Reason string
}

// Recovery returns what Open found and repaired.
func (l *Log) Recovery() RecoveryReport { return l.recovery }
