package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/recordbatch"
	"ringbroker/internal/testutil"
)

// txnBatch is a transactional batch of producer pid: records records of valueSize bytes.
func txnBatch(tb testing.TB, pid int64, epoch int16, seq int32, records, valueSize int) []byte {
	tb.Helper()
	s := idem(pid, epoch, seq, records)
	s.valueSize = valueSize
	b := makeBatch(tb, s)
	setAttributes(b, recordbatch.AttrTransactional)
	return b
}

// setAttributes ors attrs into batch b's attributes and seals its CRC again.
func setAttributes(b []byte, attrs int16) {
	be := binary.BigEndian
	be.PutUint16(b[recordbatch.OffAttributes:], be.Uint16(b[recordbatch.OffAttributes:])|uint16(attrs))
	rb := kmsg.RecordBatch{}
	if err := rb.ReadFrom(b); err != nil {
		panic(err)
	}
	copy(b, testutil.SealBatch(rb))
}

// marker is a COMMIT (commit) or ABORT control batch of producer pid, as a transaction
// coordinator writes it: key (version 0, type), value (version 0, coordinator epoch).
func marker(tb testing.TB, pid int64, epoch int16, commit bool, coordEpoch int32) []byte {
	tb.Helper()
	key := []byte{0, 0, 0, controlAbort}
	if commit {
		key[3] = controlCommit
	}
	value := binary.BigEndian.AppendUint32([]byte{0, 0}, uint32(coordEpoch))
	rb := testutil.NewBatch(1000, kmsg.Record{Key: key, Value: value})
	rb.Attributes = recordbatch.AttrControl | recordbatch.AttrTransactional
	rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = pid, epoch, -1
	return testutil.SealBatch(rb)
}

// wantAborted checks the aborted transactions l lists for from..upto.
func wantAborted(tb testing.TB, l *Log, from, upto int64, want ...AbortedTxn) {
	tb.Helper()
	if got := l.AbortedTransactions(from, upto); !slices.Equal(got, want) {
		tb.Fatalf("AbortedTransactions(%d, %d) = %+v; want %+v", from, upto, got, want)
	}
}

// wantLSO checks the last stable offset l gives for high watermark hw.
func wantLSO(tb testing.TB, l *Log, hw, want int64) {
	tb.Helper()
	if got := l.LastStableOffset(hw); got != want {
		tb.Fatalf("LastStableOffset(%d) = %d; want %d", hw, got, want)
	}
}

// txnFixture writes: a plain batch (0), producer 1's transaction (1-2), producer 2's (3-4),
// producer 1's COMMIT (5), producer 2's ABORT (6) and producer 3's open transaction (7-8).
func txnFixture(t *testing.T, l *Log) {
	t.Helper()
	mustAppend(t, l, makeBatch(t, plain(1, 8, 1000)))
	mustAppend(t, l, txnBatch(t, 1, 0, 0, 2, 8))
	wantLSO(t, l, l.LogEndOffset(), 1)
	mustAppend(t, l, txnBatch(t, 2, 0, 0, 2, 8))
	mustAppend(t, l, marker(t, 1, 0, true, 5))
	// The commit's marker (5) is not below the high watermark yet: producer 1 still counts.
	wantLSO(t, l, 5, 1)
	wantLSO(t, l, 6, 3)
	mustAppend(t, l, marker(t, 2, 0, false, 5))
	wantLSO(t, l, 7, 7)
	mustAppend(t, l, txnBatch(t, 3, 0, 0, 2, 8))
	wantLSO(t, l, 9, 7)
	wantLSO(t, l, 6, 6) // capped by the high watermark
}

