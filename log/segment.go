package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ringbroker/internal/recordbatch"
)

// File name suffixes of Kafka's layout.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
)

// segmentSuffixes lists the files of one segment: the log, its indexes and its transaction
// index (which exists only once an aborted transaction was recorded in it).
func segmentSuffixes() []string {
	return []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix}
}

// segmentPath names a segment file by its base offset, zero-padded to 20 digits.
func segmentPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// segment is one .log file with its two indexes.
//
// Readers map the file read-only. The active segment is mapped once with a length covering
// segment.bytes, so appends (pwrite through the descriptor, visible through the shared page
// cache) never remap and slices handed out earlier stay valid; only data[:size] is ever read,
// so the pages past the end of the file are never touched. The cost is address space, not
// memory.
type segment struct {
	base   int64
	path   string
	f      *os.File
	fd     int          // f's descriptor, for sendfile by readers
	data   []byte       // shared read-only mapping; data[:size] holds whole batches
	size   atomic.Int64 // bytes written and visible to readers; grows only under Log.mu
	offIdx *index
	timIdx *index
	logger *slog.Logger

	// refs counts the owning Log's list (1) plus outstanding reads. At 0 the segment is
	// unmapped and closed; it never goes up again.
	refs atomic.Int32
	// deleted says retention dropped the segment and renamed its files to *.deleted; they are
	// removed when refs reaches 0, so in-flight reads and zero-copy sends keep their pages.
	deleted atomic.Bool
	// release drops one reference; cached so Read hands it out without allocating.
	release func()
	// mapped estimates the bytes of this segment that reads have mapped into the process since
	// its pages were last dropped (noteMapped).
	mapped atomic.Int64
	// dirty says bytes were written since the last fsync.
	dirty atomic.Bool
	// sealed says the segment stopped being active and its indexes are final. Only then are
	// they fsynced: recovery always rebuilds the indexes of the segment holding the recovery
	// point, and that includes the active one.
	sealed atomic.Bool

	// aborted is the .txnindex, replaced by a longer slice on each append (appendAborted).
	aborted atomic.Pointer[[]abortedTxn]
	// txnFileMu guards txnFile, open once an entry was written here, against the flushes
	// that fsync it from other goroutines; txnDirty says an entry was written since the last
	// fsync.
	txnFileMu sync.Mutex
	txnFile   *os.File
	txnDirty  bool

	// Writer state, guarded by Log.mu.
	next        int64     // offset after the last batch; base when empty
	maxTs       int64     // largest batch maxTimestamp; -1 when none
	maxTsOffset int64     // last offset of the batch holding maxTs
	firstTs     int64     // maxTimestamp of the first batch; -1 when empty (segment.ms)
	created     time.Time // when this process created or loaded the segment (segment.ms fallback)
	sinceIndex  int64     // bytes appended since the last index entry

	// Page-cache writeback state, used only by the Writeback goroutine: the writeback of
	// bytes below wbStarted was started; bytes below wbDropped were dropped from the page
	// cache (readers load it to read such bytes in before a ring sends them), and those from
	// wbRetry on, which the kernel kept, are dropped again by the next pass, for the
	// wbTries-th time. wbVec is scratch for mincore.
	wbStarted, wbRetry int64
	wbTries            int
	wbVec              []byte
	wbDropped          atomic.Int64
	// allocEnd is how far the file's disk blocks are allocated past its end (allocateAhead),
	// 0 when they are not; deactivate gives them back. noAlloc says the file system refused
	// to allocate, so no pass tries again. noAlloc is the Writeback goroutine's only.
	allocEnd atomic.Int64
	noAlloc  bool
	// coldBelow is the size the segment had when this process opened it (0 for one it
	// created): bytes below it may be on disk only (ReadCached). Set before readers see the
	// segment.
	coldBelow int64
	// padEnd is the end of the zeros that appends wrote past the data (Log.write), 0 when
	// there are none; deactivate cuts them off. Guarded by Log.mu.
	padEnd int64
}

func newSegment(base int64, path string, f *os.File, logger *slog.Logger, now time.Time) *segment {
	s := &segment{base: base, path: path, f: f, fd: int(f.Fd()), logger: logger, next: base, maxTs: -1, maxTsOffset: -1, firstTs: -1, created: now}
	s.refs.Store(1)
	s.release = s.decRef
	return s
}

// createSegment makes the files of a new, empty active segment.
func createSegment(dir string, base int64, cfg *Config, logger *slog.Logger, now time.Time) (*segment, error) {
	path := segmentPath(dir, base, logSuffix)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	s := newSegment(base, path, f, logger, now)
	if err := s.openIndexes(int64(cfg.MaxIndexBytes), true); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	if err := s.mapData(cfg.SegmentBytes); err != nil {
		return nil, errors.Join(err, s.closeFiles())
	}
	return s, nil
}

