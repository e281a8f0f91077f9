package log

import (
	"encoding/binary"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"ringbroker/internal/crc32c"
)

// sampleEntries covers an empty entry, a partial one and a full one with wrapped sequences.
func sampleEntries() map[int64]producerEntry {
	full := producerEntry{epoch: 4, lastTimestamp: 1234, coordinatorEpoch: 3, txnFirstOffset: 200}
	for i := range producerBatchesRetained {
		full.add(4, producerBatch{firstSeq: int32(2147483640 + i*2), lastSeq: incrementSequence(int32(2147483640+i*2), 1),
			firstOffset: int64(100 + i*2), lastOffset: int64(101 + i*2)})
	}
	return map[int64]producerEntry{
		1: {epoch: 0, lastTimestamp: -1, coordinatorEpoch: -1, txnFirstOffset: -1},
		7: {epoch: 2, n: 1, lastTimestamp: 99, coordinatorEpoch: 7, txnFirstOffset: -1, batches: [producerBatchesRetained]producerBatch{{firstSeq: 0, lastSeq: 4, firstOffset: 10, lastOffset: 14}}},
		9: full,
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	want := sampleEntries()
	got, err := decodeSnapshot(encodeSnapshot(want))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("round trip: %+v; want %+v", got, want)
	}
	empty, err := decodeSnapshot(encodeSnapshot(nil))
	if err != nil || len(empty) != 0 {
		t.Fatalf("empty snapshot: %v, %v", empty, err)
	}
}

// TestSnapshotKafkaVersion1 reads Kafka's own format: one batch per producer from
// lastSequence, lastOffset and offsetDelta (no batch when lastSequence is -1), and the
// coordinator epoch and ongoing transaction's first offset.
func TestSnapshotKafkaVersion1(t *testing.T) {
	be := binary.BigEndian
	b := make([]byte, 10)
	be.PutUint16(b, 1)
	be.PutUint32(b[6:], 2)
	entry := func(id int64, epoch int16, lastSeq int32, lastOffset int64, delta int32, ts int64, coordEpoch int32, txnFirst int64) {
		b = be.AppendUint64(b, uint64(id))
		b = be.AppendUint16(b, uint16(epoch))
		b = be.AppendUint32(b, uint32(lastSeq))
		b = be.AppendUint64(b, uint64(lastOffset))
		b = be.AppendUint32(b, uint32(delta))
		b = be.AppendUint64(b, uint64(ts))
		b = be.AppendUint32(b, uint32(coordEpoch))
		b = be.AppendUint64(b, uint64(txnFirst))
	}
	entry(5, 1, 9, 50, 4, 777, -1, -1)
	entry(6, 2, -1, 60, 0, 888, 4, 55)
	be.PutUint32(b[2:], crc32c.Checksum(b[6:]))
	got, err := decodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]producerEntry{
		5: {epoch: 1, n: 1, lastTimestamp: 777, coordinatorEpoch: -1, txnFirstOffset: -1, batches: [producerBatchesRetained]producerBatch{{firstSeq: 5, lastSeq: 9, firstOffset: 46, lastOffset: 50}}},
		6: {epoch: 2, lastTimestamp: 888, coordinatorEpoch: 4, txnFirstOffset: 55},
	}
	if !maps.Equal(got, want) {
		t.Fatalf("version 1: %+v; want %+v", got, want)
	}
}