func TestTxnLastStableOffsetAndIndex(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig(), Options{})
	defer l.Close()
	txnFixture(t, l)
	wantAborted(t, l, 0, 9, AbortedTxn{ProducerID: 2, FirstOffset: 3})
	wantAborted(t, l, 7, 9)                                            // marker before the range
	wantAborted(t, l, 0, 3)                                            // transaction after it
	wantAborted(t, l, 6, 7, AbortedTxn{ProducerID: 2, FirstOffset: 3}) // the marker itself
	data, err := os.ReadFile(segmentPath(dir, 0, txnIndexSuffix))
	if err != nil {
		t.Fatal(err)
	}
	// Kafka's entry: version 0, producer 2, first 3, last (the marker) 6, last stable 7 (no
	// other transaction was ongoing when it completed).
	want := []byte{0, 0}
	for _, v := range []int64{2, 3, 6, 7} {
		want = binary.BigEndian.AppendUint64(want, uint64(v))
	}
	if !bytes.Equal(data, want) {
		t.Fatalf(".txnindex = %x; want %x", data, want)
	}
}

// TestTxnIndexLastStableOffset: an abort completing while another transaction is ongoing
// records that transaction's first offset as its last stable offset, which ends a search.
func TestTxnIndexLastStableOffset(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer l.Close()
	mustAppend(t, l, txnBatch(t, 1, 0, 0, 1, 8)) // 0
	mustAppend(t, l, txnBatch(t, 2, 0, 0, 1, 8)) // 1
	mustAppend(t, l, marker(t, 1, 0, false, 0))  // 2
	mustAppend(t, l, marker(t, 2, 0, false, 0))  // 3
	got := l.active.abortedTxns()
	want := []abortedTxn{{1, 0, 2, 1}, {2, 1, 3, 4}}
	if !slices.Equal(got, want) {
		t.Fatalf("txnindex %+v; want %+v", got, want)
	}
	// Upto 1: the first entry's last stable offset reaches it; the second is not looked at.
	wantAborted(t, l, 0, 1, AbortedTxn{ProducerID: 1, FirstOffset: 0})
	wantAborted(t, l, 0, 4, AbortedTxn{ProducerID: 1, FirstOffset: 0}, AbortedTxn{ProducerID: 2, FirstOffset: 1})
}

// TestTxnLastStableOffsetLogStart: a transaction whose start DeleteRecords removed holds the
// last stable offset at the log start, not below it.
func TestTxnLastStableOffsetLogStart(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer l.Close()
	mustAppend(t, l, makeBatch(t, plain(1, 8, 1000))) // 0
	mustAppend(t, l, txnBatch(t, 1, 0, 0, 2, 8))      // 1-2
	mustAppend(t, l, makeBatch(t, plain(2, 8, 1000))) // 3-4
	if _, err := l.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	wantLSO(t, l, 5, 3)
	mustAppend(t, l, marker(t, 1, 0, true, 0)) // 5
	wantLSO(t, l, 5, 3)                        // the marker is not below the high watermark
	wantLSO(t, l, 6, 6)
}

func TestTxnProducerChecks(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer l.Close()
	mustAppend(t, l, txnBatch(t, 1, 3, 0, 1, 8))
	if _, err := l.Append(makeBatch(t, idem(1, 3, 1, 1))); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch during a transaction: %v; want ErrInvalidTxnState", err)
	}
	if _, err := l.Append(marker(t, 1, 2, true, 0)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker with an older producer epoch: %v; want ErrInvalidProducerEpoch", err)
	}
	mustAppend(t, l, marker(t, 1, 3, true, 4))
	mustAppend(t, l, txnBatch(t, 1, 3, 1, 1, 8))
	if _, err := l.Append(marker(t, 1, 3, false, 3)); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("marker of an older coordinator epoch: %v; want ErrTransactionCoordinatorFenced", err)
	}
	wantLSO(t, l, l.LogEndOffset(), 2) // the refused marker changed nothing
	corrupt := marker(t, 1, 3, true, 4)
	rb := kmsg.RecordBatch{}
	if err := rb.ReadFrom(corrupt); err != nil {
		t.Fatal(err)
	}
	rb.Records = testutil.EncodeRecords(kmsg.Record{Key: []byte{0, 0}, Value: []byte{0, 0, 0, 0, 0, 4}})
	if _, err := l.Append(testutil.SealBatch(rb)); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("marker with a 2-byte key: %v; want ErrCorruptBatch", err)
	}
	// A marker without a transaction completes an empty one at its own offset (Kafka's).
	mustAppend(t, l, marker(t, 1, 3, false, 4)) // 3: aborts the transaction from 2
	mustAppend(t, l, marker(t, 5, 0, false, 0)) // 4: an empty transaction
	wantAborted(t, l, 0, l.LogEndOffset(), AbortedTxn{ProducerID: 1, FirstOffset: 2}, AbortedTxn{ProducerID: 5, FirstOffset: 4})
}

