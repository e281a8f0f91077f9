package log

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAppendsPadAhead checks the zeros appends write ahead of a hot segment's data: none
// before the log is hot (blocks allocated ahead), then the file reaches the next multiple of
// padBytes past the data while the data itself reads back unchanged; a roll and a close cut
// the zeros off; and after a crash the zeros are dropped at open without being reported as a
// damaged batch, with every appended batch intact.
func TestAppendsPadAhead(t *testing.T) {
	logDir, cfg, w := paddingLog(t)
	l := w.l
	appendN := w.add
	pass := func() {
		if err := l.writeback(64<<10, true); err != nil {
			t.Fatalf("writeback: %v", err)
		}
	}
	padded := func(s *segment) int64 { return (s.size.Load() + padBytes - 1) / padBytes * padBytes }

	appendN(4)
	s := l.active
	if got := fileSize(t, s.path); got != s.size.Load() {
		t.Fatalf("cold log: file %d bytes for %d of data; want no zeros ahead", got, s.size.Load())
	}
	pass()
	pass() // passes less than a second apart: hot, blocks allocated ahead
	for range 40 {
		appendN(1)
		if got, want := fileSize(t, s.path), padded(s); got != want {
			t.Fatalf("hot log: file %d bytes for %d of data; want %d, the next multiple of %d", got, s.size.Load(), want, padBytes)
		}
	}
	if got := readBatches(t, l, 0); len(got) != len(w.want) {
		t.Fatalf("read %d batches; want %d", len(got), len(w.want))
	}

	appendN(520) // about 4 MiB more: rolls
	for _, r := range *l.segs.Load() {
		if r != l.active {
			if got := fileSize(t, r.path); got != r.size.Load() {
				t.Fatalf("rolled segment %s: file %d bytes for %d of data", filepath.Base(r.path), got, r.size.Load())
			}
		}
	}
	pass()
	pass()
	appendN(8)
	active := l.active
	if fileSize(t, active.path) <= active.size.Load() {
		t.Fatalf("new active segment: file %d bytes for %d of data; want zeros ahead", fileSize(t, active.path), active.size.Load())
	}
	crash(l)

	l = mustOpen(t, logDir, cfg, Options{})
	w.l = l
	if r := l.Recovery(); r.Truncated {
		t.Fatalf("recovery reported a damaged tail for the zeros written ahead: %+v", r)
	}
	if got := fileSize(t, l.active.path); got != l.active.size.Load() {
		t.Fatalf("after the crash: file %d bytes for %d of data; want the zeros dropped", got, l.active.size.Load())
	}
	checkBatches(t, readBatches(t, l, 0), w.want, "after the crash")
	pass()
	pass()
	appendN(8)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, l.active.path); got != l.active.size.Load() {
		t.Fatalf("closed: file %d bytes for %d of data; want the zeros cut off", got, l.active.size.Load())
	}
}

// TestZeroTailBeforeEmptySegment checks a crash between a roll creating the next segment and
// cutting the zeros off the one it rolled: the zeros end that segment's data, the empty
// segment after it goes, and recovery reports no damaged batch; every batch reads back.
func TestZeroTailBeforeEmptySegment(t *testing.T) {
	logDir, cfg, w := paddingLog(t)
	l := w.l
	w.add(4)
	for range 2 { // passes less than a second apart: hot, blocks allocated ahead
		if err := l.writeback(64<<10, true); err != nil {
			t.Fatalf("writeback: %v", err)
		}
	}
	w.add(20)
	s := l.active
	if fileSize(t, s.path) <= s.size.Load() {
		t.Fatalf("file %d bytes for %d of data; want zeros ahead", fileSize(t, s.path), s.size.Load())
	}
	next := s.next
	crash(l)
	f, err := os.Create(segmentPath(logDir, next, logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	l = mustOpen(t, logDir, cfg, Options{})
	defer l.Close()
	if r := l.Recovery(); r.Truncated {
		t.Fatalf("recovery reported a damaged tail for the zeros of a rolled segment: %+v", r)
	}
	if got := fileSize(t, l.active.path); got != l.active.size.Load() {
		t.Fatalf("after the crash: file %d bytes for %d of data; want the zeros dropped", got, l.active.size.Load())
	}
	if got, want := l.LogEndOffset(), next; got != want {
		t.Fatalf("log end offset %d; want %d", got, want)
	}
	if _, err := os.Stat(segmentPath(logDir, next, logSuffix)); !os.IsNotExist(err) {
		t.Fatalf("the empty segment after the zeros: %v; want it removed", err)
	}
	checkBatches(t, readBatches(t, l, 0), w.want, "after the crash")
}

// paddingLog opens a log of 4 MiB segments in a directory on a file system that allocates
// blocks ahead, so that it pads once hot; it returns the log's directory, its config and a
// writer of batches to it.
func paddingLog(t *testing.T) (string, Config, *batchWriter) {
	cfg := testConfig()
	cfg.SegmentBytes = 4 << 20
	cfg.MaxIndexBytes = 1 << 20
	logDir := filepath.Join(allocatingDir(t), "log")
	return logDir, cfg, &batchWriter{t: t, l: mustOpen(t, logDir, cfg, Options{})}
}
