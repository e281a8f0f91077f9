package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"ringbroker/internal/recordbatch"
	"ringbroker/internal/testutil"
)

// TestRoundTripAcrossRolls appends batches across many segment rolls in every combination of
// flush mode, codec bits and timestamp type, reads them back, then reopens after Close and
// reads and appends again.
func TestRoundTripAcrossRolls(t *testing.T) {
	for _, flush := range []int64{math.MaxInt64, 1, 7} {
		for _, codec := range []int16{0, 1, 2, 3, 4} {
			for _, appendTime := range []bool{false, true} {
				t.Run(fmt.Sprintf("flush=%d/codec=%d/logAppendTime=%v", flush, codec, appendTime), func(t *testing.T) {
					t.Parallel()
					testRoundTrip(t, flush, codec, appendTime)
				})
			}
		}
	}
}

func testRoundTrip(t *testing.T, flush int64, codec int16, appendTime bool) {
	dir := filepath.Join(t.TempDir(), "topic-0")
	cfg := testConfig()
	cfg.FlushMessages = flush
	cfg.LogAppendTime = appendTime
	now := time.UnixMilli(5_000_000)
	opts := Options{Topic: "topic", LeaderEpoch: 3, Now: func() time.Time { return now }}
	l := mustOpen(t, dir, cfg, opts)
	var want [][]byte
	next := int64(0)
	for i := range 120 {
		spec := plain(1+i%5, 100+i*7%300, int64(1000+i*10))
		spec.codec = codec
		b := makeBatch(t, spec)
		res := mustAppend(t, l, b)
		if res.BaseOffset != next || res.LastOffset != next+int64(spec.records-1) {
			t.Fatalf("append %d: offsets %d..%d; want %d..%d", i, res.BaseOffset, res.LastOffset, next, next+int64(spec.records-1))
		}
		if wantTime := map[bool]int64{true: now.UnixMilli(), false: -1}[appendTime]; res.LogAppendTime != wantTime {
			t.Fatalf("append %d: LogAppendTime %d; want %d", i, res.LogAppendTime, wantTime)
		}
		h := parseHeader(b)
		if h.baseOffset != next || h.leaderEpoch != 3 {
			t.Fatalf("append %d: batch rewritten to base %d epoch %d; want %d, 3", i, h.baseOffset, h.leaderEpoch, next)
		}
		if _, err := checkBatch(b, true); err != nil {
			t.Fatalf("append %d: stamped batch fails its check: %v", i, err)
		}
		want = append(want, bytes.Clone(b))
		next = res.LastOffset + 1
	}
	if n := len(*l.segs.Load()); n < 5 {
		t.Fatalf("%d segments after %d bytes with segment.bytes=%d; want several", n, l.Size(), cfg.SegmentBytes)
	}
	if flush == 1 && l.RecoveryPoint() != next {
		t.Fatalf("recovery point %d with flush.messages=1; want %d", l.RecoveryPoint(), next)
	}
	check := func(l *Log) {
		t.Helper()
		got := readBatches(t, l, 0)
		if len(got) != len(want) {
			t.Fatalf("read %d batches; want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("batch %d differs after read", i)
			}
		}
		for i, b := range want { // reads from the middle of every batch
			h := parseHeader(b)
			r, err := l.Read(h.lastOffset(), 1, -1, true)
			if err != nil || !bytes.Equal(r.Data, b) {
				t.Fatalf("Read(%d) of batch %d: %v, %d bytes", h.lastOffset(), i, err, len(r.Data))
			}
			r.Release()
		}
	}
	check(l)
	size := l.Size()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg, Options{Topic: "topic", LeaderEpoch: 3, CleanShutdown: true, Now: opts.Now})
	defer l.Close()
	if l.LogEndOffset() != next || l.Size() != size || l.LogStartOffset() != 0 {
		t.Fatalf("reopened: end %d size %d start %d; want %d %d 0", l.LogEndOffset(), l.Size(), l.LogStartOffset(), next, size)
	}
	check(l)
	b := makeBatch(t, plain(2, 10, 9999))
	if res := mustAppend(t, l, b); res.BaseOffset != next {
		t.Fatalf("append after reopen at %d; want %d", res.BaseOffset, next)
	}
	want = append(want, bytes.Clone(b))
	check(l)
}