// TestTxnCoordinatorAppends checks AppendAsCoordinator, the group coordinator's appends of
// transactional offset commits: batches without sequence numbers, which a client append would
// take for duplicates or refuse as out of order, are written, while the producer epoch and
// the transaction state are checked as for clients.
func TestTxnCoordinatorAppends(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer l.Close()
	coordAppend := func(b []byte) AppendResult {
		t.Helper()
		res, err := l.AppendAsCoordinator(b)
		if err != nil || res.Duplicate {
			t.Fatalf("AppendAsCoordinator: %+v, %v", res, err)
		}
		return res
	}
	coordAppend(txnBatch(t, 1, 2, -1, 1, 8))
	if res := coordAppend(txnBatch(t, 1, 2, -1, 1, 8)); res.BaseOffset != 1 {
		t.Fatalf("second equal batch at %d; want 1", res.BaseOffset)
	}
	if res, err := l.Append(txnBatch(t, 1, 2, -1, 1, 8)); err != nil || !res.Duplicate {
		t.Fatalf("the same batch from a client: %+v, %v; want a duplicate", res, err)
	}
	coordAppend(txnBatch(t, 1, 2, -1, 3, 8)) // 2-4
	mustAppend(t, l, marker(t, 1, 2, true, 0))
	coordAppend(txnBatch(t, 1, 2, -1, 1, 8)) // the producer's next transaction, same epoch
	if _, err := l.AppendAsCoordinator(txnBatch(t, 1, 1, -1, 1, 8)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("older producer epoch: %v; want ErrInvalidProducerEpoch", err)
	}
	if _, err := l.AppendAsCoordinator(makeBatch(t, idem(1, 2, -1, 1))); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch during a transaction: %v; want ErrInvalidTxnState", err)
	}
	wantLSO(t, l, l.LogEndOffset(), 6)
}

