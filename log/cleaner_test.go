package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/codec"
	"ringbroker/internal/recordbatch"
	"ringbroker/internal/testutil"
)

// kv is one record for keyedBatch: a null key when noKey, a null value (tombstone) when tomb.
type kv struct {
	key, value string
	noKey      bool
	tomb       bool
}

func put(k, v string) kv { return kv{key: k, value: v} }
func del(k string) kv    { return kv{key: k, tomb: true} }

// batchOpts are the header fields of keyedBatch.
type batchOpts struct {
	codec      codec.Codec
	ts         int64 // first record's timestamp; record i has ts+i
	producerID int64
	epoch      int16
	seq        int32
}

func plainOpts(id codec.Codec, ts int64) batchOpts {
	return batchOpts{codec: id, ts: ts, producerID: -1, epoch: -1, seq: -1}
}

// keyedBatch encodes a record batch v2 of recs, really compressed with o.codec, with a valid
// CRC32C.
func keyedBatch(tb testing.TB, o batchOpts, recs ...kv) []byte {
	tb.Helper()
	krecs := make([]kmsg.Record, len(recs))
	for i, r := range recs {
		krecs[i].TimestampDelta64 = int64(i)
		if !r.noKey {
			krecs[i].Key = []byte(r.key)
		}
		if !r.tomb {
			krecs[i].Value = []byte(r.value)
		}
	}
	rb := testutil.NewBatch(o.ts, krecs...)
	payload, err := codec.New().Compress(o.codec, rb.Records, nil)
	if err != nil {
		tb.Fatal(err)
	}
	rb.Records, rb.Attributes = payload, int16(o.codec)
	rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = o.producerID, o.epoch, o.seq
	return testutil.SealBatch(rb)
}

// gotRecord is a record read back, decoded independently of the cleaner with kmsg.
type gotRecord struct {
	offset    int64
	timestamp int64
	key       string
	value     *string
}

func (g gotRecord) String() string {
	v := "<nil>"
	if g.value != nil {
		v = *g.value
	}
	return fmt.Sprintf("%d:%s=%s", g.offset, g.key, v)
}

// readRecords reads the whole log and decodes every record; it also returns the batch headers.
func readRecords(tb testing.TB, l *Log) ([]gotRecord, []kmsg.RecordBatch) {
	tb.Helper()
	c := codec.New()
	var out []gotRecord
	var hdrs []kmsg.RecordBatch
	for _, b := range readBatches(tb, l, l.LogStartOffset()) {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			tb.Fatalf("decode batch: %v", err)
		}
		hdrs = append(hdrs, rb)
		payload, err := c.Decompress(codec.Codec(rb.Attributes&7), rb.Records, nil, 1<<30)
		if err != nil {
			tb.Fatalf("decompress batch at %d: %v", rb.FirstOffset, err)
		}
		for range rb.NumRecords {
			var r kmsg.Record
			if err := r.ReadFrom(payload); err != nil {
				tb.Fatalf("decode record in batch at %d: %v", rb.FirstOffset, err)
			}
			_, n := binary.Varint(payload)
			payload = payload[n+int(r.Length):]
			g := gotRecord{offset: rb.FirstOffset + int64(r.OffsetDelta), timestamp: rb.FirstTimestamp + r.TimestampDelta64, key: string(r.Key)}
			if r.Value != nil {
				v := string(r.Value)
				g.value = &v
			}
			out = append(out, g)
		}
		if len(payload) != 0 {
			tb.Fatalf("batch at %d: %d bytes after the records", rb.FirstOffset, len(payload))
		}
	}
	return out, hdrs
}

// cleanerFixture is a log with a compaction cleaner and a settable clock.
type cleanerFixture struct {
	dir string
	l   *Log
	c   *Cleaner
	mu  sync.Mutex
	now time.Time
}

