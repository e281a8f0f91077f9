package log

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ringbroker/internal/testutil"
)

// fillSegments appends n batches of about 1 KiB with timestamps ts0, ts0+10, ... and returns
// copies of them.
func fillSegments(t *testing.T, l *Log, n int, ts0 int64) [][]byte {
	t.Helper()
	var out [][]byte
	for i := range n {
		b := makeBatch(t, plain(2, 500, ts0+int64(i)*10))
		mustAppend(t, l, b)
		out = append(out, bytes.Clone(b))
	}
	return out
}

func segmentBases(l *Log) []int64 {
	var bases []int64
	for _, s := range *l.segs.Load() {
		bases = append(bases, s.base)
	}
	return bases
}

// segmentFiles lists the segment and .deleted files in dir.
func segmentFiles(t *testing.T, dir string) (live, deleted []string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		switch name := e.Name(); {
		case strings.HasSuffix(name, deletedSuffix):
			deleted = append(deleted, name)
		case strings.HasSuffix(name, logSuffix):
			live = append(live, name)
		}
	}
	return live, deleted
}

// TestRetentionBytes deletes the oldest segments while the log stays at least retention.bytes
// large, as Kafka does, and moves the log start offset to the first remaining segment.
func TestRetentionBytes(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.RetentionMs = -1 // the batches' timestamps are from 1970
	l := mustOpen(t, dir, cfg, Options{})
	defer l.Close()
	batches := fillSegments(t, l, 80, 1000)
	before := segmentBases(l)
	if len(before) < 4 {
		t.Fatalf("%d segments; want at least 4", len(before))
	}
	cfg.RetentionBytes = 3 * cfg.SegmentBytes
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	total := l.Size()
	n, err := l.ApplyRetention()
	if err != nil {
		t.Fatal(err)
	}
	segs := *l.segs.Load()
	if n == 0 || len(segs) != len(before)-n {
		t.Fatalf("deleted %d of %d segments, %d left", n, len(before), len(segs))
	}
	if l.Size() < cfg.RetentionBytes || l.Size()-segs[0].size.Load() >= cfg.RetentionBytes {
		t.Fatalf("size %d after retention.bytes=%d (was %d): want the smallest suffix of segments reaching it", l.Size(), cfg.RetentionBytes, total)
	}
	if l.LogStartOffset() != segs[0].base {
		t.Fatalf("log start %d; want first segment base %d", l.LogStartOffset(), segs[0].base)
	}
	if _, err := l.Read(segs[0].base-1, 1<<20, -1, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read below the log start: %v; want ErrOffsetOutOfRange", err)
	}
	got := readBatches(t, l, l.LogStartOffset())
	if want := batches[countBelow(batches, segs[0].base):]; len(got) != len(want) || !bytes.Equal(got[0], want[0]) {
		t.Fatalf("read %d batches after retention; want %d", len(got), len(want))
	}
	testutil.WaitFor(t, 5*time.Second, testutil.Holds("deleted files removed", func() bool {
		live, deleted := segmentFiles(t, dir)
		return len(deleted) == 0 && len(live) == len(segs)
	}))
	if n, err := l.ApplyRetention(); n != 0 || err != nil {
		t.Fatalf("second retention pass deleted %d (%v); want nothing", n, err)
	}
}