// TestTxnRecovery rebuilds the transaction state and .txnindex on reopen: after a crash
// without clean shutdown, after deleting the indexes, and from a snapshot after a clean close.
func TestTxnRecovery(t *testing.T) {
	cfg := testConfig()
	fill := func(t *testing.T) (string, []int64) {
		dir := t.TempDir()
		l := mustOpen(t, dir, cfg, Options{})
		// Producer 1 aborts a transaction spanning a roll; producer 2 commits one; producer
		// 3's stays open across segments.
		mustAppend(t, l, txnBatch(t, 1, 0, 0, 4, 1500)) // 0-3
		mustAppend(t, l, txnBatch(t, 3, 0, 0, 1, 8))    // 4
		for i := range 12 {
			mustAppend(t, l, txnBatch(t, 1, 0, int32(4+i*4), 4, 1500))
		}
		mustAppend(t, l, marker(t, 1, 0, false, 1))
		mustAppend(t, l, txnBatch(t, 2, 0, 0, 1, 8))
		mustAppend(t, l, marker(t, 2, 0, true, 1))
		bases := segmentBases(l)
		if len(bases) < 3 {
			t.Fatalf("fixture made %d segments; want at least 3", len(bases))
		}
		wantLSO(t, l, l.LogEndOffset(), 4)
		abortAt := l.LogEndOffset() - 3
		wantAborted(t, l, 0, l.LogEndOffset(), AbortedTxn{ProducerID: 1, FirstOffset: 0})
		if got := l.active.abortedTxns(); len(got) != 1 || got[0] != (abortedTxn{1, 0, abortAt, 4}) {
			t.Fatalf("active segment's txnindex %+v; want the abort at %d with last stable offset 4", got, abortAt)
		}
		crash(l)
		return dir, bases
	}
	check := func(t *testing.T, l *Log) {
		t.Helper()
		wantLSO(t, l, l.LogEndOffset(), 4)
		wantAborted(t, l, 0, l.LogEndOffset(), AbortedTxn{ProducerID: 1, FirstOffset: 0})
		wantAborted(t, l, 5, 9, AbortedTxn{ProducerID: 1, FirstOffset: 0})
		if _, err := l.Append(makeBatch(t, idem(3, 0, 1, 1))); !errors.Is(err, ErrInvalidTxnState) {
			t.Fatalf("producer 3's transaction was not restored: %v", err)
		}
	}
	t.Run("crash", func(t *testing.T) {
		dir, _ := fill(t)
		l := mustOpen(t, dir, cfg, Options{})
		defer l.Close()
		check(t, l)
	})
	t.Run("indexes deleted", func(t *testing.T) {
		dir, bases := fill(t)
		last := bases[len(bases)-1]
		for _, suffix := range []string{txnIndexSuffix, indexSuffix, timeIndexSuffix} {
			if err := os.Remove(segmentPath(dir, last, suffix)); err != nil {
				t.Fatal(err)
			}
		}
		l := mustOpen(t, dir, cfg, Options{CleanShutdown: true})
		defer l.Close()
		check(t, l)
		if _, err := os.Stat(segmentPath(dir, last, txnIndexSuffix)); err != nil {
			t.Fatalf("txnindex not rebuilt: %v", err)
		}
	})
	t.Run("crash after the recovery point", func(t *testing.T) {
		// Only the last segment is recovered; its .txnindex is rebuilt from the snapshot of
		// its roll, which knows producer 1's transaction began in the first segment.
		dir, bases := fill(t)
		last := bases[len(bases)-1]
		if err := os.Remove(segmentPath(dir, last, txnIndexSuffix)); err != nil {
			t.Fatal(err)
		}
		l := mustOpen(t, dir, cfg, Options{RecoveryPoint: last})
		defer l.Close()
		if l.Recovery().CheckedSegments != 1 {
			t.Fatalf("recovered %d segments; want 1", l.Recovery().CheckedSegments)
		}
		check(t, l)
	})
	t.Run("damaged txnindex", func(t *testing.T) {
		dir, bases := fill(t)
		last := bases[len(bases)-1]
		if err := os.WriteFile(segmentPath(dir, last, txnIndexSuffix), []byte{0, 1, 2}, 0o644); err != nil {
			t.Fatal(err)
		}
		l := mustOpen(t, dir, cfg, Options{CleanShutdown: true})
		defer l.Close()
		check(t, l)
	})
	t.Run("snapshot", func(t *testing.T) {
		dir, _ := fill(t)
		l := mustOpen(t, dir, cfg, Options{})
		leo := l.LogEndOffset()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}

		data, err := os.ReadFile(snapshotPath(dir, leo))
		if err != nil {
			t.Fatal(err)
		}
		entries, err := decodeSnapshot(data)
		if err != nil {
			t.Fatal(err)
		}
		if e := entries[3]; e.txnFirstOffset != 4 {
			t.Fatalf("snapshot keeps producer 3's transaction from %d; want 4", e.txnFirstOffset)
		}
		if e := entries[1]; e.txnFirstOffset != -1 || e.coordinatorEpoch != 1 {
			t.Fatalf("snapshot: producer 1 transaction from %d, coordinator epoch %d; want -1, 1", e.txnFirstOffset, e.coordinatorEpoch)
		}
		l = mustOpen(t, dir, cfg, Options{CleanShutdown: true})
		defer l.Close()
		if l.snapOffset != leo {
			t.Fatalf("Open loaded the snapshot at %d; want %d", l.snapOffset, leo)
		}
		check(t, l)
	})
}