// openSegment opens an existing segment and maps its current bytes; its indexes are opened
// by the loader once it knows whether they are trusted.
func openSegment(dir string, base int64, logger *slog.Logger, now time.Time) (*segment, error) {
	path := segmentPath(dir, base, logSuffix)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open segment: %w", err)
	}
	s := newSegment(base, path, f, logger, now)
	if err := s.mapData(0); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	s.coldBelow = s.size.Load()
	return s, nil
}

// openIndexes opens both indexes, preallocated to capBytes (0: as they are).
func (s *segment) openIndexes(capBytes int64, fresh bool) error {
	if s.offIdx != nil {
		if err := errors.Join(s.offIdx.close(), s.timIdx.close()); err != nil {
			return err
		}
		s.offIdx, s.timIdx = nil, nil
	}
	oi, err := openIndex(segmentPath(filepath.Dir(s.path), s.base, indexSuffix), offsetEntrySize, capBytes, fresh)
	if err != nil {
		return err
	}
	ti, err := openIndex(segmentPath(filepath.Dir(s.path), s.base, timeIndexSuffix), timeEntrySize, capBytes, fresh)
	if err != nil {
		return errors.Join(err, oi.close())
	}
	s.offIdx, s.timIdx = oi, ti
	return nil
}

// mapData (re)maps the file with a length covering max(file size, capacity), rounded up to
// whole pages; it sets size to the file size. Only called before readers can see the segment.
func (s *segment) mapData(capacity int64) error {
	if s.data != nil {
		if err := unix.Munmap(s.data); err != nil {
			return fmt.Errorf("munmap segment %s: %w", s.path, err)
		}
		s.data = nil
	}
	fi, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("stat segment %s: %w", s.path, err)
	}
	s.size.Store(fi.Size())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 > fi.Size()+leftoverAllocBytes {
		// Blocks allocated ahead before a crash: deactivate frees them.
		s.allocEnd.Store(st.Blocks * 512)
	}
	length := max(fi.Size(), capacity)
	if length > math.MaxInt32 {
		return fmt.Errorf("segment %s: %d bytes exceeds the %d-byte limit of 32-bit positions", s.path, length, math.MaxInt32)
	}
	if length == 0 {
		return nil
	}
	page := int64(os.Getpagesize())
	length = (length + page - 1) / page * page
	data, err := unix.Mmap(int(s.f.Fd()), 0, int(length), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap segment %s (%d bytes): %w", s.path, length, err)
	}
	s.data = data
	return nil
}

// tryRef takes a reference unless the segment is already released.
func (s *segment) tryRef() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// decRef drops a reference; the last one unmaps the segment and closes its files.
func (s *segment) decRef() {
	n := s.refs.Add(-1)
	if n > 0 {
		return
	}
	if n < 0 {
		s.logger.Error("segment released more often than referenced", "segment", s.path, "refs", n)
		return
	}
	if err := s.closeFiles(); err != nil {
		s.logger.Warn("close segment", "segment", s.path, "err", err)
	}
	if s.deleted.Load() {
		// Unlinking a large file can take milliseconds; the last release may run on a ring
		// goroutine.
		go s.removeDeletedFiles()
	}
}

// markDeleted renames the segment's files to *.deleted (Kafka's marker for files awaiting
// removal, cleaned up on the next Open after a crash) and arranges their removal at the last
// release. The caller then drops the log's reference.
func (s *segment) markDeleted() error {
	var errs []error
	for _, suffix := range segmentSuffixes() {
		path := segmentPath(filepath.Dir(s.path), s.base, suffix)
		if err := ignoreNotExist(os.Rename(path, path+deletedSuffix)); err != nil {
			errs = append(errs, fmt.Errorf("rename %s for deletion: %w", path, err))
		}
	}
	s.deleted.Store(true)
	return errors.Join(errs...)
}

// removeDeletedFiles removes the *.deleted files of a released segment.
func (s *segment) removeDeletedFiles() {
	for _, suffix := range segmentSuffixes() {
		path := segmentPath(filepath.Dir(s.path), s.base, suffix) + deletedSuffix
		if err := ignoreNotExist(os.Remove(path)); err != nil {
			s.logger.Warn("remove deleted segment file", "file", path, "err", err)
		}
	}
}

// largestTimestamp is what retention.ms compares, as Kafka's LogSegment.largestTimestamp: the
// newest batch timestamp, or the file's modification time when no batch has one. Called under
// Log.mu.
func (s *segment) largestTimestamp() int64 {
	if s.maxTs >= 0 {
		return s.maxTs
	}
	fi, err := s.f.Stat()
	if err != nil {
		return math.MaxInt64 // unknown: never old enough to delete
	}
	return fi.ModTime().UnixMilli()
}

