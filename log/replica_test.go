package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ringbroker/internal/recordbatch"
	"ringbroker/internal/testutil"
)

// stored returns the batch of spec as a leader stores it: at base offset base, in leader epoch
// epoch (both lie outside the CRC).
func stored(tb testing.TB, spec batchSpec, base int64, epoch int32) []byte {
	tb.Helper()
	b := makeBatch(tb, spec)
	binary.BigEndian.PutUint64(b[recordbatch.OffBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(b[recordbatch.OffLeaderEpoch:], uint32(epoch))
	return b
}

func mustFollow(tb testing.TB, l *Log, records []byte) AppendResult {
	tb.Helper()
	res, err := l.AppendAsFollower(records)
	if err != nil {
		tb.Fatalf("AppendAsFollower: %v", err)
	}
	return res
}

// wantEpochs is the leader-epoch cache that batches build: each newer epoch starts at its first
// batch.
func wantEpochs(batches [][]byte) []epochEntry {
	var c epochCache
	for _, b := range batches {
		h := parseHeader(b)
		c.assignIfNewer(h.leaderEpoch, h.baseOffset)
	}
	return c.entries
}

// wantProducers is the producer state that batches build.
func wantProducers(batches [][]byte) map[int64]producerEntry {
	p := newProducers()
	for _, b := range batches {
		if h := parseHeader(b); h.producerID >= 0 {
			p.load(&h, b)
		}
	}
	return p.entries
}

// checkHolds verifies that l holds exactly batches, some of which may lie wholly below its log
// start: byte-identical reads from the log start, a read from every visible batch's base and
// last offset starting at that batch, sound indexes, timestamp lookups, the leader epochs and
// the producer state that the batches imply.
func checkHolds(t *testing.T, l *Log, batches [][]byte) {
	t.Helper()
	start, end := l.LogStartOffset(), l.LogStartOffset()
	var visible [][]byte
	for _, b := range batches {
		h := parseHeader(b)
		if end = h.lastOffset() + 1; end > start {
			visible = append(visible, b)
		}
	}
	if l.LogEndOffset() != end {
		t.Fatalf("log end %d; want %d", l.LogEndOffset(), end)
	}
	got := readBatches(t, l, start)
	if len(got) != len(visible) {
		t.Fatalf("read %d batches; want %d", len(got), len(visible))
	}
	for i, b := range visible {
		if !bytes.Equal(got[i], b) {
			t.Fatalf("batch %d differs: offset %d; want %d", i, parseHeader(got[i]).baseOffset, parseHeader(b).baseOffset)
		}
		h := parseHeader(b)
		for _, o := range []int64{max(h.baseOffset, start), h.lastOffset()} {
			r, err := l.Read(o, 1, -1, true)
			if err != nil || !bytes.Equal(r.Data, b) {
				t.Fatalf("Read(%d) of batch %d: %v, %d bytes; want the batch", o, i, err, len(r.Data))
			}
			r.Release()
		}
	}
	var size int64
	for _, b := range batches {
		size += int64(len(b))
	}
	if l.Size() != size {
		t.Fatalf("size %d; want %d", l.Size(), size)
	}
	var segBytes int64
	for _, s := range *l.segs.Load() {
		segBytes += s.size.Load()
		if err := errors.Join(s.offIdx.checkOffsets(s.size.Load()), s.timIdx.checkTimes()); err != nil {
			t.Fatalf("segment %d: %v", s.base, err)
		}
	}
	if segBytes != size {
		t.Fatalf("segments hold %d bytes; want %d", segBytes, size)
	}
	for _, b := range visible {
		h := parseHeader(b)
		for _, q := range []int64{h.baseTimestamp, h.maxTimestamp + 1} {
			wOff, wTs, wOK := timestampBruteForce(visible, q, start)
			if off, ts, ok := l.OffsetForTimestamp(q); off != wOff || ts != wTs || ok != wOK {
				t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d, %v", q, off, ts, ok, wOff, wTs, wOK)
			}
		}
	}
	wOff, wTs, wOK := int64(0), int64(-1), false
	for _, b := range visible {
		if h := parseHeader(b); h.maxTimestamp > wTs {
			wOff, wTs, wOK = h.lastOffset(), h.maxTimestamp, true
		}
	}
	if off, ts, ok := l.MaxTimestampOffset(); off != wOff || ts != wTs || ok != wOK {
		t.Fatalf("MaxTimestampOffset = %d, %d, %v; want %d, %d, %v", off, ts, ok, wOff, wTs, wOK)
	}
	l.mu.Lock()
	epochs, producers := slices.Clone(l.epochs.entries), l.producers.entries
	l.mu.Unlock()
	if w := wantEpochs(batches); fmt.Sprint(epochs) != fmt.Sprint(w) {
		t.Fatalf("leader epochs %v; want %v", epochs, w)
	}
	if w := wantProducers(batches); !reflect.DeepEqual(producers, w) {
		t.Fatalf("producer state %+v; want %+v", producers, w)
	}
	if rp := l.RecoveryPoint(); rp > end {
		t.Fatalf("recovery point %d past the log end %d", rp, end)
	}
	if offs, err := listSnapshots(l.dir); err != nil || (len(offs) > 0 && offs[len(offs)-1] > end) {
		t.Fatalf("snapshots %v, %v; want none past the log end %d", offs, err, end)
	}
}

// timestampBruteForce finds the first record of batches (uncompressed, built by makeBatch) at
// or past minOffset whose timestamp is at least ts.
func timestampBruteForce(batches [][]byte, ts, minOffset int64) (int64, int64, bool) {
	for _, b := range batches {
		h := parseHeader(b)
		for i := range int64(h.lastOffsetDelta) + 1 {
			if h.baseTimestamp+i >= ts && h.baseOffset+i >= minOffset {
				return h.baseOffset + i, h.baseTimestamp + i, true
			}
		}
	}
	return 0, 0, false
}

// TestFollowerAppendMatchesLeader replicates a leader's log (epochs 0, 0, 2, 5, plain and
// idempotent batches, over several segments) by appending what its Reads return, a partial
// batch at the end of every chunk: the follower holds byte-identical batches with the leader's
// offsets and epochs, the same leader epochs and producer state, before and after a reopen.
func TestFollowerAppendMatchesLeader(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4 << 10
	leader := mustOpen(t, t.TempDir(), cfg, Options{LeaderEpoch: 0})
	defer leader.Close()
	seq := int32(0)
	for i, epoch := range []int32{0, 0, 2, 5} {
		if err := leader.SetLeaderEpoch(epoch); err != nil {
			t.Fatal(err)
		}
		for j := range 8 {
			spec := plain(1+j%3, 150, int64(1000*i+10*j))
			if j%2 == 0 {
				spec = idem(7, 0, seq, 3)
				spec.valueSize, spec.ts = 150, int64(1000*i+10*j)
				seq += 3
			}
			mustAppend(t, leader, makeBatch(t, spec))
		}
	}
	want := readBatches(t, leader, 0)
	dir := t.TempDir()
	l := mustOpen(t, dir, cfg, Options{LeaderEpoch: 9}) // a follower's own epoch is never stamped
	for l.LogEndOffset() < leader.LogEndOffset() {
		r, err := leader.Read(l.LogEndOffset(), 1500, -1, true)
		if err != nil {
			t.Fatal(err)
		}
		records := bytes.Clone(r.Data)
		r.Release()
		end := l.LogEndOffset()
		for p := 0; p < len(records); {
			h := parseHeader(records[p:])
			end, p = h.lastOffset()+1, p+int(h.size())
		}
		if end < leader.LogEndOffset() { // the start of the next batch after the whole ones
			next, err := leader.Read(end, 1<<20, -1, true)
			if err != nil {
				t.Fatal(err)
			}
			records = append(records, next.Data[:min(len(next.Data), 40)]...)
			next.Release()
		}
		first := parseHeader(records)
		res := mustFollow(t, l, records)
		if res.BaseOffset != first.baseOffset || res.LogAppendTime != -1 || res.LogStartOffset != 0 {
			t.Fatalf("AppendAsFollower at %d: %+v", first.baseOffset, res)
		}
	}
	if n := len(*l.segs.Load()); n < 3 {
		t.Fatalf("%d segments; want several", n)
	}
	check := func(l *Log) {
		t.Helper()
		checkHolds(t, l, want)
		for e := int32(-1); e <= 6; e++ {
			we, wend := leader.EndOffsetForEpoch(e)
			if ge, gend := l.EndOffsetForEpoch(e); ge != we || gend != wend {
				t.Errorf("EndOffsetForEpoch(%d) = %d, %d; the leader says %d, %d", e, ge, gend, we, wend)
			}
		}
		if e, ok := l.LatestEpoch(); e != 5 || !ok {
			t.Fatalf("LatestEpoch = %d, %v; want 5", e, ok)
		}
		l.mu.Lock()
		got := l.producers.entries
		l.mu.Unlock()
		leader.mu.Lock()
		defer leader.mu.Unlock()
		if !reflect.DeepEqual(got, leader.producers.entries) {
			t.Fatalf("producer state %+v; the leader has %+v", got, leader.producers.entries)
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg, Options{CleanShutdown: true})
	check(l)
	rp := l.RecoveryPoint()
	crash(l)
	l = mustOpen(t, dir, cfg, Options{RecoveryPoint: rp})
	defer l.Close()
	check(l)
	// Promoted, the follower detects the leader's duplicates.
	if err := l.SetLeaderEpoch(6); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Append(makeBatch(t, idem(7, 0, seq-3, 3))); err != nil || !res.Duplicate {
		t.Fatalf("re-sent last producer batch after promotion: %+v, %v; want a duplicate", res, err)
	}
}

// TestFollowerEpochs appends batches of epochs 0, 0, 2 and 5 as a follower: the epoch cache
// answers OffsetForLeaderEpoch as Kafka's LeaderEpochFileCache.endOffsetFor, and the
// checkpoint holds the three epochs.
func TestFollowerEpochs(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig(), Options{})
	defer l.Close()
	if _, ok := l.LatestEpoch(); ok {
		t.Fatal("LatestEpoch of an empty log is known")
	}
	for i, epoch := range []int32{0, 0, 2, 5} {
		mustFollow(t, l, stored(t, plain(3, 10, int64(i)), int64(3*i), epoch))
	}
	if e, ok := l.LatestEpoch(); e != 5 || !ok {
		t.Fatalf("LatestEpoch = %d, %v; want 5", e, ok)
	}
	for _, tt := range []struct {
		epoch, wEpoch int32
		wEnd          int64
	}{
		{-1, -1, -1}, {0, 0, 6}, {1, 0, 6}, {2, 2, 9}, {3, 2, 9}, {4, 2, 9}, {5, 5, 12}, {6, -1, -1},
	} {
		if e, end := l.EndOffsetForEpoch(tt.epoch); e != tt.wEpoch || end != tt.wEnd {
			t.Errorf("EndOffsetForEpoch(%d) = %d, %d; want %d, %d", tt.epoch, e, end, tt.wEpoch, tt.wEnd)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, leaderEpochFile)); err != nil || string(data) != "0\n3\n0 0\n2 6\n5 9\n" {
		t.Fatalf("checkpoint %q, %v", data, err)
	}
	// An epoch older than the first known one: Kafka answers it with the first one's start.
	l2 := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer l2.Close()
	mustFollow(t, l2, stored(t, plain(3, 10, 0), 100, 3))
	if e, end := l2.EndOffsetForEpoch(1); e != 1 || end != 100 {
		t.Fatalf("EndOffsetForEpoch(1) before the first epoch 3 = %d, %d; want 1, 100", e, end)
	}
}

// TestFollowerAppendRejects covers what AppendAsFollower refuses, each time leaving the log as
// it was: no whole batch, a batch below the log end, offsets that go back inside one append
// (nothing of it is written), a bad CRC, and a batch larger than segment.bytes.
func TestFollowerAppendRejects(t *testing.T) {
	cfg := testConfig()
	l := mustOpen(t, t.TempDir(), cfg, Options{})
	defer l.Close()
	first := stored(t, idem(7, 0, 0, 3), 10, 1)
	res := mustFollow(t, l, first)
	if res.BaseOffset != 10 || res.LastOffset != 12 || l.LogEndOffset() != 13 {
		t.Fatalf("first append %+v, log end %d; want 10..12, end 13", res, l.LogEndOffset())
	}
	kept := [][]byte{bytes.Clone(first)}
	next := stored(t, idem(7, 0, 3, 3), 13, 1)
	badCRC := bytes.Clone(next)
	badCRC[len(badCRC)-1] ^= 1
	tooBig := stored(t, plain(1, int(cfg.SegmentBytes), 0), 13, 1)
	tests := []struct {
		name    string
		records []byte
		wErr    error
	}{
		{"empty", nil, ErrIncompleteBatch},
		{"header only", next[:recordbatch.HeaderSize], ErrIncompleteBatch},
		{"all but the last byte", next[:len(next)-1], ErrIncompleteBatch},
		{"below the log end", stored(t, plain(2, 10, 0), 12, 1), ErrOffsetOutOfOrder},
		{"offsets go back", slices.Concat(next, stored(t, plain(1, 10, 0), 15, 1)), ErrOffsetOutOfOrder},
		{"bad crc", badCRC, ErrCorruptBatch},
		{"larger than segment.bytes", tooBig, ErrRecordListTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.AppendAsFollower(tt.records)
			if !errors.Is(err, tt.wErr) {
				t.Fatalf("AppendAsFollower = %v; want %v", err, tt.wErr)
			}
			if errors.Is(err, ErrIncompleteBatch) && tt.wErr != ErrIncompleteBatch {
				t.Fatalf("AppendAsFollower = %v; want a refusal other than an incomplete batch", err)
			}
			checkHolds(t, l, kept)
		})
	}
	// A corrupt batch after good ones fails the whole append.
	corrupt := slices.Concat(next, badCRC)
	binary.BigEndian.PutUint64(corrupt[len(next)+recordbatch.OffBaseOffset:], 16)
	if _, err := l.AppendAsFollower(corrupt); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("good batch then a bad CRC: %v; want ErrCorruptBatch", err)
	}
	checkHolds(t, l, kept)
	// Whole batches before a partial one are written; the partial one is left for later.
	partial := stored(t, plain(2, 10, 5), 16, 2)
	res = mustFollow(t, l, slices.Concat(next, partial[:len(partial)-3]))
	if res.BaseOffset != 13 || res.LastOffset != 15 {
		t.Fatalf("append with a trailing partial batch: %+v; want 13..15", res)
	}
	kept = append(kept, next)
	checkHolds(t, l, kept)
	res = mustFollow(t, l, partial)
	if res.BaseOffset != 16 || res.LastOffset != 17 {
		t.Fatalf("the partial batch, whole: %+v; want 16..17", res)
	}
	checkHolds(t, l, append(kept, partial))
}