// TestReadLimits covers maxBytes, minOneBatch, maxOffset and the range checks.
func TestReadLimits(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer l.Close()
	var sizes []int
	for i := range 4 {
		b := makeBatch(t, plain(2, 200, int64(i)))
		sizes = append(sizes, len(b))
		mustAppend(t, l, b)
	}
	tests := []struct {
		name      string
		offset    int64
		maxBytes  int
		maxOffset int64
		minOne    bool
		wBytes    int
		wErr      error
	}{
		{"all", 0, 1 << 20, -1, true, sizes[0] + sizes[1] + sizes[2] + sizes[3], nil},
		{"two whole batches", 0, sizes[0] + sizes[1] + 10, -1, true, sizes[0] + sizes[1], nil},
		{"first batch larger than maxBytes, minOneBatch", 0, 10, -1, true, sizes[0], nil},
		{"first batch larger than maxBytes, prefix", 0, 10, -1, false, 10, nil},
		{"zero maxBytes without minOneBatch", 0, 0, -1, false, 0, nil},
		{"from the middle of a batch", 3, 1 << 20, -1, true, sizes[1] + sizes[2] + sizes[3], nil},
		{"high watermark", 0, 1 << 20, 4, true, sizes[0] + sizes[1], nil},
		{"high watermark mid-batch", 0, 1 << 20, 5, true, sizes[0] + sizes[1] + sizes[2], nil},
		{"at the high watermark", 4, 1 << 20, 4, true, 0, nil},
		{"at the log end", 8, 1 << 20, -1, true, 0, nil},
		{"past the log end", 9, 1 << 20, -1, true, 0, ErrOffsetOutOfRange},
		{"negative", -1, 1 << 20, -1, true, 0, ErrOffsetOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := l.Read(tt.offset, tt.maxBytes, tt.maxOffset, tt.minOne)
			defer r.Release()
			if !errors.Is(err, tt.wErr) || len(r.Data) != tt.wBytes {
				t.Fatalf("Read(%d, %d, %d, %v) = %d bytes, %v; want %d bytes, %v",
					tt.offset, tt.maxBytes, tt.maxOffset, tt.minOne, len(r.Data), err, tt.wBytes, tt.wErr)
			}
		})
	}
}

// TestIndexLookups checks that every offset index entry points at the batch holding its
// offset and that lookups land at or before the wanted batch.
func TestIndexLookups(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.MaxIndexBytes = 64 << 10
	cfg.IndexIntervalBytes = 300
	l := mustOpen(t, t.TempDir(), cfg, Options{})
	defer l.Close()
	positions := map[int64]int64{} // batch last offset -> position
	var pos int64
	for i := range 200 {
		b := makeBatch(t, plain(1+i%3, 50+i%200, int64(10*i)))
		res := mustAppend(t, l, b)
		for o := res.BaseOffset; o <= res.LastOffset; o++ {
			positions[o] = pos
		}
		pos += int64(len(b))
	}
	s := l.active
	n := s.offIdx.n.Load()
	if n < 20 {
		t.Fatalf("%d index entries for %d bytes at interval %d; want more", n, pos, cfg.IndexIntervalBytes)
	}
	for i := range n {
		rel, p := s.offIdx.offsetEntry(i)
		if positions[rel] != p {
			t.Fatalf("entry %d maps offset %d to %d; the batch is at %d", i, rel, p, positions[rel])
		}
	}
	for o := range l.LogEndOffset() {
		if p := s.offIdx.lookupPosition(o); p > positions[o] {
			t.Fatalf("lookup(%d) = %d, past the batch at %d", o, p, positions[o])
		}
	}
	tn := s.timIdx.n.Load()
	if tn < 20 {
		t.Fatalf("%d time index entries; want more", tn)
	}
	for ts := int64(-5); ts < 2100; ts += 7 {
		off, gotTs, ok := l.OffsetForTimestamp(ts)
		// batch i holds records at 10i, 10i+1, ...; the first record >= ts:
		wantOff, wantTs, wantOK := bruteForceTimestamp(t, l, ts)
		if off != wantOff || gotTs != wantTs || ok != wantOK {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d, %v", ts, off, gotTs, ok, wantOff, wantTs, wantOK)
		}
	}
}