func TestSnapshotDecodeErrors(t *testing.T) {
	good := encodeSnapshot(sampleEntries())
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-3] ^= 1
	badVersion := append([]byte(nil), good...)
	badVersion[1] = 9
	for name, b := range map[string][]byte{
		"empty":        nil,
		"short header": good[:5],
		"truncated":    good[:len(good)-4],
		"flipped byte": flipped,
		"version 9":    badVersion,
	} {
		if _, err := decodeSnapshot(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeSnapshot feeds arbitrary bytes to the decoder: no panic, and whatever decodes
// survives a re-encode.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(encodeSnapshot(sampleEntries()))
	f.Add(encodeSnapshot(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := decodeSnapshot(b)
		if err != nil {
			return
		}
		again, err := decodeSnapshot(encodeSnapshot(entries))
		if err != nil || !maps.Equal(again, entries) {
			t.Fatalf("re-encode of a decoded snapshot: %v", err)
		}
	})
}

// snapshotFixture writes idempotent batches of producer 7 over several segments, waits for
// the roll snapshots and returns the log and the next sequence.
func snapshotFixture(t *testing.T, dir string) (*Log, int32) {
	t.Helper()
	l := mustOpen(t, dir, testConfig(), Options{})
	seq := int32(0)
	for range 60 {
		spec := idem(7, 0, seq, 3)
		spec.valueSize = 200
		mustAppend(t, l, makeBatch(t, spec))
		seq += 3
	}
	l.flushes.Wait()
	if offs, err := listSnapshots(dir); err != nil || len(offs) == 0 {
		t.Fatalf("no snapshots after rolls: %v, %v", offs, err)
	}
	return l, seq
}

// writeTamperedSnapshot replaces the snapshot at offset with one claiming producer 7's last
// sequence is lastSeq: a log that appends lastSeq+1 afterwards provably used the snapshot.
func writeTamperedSnapshot(t *testing.T, dir string, offset int64, lastSeq int32) {
	t.Helper()
	e := newProducerEntry()
	e.epoch, e.n = 0, 1
	e.batches[0] = producerBatch{firstSeq: lastSeq, lastSeq: lastSeq, firstOffset: offset - 1, lastOffset: offset - 1}
	if err := os.WriteFile(snapshotPath(dir, offset), encodeSnapshot(map[int64]producerEntry{7: e}), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotRestoreClean closes cleanly (a snapshot at the log end), then checks Open takes
// the producer state from the snapshot without replaying the batches, and still knows each
// segment's end offset and largest timestamp.
func TestSnapshotRestoreClean(t *testing.T) {
	dir := t.TempDir()
	l, seq := snapshotFixture(t, dir)
	leo := l.LogEndOffset()
	maxOff, maxTs, _ := l.MaxTimestampOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(snapshotPath(dir, leo)); err != nil {
		t.Fatalf("no snapshot at the log end after a clean close: %v", err)
	}
	l = mustOpen(t, dir, testConfig(), Options{CleanShutdown: true})
	if _, err := l.Append(makeBatch(t, idem(7, 0, seq, 1))); err != nil {
		t.Fatalf("next sequence after a clean restart: %v", err)
	}
	if o, ts, _ := l.MaxTimestampOffset(); o != maxOff || ts != maxTs {
		t.Fatalf("max timestamp after restart: %d at %d; want %d at %d", ts, o, maxTs, maxOff)
	}
	if n := len(readBatches(t, l, 0)); n != 61 {
		t.Fatalf("read %d batches after restart; want 61", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	writeTamperedSnapshot(t, dir, l.LogEndOffset(), 5000)
	l = mustOpen(t, dir, testConfig(), Options{CleanShutdown: true})
	defer l.Close()
	if _, err := l.Append(makeBatch(t, idem(7, 0, 5001, 1))); err != nil {
		t.Fatalf("sequence following the snapshot's state: %v (the batches were replayed instead)", err)
	}
}

// TestSnapshotCorruptFallback damages the newest snapshot: Open removes it and falls back to
// an older one plus replay, ending with the right state.
func TestSnapshotCorruptFallback(t *testing.T) {
	dir := t.TempDir()
	l, seq := snapshotFixture(t, dir)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	offs, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	newest := snapshotPath(dir, offs[len(offs)-1])
	flipByte(t, newest, fileSize(t, newest)-2)
	l = mustOpen(t, dir, testConfig(), Options{CleanShutdown: true})
	defer l.Close()
	if _, err := os.Stat(newest); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("damaged snapshot kept: %v", err)
	}
	if _, err := l.Append(makeBatch(t, idem(7, 0, seq+1, 1))); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap after fallback: err = %v; want ErrOutOfOrderSequence", err)
	}
	if _, err := l.Append(makeBatch(t, idem(7, 0, seq, 1))); err != nil {
		t.Fatalf("next sequence after fallback: %v", err)
	}
}

// TestSnapshotUncleanShutdown crashes; Open ignores snapshots above the recovery point, uses
// the newest at or below it and replays the rest.
func TestSnapshotUncleanShutdown(t *testing.T) {
	dir := t.TempDir()
	l, seq := snapshotFixture(t, dir)
	offs, err := listSnapshots(dir)
	if err != nil || len(offs) < 2 {
		t.Fatalf("want at least 2 snapshots: %v, %v", offs, err)
	}
	last := makeBatch(t, idem(7, 0, seq-3, 3))
	crash(l)
	// A snapshot above the recovery point is not trusted even if it looks valid.
	writeTamperedSnapshot(t, dir, offs[len(offs)-1], 9000)
	rp := offs[len(offs)-2]
	l = mustOpen(t, dir, testConfig(), Options{RecoveryPoint: rp})
	defer l.Close()
	if res, err := l.Append(last); err != nil || !res.Duplicate {
		t.Fatalf("retry of the last batch after a crash: %+v, %v; want a duplicate", res, err)
	}
	if _, err := l.Append(makeBatch(t, idem(7, 0, seq, 1))); err != nil {
		t.Fatalf("next sequence after a crash: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix)); len(m) == 0 {
		t.Fatal("snapshots vanished")
	}
}
