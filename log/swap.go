package log

// A cleaned group is written beside the log as %020d.log.cleaned (and .index.cleaned,
// .timeindex.cleaned and, when the group had aborted transactions, .txnindex.cleaned), fsynced, renamed to .swap (the commit point), the old segments renamed
// to .deleted and the swap files to their final names. Open completes or discards an
// interrupted swap (recoverSwaps). Readers holding the old segments keep their mappings until
// they release them.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"ringbroker/internal/fsutil"
)

const (
	// cleanedSuffix marks files of a cleaned segment being written; Open removes them.
	cleanedSuffix = ".cleaned"
	// swapSuffix marks a complete cleaned segment about to replace the old ones; Open finishes
	// the replacement.
	swapSuffix = ".swap"
)

// cleanedPath names a file of the cleaned segment at base.
func cleanedPath(dir string, base int64, suffix string) string {
	return segmentPath(dir, base, suffix) + cleanedSuffix
}

// discardCleaned closes and removes the files of a cleaned segment that will not be used.
func discardCleaned(s *segment) {
	dir := filepath.Dir(s.path)
	if err := s.closeFiles(); err != nil {
		s.logger.Warn("close discarded cleaned segment", "segment", s.path, "err", err)
	}
	for _, suffix := range segmentSuffixes() {
		for _, path := range []string{cleanedPath(dir, s.base, suffix), segmentPath(dir, s.base, suffix) + swapSuffix} {
			if err := ignoreNotExist(os.Remove(path)); err != nil {
				s.logger.Warn("remove discarded cleaned segment", "file", path, "err", err)
			}
		}
	}
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
	if len(cleaned.abortedTxns()) > 0 {
		suffixes = []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix}
	}
	for _, suffix := range suffixes {
		if err := os.Rename(cleanedPath(l.dir, base, suffix), segmentPath(l.dir, base, suffix)+swapSuffix); err != nil {
			return fmt.Errorf("replace segments of %s: %w: %w", l.dir, errCleaningAborted, err)
		}
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
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
	errs = append(errs, fsutil.SyncDir(l.dir))
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
		for _, suffix := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
			final := segmentPath(l.dir, s.base, suffix)
			if err := ignoreNotExist(os.Rename(final+swapSuffix, final)); err != nil {
				return fmt.Errorf("complete interrupted cleaning: %w", err)
			}
		}
		l.logger.Warn("completed an interrupted cleaning", "base_offset", s.base, "next_offset", s.next)
	}
	return fsutil.SyncDir(l.dir)
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