// bruteForceTimestamp scans every record for the first with a timestamp >= ts.
func bruteForceTimestamp(tb testing.TB, l *Log, ts int64) (int64, int64, bool) {
	for _, b := range readBatches(tb, l, 0) {
		h := parseHeader(b)
		for i := range int64(h.lastOffsetDelta) + 1 {
			if h.baseTimestamp+i >= ts {
				return h.baseOffset + i, h.baseTimestamp + i, true
			}
		}
	}
	return 0, 0, false
}

// TestOffsetForTimestampAcrossSegments looks timestamps up over many segments, including a
// compressed batch, which answers at batch granularity.
func TestOffsetForTimestampAcrossSegments(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer l.Close()
	for i := range 100 {
		mustAppend(t, l, makeBatch(t, plain(3, 300, int64(100*i))))
	}
	spec := plain(3, 300, 20000)
	spec.codec = 4
	res := mustAppend(t, l, makeBatch(t, spec))
	for _, tt := range []struct {
		ts        int64
		wOff, wTs int64
		wOK       bool
	}{
		{-1, 0, 0, true},
		{0, 0, 0, true},
		{1, 1, 1, true},
		{3, 3, 100, true},
		{5000, 150, 5000, true},
		{9902, 299, 9902, true},
		{9903, res.BaseOffset, 20002, true},
		{20001, res.BaseOffset, 20002, true},
		{20003, 0, 0, false},
	} {
		off, ts, ok := l.OffsetForTimestamp(tt.ts)
		if off != tt.wOff || ts != tt.wTs || ok != tt.wOK {
			t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d, %v", tt.ts, off, ts, ok, tt.wOff, tt.wTs, tt.wOK)
		}
	}
}

// TestRollTriggers covers the roll conditions other than size.
func TestRollTriggers(t *testing.T) {
	t.Run("index full", func(t *testing.T) {
		cfg := testConfig()
		cfg.SegmentBytes = 1 << 20
		cfg.IndexIntervalBytes = 0
		cfg.MaxIndexBytes = 4 * timeEntrySize // 6 offset entries, 3 usable time entries
		l := mustOpen(t, t.TempDir(), cfg, Options{})
		defer l.Close()
		for i := range 20 {
			mustAppend(t, l, makeBatch(t, plain(1, 10, int64(i))))
		}
		if n := len(*l.segs.Load()); n < 4 {
			t.Fatalf("%d segments; want rolls on a full index", n)
		}
		if got := readBatches(t, l, 0); len(got) != 20 {
			t.Fatalf("read %d batches; want 20", len(got))
		}
	})
	t.Run("segment.ms by timestamp", func(t *testing.T) {
		cfg := testConfig()
		cfg.SegmentMs = time.Second
		l := mustOpen(t, t.TempDir(), cfg, Options{})
		defer l.Close()
		mustAppend(t, l, makeBatch(t, plain(1, 10, 1000)))
		mustAppend(t, l, makeBatch(t, plain(1, 10, 2000))) // exactly segment.ms later: no roll
		mustAppend(t, l, makeBatch(t, plain(1, 10, 2001)))
		if n := len(*l.segs.Load()); n != 2 || l.active.base != 2 {
			t.Fatalf("%d segments, active at %d; want 2, 2", n, l.active.base)
		}
	})
	t.Run("segment.ms by clock", func(t *testing.T) {
		cfg := testConfig()
		cfg.SegmentMs = time.Second
		now := time.Unix(100, 0)
		l := mustOpen(t, t.TempDir(), cfg, Options{Now: func() time.Time { return now }})
		defer l.Close()
		mustAppend(t, l, makeBatch(t, plain(1, 10, -1))) // no timestamps
		now = now.Add(2 * time.Second)
		mustAppend(t, l, makeBatch(t, plain(1, 10, -1)))
		if n := len(*l.segs.Load()); n != 2 {
			t.Fatalf("%d segments; want 2", n)
		}
	})
	t.Run("rolled segments are flushed in the background", func(t *testing.T) {
		l := mustOpen(t, t.TempDir(), testConfig(), Options{})
		defer l.Close()
		for range 40 {
			mustAppend(t, l, makeBatch(t, plain(1, 1000, 0)))
		}
		testutil.WaitFor(t, 5*time.Second, testutil.Holds("recovery point at the active segment", func() bool {
			return l.RecoveryPoint() == l.active.base
		}))
	})
}

