package log

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Writeback keeps the page cache of its logs to a window of each log's newest bytes. Each
// time a log has grown by a step, one goroutine starts the writeback of the new bytes to disk
// (sync_file_range) and drops from the page cache what lies more than the window behind the
// log end, once written back. Appends then reuse the pages it freed instead of the kernel
// taking fresh ones, and dirty data reaches the disk steadily rather than in bursts when the
// kernel's dirty limits trip. Fresh pages are what a page-cache write costs most where a
// hypervisor backs guest memory lazily (see docs/DESIGN.md, "Page cache"). Durability is
// unchanged: fsync and replication decide it, not this.
//
// A log that grows by less than a step in writebackMaxAge gets a pass too once the first bytes
// appended since its last pass are that old, for their whole pages. Left to the kernel, the
// dirty pages of every such log expire together (30 s after they were first written, by
// default) and go to disk in one burst, during which an append waits for the page-cache folio
// that the kernel's writeback holds locked, for up to tens of milliseconds (BENCHMARKS.md,
// "Slow partitions' writeback").
//
// A log written fast enough to grow by a step within allocHotInterval of the last one also
// gets the disk blocks of its next allocAhead bytes allocated before appends reach them
// (fallocate, the file's size unchanged), and an append then writes into blocks that exist
// instead of reserving each one, while the writeback converts them rather than allocating:
// about a sixth less CPU per byte written on ext4. A segment gives back what it did not use
// when it stops being active or the log closes.
//
// Bytes that a consumer reading the log (NoteReader) has not read yet stay cached too, up to
// unreadWindows windows behind the end, so a consumer that falls behind for a while reads
// from memory, and its pages are freed for new appends once it has read them. Readers further
// behind read from disk. A window of 0 means no Writeback: the broker then leaves the page
// cache to the kernel, as Kafka does.
type Writeback struct {
	window int64
	step   int64
	logger *slog.Logger
	// maxAge is how old a log's bytes not yet written back get before a pass starts their
	// writeback (writebackMaxAge; tests shorten it).
	maxAge time.Duration

	mu    sync.Mutex
	queue []*Log
	// aging lists the logs with bytes appended since their last pass, for the time-driven
	// passes; only the goroutine drops logs from it.
	aging []*Log
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

// writebackMaxStep is the most a log grows between two writeback passes.
const writebackMaxStep = 4 << 20

// writebackMaxAge is how long after they were appended a log's bytes wait at most for a pass
// to start their writeback, however slowly the log grows: well inside the kernel's 30 s
// dirty expiry, so that it never finds a backlog of many logs to write at once.
const writebackMaxAge = time.Second

// unreadWindows is how many windows behind the log end a reader's unread bytes stay cached.
const unreadWindows = 4

// allocAhead is how far past the end of a hot log's active segment its disk blocks are kept
// allocated; a pass allocates again once less than half of it is left.
const allocAhead = 8 << 20

// allocHotInterval is how soon after its last step a log must grow by the next one to be hot.
const allocHotInterval = time.Second

// leftoverAllocBytes is how many more bytes than its size a segment found at open must have
// allocated for them to count as allocated ahead by an earlier run that did not close it.
const leftoverAllocBytes = 1 << 20

// readerIdle is how long after its last read a reader stops keeping unread bytes cached, so a
// consumer that went away does not hold them.
const readerIdle = 10 * time.Second

// readerSeenStep is how stale NoteReader lets the time of the last read get before it stores
// it again, sparing most calls a locked store.
const readerSeenStep = 100 * time.Millisecond

// NewWriteback returns a Writeback keeping window bytes of each log cached (at least one
// page). Start runs it; logs opened with it in Options.Writeback queue themselves.
func NewWriteback(window int64, logger *slog.Logger) *Writeback {
	if logger == nil {
		logger = slog.Default()
	}
	window = max(window, int64(os.Getpagesize()))
	return &Writeback{
		window: window,
		step:   min(writebackMaxStep, max(window/4, int64(os.Getpagesize()))),
		logger: logger,
		maxAge: writebackMaxAge,
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
}

// Start runs the writeback goroutine until Stop.
func (w *Writeback) Start() { go w.run() }

// Stop ends the goroutine started by Start and waits for it; queued logs are left as they are.
func (w *Writeback) Stop() {
	close(w.stop)
	<-w.done
}

// enqueue hands l to the goroutine; Log.noteWritten calls it at most once until the pass.
func (w *Writeback) enqueue(l *Log) {
	w.mu.Lock()
	w.queue = append(w.queue, l)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// age puts l on the list of logs whose bytes age towards a pass; noteWritten calls it when l
// is not on it.
func (w *Writeback) age(l *Log) {
	w.mu.Lock()
	w.aging = append(w.aging, l)
	first := len(w.aging) == 1
	w.mu.Unlock()
	if first {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *Writeback) run() {
	defer close(w.done)
	var batch []*Log
	// tick runs while logs are aging, every half maxAge: a log's bytes wait maxAge to 1.5
	// maxAge for their pass.
	var tick *time.Ticker
	var tickC <-chan time.Time
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		select {
		case <-w.stop:
			return
		case <-w.wake:
		case now := <-tickC:
			w.queueAged(now.UnixNano())
		}
		w.mu.Lock()
		batch, w.queue = w.queue, batch[:0]
		aging := len(w.aging) > 0
		w.mu.Unlock()
		for i, l := range batch {
			l.wbQueued.Store(false)
			l.wbDirtySince.Store(0)
			if err := l.writeback(w.window, l.wbStepDue.Swap(false)); err != nil {
				w.logger.Warn("page-cache writeback", "dir", l.dir, "err", err)
			}
			batch[i] = nil
		}
		switch {
		case aging && tick == nil:
			tick = time.NewTicker(w.maxAge / 2)
			tickC = tick.C
		case !aging && tick != nil:
			tick.Stop()
			tick, tickC = nil, nil
		}
	}
}

// queueAged queues for a pass the aging logs whose bytes not yet written back were appended
// maxAge or longer before now, and drops from the list those that got a pass and have had no
// append since.
func (w *Writeback) queueAged(now int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kept := w.aging[:0]
	for _, l := range w.aging {
		since := l.wbDirtySince.Load()
		if since == 0 {
			// An append before the Store finds l listed and leaves it here, where the check
			// after it keeps l; one after the Store lists l again itself (once this returns
			// w.mu), and the check drops this entry.
			l.wbAging.Store(false)
			if l.wbDirtySince.Load() == 0 || l.wbAging.Swap(true) {
				continue
			}
		} else if now-since >= int64(w.maxAge) && !l.wbQueued.Swap(true) {
			w.queue = append(w.queue, l)
		}
		kept = append(kept, l)
	}
	clear(w.aging[len(kept):])
	w.aging = kept
}

// noteWritten counts n appended bytes towards the next writeback pass and queues the log for
// it once they reach the step; the first bytes after a pass start their age (writebackMaxAge).
// Called under l.mu.
func (l *Log) noteWritten(n int64) {
	w := l.opts.Writeback
	if w == nil {
		return
	}
	if l.wbDirtySince.Load() == 0 {
		l.wbDirtySince.Store(time.Now().UnixNano())
		if !l.wbAging.Swap(true) {
			w.age(l)
		}
	}
	l.wbPending += n
	if l.wbPending < w.step {
		return
	}
	l.wbPending = 0
	l.wbStepDue.Store(true)
	if !l.wbQueued.Swap(true) {
		w.enqueue(l)
	}
}

// NoteReader records that a consumer asked at now to read the log from offset on: Writeback
// keeps the bytes from there to the log end cached (up to unreadWindows windows) while such
// reads keep coming. With several consumers the one furthest ahead counts. Followers need not
// call it: they read within the window. The caller passes the time it already has, so that
// a fetch of many partitions reads the clock once.
func (l *Log) NoteReader(offset int64, now time.Time) {
	if l.opts.Writeback == nil {
		return
	}
	for {
		cur := l.readerAt.Load()
		if offset <= cur || l.readerAt.CompareAndSwap(cur, offset) {
			break
		}
	}
	if t := now.UnixNano(); t-l.readerSeen.Load() > int64(readerSeenStep) {
		l.readerSeen.Store(t)
	}
}

// keepBytes is how many bytes at the end of segs a pass at now (Unix nanoseconds) keeps
// cached: the window, or the bytes an active reader has not read yet, at most unreadWindows
// windows.
func (l *Log) keepBytes(segs []*segment, window, now int64) int64 {
	if now-l.readerSeen.Load() > int64(readerIdle) {
		return window
	}
	at, limit := l.readerAt.Load(), unreadWindows*window
	var unread int64
	for i := len(segs) - 1; i >= 0 && unread < limit; i-- {
		s := segs[i]
		if s.base <= at {
			// The index gives a batch start at or before the reader's offset: a little more
			// is kept, never less.
			unread += max(s.size.Load()-s.offIdx.lookupPosition(at-s.base), 0)
			break
		}
		unread += s.size.Load()
	}
	return max(window, min(unread, limit))
}

// writeback starts the writeback of every segment's whole pages not yet started and drops
// from the page cache the bytes more than window behind the log end, or more if a reader has
// not read them yet (keepBytes). A pass for a step (step) that follows the last one within
// allocHotInterval allocates blocks ahead. Only the Writeback goroutine calls it, so the
// segments' writeback marks need no lock.
//
// A page that appends are still filling waits for a later pass: written back now, it would be
// written again once full, and a log growing by a few bytes a second would be written a page
// a pass.
func (l *Log) writeback(window int64, step bool) error {
	segsp := l.segs.Load()
	if segsp == nil {
		return nil
	}
	segs := *segsp
	now := l.opts.Now().UnixNano()
	if step {
		if now-l.wbLastStep < int64(allocHotInterval) {
			l.allocateAhead(segs[len(segs)-1])
		}
		l.wbLastStep = now
	}
	page := int64(os.Getpagesize())
	keepAll := l.keepBytes(segs, window, now)
	var after int64 // bytes of the segments after segs[i]
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		size := s.size.Load()
		dropTo, windowTo := dropBoundary(size, keepAll-after, page), dropBoundary(size, window-after, page)
		after += size
		// A truncation may have cut the segment below its marks. Otherwise what was dropped
		// stays dropped, even when a reader now keeps more: readers read it in (readIn).
		if s.wbDropped.Load() > windowTo {
			s.wbDropped.Store(windowTo)
		}
		dropTo = max(dropTo, s.wbDropped.Load())
		startTo := wholePages(size)
		s.wbStarted, s.wbRetry = min(s.wbStarted, startTo), min(s.wbRetry, dropTo)
		if s.wbStarted == startTo && s.wbRetry == dropTo {
			continue
		}
		if !s.tryRef() {
			continue
		}
		err := s.writeback(size, dropTo)
		s.decRef()
		if err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
	}
	return nil
}

// allocateAhead allocates the disk blocks of s, the active segment, up to allocAhead past its
// end (within the bytes it may grow to) when less than half of that is left. If s stopped
// being active meanwhile, its roll may have freed the blocks allocated before this call only,
// so they are freed here. A file system that refuses is not asked again for s.
func (l *Log) allocateAhead(s *segment) {
	size := s.size.Load()
	end := s.allocEnd.Load()
	if s.noAlloc || end >= size+allocAhead/2 || !s.tryRef() {
		return
	}
	defer s.decRef()
	from, to := max(size, end), min(size+allocAhead, int64(len(s.data)))
	if to <= from {
		return
	}
	if err := unix.Fallocate(s.fd, unix.FALLOC_FL_KEEP_SIZE, from, to-from); err != nil {
		s.noAlloc = true
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSPC) {
			l.logger.Warn("allocating segment blocks ahead", "segment", s.path, "err", err)
		}
		return
	}
	s.allocEnd.Store(to)
	if s.sealed.Load() {
		l.mu.Lock()
		err := s.trimAllocated()
		l.mu.Unlock()
		if err != nil {
			l.logger.Warn("freeing segment blocks allocated ahead", "err", err)
		}
	}
}

// wholePages is n bytes down to a whole number of pages.
func wholePages(n int64) int64 {
	page := int64(os.Getpagesize())
	return n / page * page
}

// dropBoundary is how far from its start a segment of size bytes is dropped when keep of its
// bytes are to stay cached: whole pages only, but all of it, its last page too, when none are.
func dropBoundary(size, keep, page int64) int64 {
	if keep <= 0 {
		return (size + page - 1) / page * page
	}
	return max(size-keep, 0) / page * page
}

// writeback starts the writeback of bytes wbStarted..size's last whole page and, once they are
// on disk, drops bytes wbRetry..dropTo from the page cache.
//
// The kernel skips pages it cannot drop at that moment (a reference held elsewhere for a
// while, as around their writeback), so a pass that finds some of its range still cached
// leaves wbRetry at the first such page, and the next passes drop from there again, up to
// maxDropTries times. Each drop starts at a multiple of the largest folio size so that no
// folio reaching back before wbRetry stays.
func (s *segment) writeback(size, dropTo int64) error {
	if startTo := wholePages(size); startTo > s.wbStarted {
		if err := unix.SyncFileRange(s.fd, s.wbStarted, startTo-s.wbStarted, unix.SYNC_FILE_RANGE_WRITE); err != nil {
			return fmt.Errorf("start writeback: %w", err)
		}
		s.wbStarted = startTo
	}
	from := s.wbRetry &^ (maxFolioBytes - 1)
	if dropTo <= from {
		return nil
	}
	n := dropTo - from
	if err := unix.SyncFileRange(s.fd, from, n,
		unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER); err != nil {
		return fmt.Errorf("wait for writeback: %w", err)
	}
	// The page cache keeps pages that are mapped, and the process's own mapping holds those
	// readers touched: unmap them first (a reader still sending from them faults them back in).
	end := min(dropTo, int64(len(s.data)))
	if end > from {
		if err := unix.Madvise(s.data[from:end], unix.MADV_DONTNEED); err != nil {
			return fmt.Errorf("unmap cached pages: %w", err)
		}
	}
	// The kernel drops only the folios wholly inside the range. A segment dropped whole goes to
	// the end of its file (length 0), so that its last folio, which a roll's truncation may have
	// left reaching past the end (padBytes), goes too.
	adviseLen := n
	if dropTo >= size {
		adviseLen = 0
	}
	if err := unix.Fadvise(s.fd, from, adviseLen, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("drop cached pages: %w", err)
	}
	s.wbDropped.Store(dropTo)
	s.wbRetry = dropTo
	if end > from && s.wbTries < maxDropTries {
		if at, err := firstCached(s.data[from:end], &s.wbVec); err != nil {
			return err
		} else if at >= 0 {
			s.wbRetry = from + at
			s.wbTries++
			return nil
		}
	}
	s.wbTries = 0
	return nil
}

// maxFolioBytes is the largest folio the page cache uses for a file: a PMD's worth on x86-64
// and arm64 with 4 KiB pages.
const maxFolioBytes = 2 << 20

// maxDropTries bounds how many passes in a row drop the same range again.
const maxDropTries = 16

// firstCached returns the offset in b, a page-aligned file mapping, of its first page in the
// page cache, or -1. vec is scratch space, grown to one byte per page.
func firstCached(b []byte, vec *[]byte) (int64, error) {
	page := os.Getpagesize()
	pages := (len(b) + page - 1) / page
	if cap(*vec) < pages {
		*vec = make([]byte, pages)
	}
	v := (*vec)[:pages]
	if err := mincore(b, v); err != nil {
		return 0, err
	}
	for i, r := range v {
		if r&1 != 0 {
			return int64(i) * int64(page), nil
		}
	}
	return -1, nil
}

// mincore fills vec, one byte per page of b (a page-aligned mapping), with bit 0 set for the
// pages in the page cache.
func mincore(b, vec []byte) error {
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return fmt.Errorf("mincore: %w", errno)
	}
	return nil
}