// TestFollowerAppendFarOffsets appends a batch whose offset lies beyond 32-bit relative offsets
// from the active segment, empty or not (a compacted leader's gaps): the follower rolls a
// segment at the batch's offset instead of corrupting its indexes.
func TestFollowerAppendFarOffsets(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig(), Options{})
	batches := [][]byte{stored(t, plain(2, 10, 1), 5_000_000_000, 0)}
	mustFollow(t, l, batches[0])
	batches = append(batches, stored(t, plain(2, 10, 2), 9_000_000_000, 0))
	mustFollow(t, l, batches[1])
	var bases []int64
	for _, s := range *l.segs.Load() {
		bases = append(bases, s.base)
	}
	if !slices.Equal(bases, []int64{0, 5_000_000_000, 9_000_000_000}) {
		t.Fatalf("segment bases %v; want 0, 5e9, 9e9", bases)
	}
	checkHolds(t, l, batches)
	if r, err := l.Read(7, 1<<20, -1, true); err != nil || !bytes.Equal(r.Data, batches[0]) {
		t.Fatalf("Read(7) in the gap: %v, %d bytes; want the batch at 5e9", err, len(r.Data))
	} else {
		r.Release()
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, testConfig(), Options{})
	defer l.Close()
	checkHolds(t, l, batches)
}

