package log

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"ringbroker/internal/testutil"
)

// batchSpec describes a record batch built by makeBatch.
type batchSpec struct {
	records    int   // number of records, at least 1
	valueSize  int   // bytes per record value
	ts         int64 // first record's timestamp; record i has ts+i
	producerID int64 // -1 for a non-idempotent batch
	epoch      int16
	seq        int32
	codec      int16 // compression bits of the attributes; the log treats records as opaque
}

func plain(records, valueSize int, ts int64) batchSpec {
	return batchSpec{records: records, valueSize: valueSize, ts: ts, producerID: -1, epoch: -1, seq: -1}
}

func idem(pid int64, epoch int16, seq int32, records int) batchSpec {
	return batchSpec{records: records, valueSize: 8, ts: 1000, producerID: pid, epoch: epoch, seq: seq}
}

// makeBatch encodes a record batch v2 of s.records records with a valid CRC32C.
func makeBatch(tb testing.TB, s batchSpec) []byte {
	tb.Helper()
	recs := make([]kmsg.Record, s.records)
	for i := range recs {
		recs[i] = kmsg.Record{TimestampDelta64: int64(i), Value: bytes.Repeat([]byte{byte('a' + i%26)}, s.valueSize)}
	}
	rb := testutil.NewBatch(s.ts, recs...)
	rb.Attributes = s.codec
	rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = s.producerID, s.epoch, s.seq
	return testutil.SealBatch(rb)
}

// testConfig is a small configuration that rolls and indexes often.
func testConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 16 << 10
	c.IndexIntervalBytes = 512
	c.MaxIndexBytes = 1 << 10
	return c
}

func mustOpen(tb testing.TB, dir string, cfg Config, opts Options) *Log {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(tb)
	}
	l, err := Open(dir, cfg, opts)
	if err != nil {
		tb.Fatalf("Open(%s): %v", dir, err)
	}
	return l
}

func mustAppend(tb testing.TB, l *Log, b []byte) AppendResult {
	tb.Helper()
	res, err := l.Append(b)
	if err != nil {
		tb.Fatalf("Append: %v", err)
	}
	return res
}

// readBatches reads every batch from offset to the log end and returns copies.
func readBatches(tb testing.TB, l *Log, offset int64) [][]byte {
	tb.Helper()
	var out [][]byte
	for offset < l.LogEndOffset() {
		r, err := l.Read(offset, 1<<20, -1, true)
		if err != nil {
			tb.Fatalf("Read(%d): %v", offset, err)
		}
		if len(r.Data) == 0 {
			r.Release()
			tb.Fatalf("Read(%d) returned nothing below log end %d", offset, l.LogEndOffset())
		}
		for p := 0; p < len(r.Data); {
			h, err := checkBatch(r.Data[p:], true)
			if err != nil {
				tb.Fatalf("Read(%d) served a bad batch at byte %d: %v", offset, p, err)
			}
			out = append(out, bytes.Clone(r.Data[p:p+int(h.size())]))
			offset = h.lastOffset() + 1
			p += int(h.size())
		}
		r.Release()
	}
	return out
}

// testLogger sends log output to the test's log.
func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// crash abandons l as a killed process would: no flush, no index trimming, no checkpoint,
// which is what Discard leaves.
func crash(l *Log) { l.Discard() }

func fileSize(tb testing.TB, path string) int64 {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Size()
}

// allocatingDir is a temporary directory on a file system that allocates blocks ahead
// (fallocate with KEEP_SIZE); the test is skipped where it does not, as then nothing is
// allocated ahead or padded.
func allocatingDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	probe, err := os.Create(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Fallocate(int(probe.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20)
	probe.Close()
	if errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("the file system of %s does not allocate ahead: %v", dir, err)
	}
	return dir
}

// batchWriter appends batches of 8 records of 1000 bytes to l, each with the next timestamp,
// and keeps a copy of each in want, for tests that read them back.
type batchWriter struct {
	t    *testing.T
	l    *Log
	want [][]byte
}

// add appends n batches.
func (w *batchWriter) add(n int) {
	for range n {
		b := makeBatch(w.t, plain(8, 1000, int64(len(w.want))))
		w.want = append(w.want, bytes.Clone(b))
		mustAppend(w.t, w.l, b)
	}
}

// checkBatches fails tb unless got holds the batches of want, in order: the same number, each
// of the same length and, past its first 16 bytes (the base offset and length, which the log
// stamps on append), the same bytes. when says at which point of the test they were read.
func checkBatches(tb testing.TB, got, want [][]byte, when string) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%s: read %d batches; want %d", when, len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) || !bytes.Equal(got[i][16:], want[i][16:]) {
			tb.Fatalf("%s: batch %d differs", when, i)
		}
	}
}
