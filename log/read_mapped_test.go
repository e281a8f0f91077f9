package log

import (
	"encoding/binary"
	"os"
	"testing"
	"unsafe"
)

// mappedPages reports, for each page of b (page-aligned, in this process), whether it is
// mapped, from /proc/self/pagemap.
func mappedPages(t *testing.T, b []byte) []bool {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := os.Getpagesize()
	n := len(b) / page
	buf := make([]byte, 8*n)
	if _, err := f.ReadAt(buf, int64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))/uintptr(page))*8); err != nil {
		t.Fatal(err)
	}
	out := make([]bool, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(buf[8*i:])>>63 != 0
	}
	return out
}

// TestDropMappedUnmapsWholeFolios reads a large range, touches it as a send does, and checks
// that DropMapped leaves nothing of the segment mapped from the folio boundary before the
// range to the one after: a fault maps a whole large folio, so dropping the range's own pages
// alone would leave the folios' other parts mapped, and a reader moving through the log would
// keep most of what it read in the broker's resident memory.
func TestDropMappedUnmapsWholeFolios(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 64 << 20
	l := mustOpen(t, t.TempDir(), cfg, Options{})
	defer l.Close()
	for i := 0; i < 96; i++ { // 96 batches of about 64 KiB: 6 MiB
		mustAppend(t, l, makeBatch(t, plain(64, 1000, int64(i))))
	}
	// A read from the middle of the first folio, across the second, into the third.
	r, err := l.Read(64*15, 3<<20, -1, true)
	if err != nil || len(r.Data) < dropMappedMinBytes {
		t.Fatalf("Read = %d bytes, %v", len(r.Data), err)
	}
	defer r.Release()
	s := r.seg
	var sum byte
	for i := 0; i < len(r.Data); i += 512 {
		sum += r.Data[i]
	}
	_ = sum
	from := r.Pos &^ (maxFolioBytes - 1)
	to := min((r.Pos+int64(len(r.Data))+maxFolioBytes-1)&^(maxFolioBytes-1), s.size.Load())
	r.DropMapped()
	page := int64(os.Getpagesize())
	for p, mapped := range mappedPages(t, s.data[from:(to+page-1)/page*page]) {
		if mapped {
			t.Fatalf("page at %d is still mapped after DropMapped of %d..%d", from+int64(p)*page, r.Pos, r.Pos+int64(len(r.Data)))
		}
	}
}