// TestAppendErrors covers input that Append refuses.
func TestAppendErrors(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMessageBytes = 2000
	l := mustOpen(t, t.TempDir(), cfg, Options{})
	defer l.Close()
	good := makeBatch(t, plain(1, 10, 0))
	badMagic := bytes.Clone(good)
	badMagic[recordbatch.OffMagic] = 1
	tests := []struct {
		name    string
		records []byte
		wErr    error
	}{
		{"empty", nil, ErrCorruptBatch},
		{"short", good[:30], ErrCorruptBatch},
		{"trailing garbage", append(bytes.Clone(good), 1, 2, 3), ErrCorruptBatch},
		{"magic", badMagic, ErrCorruptBatch},
		{"batch over max.message.bytes", makeBatch(t, plain(3, 1000, 0)), ErrRecordTooLarge},
		{"append over segment.bytes", bytes.Repeat(good, int(cfg.SegmentBytes)/len(good)+1), ErrRecordListTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.Append(tt.records); !errors.Is(err, tt.wErr) {
				t.Fatalf("Append = %v; want %v", err, tt.wErr)
			}
			if l.LogEndOffset() != 0 || l.Size() != 0 {
				t.Fatalf("failed append moved the log to end %d size %d", l.LogEndOffset(), l.Size())
			}
		})
	}
}

// TestWriteFailure injects a failing write: the append fails, nothing becomes visible and the
// next append continues at the same offset and position.
func TestWriteFailure(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig(), Options{})
	mustAppend(t, l, makeBatch(t, idem(1, 0, 0, 2)))
	fail := errors.New("injected EIO")
	l.writeAt = func(s *segment, b, _ []byte, off int64) (int, error) {
		n, _ := s.f.WriteAt(b[:len(b)/2], off) // a torn write
		return n, fail
	}
	if _, err := l.Append(makeBatch(t, idem(1, 0, 2, 2))); !errors.Is(err, fail) {
		t.Fatalf("Append = %v; want the injected error", err)
	}
	if l.LogEndOffset() != 2 {
		t.Fatalf("log end %d after a failed write; want 2", l.LogEndOffset())
	}
	l.writeAt = l.writeSegment
	if res := mustAppend(t, l, makeBatch(t, idem(1, 0, 2, 2))); res.BaseOffset != 2 || res.Duplicate {
		t.Fatalf("retry after failed write: %+v; want base 2, not a duplicate", res)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, testConfig(), Options{})
	defer l.Close()
	if got := readBatches(t, l, 0); len(got) != 2 || l.LogEndOffset() != 4 {
		t.Fatalf("reopened: %d batches, end %d; want 2, 4", len(got), l.LogEndOffset())
	}
}