func (f *cleanerFixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *cleanerFixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func newCleanerFixture(tb testing.TB, cfg Config, cc CompactionConfig) *cleanerFixture {
	tb.Helper()
	f := &cleanerFixture{dir: filepath.Join(tb.TempDir(), "t-0"), now: time.UnixMilli(1_700_000_000_000)}
	f.l = mustOpen(tb, f.dir, cfg, Options{Topic: "t", Now: f.clock})
	f.c = NewCleaner(CleanerConfig{Now: f.clock, Logger: testLogger(tb), Backoff: 20 * time.Millisecond})
	f.c.Add(f.l, cc)
	tb.Cleanup(func() {
		f.c.Stop()
		f.c.Remove(f.l)
		if err := f.l.Close(); err != nil {
			tb.Error(err)
		}
	})
	return f
}

func (f *cleanerFixture) roll(tb testing.TB) {
	tb.Helper()
	f.l.mu.Lock()
	defer f.l.mu.Unlock()
	if f.l.active.size.Load() == 0 {
		return
	}
	if err := f.l.roll("test", f.l.leo.Load()); err != nil {
		tb.Fatal(err)
	}
}

func (f *cleanerFixture) clean(tb testing.TB) CleanStats {
	tb.Helper()
	st, err := f.c.Clean(f.l)
	if err != nil {
		tb.Fatalf("Clean: %v", err)
	}
	return st
}

var allCodecs = []codec.Codec{codec.None, codec.Gzip, codec.Snappy, codec.LZ4, codec.Zstd}

// TestCleanerKeepsLatestPerKey overwrites keys over several segments with every codec; after
// cleaning exactly the latest record of each key remains, at its original offset, in batches
// with the original codec and valid CRCs, and every original offset still reads.
func TestCleanerKeepsLatestPerKey(t *testing.T) {
	for _, id := range allCodecs {
		t.Run(id.String(), func(t *testing.T) {
			cfg := testConfig()
			f := newCleanerFixture(t, cfg, DefaultCompactionConfig())
			want := map[string]gotRecord{}
			var offsets []int64
			for round := range 12 {
				var recs []kv
				for k := range 6 {
					key := fmt.Sprintf("key-%d", (round+k)%9)
					recs = append(recs, put(key, fmt.Sprintf("%s-round-%d-%s", key, round, strings.Repeat("x", 40))))
				}
				res := mustAppend(t, f.l, keyedBatch(t, plainOpts(id, int64(1000+round*10)), recs...))
				for i, r := range recs {
					v := r.value
					want[r.key] = gotRecord{offset: res.BaseOffset + int64(i), key: r.key, value: &v}
					offsets = append(offsets, res.BaseOffset+int64(i))
				}
				if round%3 == 2 {
					f.roll(t)
				}
			}
			f.roll(t)
			leo, segsBefore := f.l.LogEndOffset(), len(*f.l.segs.Load())
			if segsBefore < 4 {
				t.Fatalf("fixture has %d segments; want at least 4", segsBefore)
			}
			st := f.clean(t)
			if st.Segments == 0 || st.RecordsKept != int64(len(want)) {
				t.Fatalf("stats %+v; want segments replaced and %d records kept", st, len(want))
			}
			got, hdrs := readRecords(t, f.l)
			if len(got) != len(want) {
				t.Fatalf("after cleaning %d records %v; want %d", len(got), got, len(want))
			}
			for _, g := range got {
				w := want[g.key]
				if g.offset != w.offset || g.value == nil || *g.value != *w.value {
					t.Errorf("key %s: got %v; want %v", g.key, g, w)
				}
			}
			for _, h := range hdrs {
				if codec.Codec(h.Attributes&7) != id {
					t.Errorf("batch at %d has codec %d; want %s", h.FirstOffset, h.Attributes&7, id)
				}
			}
			if f.l.LogEndOffset() != leo || f.l.LogStartOffset() != 0 {
				t.Fatalf("offsets moved: start %d end %d; want 0 and %d", f.l.LogStartOffset(), f.l.LogEndOffset(), leo)
			}
			if n := len(*f.l.segs.Load()); n >= segsBefore {
				t.Fatalf("%d segments after cleaning; want fewer than %d", n, segsBefore)
			}
			for _, off := range offsets {
				r, err := f.l.Read(off, 1<<20, -1, true)
				if err != nil || len(r.Data) == 0 {
					t.Fatalf("Read(%d) after cleaning: %d bytes, err %v", off, len(r.Data), err)
				}
				if h := parseHeader(r.Data); h.lastOffset() < off {
					t.Fatalf("Read(%d) returned a batch ending at %d", off, h.lastOffset())
				}
				r.Release()
			}
			// A second cleaning finds nothing dirty and rewrites nothing.
			if st := f.clean(t); st.Segments != 0 {
				t.Fatalf("second cleaning replaced %d segments; want 0", st.Segments)
			}
			// The cleaned log reopens intact (clean shutdown, then crash recovery).
			if err := f.l.Close(); err != nil {
				t.Fatal(err)
			}
			waitNoDeleted(t, f.dir)
			for _, clean := range []bool{true, false} {
				l := mustOpen(t, f.dir, cfg, Options{CleanShutdown: clean})
				again, _ := readRecords(t, l)
				if !slices.EqualFunc(again, got, func(a, b gotRecord) bool { return a.String() == b.String() }) {
					t.Fatalf("reopened (clean=%v): %v; want %v", clean, again, got)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			f.c.Remove(f.l)
		})
	}
}

// TestCleanerTombstones keeps a tombstone with a KIP-534 delete horizon at the first cleaning
// and removes it at the first cleaning after delete.retention.ms; the value it deletes goes at
// once, keyless records are dropped, and record timestamps survive the rebasing.
func TestCleanerTombstones(t *testing.T) {
	for _, id := range []codec.Codec{codec.None, codec.Zstd} {
		t.Run(id.String(), func(t *testing.T) {
			cc := DefaultCompactionConfig()
			cc.DeleteRetention = time.Hour
			f := newCleanerFixture(t, testConfig(), cc)
			mustAppend(t, f.l, keyedBatch(t, plainOpts(id, 5000), put("a", "1"), put("b", "1"), kv{noKey: true, value: "keyless"}))
			mustAppend(t, f.l, keyedBatch(t, plainOpts(id, 6000), del("a"), put("c", "1")))
			f.roll(t)
			mustAppend(t, f.l, keyedBatch(t, plainOpts(id, 7000), put("d", "active")))

			f.clean(t)
			got, hdrs := readRecords(t, f.l)
			if s := fmt.Sprint(got); s != "[1:b=1 3:a=<nil> 4:c=1 5:d=active]" {
				t.Fatalf("after first cleaning: %s", s)
			}
			if got[1].timestamp != 6000 || got[2].timestamp != 6001 {
				t.Fatalf("timestamps after rebasing: %d, %d; want 6000, 6001", got[1].timestamp, got[2].timestamp)
			}
			horizon := f.clock().Add(time.Hour).UnixMilli()
			if h := hdrs[1]; h.Attributes&recordbatch.AttrDeleteHorizon == 0 || h.FirstTimestamp != horizon || h.MaxTimestamp != 6001 {
				t.Fatalf("tombstone batch attributes %#x first timestamp %d max %d; want delete horizon %d, max 6001",
					h.Attributes, h.FirstTimestamp, h.MaxTimestamp, horizon)
			}
			if h := hdrs[0]; h.Attributes&recordbatch.AttrDeleteHorizon != 0 {
				t.Fatalf("batch without tombstones got a delete horizon")
			}

			// Before the horizon a cleaning keeps the tombstone; the log is not due.
			f.advance(30 * time.Minute)
			if f.c.pick() != nil {
				t.Fatal("log picked for cleaning before the delete horizon")
			}
			f.clean(t)
			if got, _ := readRecords(t, f.l); len(got) != 4 {
				t.Fatalf("tombstone removed before the horizon: %v", got)
			}
			f.advance(31 * time.Minute)
			if f.c.pick() != f.l {
				t.Fatal("log not due for cleaning after the delete horizon")
			}
			f.clean(t)
			got, _ = readRecords(t, f.l)
			if s := fmt.Sprint(got); s != "[1:b=1 4:c=1 5:d=active]" {
				t.Fatalf("after the horizon: %s", s)
			}
		})
	}
}

// TestCleanerKeepsProducerState drops every record of an idempotent producer's last batch,
// which stays as an empty batch with its offsets and sequences, so after a restart the
// producer continues its sequence and a retry of that batch is still a duplicate.
func TestCleanerKeepsProducerState(t *testing.T) {
	f := newCleanerFixture(t, testConfig(), DefaultCompactionConfig())
	idemOpts := func(seq int32) batchOpts {
		return batchOpts{codec: codec.LZ4, ts: 100, producerID: 42, epoch: 3, seq: seq}
	}
	mustAppend(t, f.l, keyedBatch(t, idemOpts(0), put("x", "1"), put("y", "1")))
	last := keyedBatch(t, idemOpts(2), put("x", "2"), put("y", "2"))
	mustAppend(t, f.l, bytes.Clone(last))
	mustAppend(t, f.l, keyedBatch(t, plainOpts(codec.None, 200), put("x", "3"), put("y", "3")))
	f.roll(t)
	f.clean(t)
	got, hdrs := readRecords(t, f.l)
	if s := fmt.Sprint(got); s != "[4:x=3 5:y=3]" {
		t.Fatalf("records after cleaning: %s", s)
	}
	if len(hdrs) != 2 {
		t.Fatalf("%d batches after cleaning; want the producer's empty last batch and the plain one", len(hdrs))
	}
	if h := hdrs[0]; h.NumRecords != 0 || h.FirstOffset != 2 || h.LastOffsetDelta != 1 || h.ProducerID != 42 ||
		h.ProducerEpoch != 3 || h.FirstSequence != 2 || h.Attributes&7 != 0 {
		t.Fatalf("empty batch %+v; want offsets 2..3, producer 42 epoch 3 sequence 2, uncompressed", h)
	}
	f.c.Remove(f.l)
	if err := f.l.Close(); err != nil {
		t.Fatal(err)
	}
	waitNoDeleted(t, f.dir)
	f.l = mustOpen(t, f.dir, testConfig(), Options{Topic: "t", Now: f.clock})
	if res := mustAppend(t, f.l, bytes.Clone(last)); !res.Duplicate || res.BaseOffset != 2 {
		t.Fatalf("retry of the cleaned batch: %+v; want a duplicate at offset 2", res)
	}
	if _, err := f.l.Append(keyedBatch(t, idemOpts(4), put("z", "1"))); err != nil {
		t.Fatalf("next sequence after cleaning and restart: %v", err)
	}
	if _, err := f.l.Append(keyedBatch(t, idemOpts(9), put("z", "2"))); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap in sequence: err = %v; want ErrOutOfOrderSequence", err)
	}
}

// TestCleanerReadersKeepOldSegments holds a read of a segment across its replacement: the
// bytes stay valid and unchanged until released.
func TestCleanerReadersKeepOldSegments(t *testing.T) {
	f := newCleanerFixture(t, testConfig(), DefaultCompactionConfig())
	for i := range 10 {
		mustAppend(t, f.l, keyedBatch(t, plainOpts(codec.Gzip, 1), put("k", fmt.Sprint(i))))
	}
	f.roll(t)
	r, err := f.l.Read(0, 1<<20, -1, true)
	if err != nil {
		t.Fatal(err)
	}
	before := bytes.Clone(r.Data)
	if st := f.clean(t); st.Segments != 1 {
		t.Fatalf("cleaning replaced %d segments; want 1", st.Segments)
	}
	if !bytes.Equal(r.Data, before) {
		t.Fatal("a held read changed under cleaning")
	}
	r.Release()
	if got, _ := readRecords(t, f.l); fmt.Sprint(got) != "[9:k=9]" {
		t.Fatalf("after cleaning: %v", got)
	}
	waitNoDeleted(t, f.dir)
}

// waitNoDeleted waits until the *.deleted files of released segments are gone: they are
// removed asynchronously after the last release.
func waitNoDeleted(tb testing.TB, dir string) {
	tb.Helper()
	testutil.WaitFor(tb, 5*time.Second, testutil.Holds("deleted segment files removed after release", func() bool {
		ents, _ := filepath.Glob(filepath.Join(dir, "*"+deletedSuffix))
		return len(ents) == 0
	}))
}

// TestCleanerCompactionLag leaves segments newer than min.compaction.lag.ms alone.
func TestCleanerCompactionLag(t *testing.T) {
	cc := DefaultCompactionConfig()
	cc.MinCompactionLag = time.Hour
	f := newCleanerFixture(t, testConfig(), cc)
	now := f.clock().UnixMilli()
	mustAppend(t, f.l, keyedBatch(t, plainOpts(codec.None, now-2*time.Hour.Milliseconds()), put("k", "old1"), put("k", "old2")))
	f.roll(t)
	mustAppend(t, f.l, keyedBatch(t, plainOpts(codec.None, now), put("k", "new")))
	f.roll(t)
	f.clean(t)
	if got, _ := readRecords(t, f.l); fmt.Sprint(got) != "[1:k=old2 2:k=new]" {
		t.Fatalf("after cleaning with a lag: %v", got)
	}
}

// TestCleanerLoop runs the background cleaner: it cleans a log once its dirty ratio passes
// min.cleanable.dirty.ratio, records the first dirty offset in the checkpoint, and a new
// cleaner reading that checkpoint finds nothing to do.
func TestCleanerLoop(t *testing.T) {
	f := newCleanerFixture(t, testConfig(), DefaultCompactionConfig())
	for i := range 50 {
		mustAppend(t, f.l, keyedBatch(t, plainOpts(codec.Snappy, int64(i)), put(fmt.Sprint(i%5), strings.Repeat("v", 100))))
	}
	f.roll(t)
	f.c.Start()
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("the background cleaner to compact", func() bool {
		got, _ := readRecords(t, f.l)
		return len(got) == 5
	}))
	ck := filepath.Join(filepath.Dir(f.dir), CleanerOffsetCheckpointFile)
	var offsets map[TopicPartition]int64
	testutil.WaitFor(t, 5*time.Second, testutil.Holds("the cleaner checkpoint", func() bool {
		var err error
		offsets, err = ReadOffsetCheckpoint(ck)
		return err == nil && offsets[TopicPartition{"t", 0}] == 50
	}))
	c2 := NewCleaner(CleanerConfig{Now: f.clock, Logger: testLogger(t)})
	c2.Add(f.l, DefaultCompactionConfig())
	defer c2.Remove(f.l)
	if c2.pick() != nil {
		t.Fatal("a cleaner reading the checkpoint found the log dirty")
	}
}

// TestCleanerSwapRecovery interrupts the swap of a cleaned segment at each step and reopens
// the log: before the .swap commit point the old segments are intact, after it the cleaned
// ones, and no temporary file is left. An aborted transaction recorded in a later segment of
// the group stays listed throughout (its .txnindex entry moves with the swap).
func TestCleanerSwapRecovery(t *testing.T) {
	steps := []struct {
		name    string
		stop    int // steps done: 1 cleaned files, 2 renamed to .swap, 3 old marked deleted, 4 index swaps renamed
		cleaned bool
	}{
		{"cleaned files written", 1, false},
		{"renamed to swap", 2, true},
		{"old segments marked deleted", 3, true},
		{"index swap files renamed", 4, true},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 2 << 10
			f := newCleanerFixture(t, cfg, DefaultCompactionConfig())
			var txnAt, abortAt int64
			for i := range 40 {
				switch i {
				case 1:
					b := keyedBatch(t, batchOpts{ts: 1, producerID: 9, seq: 0}, put("t", "aborted"))
					setAttributes(b, recordbatch.AttrTransactional)
					txnAt = mustAppend(t, f.l, b).BaseOffset
				case 20:
					abortAt = mustAppend(t, f.l, marker(t, 9, 0, false, 0)).BaseOffset
				}
				mustAppend(t, f.l, keyedBatch(t, plainOpts(codec.None, int64(i)), put(fmt.Sprint(i%3), strings.Repeat("v", 60))))
			}
			f.roll(t)
			if bases := segmentBases(f.l); len(bases) < 3 || abortAt < bases[1] {
				t.Fatalf("the abort at %d is in the first of segments %v; the fixture wants it in a later one", abortAt, bases)
			}
			original, _ := readRecords(t, f.l)
			segs := *f.l.segs.Load()
			group := segs[:len(segs)-1]
			if len(group) < 2 {
				t.Fatalf("fixture has %d sealed segments; want at least 2", len(group))
			}
			st := CleanStats{}
			flt := &filter{mapEnd: f.l.active.base, now: f.clock().UnixMilli(), minHorizon: 1 << 62, stats: &st, offsets: f.c.offsets, firstUnstable: math.MaxInt64,
				txnRetained: map[int64]bool{}, removedMarkers: map[int64]bool{}}
			r := f.l.cleanableRange(&CompactionConfig{}, 0, flt.now)
			if _, err := f.c.buildOffsetMap(r.segs, r, flt); err != nil {
				t.Fatal(err)
			}
			cleaned, err := f.c.cleanGroup(f.l, group, &cfg, flt)
			if err != nil || cleaned == nil {
				t.Fatalf("cleanGroup: %v, %v", cleaned, err)
			}
			base := cleaned.base
			if err := cleaned.closeFiles(); err != nil {
				t.Fatal(err)
			}
			rename := func(suffix, from, to string) {
				p := segmentPath(f.dir, base, suffix)
				if err := os.Rename(p+from, p+to); err != nil {
					t.Fatal(err)
				}
			}
			if step.stop >= 2 {
				for _, s := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
					rename(s, cleanedSuffix, swapSuffix)
				}
			}
			if step.stop >= 3 {
				for _, s := range group {
					if err := s.markDeleted(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if step.stop >= 4 {
				rename(indexSuffix, swapSuffix, "")
				rename(timeIndexSuffix, swapSuffix, "")
				rename(txnIndexSuffix, swapSuffix, "")
			}
			f.c.Remove(f.l)
			crash(f.l)
			// In-process, the crash released the old segments, whose *.deleted files now go
			// asynchronously; a killed process would leave them for Open.
			waitNoDeleted(t, f.dir)
			f.l = mustOpen(t, f.dir, cfg, Options{Topic: "t", Now: f.clock})
			got, _ := readRecords(t, f.l)
			want := original
			if step.cleaned {
				// The latest record of each of the 3 keys stays. The manual cleaning knows no
				// aborted transactions: it keeps them like any transactional batch, and the
				// marker.
				latest := original[len(original)-3].offset
				want = slices.DeleteFunc(slices.Clone(original), func(g gotRecord) bool {
					return g.offset < latest && g.offset != txnAt && g.offset != abortAt
				})
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after recovery: %v; want %v", got, want)
			}
			wantAborted(t, f.l, 0, f.l.LogEndOffset(), AbortedTxn{ProducerID: 9, FirstOffset: txnAt})
			for _, pat := range []string{"*" + cleanedSuffix, "*" + swapSuffix, "*" + deletedSuffix} {
				if m, _ := filepath.Glob(filepath.Join(f.dir, pat)); len(m) != 0 {
					t.Fatalf("left over after recovery: %v", m)
				}
			}
			if _, err := f.l.Append(keyedBatch(t, plainOpts(codec.None, 99), put("after", "recovery"))); err != nil {
				t.Fatal(err)
			}
		})
	}
}