func (s *segment) closeFiles() error {
	var errs []error
	if s.data != nil {
		if err := unix.Munmap(s.data); err != nil {
			errs = append(errs, fmt.Errorf("munmap segment %s: %w", s.path, err))
		}
		s.data = nil
	}
	if s.offIdx != nil {
		errs = append(errs, s.offIdx.close(), s.timIdx.close())
	}
	errs = append(errs, s.closeTxnFile())
	errs = append(errs, s.f.Close())
	return errors.Join(errs...)
}

// sync fsyncs the segment, and its indexes once sealed.
func (s *segment) sync() error {
	// fdatasync: the file size is data for it, and the modification time is not needed.
	if err := unix.Fdatasync(int(s.f.Fd())); err != nil {
		return fmt.Errorf("fsync segment %s: %w", s.path, err)
	}
	if err := s.syncTxnIndex(); err != nil {
		return err
	}
	if !s.sealed.Load() {
		return nil
	}
	return errors.Join(s.offIdx.sync(), s.timIdx.sync())
}

// noteBatch updates the writer state for a batch written at pos and, when indexing, adds index
// entries every interval bytes as Kafka's LogSegment.append does: the offset index maps the
// batch's last offset to its position; the time index records the largest timestamp so far.
func (s *segment) noteBatch(pos, size, lastOffset, maxTs, interval int64, indexing bool) {
	if pos == 0 {
		s.firstTs = maxTs
	}
	if maxTs > s.maxTs {
		s.maxTs, s.maxTsOffset = maxTs, lastOffset
	}
	if indexing && s.sinceIndex > interval {
		s.offIdx.appendOffset(lastOffset-s.base, pos)
		s.timIdx.appendTime(s.maxTs, s.maxTsOffset-s.base, false)
		s.sinceIndex = 0
	}
	s.sinceIndex += size
	s.next = lastOffset + 1
}

// deactivate finishes the segment's indexes when it stops being the active one: the final
// time index entry, then both files trimmed to their entries.
func (s *segment) deactivate() error {
	if s.maxTs >= 0 {
		s.timIdx.appendTime(s.maxTs, s.maxTsOffset-s.base, true)
	}
	err := errors.Join(s.offIdx.trim(), s.timIdx.trim())
	s.sealed.Store(true)
	s.dirty.Store(true)
	return errors.Join(err, s.trimAllocated())
}

// trimAllocated cuts the file back to its data: the zeros appends wrote ahead of it and the disk
// blocks allocated past its end, if any, go. Called under Log.mu, so no append moves the end
// meanwhile.
func (s *segment) trimAllocated() error {
	size := s.size.Load()
	if s.allocEnd.Load() <= size && s.padEnd <= size {
		return nil
	}
	s.allocEnd.Store(0)
	s.padEnd = 0
	if err := s.f.Truncate(size); err != nil {
		return fmt.Errorf("free blocks allocated past the end of %s: %w", s.path, err)
	}
	return nil
}

// read returns whole batches starting with the first one whose last offset is >= offset, up to
// maxBytes and stopping before any batch whose base offset is >= maxOffset. stop reports that
// the answer is final for this segment: a batch at or past offset exists here. leo loads the
// log end offset; it is read after the segment's size, so every batch within that size lies
// below it.
//
// Only the headers of the first batch and of the batches near the end of the answer are read
// (the offset index, whose positions are batch starts, finds the last whole batch within
// maxBytes), so serving a fetch maps in a page or two whatever its size; the kernel copies the
// bytes themselves out of the mapping (ReadResult.DropMapped drops those pages again) or sends them with
// sendfile. Pages mapped by header reads are dropped now and then (noteMapped).
//
// With cachedOnly it reads nothing and reports cold where the bytes from offset's index entry
// on may not be in the page cache (Log.ReadCached).
func (s *segment) read(offset int64, maxBytes int, maxOffset int64, minOneBatch, cachedOnly bool, leo func() int64) (data []byte, pos int64, stop, cold bool) {
	end := s.size.Load()
	limitAll := maxOffset >= leo()
	pos = s.offIdx.lookupPosition(offset - s.base)
	if cachedOnly && pos < max(s.coldBelow, s.wbDropped.Load()) {
		return nil, 0, false, true
	}
	var first int64
	for {
		size, base, last, ok := s.batchAt(pos, end)
		if !ok {
			return nil, 0, false, false
		}
		if last >= offset {
			if base >= maxOffset {
				return nil, 0, true, false
			}
			first = size
			break
		}
		pos += size
	}
	start := pos
	limit := end
	if !limitAll {
		limit = s.positionOf(maxOffset, start, end)
	}
	p := limit
	if want := start + int64(max(maxBytes, 0)); want < limit {
		p = s.boundaryAtOrBefore(want, start, limit)
	}
	if p < start+first {
		switch {
		case minOneBatch:
			p = start + first
		case maxBytes > 0:
			// Kafka returns the first maxBytes of an oversized batch, so consumers without
			// KIP-74 report RecordTooLarge instead of polling forever.
			p = start + min(first, int64(maxBytes))
		default:
			p = start
		}
	}
	s.noteMapped(p - start)
	if start < s.wbDropped.Load() {
		s.readIn(start, p)
	}
	return s.data[start:p:p], start, true, false
}