// TestDeleteWhileReading keeps slices of a deleted log readable until Release.
func TestDeleteWhileReading(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l := mustOpen(t, dir, testConfig(), Options{})
	b := makeBatch(t, plain(3, 500, 7))
	mustAppend(t, l, b)
	r, err := l.Read(0, 1<<20, -1, true)
	if err != nil {
		t.Fatal(err)
	}
	s := l.active
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("directory still there after Delete: %v", err)
	}
	if got := s.refs.Load(); got != 1 {
		t.Fatalf("refs %d with one read outstanding; want 1", got)
	}
	if !bytes.Equal(r.Data, b) {
		t.Fatal("slice of a deleted segment changed before Release")
	}
	r.Release()
	if got := s.refs.Load(); got != 0 || s.data != nil {
		t.Fatalf("after Release: refs %d, mapped %v; want 0, unmapped", got, s.data != nil)
	}
	if _, err := l.Read(0, 100, -1, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Delete = %v; want ErrClosed", err)
	}
	if _, err := l.Append(b); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Delete = %v; want ErrClosed", err)
	}
}

// TestDiscardWritesNothing closes a log as DeleteTopics does: no file in its directory is
// written, trimmed, replaced or added (Close would fsync, trim the active segment's indexes and
// write the epoch checkpoint and a producer snapshot), a SyncAsync caller is answered, and
// what was appended is still there for a reopen to recover.
func TestDiscardWritesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l := mustOpen(t, dir, testConfig(), Options{})
	var want [][]byte
	for i := range 5 {
		b := makeBatch(t, idem(7, 0, int32(3*i), 3))
		mustAppend(t, l, b)
		want = append(want, b)
	}
	type file struct {
		ino  uint64
		size int64
	}
	list := func() map[string]file {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]file{}
		for _, e := range ents {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = file{fi.Sys().(*syscall.Stat_t).Ino, fi.Size()}
		}
		return files
	}
	before := list()
	answered := make(chan error, 1)
	l.SyncAsync(l.LogEndOffset(), func(err error) { answered <- err })
	l.Discard()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("SyncAsync waiter not answered after Discard")
	}
	if after := list(); !maps.Equal(before, after) {
		t.Fatalf("Discard changed the log's files:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := l.Append(want[0]); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Discard = %v; want ErrClosed", err)
	}
	l.Discard()
	r := mustOpen(t, dir, testConfig(), Options{})
	defer r.Close()
	checkBatches(t, readBatches(t, r, 0), want, "reopened after Discard")
}

// TestConcurrentReadsDuringAppends reads while another goroutine appends and rolls; every read
// sees whole, valid batches in offset order.
func TestConcurrentReadsDuringAppends(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer l.Close()
	const batches = 400
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range batches {
			if _, err := l.Append(makeBatch(t, plain(2, 100+i%400, int64(i)))); err != nil {
				t.Errorf("Append %d: %v", i, err)
				return
			}
		}
	})
	for range 2 {
		wg.Go(func() {
			var offset int64
			for offset < 2*batches {
				r, err := l.Read(offset, 4096, -1, true)
				if err != nil {
					t.Errorf("Read(%d): %v", offset, err)
					return
				}
				for p := 0; p < len(r.Data); {
					h, err := checkBatch(r.Data[p:], true)
					if err != nil || h.baseOffset > offset {
						t.Errorf("Read(%d): batch at byte %d base %d: %v", offset, p, h.baseOffset, err)
						r.Release()
						return
					}
					offset = h.lastOffset() + 1
					p += int(h.size())
				}
				r.Release()
			}
		})
	}
	wg.Wait()
}

// TestTopicID covers partition.metadata.
func TestTopicID(t *testing.T) {
	dir := t.TempDir()
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	l := mustOpen(t, dir, testConfig(), Options{TopicID: id})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, partitionMetadataFile))
	if err != nil || string(data) != "version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA\n" {
		t.Fatalf("partition.metadata = %q, %v", data, err)
	}
	l = mustOpen(t, dir, testConfig(), Options{})
	if l.TopicID() != id {
		t.Fatalf("adopted topic id %x; want %x", l.TopicID(), id)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, testConfig(), Options{TopicID: [16]byte{9}}); err == nil {
		t.Fatal("Open with another topic id succeeded")
	}
}

