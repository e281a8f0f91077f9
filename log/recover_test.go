package log

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ringbroker/internal/crc32c"
	"ringbroker/internal/recordbatch"
)

// crashFixture writes batches over several segments, abandons the log without closing it and
// returns the directory, the batches written and the segment base offsets.
func crashFixture(t *testing.T) (dir string, batches [][]byte, bases []int64) {
	t.Helper()
	dir = t.TempDir()
	l := mustOpen(t, dir, testConfig(), Options{LeaderEpoch: 2})
	for i := range 60 {
		spec := idem(7, 0, int32(i*3), 3)
		spec.valueSize = 200
		b := makeBatch(t, spec)
		mustAppend(t, l, b)
		batches = append(batches, bytes.Clone(b))
	}
	for _, s := range *l.segs.Load() {
		bases = append(bases, s.base)
	}
	if len(bases) < 3 {
		t.Fatalf("fixture has %d segments; want at least 3", len(bases))
	}
	crash(l)
	return dir, batches, bases
}

// TestRecoveryAfterCrash reopens without the clean-shutdown marker after damaging the tail in
// different ways; the log keeps exactly the batches before the damage, serves none after it,
// rebuilds indexes and producer state, and accepts appends again.
func TestRecoveryAfterCrash(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string, batches [][]byte, bases []int64) int // returns batches kept
	}{
		{"intact", func(t *testing.T, dir string, b [][]byte, bases []int64) int { return len(b) }},
		{"segment cut mid-batch", func(t *testing.T, dir string, b [][]byte, bases []int64) int {
			path := segmentPath(dir, bases[len(bases)-1], logSuffix)
			last := b[len(b)-1]
			if err := os.Truncate(path, fileSize(t, path)-int64(len(last))/2); err != nil {
				t.Fatal(err)
			}
			return len(b) - 1
		}},
		{"byte flipped in the last batch", func(t *testing.T, dir string, b [][]byte, bases []int64) int {
			path := segmentPath(dir, bases[len(bases)-1], logSuffix)
			flipByte(t, path, fileSize(t, path)-5)
			return len(b) - 1
		}},
		{"byte flipped in an earlier segment drops the later ones", func(t *testing.T, dir string, b [][]byte, bases []int64) int {
			path := segmentPath(dir, bases[1], logSuffix)
			flipByte(t, path, int64(len(b[0]))+recordbatch.OffAttributes+3) // second batch of segment 1
			return countBelow(b, bases[1]) + 1
		}},
		{"index truncated mid-entry", func(t *testing.T, dir string, b [][]byte, bases []int64) int {
			for _, base := range bases {
				if err := os.Truncate(segmentPath(dir, base, indexSuffix), 13); err != nil {
					t.Fatal(err)
				}
			}
			return len(b)
		}},
		{"indexes missing", func(t *testing.T, dir string, b [][]byte, bases []int64) int {
			for _, base := range bases {
				for _, suf := range []string{indexSuffix, timeIndexSuffix} {
					if err := os.Remove(segmentPath(dir, base, suf)); err != nil {
						t.Fatal(err)
					}
				}
			}
			return len(b)
		}},
		{"garbage appended after the last batch", func(t *testing.T, dir string, b [][]byte, bases []int64) int {
			f, err := os.OpenFile(segmentPath(dir, bases[len(bases)-1], logSuffix), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(bytes.Repeat([]byte{0}, 100)); err != nil {
				t.Fatal(err)
			}
			return len(b)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, batches, bases := crashFixture(t)
			kept := tt.damage(t, dir, batches, bases)
			l := mustOpen(t, dir, testConfig(), Options{LeaderEpoch: 2})
			defer l.Close()
			got := readBatches(t, l, 0)
			if len(got) != kept {
				t.Fatalf("recovered %d batches; want %d", len(got), kept)
			}
			for i := range got {
				if !bytes.Equal(got[i], batches[i]) {
					t.Fatalf("batch %d differs after recovery", i)
				}
			}
			end := int64(3 * kept)
			if l.LogEndOffset() != end {
				t.Fatalf("log end %d; want %d", l.LogEndOffset(), end)
			}
			for _, s := range *l.segs.Load() {
				if err := s.offIdx.checkOffsets(s.size.Load()); err != nil {
					t.Fatalf("index after recovery: %v", err)
				}
				if err := s.timIdx.checkTimes(); err != nil {
					t.Fatalf("time index after recovery: %v", err)
				}
			}
			if kept > 0 { // the producer state was rebuilt: the last kept batch is a duplicate
				res := mustAppend(t, l, batches[kept-1])
				if !res.Duplicate || res.BaseOffset != end-3 {
					t.Fatalf("re-sent last batch: %+v; want duplicate at %d", res, end-3)
				}
			}
			res := mustAppend(t, l, makeBatch(t, idem(7, 0, int32(kept*3), 3)))
			if res.BaseOffset != end {
				t.Fatalf("append after recovery at %d; want %d", res.BaseOffset, end)
			}
			if e, off := l.EndOffsetForEpoch(2); e != 2 || off != end+3 {
				t.Fatalf("EndOffsetForEpoch(2) = %d, %d; want 2, %d", e, off, end+3)
			}
		})
	}
}