// TestTxnTruncate cuts the log below an ABORT marker: its .txnindex entry goes, and the
// transaction is ongoing again.
func TestTxnTruncate(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig(), Options{})
	defer l.Close()
	txnFixture(t, l)
	if err := l.TruncateTo(6); err != nil { // producer 2's ABORT was at 6
		t.Fatal(err)
	}
	wantAborted(t, l, 0, 6)
	wantLSO(t, l, 6, 3)
	if _, err := os.Stat(segmentPath(dir, 0, txnIndexSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("txnindex without entries left: %v; want it removed", err)
	}
	mustAppend(t, l, marker(t, 2, 0, false, 5))
	wantAborted(t, l, 0, 7, AbortedTxn{ProducerID: 2, FirstOffset: 3})
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	wantLSO(t, l, 100, 100)
	wantAborted(t, l, 100, 101)
}

// TestTxnFollower replays a leader's batches as a follower: the same transactions, index and
// last stable offset.
func TestTxnFollower(t *testing.T) {
	leader := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer leader.Close()
	txnFixture(t, leader)
	dir := t.TempDir()
	follower := mustOpen(t, dir, testConfig(), Options{})
	defer follower.Close()
	for _, b := range readBatches(t, leader, 0) {
		if _, err := follower.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(follower.unreplicated); n != 2 {
		t.Fatalf("follower holds %d unreplicated transactions; want the 2 completed", n)
	}
	follower.NoteHighWatermark(follower.LogEndOffset())
	if n := len(follower.unreplicated); n != 0 {
		t.Fatalf("follower holds %d unreplicated transactions after the high watermark passed them; want 0", n)
	}
	wantAborted(t, follower, 0, 9, AbortedTxn{ProducerID: 2, FirstOffset: 3})
	wantLSO(t, follower, 9, 7)
	got, err := os.ReadFile(filepath.Join(dir, "00000000000000000000.txnindex"))
	if err != nil {
		t.Fatal(err)
	}
	if want := appendTxnEntry(nil, abortedTxn{2, 3, 6, 7}); !bytes.Equal(got, want) {
		t.Fatalf("follower .txnindex %x; want %x", got, want)
	}
}

// TestTxnIndexConcurrentFlush writes aborts while another goroutine flushes the log, as the
// background flushes of rolls and group commits do: no flush fails, and every entry is on
// disk after a clean close.
func TestTxnIndexConcurrentFlush(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig(), Options{})
	stop := make(chan struct{})
	flushed := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				flushed <- nil
				return
			default:
			}
			if err := l.Flush(); err != nil {
				flushed <- err
				return
			}
		}
	}()
	const n = 40
	for i := range n {
		mustAppend(t, l, txnBatch(t, int64(i), 0, 0, 1, 400))
		mustAppend(t, l, marker(t, int64(i), 0, false, 0))
	}
	close(stop)
	if err := <-flushed; err != nil {
		t.Fatalf("concurrent flush: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, testConfig(), Options{CleanShutdown: true})
	defer l.Close()
	if got := l.AbortedTransactions(0, l.LogEndOffset()); len(got) != n {
		t.Fatalf("%d aborted transactions after reopening; want %d", len(got), n)
	}
}

// TestTxnRetention deletes a segment with its .txnindex.
func TestTxnRetention(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	l := mustOpen(t, dir, cfg, Options{})
	defer l.Close()
	mustAppend(t, l, txnBatch(t, 1, 0, 0, 1, 8))
	mustAppend(t, l, marker(t, 1, 0, false, 0))
	for l.active.base == 0 {
		mustAppend(t, l, makeBatch(t, plain(4, 1500, 1000)))
	}
	if _, err := l.DeleteRecordsBefore(l.active.base); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, func() error {
		if _, err := os.Stat(segmentPath(dir, 0, txnIndexSuffix)); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("segment 0's txnindex still there: %v", err)
		}
		return nil
	})
	wantAborted(t, l, l.LogStartOffset(), l.LogEndOffset())
}

