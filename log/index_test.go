package log

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestOffsetIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.index")
	x, err := openIndex(path, offsetEntrySize, 5*offsetEntrySize+3, true)
	if err != nil {
		t.Fatal(err)
	}
	entries := [][2]int64{{3, 100}, {7, 250}, {12, 400}, {20, 800}}
	for _, e := range entries {
		x.appendOffset(e[0], e[1])
	}
	for _, tt := range []struct{ rel, wPos int64 }{
		{0, 0}, {2, 0}, {3, 100}, {6, 100}, {7, 250}, {19, 400}, {20, 800}, {1000, 800},
	} {
		if got := x.lookupPosition(tt.rel); got != tt.wPos {
			t.Errorf("lookupPosition(%d) = %d; want %d", tt.rel, got, tt.wPos)
		}
	}
	if x.offsetFull() {
		t.Fatal("full after 4 of 5 entries")
	}
	x.appendOffset(30, 900)
	x.appendOffset(40, 1000) // dropped
	if !x.offsetFull() || x.n.Load() != 5 {
		t.Fatalf("after filling: full %v, %d entries; want true, 5", x.offsetFull(), x.n.Load())
	}
	if err := x.checkOffsets(1001); err != nil {
		t.Fatal(err)
	}
	if err := x.checkOffsets(900); err == nil {
		t.Fatal("checkOffsets accepted a position past the segment")
	}
	if err := x.trim(); err != nil {
		t.Fatal(err)
	}
	if err := x.close(); err != nil {
		t.Fatal(err)
	}
	if n := fileSize(t, path); n != 5*offsetEntrySize {
		t.Fatalf("trimmed index is %d bytes; want %d", n, 5*offsetEntrySize)
	}
	x, err = openIndex(path, offsetEntrySize, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	if got := x.lookupPosition(25); x.n.Load() != 5 || got != 800 {
		t.Fatalf("reopened: %d entries, lookupPosition(25) = %d; want 5, 800", x.n.Load(), got)
	}
	if err := x.grow(10 * offsetEntrySize); err != nil {
		t.Fatal(err)
	}
	if x.n.Load() != 5 || x.maxEntries != 10 || x.lookupPosition(30) != 900 {
		t.Fatalf("grown: %d of %d entries", x.n.Load(), x.maxEntries)
	}
}

func TestTimeIndex(t *testing.T) {
	x, err := openIndex(filepath.Join(t.TempDir(), "00000000000000000000.timeindex"), timeEntrySize, 4*timeEntrySize, true)
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	x.appendTime(-1, 0, false) // no timestamp: skipped
	x.appendTime(100, 2, false)
	x.appendTime(100, 3, false) // not newer: skipped
	x.appendTime(200, 5, false)
	x.appendTime(300, 9, false)
	x.appendTime(400, 12, false) // only the reserved slot is left
	if x.n.Load() != 3 || !x.timeFull() {
		t.Fatalf("%d entries, full %v; want 3, true", x.n.Load(), x.timeFull())
	}
	x.appendTime(400, 12, true)
	for _, tt := range []struct{ ts, wRel int64 }{
		{50, -1}, {100, -1}, {101, 2}, {200, 2}, {250, 5}, {401, 12},
	} {
		if got := x.lookupBeforeTime(tt.ts); got != tt.wRel {
			t.Errorf("lookupBeforeTime(%d) = %d; want %d", tt.ts, got, tt.wRel)
		}
	}
	if err := x.checkTimes(); err != nil {
		t.Fatal(err)
	}
}

// TestIndexHoldsNoDescriptor checks that an open, mapped index keeps no file descriptor, so a
// partition costs one descriptor rather than three, and that it still grows, trims and syncs
// by reopening its file by path.
func TestIndexHoldsNoDescriptor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.index")
	before := countFDs(t)
	x, err := openIndex(path, offsetEntrySize, 4*offsetEntrySize, true)
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	if got := countFDs(t); got != before {
		t.Fatalf("open descriptors went from %d to %d after openIndex; want none held", before, got)
	}
	if err := x.ensure(2); err != nil {
		t.Fatal(err)
	}
	x.appendOffset(1, 10)
	x.appendOffset(2, 20)
	if err := x.grow(8 * offsetEntrySize); err != nil {
		t.Fatal(err)
	}
	x.appendOffset(3, 30)
	if err := errors.Join(x.trim(), x.sync()); err != nil {
		t.Fatal(err)
	}
	if got := countFDs(t); got != before {
		t.Fatalf("open descriptors went from %d to %d after grow/trim/sync; want none held", before, got)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 3*offsetEntrySize {
		t.Fatalf("trimmed index is %d bytes, want %d", fi.Size(), 3*offsetEntrySize)
	}
	if pos := x.lookupPosition(3); pos != 30 {
		t.Fatalf("lookupPosition(3) = %d after grow and trim, want 30", pos)
	}
}

// countFDs counts this process's open file descriptors.
func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