// followerFixture fills a follower with 30 batches of 3 records (batch i at offsets 3i..3i+2,
// timestamps 1000+10i), alternately of idempotent producer 7 and plain, in epochs 1, 3 and 4,
// over about six segments.
func followerFixture(t *testing.T, dir string, cfg Config) (*Log, [][]byte) {
	t.Helper()
	l := mustOpen(t, dir, cfg, Options{})
	var batches [][]byte
	for i := range 30 {
		spec := plain(3, 200, int64(1000+10*i))
		if i%2 == 0 {
			spec = idem(7, 0, int32(3*(i/2)), 3)
			spec.valueSize, spec.ts = 200, int64(1000+10*i)
		}
		b := stored(t, spec, int64(3*i), []int32{1, 3, 4}[i/10])
		mustFollow(t, l, b)
		batches = append(batches, b)
	}
	if n := len(*l.segs.Load()); n < 5 {
		t.Fatalf("fixture has %d segments; want at least 5", n)
	}
	return l, batches
}

// TestTruncateTo truncates a follower inside a batch, at a batch boundary, at a segment
// boundary, inside the active segment, at and below the log start and at and past the log
// end; with and without a read holding the cut segment (truncation in place or by copy). The
// log must hold exactly the batches ending before the cut; the leader's continuation is
// appended; and after a clean or an unclean reopen the batches, indexes, epochs and producer
// state are still right: the idempotent producer's last kept batch is a duplicate, its first
// removed one is not.
func TestTruncateTo(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4 << 10
	tests := []struct {
		name     string
		offset   func(l *Log) int64
		logStart int64 // DeleteRecordsBefore first, when > 0
		wEnd     int64
	}{
		{"inside a batch", func(*Log) int64 { return 40 }, 0, 39},
		{"at a batch boundary", func(*Log) int64 { return 45 }, 0, 45},
		{"at a segment boundary", func(l *Log) int64 { return (*l.segs.Load())[2].base }, 0, -1},
		{"inside the active segment", func(*Log) int64 { return 86 }, 0, 84},
		{"first offset", func(*Log) int64 { return 1 }, 0, 0},
		{"at the log start", func(*Log) int64 { return 16 }, 16, 16},
		{"below the log start", func(*Log) int64 { return 7 }, 16, 16},
		{"inside the batch holding the log start", func(*Log) int64 { return 17 }, 16, 16},
		{"just past the batch holding the log start", func(*Log) int64 { return 18 }, 16, 18},
		{"at the log end", func(*Log) int64 { return 90 }, 0, 90},
		{"past the log end", func(*Log) int64 { return 1000 }, 0, 90},
	}
	for _, tt := range tests {
		for _, hold := range []bool{false, true} {
			for _, clean := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/hold=%v/clean=%v", tt.name, hold, clean), func(t *testing.T) {
					t.Parallel()
					testTruncateTo(t, cfg, tt.offset, tt.logStart, tt.wEnd, hold, clean)
				})
			}
		}
	}
}

