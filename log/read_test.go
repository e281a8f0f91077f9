package log

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadMatchesBruteForce compares Read, which reads only the headers near the start and the
// end of its answer, with a walk over every batch, for random offsets, limits and high
// watermarks over batches of mixed sizes; and checks that FD and Pos name the same bytes.
func TestReadMatchesBruteForce(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.MaxIndexBytes = 64 << 10
	l := mustOpen(t, t.TempDir(), cfg, Options{})
	defer l.Close()
	rng := rand.New(rand.NewPCG(7, 11))
	type batch struct{ base, last, pos, size int64 }
	var bs []batch
	var pos int64
	for i := range 300 {
		b := makeBatch(t, plain(1+rng.IntN(4), rng.IntN(900), int64(i)))
		res := mustAppend(t, l, b)
		bs = append(bs, batch{res.BaseOffset, res.LastOffset, pos, int64(len(b))})
		pos += int64(len(b))
	}
	leo := l.LogEndOffset()
	want := func(offset int64, maxBytes int, maxOffset int64, minOne bool) (int64, int64) {
		if maxOffset < 0 || maxOffset > leo {
			maxOffset = leo
		}
		if offset >= maxOffset {
			return 0, 0
		}
		i := 0
		for i < len(bs) && bs[i].last < offset {
			i++
		}
		if i == len(bs) || bs[i].base >= maxOffset {
			return 0, 0
		}
		start, end := bs[i].pos, bs[i].pos
		for j := i; j < len(bs) && bs[j].base < maxOffset && bs[j].pos+bs[j].size-start <= int64(maxBytes); j++ {
			end = bs[j].pos + bs[j].size
		}
		if end == start {
			switch {
			case minOne:
				end = start + bs[i].size
			case maxBytes > 0:
				end = start + min(bs[i].size, int64(maxBytes))
			}
		}
		return start, end - start
	}
	for range 3000 {
		offset := rng.Int64N(leo + 1)
		maxBytes := rng.IntN(20_000)
		maxOffset := int64(-1)
		if rng.IntN(3) == 0 {
			maxOffset = rng.Int64N(leo + 1)
		}
		minOne := rng.IntN(2) == 0
		r, err := l.Read(offset, maxBytes, maxOffset, minOne)
		if err != nil {
			t.Fatalf("Read(%d, %d, %d, %v): %v", offset, maxBytes, maxOffset, minOne, err)
		}
		wPos, wLen := want(offset, maxBytes, maxOffset, minOne)
		if int64(len(r.Data)) != wLen || (wLen > 0 && r.Pos != wPos) {
			t.Fatalf("Read(%d, %d, %d, %v) = %d bytes at %d; want %d bytes at %d",
				offset, maxBytes, maxOffset, minOne, len(r.Data), r.Pos, wLen, wPos)
		}
		if wLen > 0 {
			got := make([]byte, len(r.Data))
			if n, err := unix.Pread(r.FD, got, r.Pos); err != nil || n != len(got) || !bytes.Equal(got, r.Data) {
				t.Fatalf("pread(FD, %d bytes at Pos %d) = %d, %v; differs from Data", len(got), r.Pos, n, err)
			}
		}
		r.Release()
	}
}
