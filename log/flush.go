package log

import (
	"fmt"

	"ringbroker/internal/fsutil"
)

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
	start, synced := l.opts.Now(), false
	segsp := l.segs.Load()
	if segsp == nil {
		return fmt.Errorf("flush %s: %w", l.dir, ErrClosed)
	}
	// A truncation lowers the log end offset under flushMu: a bound read before it must not
	// move the recovery point past the new end.
	upto = min(upto, l.leo.Load())
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
		synced = true
		if err != nil {
			s.dirty.Store(true)
			return fmt.Errorf("flush %s: %w", l.dir, err)
		}
	}
	if l.dirDirty.Swap(false) {
		if err := fsutil.SyncDir(l.dir); err != nil {
			l.dirDirty.Store(true)
			return fmt.Errorf("flush %s: %w", l.dir, err)
		}
		synced = true
	}
	if upto > l.recoveryPoint.Load() {
		l.recoveryPoint.Store(upto)
	}
	now := l.opts.Now()
	l.lastFlushNanos.Store(now.UnixNano())
	if synced && l.opts.OnFlush != nil {
		l.opts.OnFlush(now.Sub(start))
	}
	return nil
}