func testTruncateTo(t *testing.T, cfg Config, offsetOf func(*Log) int64, logStart, wEnd int64, hold, clean bool) {
	dir := t.TempDir()
	l, batches := followerFixture(t, dir, cfg)
	if logStart > 0 {
		if _, err := l.DeleteRecordsBefore(logStart); err != nil {
			t.Fatal(err)
		}
	}
	offset := offsetOf(l)
	if wEnd < 0 {
		wEnd = offset
	}
	var kept, removed [][]byte
	for _, b := range batches {
		if h := parseHeader(b); h.lastOffset() < offset {
			kept = append(kept, b)
		} else {
			removed = append(removed, b)
		}
	}
	if n := len(kept); n > 0 && offset < l.LogEndOffset() {
		if h := parseHeader(kept[n-1]); h.lastOffset() < logStart {
			kept = nil // nothing visible would be left: the log starts over at its log start
		}
	}
	var held ReadResult
	var heldCopy []byte
	if hold {
		var err error
		at := min(max(offset, l.LogStartOffset()), l.LogEndOffset()-1)
		if held, err = l.Read(at, 1<<20, -1, true); err != nil || len(held.Data) == 0 {
			t.Fatalf("Read(%d): %v, %d bytes", at, err, len(held.Data))
		}
		heldCopy = bytes.Clone(held.Data)
	}
	if err := l.TruncateTo(offset); err != nil {
		t.Fatalf("TruncateTo(%d): %v", offset, err)
	}
	if l.LogEndOffset() != wEnd || l.LogStartOffset() != max(logStart, 0) {
		t.Fatalf("after TruncateTo(%d): log start %d end %d; want %d, %d", offset, l.LogStartOffset(), l.LogEndOffset(), logStart, wEnd)
	}
	checkHolds(t, l, kept)
	// The leader's continuation, in a new epoch, with another producer.
	want := slices.Clone(kept)
	next := l.LogEndOffset()
	for i := range 12 {
		spec := plain(2, 300, int64(5000+10*i))
		if i%3 == 0 {
			spec = idem(8, 0, int32(2*(i/3)), 2)
			spec.valueSize, spec.ts = 300, int64(5000+10*i)
		}
		b := stored(t, spec, next, 6)
		mustFollow(t, l, b)
		want = append(want, b)
		next += 2
	}
	checkHolds(t, l, want)
	if hold {
		if !bytes.Equal(held.Data, heldCopy) {
			t.Fatal("a held read changed across the truncation")
		}
		held.Release()
	}
	if clean {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = mustOpen(t, dir, cfg, Options{CleanShutdown: true, LogStartOffset: logStart})
	} else {
		rp := l.RecoveryPoint()
		crash(l)
		l = mustOpen(t, dir, cfg, Options{RecoveryPoint: rp, LogStartOffset: logStart})
	}
	defer l.Close()
	if l.Recovery().Truncated {
		t.Fatalf("reopen truncated the log: %+v", l.Recovery())
	}
	checkHolds(t, l, want)
	data, err := os.ReadFile(filepath.Join(dir, leaderEpochFile))
	if parsed, perr := parseEpochCheckpoint(data); err != nil || perr != nil || fmt.Sprint(parsed.entries) != fmt.Sprint(wantEpochs(want)) {
		t.Fatalf("epoch checkpoint %q (%v, %v); want %v", data, err, perr, wantEpochs(want))
	}
	testutil.WaitFor(t, 5*time.Second, testutil.Holds("the deleted segments' files removed", func() bool {
		_, deleted := segmentFiles(t, dir)
		return len(deleted) == 0
	}))
	var lastKept, firstRemoved []byte
	for _, b := range kept {
		if parseHeader(b).producerID == 7 {
			lastKept = b
		}
	}
	for _, b := range removed {
		if parseHeader(b).producerID == 7 {
			firstRemoved = b
			break
		}
	}
	if lastKept != nil {
		h := parseHeader(lastKept)
		if res, err := l.Append(bytes.Clone(lastKept)); err != nil || !res.Duplicate || res.BaseOffset != h.baseOffset {
			t.Fatalf("re-sent kept batch at %d: %+v, %v; want a duplicate", h.baseOffset, res, err)
		}
	}
	if firstRemoved != nil {
		if res, err := l.Append(bytes.Clone(firstRemoved)); err != nil || res.Duplicate || res.BaseOffset != next {
			t.Fatalf("re-sent removed batch: %+v, %v; want it appended at %d", res, err, next)
		}
	}
}