// FuzzTxnDecoders feeds arbitrary bytes to the control-record and .txnindex decoders: they
// never panic, and what decodes encodes back to the same bytes.
func FuzzTxnDecoders(f *testing.F) {
	f.Add(marker(f, 1, 0, true, 3))
	f.Add(marker(f, 1, 0, false, -1))
	f.Add(appendTxnEntry(appendTxnEntry(nil, abortedTxn{1, 0, 2, 3}), abortedTxn{2, 1, 4, 5}))
	f.Add([]byte{0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, ok, err := parseEndTxnMarker(b); err == nil && ok {
			again, ok, err := parseEndTxnMarker(marker(t, 1, 0, m.commit, m.coordinatorEpoch))
			if err != nil || !ok || again != m {
				t.Fatalf("marker %+v parsed from %x does not survive a round trip: %+v, %v, %v", m, b, again, ok, err)
			}
		}
		list, err := decodeTxnIndex(b)
		if err != nil {
			return
		}
		var out []byte
		for _, a := range list {
			out = appendTxnEntry(out, a)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("decode/encode of %x gave %x", b, out)
		}
	})
}

// TestTxnCompaction: cleaning removes the batches of a decided aborted transaction (the
// producer's last one stays, empty), keeps committed or undecided transactional batches,
// keeps transactional records out of the key map, moves the .txnindex entries to the cleaned
// segment, where a reopen finds them, and removes a marker whose transaction has no batch left
// once its delete horizon has passed, with its .txnindex entry.
func TestTxnCompaction(t *testing.T) {
	cc := DefaultCompactionConfig()
	f := newCleanerFixture(t, testConfig(), cc)
	l := f.l
	txn := func(pid int64, seq int32, recs ...kv) []byte {
		b := keyedBatch(t, batchOpts{ts: 1000, producerID: pid, epoch: 0, seq: seq}, recs...)
		setAttributes(b, recordbatch.AttrTransactional)
		return b
	}
	plainKV := func(recs ...kv) []byte { return keyedBatch(t, plainOpts(0, 1000), recs...) }
	mustAppend(t, l, plainKV(put("k", "v1")))         // 0
	mustAppend(t, l, txn(1, 0, put("k", "aborted1"))) // 1
	mustAppend(t, l, txn(1, 1, put("y", "aborted2"))) // 2
	f.roll(t)
	mustAppend(t, l, marker(t, 1, 0, false, 0))               // 3: abort
	mustAppend(t, l, plainKV(put("j", "j1")))                 // 4
	mustAppend(t, l, txn(2, 0, put("j", "committed")))        // 5
	mustAppend(t, l, marker(t, 2, 0, true, 0))                // 6: commit
	mustAppend(t, l, plainKV(put("k", "v2"), put("x", "x1"))) // 7-8
	f.roll(t)
	mustAppend(t, l, plainKV(put("x", "x2")))                                                                // 9
	mustAppend(t, l, txn(4, 0, put("w", "aborted4")))                                                        // 10
	mustAppend(t, l, marker(t, 4, 0, false, 0))                                                              // 11: abort
	mustAppend(t, l, keyedBatch(t, batchOpts{ts: 1000, producerID: 4, epoch: 0, seq: 1}, put("v", "after"))) // 12
	mustAppend(t, l, txn(3, 0, put("z", "open")))                                                            // 13: undecided
	f.roll(t)
	if _, err := os.Stat(segmentPath(f.dir, 3, txnIndexSuffix)); err != nil {
		t.Fatalf("the abort's txnindex: %v", err)
	}
	wantLSO(t, l, l.LogEndOffset(), 13) // the high watermark passed every marker

	const abortKey, commitKey, markerValue = "\x00\x00\x00\x00", "\x00\x00\x00\x01", "\x00\x00\x00\x00\x00\x00"
	check := func(wantRecs []string, wantIndex ...abortedTxn) {
		t.Helper()
		recs, hdrs := readRecords(t, l)
		var got []string
		for _, r := range recs {
			got = append(got, r.String())
		}
		if !slices.Equal(got, wantRecs) {
			t.Fatalf("after cleaning: %q; want %q", got, wantRecs)
		}
		// Producer 1's last batch stays, empty and transactional; its first one is gone.
		if hdrs[0].FirstOffset != 2 || hdrs[0].NumRecords != 0 || hdrs[0].Attributes&recordbatch.AttrTransactional == 0 {
			t.Fatalf("first batch after cleaning: %+v; want producer 1's empty transactional batch at 2", hdrs[0])
		}
		var want []AbortedTxn
		var data []byte
		for _, a := range wantIndex {
			want = append(want, AbortedTxn{ProducerID: a.producerID, FirstOffset: a.firstOffset})
			data = appendTxnEntry(data, a)
		}
		wantAborted(t, l, 0, l.LogEndOffset(), want...)
		wantLSO(t, l, l.LogEndOffset(), 13)
		got2, err := os.ReadFile(segmentPath(f.dir, 0, txnIndexSuffix))
		if err != nil {
			t.Fatalf("cleaned segment's txnindex: %v", err)
		}
		if !bytes.Equal(got2, data) {
			t.Fatalf("cleaned segment's txnindex %x; want %x", got2, data)
		}
	}
	f.clean(t)
	// The committed "j" (5) supersedes the plain one before it (4), as in Kafka's cleaner.
	kept := []string{"3:" + abortKey + "=" + markerValue, "5:j=committed", "6:" + commitKey + "=" + markerValue,
		"7:k=v2", "9:x=x2", "11:" + abortKey + "=" + markerValue, "12:v=after", "13:z=open"}
	check(kept, abortedTxn{1, 1, 3, 4}, abortedTxn{4, 10, 11, 12})
	if _, err := os.Stat(segmentPath(f.dir, 3, txnIndexSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the replaced segment's txnindex is still there: %v", err)
	}

	// Producer 4's marker got a delete horizon (its transaction has no batch left); producer
	// 1's did not (its empty batch stays). Past the horizon, producer 4's marker goes.
	f.advance(cc.DeleteRetention + time.Second)
	f.clean(t)
	kept = slices.DeleteFunc(kept, func(s string) bool { return strings.HasPrefix(s, "11:") })
	check(kept, abortedTxn{1, 1, 3, 4})

	f.c.Remove(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, f.dir, testConfig(), Options{CleanShutdown: true})
	f.l = l
	f.c.Add(l, cc)
	check(kept, abortedTxn{1, 1, 3, 4})
}

// TestTxnCompactionCommitted compacts a committed transaction's record away: its batch goes, its
// COMMIT marker gets a delete horizon and goes after it, while a later committed transaction of
// the same producer, whose record is the latest of its key, stays with its marker.
func TestTxnCompactionCommitted(t *testing.T) {
	cc := DefaultCompactionConfig()
	f := newCleanerFixture(t, testConfig(), cc)
	l := f.l
	txn := func(seq int32, recs ...kv) []byte {
		b := keyedBatch(t, batchOpts{ts: 1000, producerID: 5, epoch: 0, seq: seq}, recs...)
		setAttributes(b, recordbatch.AttrTransactional)
		return b
	}
	mustAppend(t, l, txn(0, put("a", "1")))                            // 0
	mustAppend(t, l, marker(t, 5, 0, true, 0))                         // 1: commit
	mustAppend(t, l, txn(1, put("b", "x")))                            // 2
	mustAppend(t, l, marker(t, 5, 0, true, 0))                         // 3: commit
	mustAppend(t, l, keyedBatch(t, plainOpts(0, 1000), put("a", "2"))) // 4
	f.roll(t)
	l.NoteHighWatermark(l.LogEndOffset()) // the markers are replicated: both transactions decided
	const commitKey, markerValue = "\x00\x00\x00\x01", "\x00\x00\x00\x00\x00\x00"
	check := func(want ...string) {
		t.Helper()
		recs, _ := readRecords(t, l)
		var got []string
		for _, r := range recs {
			got = append(got, r.String())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after cleaning: %q; want %q", got, want)
		}
	}
	f.clean(t)
	check("1:"+commitKey+"="+markerValue, "2:b=x", "3:"+commitKey+"="+markerValue, "4:a=2")
	f.advance(cc.DeleteRetention + time.Second)
	f.clean(t)
	check("2:b=x", "3:"+commitKey+"="+markerValue, "4:a=2")
}