// TestRecoveryPointSkipsFlushedSegments trusts segments below the recovery point: damage there
// goes unnoticed by the CRC scan, damage above it is repaired.
func TestRecoveryPointSkipsFlushedSegments(t *testing.T) {
	dir, batches, bases := crashFixture(t)
	flipByte(t, segmentPath(dir, bases[0], logSuffix), recordbatch.HeaderSize+5) // payload damage, framing intact
	path := segmentPath(dir, bases[len(bases)-1], logSuffix)
	flipByte(t, path, fileSize(t, path)-5)
	l := mustOpen(t, dir, testConfig(), Options{RecoveryPoint: bases[len(bases)-1]})
	defer l.Close()
	if got := readBatches(t, l, bases[len(bases)-1]); len(got) != len(batches)-countBelow(batches, bases[len(bases)-1])-1 {
		t.Fatalf("recovered %d batches in the last segment", len(got))
	}
	if l.LogEndOffset() != int64(3*(len(batches)-1)) {
		t.Fatalf("log end %d; want %d", l.LogEndOffset(), 3*(len(batches)-1))
	}
}

// TestCleanReopenTrustsFraming reopens a cleanly closed log with a damaged index: the index
// is rebuilt, the data kept.
func TestCleanReopenTrustsFraming(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig(), Options{})
	for i := range 50 {
		mustAppend(t, l, makeBatch(t, plain(2, 300, int64(i))))
	}
	bases := []int64{}
	for _, s := range *l.segs.Load() {
		bases = append(bases, s.base)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fileSize(t, segmentPath(dir, bases[0], indexSuffix)); n == 0 || n%offsetEntrySize != 0 || n >= int64(testConfig().MaxIndexBytes) {
		t.Fatalf("closed index is %d bytes; want trimmed whole entries", n)
	}
	if err := os.WriteFile(segmentPath(dir, bases[0], indexSuffix), make([]byte, 64), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(segmentPath(dir, bases[1], timeIndexSuffix)); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, testConfig(), Options{CleanShutdown: true})
	defer l.Close()
	if got := readBatches(t, l, 0); len(got) != 50 {
		t.Fatalf("read %d batches; want 50", len(got))
	}
	segs := *l.segs.Load()
	if err := segs[0].offIdx.checkOffsets(1 << 30); err != nil || segs[0].offIdx.n.Load() == 0 {
		t.Fatalf("index not rebuilt: %v", err)
	}
	if segs[1].timIdx.n.Load() == 0 {
		t.Fatal("missing time index not rebuilt")
	}
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

// countBelow counts the batches whose base offset is below offset.
func countBelow(batches [][]byte, offset int64) int {
	n := 0
	for _, b := range batches {
		if parseHeader(b).baseOffset < offset {
			n++
		}
	}
	return n
}

// FuzzRecoverSegment opens arbitrary bytes as the only segment of an uncleanly shut down log:
// Open must not panic, every batch it serves must pass its CRC with increasing offsets, and
// its last stable offset and aborted transactions must lie within the log.
// With fixCRC the input's framed batches get valid CRCs first, so the fuzzer also explores
// offsets, lengths and producer fields behind the CRC check.
func FuzzRecoverSegment(f *testing.F) {
	var good []byte
	for i := range 3 {
		b := makeBatch(f, plain(2, 20, int64(i)))
		parseAt := int64(2 * i)
		b[0], b[7] = 0, byte(parseAt)
		good = append(good, b...)
	}
	f.Add(false, good)
	f.Add(true, good)
	f.Add(false, good[:len(good)-7])
	f.Add(false, append(bytes.Clone(good), 0xff, 0, 0, 0))
	flipped := bytes.Clone(good)
	flipped[len(flipped)-3] ^= 1
	f.Add(false, flipped)
	f.Add(false, []byte{})
	f.Add(false, bytes.Repeat([]byte{0}, 200))
	var txn []byte // a transaction of producer 1 at 0-1, aborted at 2
	for i, b := range [][]byte{txnBatch(f, 1, 0, 0, 2, 8), marker(f, 1, 0, false, 0)} {
		b[7] = byte(2 * i)
		txn = append(txn, b...)
	}
	f.Add(true, txn)
	f.Fuzz(func(t *testing.T, fixCRC bool, data []byte) {
		if fixCRC {
			fixCRCs(data)
		}
		dir := fuzzDir(t)
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig()
		cfg.IndexIntervalBytes = 0
		l, err := Open(dir, cfg, Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		if l.Size() > int64(len(data)) {
			t.Fatalf("size %d from %d bytes", l.Size(), len(data))
		}
		next := int64(-1)
		for offset := l.LogStartOffset(); offset < l.LogEndOffset(); {
			r, err := l.Read(offset, 1<<20, -1, true)
			if err != nil {
				t.Fatalf("Read(%d): %v", offset, err)
			}
			if len(r.Data) == 0 {
				r.Release()
				break
			}
			for p := 0; p < len(r.Data); {
				h, err := checkBatch(r.Data[p:], true)
				if err != nil || h.baseOffset <= next {
					t.Fatalf("served a bad batch at offset %d: %v (previous end %d)", h.baseOffset, err, next)
				}
				next = h.lastOffset()
				offset = next + 1
				p += int(h.size())
			}
			r.Release()
		}
		if lso := l.LastStableOffset(l.LogEndOffset()); lso < l.LogStartOffset() || lso > l.LogEndOffset() {
			t.Fatalf("last stable offset %d outside the log %d..%d", lso, l.LogStartOffset(), l.LogEndOffset())
		}
		for _, a := range l.AbortedTransactions(l.LogStartOffset(), l.LogEndOffset()) {
			if a.FirstOffset < 0 || a.FirstOffset >= l.LogEndOffset() {
				t.Fatalf("aborted transaction %+v outside the log end %d", a, l.LogEndOffset())
			}
		}
		if _, err := l.Append(makeBatch(t, plain(1, 1, 0))); err != nil {
			t.Fatalf("Append after recovery: %v", err)
		}
	})
}

// fuzzDir returns a fresh directory on tmpfs when there is one, so that the fsyncs of each
// execution cost nothing and the fuzzer can minimize inputs quickly.
func fuzzDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "ringbroker-log-fuzz-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// fixCRCs rewrites the CRC of every framed batch in data, walking by batchLength.
func fixCRCs(data []byte) {
	for p := 0; p+recordbatch.HeaderSize <= len(data); {
		n := recordbatch.LogOverhead + int(int32(binary.BigEndian.Uint32(data[p+recordbatch.OffBatchLength:])))
		if n < recordbatch.HeaderSize || n > len(data)-p {
			return
		}
		binary.BigEndian.PutUint32(data[p+recordbatch.OffCRC:], crc32c.Checksum(data[p+recordbatch.OffAttributes:p+n]))
		p += n
	}
}

// TestRecoveryReport checks that Open reports where it truncated a damaged log, how much it
// dropped and why, and which indexes it rebuilt.
func TestRecoveryReport(t *testing.T) {
	t.Run("cut mid-batch", func(t *testing.T) {
		dir, batches, bases := crashFixture(t)
		last := bases[len(bases)-1]
		path := segmentPath(dir, last, logSuffix)
		size, n := fileSize(t, path), int64(len(batches[len(batches)-1]))
		if err := os.Truncate(path, size-n/2); err != nil {
			t.Fatal(err)
		}
		l := mustOpen(t, dir, testConfig(), Options{RecoveryPoint: last})
		defer l.Close()
		r := l.Recovery()
		want := RecoveryReport{CheckedSegments: 1, RebuiltIndexes: 1, Truncated: true, TruncatedSegment: last,
			TruncatedPosition: size - n, DroppedBytes: n - n/2, Reason: r.Reason}
		if r != want || r.Reason == "" {
			t.Fatalf("report %+v; want %+v with a reason", r, want)
		}
	})
	t.Run("byte flipped in an earlier segment", func(t *testing.T) {
		dir, batches, bases := crashFixture(t)
		pos := int64(len(batches[0])) // the second batch of segment 1
		flipByte(t, segmentPath(dir, bases[1], logSuffix), pos+recordbatch.OffAttributes+3)
		dropped := fileSize(t, segmentPath(dir, bases[1], logSuffix)) - pos
		for _, base := range bases[2:] {
			dropped += fileSize(t, segmentPath(dir, base, logSuffix))
		}
		l := mustOpen(t, dir, testConfig(), Options{})
		defer l.Close()
		r := l.Recovery()
		if !r.Truncated || r.TruncatedSegment != bases[1] || r.TruncatedPosition != pos ||
			r.DroppedSegments != len(bases)-2 || r.DroppedBytes != dropped || !strings.Contains(strings.ToLower(r.Reason), "crc") {
			t.Fatalf("report %+v; want truncation in segment %d at %d dropping %d segments and %d bytes for a CRC mismatch",
				r, bases[1], pos, len(bases)-2, dropped)
		}
	})
	t.Run("index truncated below the recovery point", func(t *testing.T) {
		dir, _, bases := crashFixture(t)
		for _, base := range bases {
			if err := os.Truncate(segmentPath(dir, base, indexSuffix), 13); err != nil {
				t.Fatal(err)
			}
		}
		l := mustOpen(t, dir, testConfig(), Options{RecoveryPoint: bases[len(bases)-1]})
		defer l.Close()
		if r := l.Recovery(); r.Truncated || r.CheckedSegments != 1 || r.RebuiltIndexes != len(bases) {
			t.Fatalf("report %+v; want no truncation, 1 checked segment and %d rebuilt indexes", r, len(bases))
		}
	})
}