// TestTruncateDropsEpochAtLogEnd: a replica that led an epoch without writing to it has that
// epoch at its log end; a truncation to the log end drops it, as Kafka does, so that the
// follower stops reporting it as its last fetched epoch.
func TestTruncateDropsEpochAtLogEnd(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer l.Close()
	mustFollow(t, l, stored(t, plain(3, 10, 0), 0, 2))
	if err := l.SetLeaderEpoch(5); err != nil {
		t.Fatal(err)
	}
	if e, ok := l.LatestEpoch(); e != 5 || !ok {
		t.Fatalf("LatestEpoch = %d, %v; want 5", e, ok)
	}
	if err := l.TruncateTo(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if e, ok := l.LatestEpoch(); e != 2 || !ok {
		t.Fatalf("LatestEpoch after TruncateTo(log end) = %d, %v; want 2", e, ok)
	}
	if e, end := l.EndOffsetForEpoch(2); e != 2 || end != 3 {
		t.Fatalf("EndOffsetForEpoch(2) = %d, %d; want 2, 3", e, end)
	}
}

// TestTruncateFullyAndStartAt starts a follower over past its log end (behind the leader's log
// start) and before it; then it replicates from there and reopens.
func TestTruncateFullyAndStartAt(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4 << 10
	for _, start := range []int64{1000, 20, 0} { // 0: the name of the first old segment
		for _, clean := range []bool{true, false} {
			t.Run(fmt.Sprintf("start=%d/clean=%v", start, clean), func(t *testing.T) {
				dir := t.TempDir()
				l, batches := followerFixture(t, dir, cfg)
				r, err := l.Read(0, 1<<20, -1, true)
				if err != nil {
					t.Fatal(err)
				}
				if err := l.TruncateFullyAndStartAt(start); err != nil {
					t.Fatal(err)
				}
				if l.LogStartOffset() != start || l.LogEndOffset() != start || l.Size() != 0 {
					t.Fatalf("start %d end %d size %d; want %d, %d, 0", l.LogStartOffset(), l.LogEndOffset(), l.Size(), start, start)
				}
				if _, ok := l.LatestEpoch(); ok {
					t.Fatal("epochs left after TruncateFullyAndStartAt")
				}
				if offs, err := listSnapshots(dir); err != nil || len(offs) != 0 {
					t.Fatalf("snapshots %v, %v; want none", offs, err)
				}
				if _, err := l.Read(start-1, 100, -1, true); !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("Read below the new start: %v; want ErrOffsetOutOfRange", err)
				}
				if !bytes.Equal(r.Data[:len(batches[0])], batches[0]) {
					t.Fatal("a held read changed")
				}
				r.Release()
				checkHolds(t, l, nil)
				var want [][]byte
				for i := range 10 {
					spec := idem(7, 1, int32(3*i), 3)
					spec.valueSize, spec.ts = 200, int64(7000+10*i)
					b := stored(t, spec, start+int64(3*i), 8)
					mustFollow(t, l, b)
					want = append(want, b)
				}
				checkHolds(t, l, want)
				if clean {
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					l = mustOpen(t, dir, cfg, Options{CleanShutdown: true})
				} else {
					rp := l.RecoveryPoint()
					crash(l)
					l = mustOpen(t, dir, cfg, Options{RecoveryPoint: rp})
				}
				defer l.Close()
				if l.LogStartOffset() != start {
					t.Fatalf("reopened log start %d; want %d", l.LogStartOffset(), start)
				}
				checkHolds(t, l, want)
			})
		}
	}
}