// TestRetentionMs deletes segments whose newest timestamp is older than retention.ms on a
// moving clock; an active segment that breaches is rolled first and deleted by the next check.
func TestRetentionMs(t *testing.T) {
	dir := t.TempDir()
	var clock atomic.Int64 // read by background flushes too
	clock.Store(1_000_000)
	advance := func(d time.Duration) time.Time { return time.UnixMilli(clock.Add(d.Milliseconds())) }
	now := advance(0)
	cfg := testConfig()
	cfg.RetentionMs = 60_000
	l := mustOpen(t, dir, cfg, Options{Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
	defer l.Close()
	fillSegments(t, l, 40, 1_000_000) // timestamps up to 1_000_390
	bases := segmentBases(l)
	if n, err := l.ApplyRetention(); n != 0 || err != nil {
		t.Fatalf("retention before anything expired deleted %d (%v)", n, err)
	}
	now = advance(2 * time.Minute)
	fillSegments(t, l, 5, now.UnixMilli()) // fresh data in the active segment
	n, err := l.ApplyRetention()
	if err != nil || n != len(bases)-1 {
		t.Fatalf("deleted %d segments (%v); want the %d sealed old ones", n, err, len(bases)-1)
	}
	start := l.LogStartOffset()
	if start != bases[len(bases)-1] {
		t.Fatalf("log start %d; want %d", start, bases[len(bases)-1])
	}
	// Now everything is old: the active segment is rolled, then deleted by the next check.
	now = advance(2 * time.Minute)
	leo := l.LogEndOffset()
	if n, err := l.ApplyRetention(); n != 0 || err != nil {
		t.Fatalf("deleted %d (%v); want only a roll of the breaching active segment", n, err)
	}
	if got := segmentBases(l); got[len(got)-1] != leo {
		t.Fatalf("active segment base %d; want a roll at the log end %d", got[len(got)-1], leo)
	}
	if n, err := l.ApplyRetention(); n != 1 || err != nil {
		t.Fatalf("deleted %d (%v); want the rolled segment", n, err)
	}
	if l.LogStartOffset() != leo || l.Size() != 0 || l.LogEndOffset() != leo {
		t.Fatalf("start %d end %d size %d; want an empty log at %d", l.LogStartOffset(), l.LogEndOffset(), l.Size(), leo)
	}
	if res := mustAppend(t, l, makeBatch(t, plain(1, 10, now.UnixMilli()))); res.BaseOffset != leo {
		t.Fatalf("append after full retention at %d; want %d", res.BaseOffset, leo)
	}
}

// TestRetentionKeepsReadersMapped deletes a segment while a read holds it: the read's bytes
// stay valid and the .deleted files stay until the read is released.
func TestRetentionKeepsReadersMapped(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.RetentionMs = -1
	l := mustOpen(t, dir, cfg, Options{})
	defer l.Close()
	batches := fillSegments(t, l, 40, 1000)
	r, err := l.Read(0, 1<<20, -1, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteRecordsBefore(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if n, err := l.ApplyRetention(); n == 0 || err != nil {
		t.Fatalf("ApplyRetention = %d, %v; want deletions", n, err)
	}
	testutil.WaitFor(t, 5*time.Second, testutil.Holds("only the held segment's files left", func() bool {
		_, deleted := segmentFiles(t, dir)
		return len(deleted) == 3 && strings.HasPrefix(deleted[0], "00000000000000000000.")
	}))
	if !bytes.Equal(r.Data[:len(batches[0])], batches[0]) {
		t.Fatal("bytes of a held read changed after deletion")
	}
	r.Release()
	testutil.WaitFor(t, 5*time.Second, testutil.Holds("the released segment's files removed", func() bool {
		_, deleted := segmentFiles(t, dir)
		return len(deleted) == 0
	}))
}

// TestDeleteRecords moves the log start offset inside a segment, refuses offsets past the end
// and logs without the delete policy, and keeps the start across a reopen.
func TestDeleteRecords(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.RetentionMs = -1
	l := mustOpen(t, dir, cfg, Options{})
	fillSegments(t, l, 40, 1000) // 80 records
	if got, err := l.DeleteRecordsBefore(31); got != 31 || err != nil {
		t.Fatalf("DeleteRecordsBefore(31) = %d, %v; want 31", got, err)
	}
	if got, err := l.DeleteRecordsBefore(10); got != 31 || err != nil {
		t.Fatalf("DeleteRecordsBefore(10) = %d, %v; want the unchanged start 31", got, err)
	}
	if _, err := l.DeleteRecordsBefore(81); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("DeleteRecordsBefore past the end: %v; want ErrOffsetOutOfRange", err)
	}
	if _, err := l.Read(30, 1<<20, -1, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read(30) below the start: %v; want ErrOffsetOutOfRange", err)
	}
	r, err := l.Read(31, 1<<20, -1, true)
	if err != nil || len(r.Data) == 0 {
		t.Fatalf("Read(31) = %d bytes, %v", len(r.Data), err)
	}
	if h := parseHeader(r.Data); h.baseOffset > 31 || h.lastOffset() < 31 {
		t.Fatalf("Read(31) starts with batch %d..%d", h.baseOffset, h.lastOffset())
	}
	r.Release()
	n, err := l.ApplyRetention()
	if err != nil || n == 0 {
		t.Fatalf("ApplyRetention after DeleteRecords = %d, %v; want the segments below 31 gone", n, err)
	}
	if first := (*l.segs.Load())[0]; first.base > 31 || first.next <= 31 {
		t.Fatalf("first segment %d..%d; want the one holding 31", first.base, first.next)
	}
	if l.LogStartOffset() != 31 {
		t.Fatalf("log start %d after retention; want 31", l.LogStartOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg, Options{CleanShutdown: true, LogStartOffset: 31})
	if l.LogStartOffset() != 31 {
		t.Fatalf("log start %d after reopen; want 31", l.LogStartOffset())
	}
	l.Close()

	cfg.DeletePolicy = false
	l = mustOpen(t, filepath.Join(t.TempDir(), "compacted-0"), cfg, Options{})
	defer l.Close()
	fillSegments(t, l, 2, 1000)
	if _, err := l.DeleteRecordsBefore(1); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("DeleteRecordsBefore on a compact-only log: %v; want ErrPolicyViolation", err)
	}
}

// TestSetConfig changes segment.bytes, flush.messages and group commit on an open log.
func TestSetConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	l := mustOpen(t, dir, cfg, Options{})
	defer l.Close()
	big := makeBatch(t, plain(1, 30<<10, 1000)) // larger than the 16 KiB segments
	if _, err := l.Append(big); !errors.Is(err, ErrRecordListTooLarge) {
		t.Fatalf("Append of %d bytes with segment.bytes=%d: %v; want ErrRecordListTooLarge", len(big), cfg.SegmentBytes, err)
	}
	cfg.SegmentBytes = 1 << 20
	cfg.MaxMessageBytes = 1 << 20
	cfg.GroupCommit = true
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if !l.GroupCommit() || l.Config().SegmentBytes != 1<<20 {
		t.Fatalf("config not applied: group commit %v, segment.bytes %d", l.GroupCommit(), l.Config().SegmentBytes)
	}
	for range 3 { // the empty active segment was remapped; later ones roll at the new size
		mustAppend(t, l, makeBatch(t, plain(1, 30<<10, 1000)))
	}
	// A segment mapped for 16 KiB that holds data rolls before outgrowing its mapping.
	l2 := mustOpen(t, filepath.Join(t.TempDir(), "t-0"), testConfig(), Options{})
	defer l2.Close()
	mustAppend(t, l2, makeBatch(t, plain(1, 100, 1000)))
	if err := l2.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l2, makeBatch(t, plain(1, 30<<10, 1000)))
	if got := len(*l2.segs.Load()); got != 2 {
		t.Fatalf("%d segments; want a roll before the mapping overflowed", got)
	}
	if got := readBatches(t, l2, 0); len(got) != 2 {
		t.Fatalf("read %d batches; want 2", len(got))
	}
	cfg.FlushMessages = 1
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if l.RecoveryPoint() != l.LogEndOffset() {
		t.Fatalf("recovery point %d after flush.messages=1; want the log end %d", l.RecoveryPoint(), l.LogEndOffset())
	}
	bad := cfg
	bad.SegmentBytes = 1
	if err := l.SetConfig(bad); err == nil || l.Config().SegmentBytes != cfg.SegmentBytes {
		t.Fatalf("SetConfig(segment.bytes=1) = %v; want refused and the old config kept", err)
	}
}