// TestLeaderEpochs stamps epochs, answers OffsetForLeaderEpoch and keeps the checkpoint.
func TestLeaderEpochs(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig(), Options{LeaderEpoch: 1})
	mustAppend(t, l, makeBatch(t, plain(5, 10, 0))) // epoch 1 at 0
	if err := l.SetLeaderEpoch(3); err != nil {     // epoch 3 at 5
		t.Fatal(err)
	}
	mustAppend(t, l, makeBatch(t, plain(5, 10, 0)))
	if err := l.SetLeaderEpoch(4); err != nil { // epoch 4 at 10
		t.Fatal(err)
	}
	mustAppend(t, l, makeBatch(t, plain(5, 10, 0)))
	check := func(l *Log) {
		t.Helper()
		for _, tt := range []struct {
			epoch  int32
			wEpoch int32
			wEnd   int64
		}{
			{-1, -1, -1}, {0, 0, 0}, {1, 1, 5}, {2, 1, 5}, {3, 3, 10}, {4, 4, 15}, {5, -1, -1},
		} {
			if e, end := l.EndOffsetForEpoch(tt.epoch); e != tt.wEpoch || end != tt.wEnd {
				t.Errorf("EndOffsetForEpoch(%d) = %d, %d; want %d, %d", tt.epoch, e, end, tt.wEpoch, tt.wEnd)
			}
		}
	}
	check(l)
	if err := l.SetLeaderEpoch(2); err == nil {
		t.Fatal("SetLeaderEpoch accepted an older epoch")
	}
	crash(l)
	data, err := os.ReadFile(filepath.Join(dir, leaderEpochFile))
	if err != nil || string(data) != "0\n3\n1 0\n3 5\n4 10\n" {
		t.Fatalf("checkpoint %q, %v", data, err)
	}
	if err := os.Remove(filepath.Join(dir, leaderEpochFile)); err != nil { // rebuilt from batches
		t.Fatal(err)
	}
	l = mustOpen(t, dir, testConfig(), Options{})
	defer l.Close()
	check(l)
}

// TestCheckpointFiles covers the per-log-directory helpers.
func TestCheckpointFiles(t *testing.T) {
	dir := t.TempDir()
	if ok, err := HasCleanShutdownMarker(dir); ok || err != nil {
		t.Fatalf("marker in an empty dir: %v, %v", ok, err)
	}
	if err := WriteCleanShutdownMarker(dir); err != nil {
		t.Fatal(err)
	}
	if ok, err := HasCleanShutdownMarker(dir); !ok || err != nil {
		t.Fatalf("marker after writing: %v, %v", ok, err)
	}
	if err := RemoveCleanShutdownMarker(dir); err != nil {
		t.Fatal(err)
	}
	if ok, _ := HasCleanShutdownMarker(dir); ok {
		t.Fatal("marker still there after removing")
	}
	path := filepath.Join(dir, RecoveryPointFile)
	want := map[TopicPartition]int64{{"a", 0}: 10, {"a", 1}: 0, {"__consumer_offsets", 49}: 1 << 40}
	if err := WriteOffsetCheckpoint(path, want); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if string(data) != "0\n3\n__consumer_offsets 49 1099511627776\na 0 10\na 1 0\n" {
		t.Fatalf("checkpoint file %q", data)
	}
	got, err := ReadOffsetCheckpoint(path)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ReadOffsetCheckpoint = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na b c\n", "0\n1\na 0\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadOffsetCheckpoint(path); err == nil {
			t.Errorf("ReadOffsetCheckpoint(%q) succeeded", bad)
		}
	}
	if got, err := ReadOffsetCheckpoint(filepath.Join(dir, "missing")); err != nil || len(got) != 0 {
		t.Fatalf("missing checkpoint: %v, %v", got, err)
	}
}