// TestFollowerRestartsAtStraddlingBatch: a follower started over at the leader's log start,
// which lies inside a batch, receives that batch; it starts over at the batch's base offset, as
// Kafka's follower does. A batch wholly below the log end is refused.
func TestFollowerRestartsAtStraddlingBatch(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer l.Close()
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsFollower(stored(t, plain(5, 10, 0), 90, 1)); !errors.Is(err, ErrOffsetOutOfOrder) {
		t.Fatalf("batch 90..94 at log start 100: %v; want ErrOffsetOutOfOrder", err)
	}
	b := stored(t, plain(10, 10, 0), 95, 1)
	if res := mustFollow(t, l, b); res.BaseOffset != 95 || res.LastOffset != 104 {
		t.Fatalf("batch 95..104 at log start 100: %+v", res)
	}
	if l.LogStartOffset() != 95 {
		t.Fatalf("log start %d; want 95", l.LogStartOffset())
	}
	checkHolds(t, l, [][]byte{b})
}

// TestTruncateFailsSyncWaiters: group-commit waiters for truncated offsets are answered with
// ErrTruncated, others keep waiting, and a flush bound taken before the truncation does not
// move the recovery point past the new end.
func TestTruncateFailsSyncWaiters(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer l.Close()
	for i := range 10 {
		mustFollow(t, l, stored(t, plain(3, 10, int64(i)), int64(3*i), 0))
	}
	got := make(chan error, 2)
	l.gc.mu.Lock()
	l.gc.running = true // no flusher: the waiters stay queued
	l.gc.waiters = append(l.gc.waiters,
		syncWaiter{upto: 30, done: func(err error) { got <- err }},
		syncWaiter{upto: 12, done: func(err error) { got <- err }})
	l.gc.mu.Unlock()
	if err := l.TruncateTo(16); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrTruncated) {
		t.Fatalf("waiter for 30 after TruncateTo(16): %v; want ErrTruncated", err)
	}
	l.gc.mu.Lock()
	left := len(l.gc.waiters)
	l.gc.waiters, l.gc.running = nil, false
	l.gc.mu.Unlock()
	if left != 1 || len(got) != 0 {
		t.Fatalf("%d waiters left, %d answered; want the one for 12 left", left, len(got))
	}
	if err := l.flushUpTo(30); err != nil || l.RecoveryPoint() != 15 {
		t.Fatalf("flushUpTo(30) after TruncateTo(16): %v, recovery point %d; want 15", err, l.RecoveryPoint())
	}
}

