package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ringbroker/internal/testutil"
)

// residentPages reports, for each page of the file at path, whether it is in the page cache.
func residentPages(t *testing.T, path string) []bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() == 0 {
		return nil
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if err := mincore(m, vec); err != nil {
		t.Fatal(err)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

// startWriteback runs a Writeback of window until the test ends, and returns it with a log
// config of 1 MiB segments for it.
func startWriteback(t *testing.T, window int64) (*Writeback, Config) {
	w := NewWriteback(window, testLogger(t))
	w.Start()
	t.Cleanup(w.Stop)
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	return w, cfg
}

// TestWritebackKeepsWindowCached appends several segments' worth through a running Writeback
// and checks that only the newest window of the log stays in the page cache, across segments,
// and that everything reads back unchanged.
func TestWritebackKeepsWindowCached(t *testing.T) {
	const window = 64 << 10
	w, cfg := startWriteback(t, window)
	l := mustOpen(t, t.TempDir(), cfg, Options{Writeback: w})
	defer l.Close()

	var want [][]byte
	for i := 0; i < 320; i++ { // 320 batches of about 8 KiB: 2.5 MiB, three segments
		b := makeBatch(t, plain(8, 1000, int64(i)))
		want = append(want, bytes.Clone(b))
		mustAppend(t, l, b)
	}

	page := int64(os.Getpagesize())
	segs := *l.segs.Load()
	if len(segs) < 3 {
		t.Fatalf("%d segments; want at least 3", len(segs))
	}
	first := segs[0]
	// The last pass ran after at most a step less than everything was written, so what lies
	// more than window + 2 steps behind the end must be gone and the newest window must
	// stay. The kernel may keep a page it could not drop at that moment, which the next pass
	// drops again: while some are left, the log grows by a batch, which makes passes.
	check := func() (errs []string) {
		segs := *l.segs.Load()
		var after int64
		for i := len(segs) - 1; i >= 0; i-- {
			s := segs[i]
			size := s.size.Load()
			res := residentPages(t, s.path)
			for p := range res {
				behind := after + size - int64(p)*page // bytes from the page's start to the log end
				switch {
				case behind > window+2*w.step+padBytes && res[p]: // a folio may straddle the drop
					errs = append(errs, fmt.Sprintf("%s: page %d, beyond the window, is cached", filepath.Base(s.path), p))
				case behind <= window-page && !res[p]:
					errs = append(errs, filepath.Base(s.path)+": a page inside the window was dropped")
				}
			}
			after += size
		}
		return errs
	}
	deadline := time.Now().Add(10 * time.Second)
	for errs := check(); len(errs) > 0; errs = check() {
		if time.Now().After(deadline) {
			t.Fatalf("page cache after writeback: %v", errs)
		}
		time.Sleep(10 * time.Millisecond)
		b := makeBatch(t, plain(8, 1000, 0))
		want = append(want, bytes.Clone(b))
		mustAppend(t, l, b)
	}

	// A read of dropped bytes brings them back before the caller (a ring, in the broker)
	// touches them, all of them, not only the pages of the batch headers the read looks at.
	// It starts at the second batch, which does not start on a page. The kernel reads ahead
	// around a fault (up to the device's read_ahead_kb), which would bring the pages in
	// whatever the read does; MADV_RANDOM turns that off, so that only readIn can.
	if err := unix.Madvise(first.data, unix.MADV_RANDOM); err != nil {
		t.Fatal(err)
	}
	r, err := l.Read(8, 1<<20, -1, true)
	if err != nil || len(r.Data) == 0 {
		t.Fatalf("Read(8) = %d bytes, %v", len(r.Data), err)
	}
	at := int64(len(want[0]))
	for p, in := range residentPages(t, first.path) {
		if pageEnd := int64(p+1) * page; pageEnd > at && int64(p)*page < at+int64(len(r.Data)) && !in {
			t.Fatalf("page %d of a read of dropped bytes is not in the page cache", p)
		}
	}
	r.Release()

	checkBatches(t, readBatches(t, l, 0), want, "after their pages were dropped")
}

// TestWritebackPassesSlowLogs checks that a log growing by much less than a step still gets
// the writeback of its whole pages started once its bytes are maxAge old, that it leaves the
// aging list after its pass and joins it again with its next append, and that passes not due
// to a step allocate nothing ahead.
func TestWritebackPassesSlowLogs(t *testing.T) {
	const window = 1 << 20 // a step of 256 KiB
	w := NewWriteback(window, testLogger(t))
	w.maxAge = 20 * time.Millisecond
	w.Start()
	stopped := false
	defer func() {
		if !stopped {
			w.Stop()
		}
	}()
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, t.TempDir(), cfg, Options{Writeback: w})
	defer l.Close()
	// passed waits until l had a pass and then left the aging list, which the goroutine does
	// only after the pass.
	passed := func(after string) {
		t.Helper()
		testutil.WaitFor(t, 10*time.Second, func() error {
			w.mu.Lock()
			aging := len(w.aging)
			w.mu.Unlock()
			if aging != 0 || l.wbDirtySince.Load() != 0 {
				return fmt.Errorf("after %s: no pass yet (%d logs aging)", after, aging)
			}
			return nil
		})
	}
	for i := range 3 { // about 24 KiB
		mustAppend(t, l, makeBatch(t, plain(8, 1000, int64(i))))
	}
	passed("the first appends")
	for i := 3; i < 5; i++ {
		mustAppend(t, l, makeBatch(t, plain(8, 1000, int64(i))))
	}
	passed("more appends")
	w.Stop()
	stopped = true
	s := l.active
	if got, want := s.wbStarted, wholePages(s.size.Load()); got != want || want == 0 {
		t.Fatalf("writeback started up to %d of %d bytes; want %d, the whole pages", got, s.size.Load(), want)
	}
	if n := s.allocEnd.Load(); n != 0 {
		t.Fatalf("blocks allocated ahead up to %d by passes not due to a step", n)
	}
}

// TestWritebackAfterTruncation checks that a pass after a truncation below its marks neither
// fails nor keeps the rewritten tail from being written back (its whole pages) and dropped
// later.
func TestWritebackAfterTruncation(t *testing.T) {
	const window = 16 << 10
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, dir, cfg, Options{})
	defer l.Close()
	for i := 0; i < 16; i++ {
		mustAppend(t, l, makeBatch(t, plain(8, 1000, int64(i))))
	}
	if err := l.writeback(window, true); err != nil {
		t.Fatalf("writeback: %v", err)
	}
	if err := l.TruncateTo(32); err != nil {
		t.Fatalf("TruncateTo: %v", err)
	}
	if err := l.writeback(window, true); err != nil {
		t.Fatalf("writeback after truncation: %v", err)
	}
	s := l.active
	if s.wbStarted != wholePages(s.size.Load()) || s.wbDropped.Load() > s.size.Load() || s.wbRetry > s.size.Load() {
		t.Fatalf("marks %d/%d/%d past the truncated size %d", s.wbStarted, s.wbDropped.Load(), s.wbRetry, s.size.Load())
	}
	for i := 0; i < 64; i++ {
		mustAppend(t, l, makeBatch(t, plain(8, 1000, int64(i))))
	}
	if err := l.writeback(window, true); err != nil {
		t.Fatalf("writeback: %v", err)
	}
	res := residentPages(t, s.path)
	page := int64(os.Getpagesize())
	for p := range res {
		// A page-cache folio of up to padBytes may straddle the drop boundary and stay.
		if behind := s.size.Load() - int64(p)*page; behind > window+padBytes && res[p] {
			t.Fatalf("page %d (%d bytes behind the end) still cached", p, behind)
		}
	}
	if n := len(readBatches(t, l, 0)); n != 4+64 {
		t.Fatalf("read %d batches after truncation and appends; want 68", n)
	}
}