// TestFlushIfDue flushes by flush.ms on the injected clock.
func TestFlushIfDue(t *testing.T) {
	cfg := testConfig()
	cfg.FlushInterval = time.Minute
	now := time.Unix(1000, 0)
	l := mustOpen(t, t.TempDir(), cfg, Options{Now: func() time.Time { return now }})
	defer l.Close()
	mustAppend(t, l, makeBatch(t, plain(3, 10, 0)))
	if err := l.FlushIfDue(); err != nil || l.RecoveryPoint() != 0 {
		t.Fatalf("FlushIfDue before flush.ms: %v, recovery point %d; want 0", err, l.RecoveryPoint())
	}
	now = now.Add(time.Minute)
	if err := l.FlushIfDue(); err != nil || l.RecoveryPoint() != 3 {
		t.Fatalf("FlushIfDue after flush.ms: %v, recovery point %d; want 3", err, l.RecoveryPoint())
	}
}

// TestOnFlushTimesFlushes reports each flush that fsynced something, with its duration on the
// log's clock, and stays quiet for a flush with nothing to write.
func TestOnFlushTimesFlushes(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { now = now.Add(7 * time.Millisecond); return now }
	var got []time.Duration
	l := mustOpen(t, t.TempDir(), testConfig(), Options{Now: clock, OnFlush: func(d time.Duration) { got = append(got, d) }})
	defer l.Close()
	mustAppend(t, l, makeBatch(t, plain(3, 10, 0)))
	if err := l.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if len(got) != 1 || got[0] <= 0 {
		t.Fatalf("OnFlush after a flush of 3 records: %v; want one positive duration", got)
	}
	if err := l.Flush(); err != nil {
		t.Fatalf("second Flush: %v", err)
	}
	if len(got) != 1 {
		t.Fatalf("OnFlush after a flush with nothing dirty: %v; want no new call", got)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, mut := range []func(*Config){
		func(c *Config) { c.SegmentBytes = 10 },
		func(c *Config) { c.SegmentBytes = math.MaxInt32 + 1 },
		func(c *Config) { c.SegmentMs = -1 },
		func(c *Config) { c.IndexIntervalBytes = -1 },
		func(c *Config) { c.MaxIndexBytes = 8 },
		func(c *Config) { c.MaxMessageBytes = 0 },
		func(c *Config) { c.FlushMessages = 0 },
		func(c *Config) { c.FlushInterval = -time.Second },
	} {
		c := DefaultConfig()
		mut(&c)
		if _, err := Open(t.TempDir(), c, Options{}); err == nil {
			t.Errorf("Open accepted %+v", c)
		}
	}
}

// TestLogAppendTimeStamp checks the rewritten header of a LogAppendTime batch.
func TestLogAppendTimeStamp(t *testing.T) {
	cfg := testConfig()
	cfg.LogAppendTime = true
	l := mustOpen(t, t.TempDir(), cfg, Options{Now: func() time.Time { return time.UnixMilli(777) }})
	defer l.Close()
	b := makeBatch(t, plain(2, 10, 5))
	mustAppend(t, l, b)
	h, err := checkBatch(b, true)
	if err != nil || h.attributes&recordbatch.AttrLogAppendTime == 0 || h.maxTimestamp != 777 || binary.BigEndian.Uint64(b[recordbatch.OffBaseTimestamp:]) != 5 {
		t.Fatalf("stamped header %+v, %v", h, err)
	}
	if off, ts, ok := l.OffsetForTimestamp(700); off != 0 || ts != 777 || !ok {
		t.Fatalf("OffsetForTimestamp(700) = %d, %d, %v; want 0, 777, true", off, ts, ok)
	}
}

func TestMaxTimestampOffset(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer l.Close()
	if _, _, ok := l.MaxTimestampOffset(); ok {
		t.Fatal("empty log has a max timestamp")
	}
	for i, ts := range []int64{100, 300, 200, 300, 50} {
		if _, err := l.Append(makeBatch(t, plain(1, 64, ts))); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	off, ts, ok := l.MaxTimestampOffset()
	if !ok || ts != 300 || off != 1 {
		t.Fatalf("MaxTimestampOffset = %d, %d, %v; want 1, 300, true", off, ts, ok)
	}
}