// TestTruncateCopyFailureLeavesLogUnchanged: when the copy of a held segment's kept prefix
// cannot be written, TruncateTo fails before any file changed and the log is as it was.
func TestTruncateCopyFailureLeavesLogUnchanged(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4 << 10
	dir := t.TempDir()
	l, batches := followerFixture(t, dir, cfg)
	defer l.Close()
	r, err := l.Read(40, 1<<20, -1, true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	s := l.active
	for _, seg := range *l.segs.Load() {
		if seg.base <= 40 {
			s = seg
		}
	}
	if err := os.Mkdir(s.timIdx.path+".tmp", 0o755); err != nil { // the copy cannot be created
		t.Fatal(err)
	}
	if err := l.TruncateTo(40); err == nil {
		t.Fatal("TruncateTo succeeded without its temporary file")
	}
	checkHolds(t, l, batches)
	if _, err := os.Stat(s.path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary copy of the log left behind: %v", err)
	}
	if err := os.Remove(s.timIdx.path + ".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(40); err != nil {
		t.Fatal(err)
	}
	checkHolds(t, l, batches[:13])
}

// TestTruncateAbandonsOnFailure: a truncation that fails after changing files closes the log
// as a crash would; Close reports it, and Open recovers a log that holds the kept batches or
// the whole old tail, never a mix.
func TestTruncateAbandonsOnFailure(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4 << 10
	dir := t.TempDir()
	l, batches := followerFixture(t, dir, cfg)
	rp := l.RecoveryPoint()
	s := l.active
	// The time index becomes a directory: truncating it in place fails.
	if err := os.Remove(s.timIdx.path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.timIdx.path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(86); err == nil {
		t.Fatal("TruncateTo succeeded without its time index")
	}
	if _, err := l.Read(0, 100, -1, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after an abandoned truncation: %v; want ErrClosed", err)
	}
	if _, err := l.AppendAsFollower(stored(t, plain(1, 1, 0), 90, 5)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after an abandoned truncation: %v; want ErrClosed", err)
	}
	if err := l.Close(); err == nil {
		t.Fatal("Close of an abandoned log reported no error")
	}
	if err := os.Remove(s.timIdx.path); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg, Options{RecoveryPoint: rp})
	defer l.Close()
	checkHolds(t, l, batches[:28]) // the log file was cut at 84 before the failure
}

// TestTruncateWithConcurrentReads truncates, starts over and appends while readers read: every
// read returns whole batches with valid CRCs whose bytes stay the same until released.
func TestTruncateWithConcurrentReads(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4 << 10
	l := mustOpen(t, t.TempDir(), cfg, Options{})
	defer l.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	errs := make(chan error, 4)
	for g := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for !stop.Load() {
				start, end := l.LogStartOffset(), l.LogEndOffset()
				if end <= start {
					runtime.Gosched()
					continue
				}
				r, err := l.Read(start+rng.Int64N(end-start), 1+rng.IntN(8<<10), -1, rng.IntN(2) == 0)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				snapshot := bytes.Clone(r.Data)
				for p := 0; p < len(r.Data) && len(r.Data)-p >= recordbatch.HeaderSize; {
					h, err := checkBatch(r.Data[p:], true)
					if err != nil {
						break // a prefix of an oversized batch
					}
					p += int(h.size())
				}
				runtime.Gosched()
				if !bytes.Equal(r.Data, snapshot) {
					errs <- errors.New("read bytes changed before Release")
				}
				r.Release()
				reads.Add(1)
			}
		})
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 60 {
		for range 1 + rng.IntN(8) {
			next := l.LogEndOffset()
			mustFollow(t, l, stored(t, plain(1+rng.IntN(4), 100+rng.IntN(600), int64(round)), next, int32(round)))
		}
		start, end := l.LogStartOffset(), l.LogEndOffset()
		switch {
		case round%15 == 14:
			if err := l.TruncateFullyAndStartAt(end + int64(rng.IntN(10))); err != nil {
				t.Fatal(err)
			}
		case end > start:
			if err := l.TruncateTo(start + rng.Int64N(end-start)); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if reads.Load() == 0 {
		t.Fatal("no read completed")
	}
	for _, s := range *l.segs.Load() {
		if err := errors.Join(s.offIdx.checkOffsets(s.size.Load()), s.timIdx.checkTimes()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTruncateKeepsTimestamps cuts a segment whose batches have timestamps out of order, so
// that its largest timestamp lies before the last kept time index entry or after it: the
// segment's largest timestamp and timestamp lookups must match the kept batches, before and
// after a reopen that rebuilds them.
func TestTruncateKeepsTimestamps(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.MaxIndexBytes = 64 << 10
	cfg.IndexIntervalBytes = 150
	rng := rand.New(rand.NewPCG(3, 4))
	var batches [][]byte
	for i := range 60 {
		batches = append(batches, stored(t, plain(1+i%3, 40, 1000+rng.Int64N(5000)), 0, 0))
	}
	for p, o := 0, int64(0); p < len(batches); p++ { // offsets
		binary.BigEndian.PutUint64(batches[p][recordbatch.OffBaseOffset:], uint64(o))
		h := parseHeader(batches[p])
		o = h.lastOffset() + 1
	}
	for _, cut := range []int{1, 7, 20, 33, 59} {
		t.Run(fmt.Sprintf("cut=%d", cut), func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, cfg, Options{})
			for _, b := range batches {
				mustFollow(t, l, bytes.Clone(b))
			}
			h := parseHeader(batches[cut])
			if err := l.TruncateTo(h.lastOffset()); err != nil {
				t.Fatal(err)
			}
			check := func(l *Log) {
				t.Helper()
				checkHolds(t, l, batches[:cut])
				for ts := int64(900); ts < 6100; ts += 37 {
					wOff, wTs, wOK := timestampBruteForce(batches[:cut], ts, 0)
					if off, gts, ok := l.OffsetForTimestamp(ts); off != wOff || gts != wTs || ok != wOK {
						t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d, %v", ts, off, gts, ok, wOff, wTs, wOK)
					}
				}
			}
			check(l)
			crash(l)
			l = mustOpen(t, dir, cfg, Options{})
			defer l.Close()
			check(l)
		})
	}
}