// TestWritebackKeepsUnreadBytes checks that bytes a reader has not read yet stay cached beyond
// the window, up to unreadWindows windows, that they go once read, and that a reader who went
// quiet keeps nothing beyond the window.
func TestWritebackKeepsUnreadBytes(t *testing.T) {
	const window = 64 << 10
	now := time.Unix(1000, 0)
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, t.TempDir(), cfg, Options{Writeback: NewWriteback(window, testLogger(t)), Now: func() time.Time { return now }})
	defer l.Close()
	l.NoteReader(0, now)
	for i := 0; i < 48; i++ { // 48 batches of 8 records, about 8 KiB each: 384 KiB
		mustAppend(t, l, makeBatch(t, plain(8, 1000, int64(i))))
	}
	page := int64(os.Getpagesize())
	s := l.active
	// cachedAs checks that the pages within keep of the end are cached and those further
	// back are not, after passes (the kernel may keep a page one pass could not drop).
	cachedAs := func(keep int64) {
		t.Helper()
		var errs []string
		for range 20 {
			if err := l.writeback(window, true); err != nil {
				t.Fatalf("writeback: %v", err)
			}
			errs = errs[:0]
			for p, in := range residentPages(t, s.path) {
				switch behind := s.size.Load() - int64(p)*page; {
				case behind > keep+page && in:
					errs = append(errs, fmt.Sprintf("page %d, %d bytes behind the end, is cached", p, behind))
				case behind <= keep-page && !in:
					errs = append(errs, fmt.Sprintf("page %d, %d bytes behind the end, was dropped", p, behind))
				}
			}
			if len(errs) == 0 {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("keeping %d bytes: %v", keep, errs)
	}
	cachedAs(unreadWindows * window) // 384 KiB unread: capped at four windows

	l.NoteReader(8*44, now) // four batches, about 32 KiB, left to read: the window is kept
	cachedAs(window)

	// A reader that went quiet keeps nothing beyond the window, however far behind it is.
	l2 := mustOpen(t, t.TempDir(), cfg, Options{Writeback: NewWriteback(window, testLogger(t)), Now: func() time.Time { return now }})
	defer l2.Close()
	l2.NoteReader(0, now)
	now = now.Add(readerIdle + time.Second)
	for i := 0; i < 48; i++ {
		mustAppend(t, l2, makeBatch(t, plain(8, 1000, int64(i))))
	}
	l, s = l2, l2.active
	cachedAs(window)
}

// allocatedBytes is the disk space the file at path takes.
func allocatedBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestWritebackAllocatesAhead checks that a log needing a second pass within allocHotInterval
// of its first gets the blocks of its next bytes allocated without its size changing, that a
// roll and Close give back what the segments did not use, that blocks a run left allocated
// without closing the log are given back by the next run's close, and that every batch reads
// back unchanged.
func TestWritebackAllocatesAhead(t *testing.T) {
	const window, slack = 64 << 10, 64 << 10
	dir := allocatingDir(t)
	cfg := testConfig()
	cfg.SegmentBytes = 4 << 20
	logDir := filepath.Join(dir, "log")
	l := mustOpen(t, logDir, cfg, Options{})
	w := &batchWriter{t: t, l: l}
	appendN := w.add
	pass := func() {
		if err := l.writeback(window, true); err != nil {
			t.Fatalf("writeback: %v", err)
		}
	}
	checkSize := func(s *segment) {
		if fi, err := os.Stat(s.path); err != nil || fi.Size() != s.size.Load() {
			t.Fatalf("%s: file size %v (%v); want the segment's %d", filepath.Base(s.path), fi.Size(), err, s.size.Load())
		}
	}

	appendN(16)
	pass()
	s := l.active
	if a := allocatedBytes(t, s.path); a > s.size.Load()+slack {
		t.Fatalf("after a first pass %d bytes allocated for %d; want none ahead", a, s.size.Load())
	}
	pass()
	if a, want := allocatedBytes(t, s.path), s.size.Load()+allocAhead; a < min(want, cfg.SegmentBytes) {
		t.Fatalf("after a second pass %d bytes allocated for %d; want %d", a, s.size.Load(), min(want, cfg.SegmentBytes))
	}
	checkSize(s)

	appendN(520) // about 4 MiB more: rolls
	if l.active == s {
		t.Fatal("the log did not roll")
	}
	for _, r := range *l.segs.Load() {
		if r == l.active {
			continue
		}
		if a := allocatedBytes(t, r.path); a > r.size.Load()+slack {
			t.Fatalf("rolled segment %s: %d bytes allocated for %d", filepath.Base(r.path), a, r.size.Load())
		}
		checkSize(r)
	}
	pass()
	pass()
	active := l.active
	if a := allocatedBytes(t, active.path); a < min(active.size.Load()+allocAhead, cfg.SegmentBytes) {
		t.Fatalf("new active segment: %d bytes allocated for %d; want blocks ahead", a, active.size.Load())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if a := allocatedBytes(t, active.path); a > active.size.Load()+slack {
		t.Fatalf("closed active segment: %d bytes allocated for %d", a, active.size.Load())
	}

	// Blocks allocated ahead by a run that ended without closing the log.
	f, err := os.OpenFile(active.path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, active.size.Load(), 4<<20)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, logDir, cfg, Options{})
	got := readBatches(t, l, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if a := allocatedBytes(t, active.path); a > active.size.Load()+slack {
		t.Fatalf("reopened and closed: %d bytes allocated for %d", a, active.size.Load())
	}
	checkBatches(t, got, w.want, "reopened")
}

// TestReadCached checks that ReadCached reads what this process appended and Writeback has not
// dropped, the same bytes as Read, and refuses with ErrWouldBlock what was dropped, what the
// log held before it was opened and, in a log without Writeback, everything; Read still reads
// all of it.
func TestReadCached(t *testing.T) {
	dir := t.TempDir()
	w, cfg := startWriteback(t, 64<<10)
	l := mustOpen(t, dir, cfg, Options{Writeback: w})
	defer func() { l.Close() }()
	appendBatch := func() int64 {
		return mustAppend(t, l, makeBatch(t, plain(8, 1000, 0))).BaseOffset
	}
	sameAsRead := func(offset int64, when string) {
		t.Helper()
		got, err := l.ReadCached(offset, 1<<20, -1, true)
		if err != nil {
			t.Fatalf("%s: ReadCached(%d): %v", when, offset, err)
		}
		want, err := l.Read(offset, 1<<20, -1, true)
		if err != nil {
			t.Fatalf("%s: Read(%d): %v", when, offset, err)
		}
		if len(got.Data) == 0 || !bytes.Equal(got.Data, want.Data) || got.Pos != want.Pos {
			t.Fatalf("%s: ReadCached(%d) read %d bytes at %d; Read %d at %d", when, offset, len(got.Data), got.Pos, len(want.Data), want.Pos)
		}
		got.Release()
		want.Release()
	}
	refused := func(offset int64, when string) {
		t.Helper()
		r, err := l.ReadCached(offset, 1<<20, -1, true)
		if !errors.Is(err, ErrWouldBlock) || len(r.Data) != 0 {
			t.Fatalf("%s: ReadCached(%d) = %d bytes, %v; want ErrWouldBlock", when, offset, len(r.Data), err)
		}
		r.Release()
		r, err = l.Read(offset, 1<<20, -1, true)
		if err != nil || len(r.Data) == 0 {
			t.Fatalf("%s: Read(%d) = %d bytes, %v", when, offset, len(r.Data), err)
		}
		r.Release()
	}

	for range 320 { // about 2.5 MiB, three segments
		appendBatch()
	}
	first := (*l.segs.Load())[0]
	deadline := time.Now().Add(10 * time.Second)
	for first.wbDropped.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first segment was not dropped from the page cache")
		}
		time.Sleep(10 * time.Millisecond)
		appendBatch()
	}
	refused(0, "dropped")
	last := appendBatch()
	sameAsRead(last, "appended")

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg, Options{Writeback: w})
	refused(last, "written before the log was opened")
	// The first batch appended now is found from an index entry written before the open, whose
	// position may be on disk only; the next one gets an entry of its own.
	refused(appendBatch(), "found from an index entry written before the log was opened")
	sameAsRead(appendBatch(), "appended after the log was opened")

	// Without Writeback the kernel decides what stays cached: nothing is read.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg, Options{})
	refused(appendBatch(), "appended to a log without writeback")
	if r, err := l.ReadCached(l.LogEndOffset(), 1<<20, -1, true); err != nil || len(r.Data) != 0 {
		t.Fatalf("ReadCached at the log end without writeback = %d bytes, %v; want none, no error", len(r.Data), err)
	}
}