// readIn reads bytes start..end, which Writeback dropped from the page cache, back into it,
// so that the ring thread that sends them never waits for the disk; the reader (a handler
// worker) waits instead. The pages are mapped to read them and unmapped at once: the page
// cache keeps them, and the broker's resident memory does not grow with them. Kernels before
// 5.14 only start the read-ahead.
func (s *segment) readIn(start, end int64) {
	if end <= start {
		return
	}
	from := start &^ int64(os.Getpagesize()-1) // madvise takes whole pages
	if err := unix.Madvise(s.data[from:end], unix.MADV_POPULATE_READ); err != nil {
		_ = unix.Madvise(s.data[from:end], unix.MADV_WILLNEED)
		return
	}
	s.dropMapped(from, end)
}

// dropMapped unmaps the process's pages of bytes start..end of the segment, rounded out to
// whole folios of the largest size (see ReadResult.DropMapped).
func (s *segment) dropMapped(start, end int64) {
	from := start &^ (maxFolioBytes - 1)
	to := min((end+maxFolioBytes-1)&^(maxFolioBytes-1), int64(len(s.data)))
	if to > from {
		_ = unix.Madvise(s.data[from:to], unix.MADV_DONTNEED)
	}
}

// positionOf returns the position of the first batch at or after from whose base offset is at
// least offset, or end when there is none before end.
func (s *segment) positionOf(offset, from, end int64) int64 {
	pos := max(s.offIdx.lookupPosition(offset-s.base), from)
	for {
		size, base, _, ok := s.batchAt(pos, end)
		if !ok || base >= offset {
			return min(pos, end)
		}
		pos += size
	}
}

// boundaryAtOrBefore returns the last batch boundary in [from, limit] at or before want: the
// offset index gives a batch start at most one index interval before it.
func (s *segment) boundaryAtOrBefore(want, from, limit int64) int64 {
	pos := max(s.offIdx.floorPosition(want), from)
	for {
		size, _, _, ok := s.batchAt(pos, limit)
		if !ok || pos+size > want {
			return pos
		}
		pos += size
	}
}

// Bounds on what reads leave mapped in the process (the pages stay in the page cache):
const (
	// faultAroundBytes is what one read fault maps in: the page and its neighbours, up to the
	// kernel's fault_around_bytes (64 KiB by default).
	faultAroundBytes = 64 << 10
	// dropMappedMinBytes: a sender unmaps the data of a read at least this large right after
	// sending it (ReadResult.DropMapped); smaller reads count towards dropAfterBytes instead, so small
	// fetches do not pay a madvise each.
	dropMappedMinBytes = 256 << 10
	// dropAfterBytes is how much a segment may have mapped in before noteMapped drops all its
	// pages.
	dropAfterBytes = 8 << 20
)

// noteMapped accounts for a read of n bytes (two header faults, plus the data when its sender
// will not drop it) and drops the segment's pages once dropAfterBytes are mapped in, so the
// broker's resident memory does not grow with the log it serves. Concurrent readers fault
// their pages in again.
func (s *segment) noteMapped(n int64) {
	est := int64(2 * faultAroundBytes)
	if n < dropMappedMinBytes {
		est += n
	}
	if s.mapped.Add(est) < dropAfterBytes {
		return
	}
	s.mapped.Store(0)
	s.dropPages()
}

// dropPages unmaps the process's pages of the segment's mapping.
func (s *segment) dropPages() {
	if n := s.size.Load(); n > 0 && s.data != nil {
		page := int64(os.Getpagesize())
		_ = unix.Madvise(s.data[:min((n+page-1)/page*page, int64(len(s.data)))], unix.MADV_DONTNEED)
	}
}

// batchAt reads the framing of the batch at pos, which must end by end.
func (s *segment) batchAt(pos, end int64) (size, base, last int64, ok bool) {
	if pos+recordbatch.HeaderSize > end {
		return 0, 0, 0, false
	}
	b := s.data[pos:end]
	size = recordbatch.LogOverhead + int64(int32(beUint32(b[recordbatch.OffBatchLength:])))
	if size < recordbatch.HeaderSize || pos+size > end {
		return 0, 0, 0, false
	}
	base = int64(beUint64(b[recordbatch.OffBaseOffset:]))
	last = base + int64(int32(beUint32(b[recordbatch.OffLastOffsetDelta:])))
	return size, base, last, true
}
