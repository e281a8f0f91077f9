package log

import (
	"errors"
	"testing"
)

// TestTryAppend: TryAppend writes what needs only a write, refuses with ErrWouldBlock (and
// writes nothing) what would wait for another append, roll, reserve index space, flush or
// record a new leader epoch, and Append then writes the refused batch as usual.
func TestTryAppend(t *testing.T) {
	try := func(t *testing.T, l *Log, b []byte) (AppendResult, error) {
		t.Helper()
		leo := l.leo.Load()
		res, err := l.TryAppend(b)
		if errors.Is(err, ErrWouldBlock) && l.leo.Load() != leo {
			t.Fatalf("refused append moved the log end %d -> %d", leo, l.leo.Load())
		}
		return res, err
	}
	t.Run("write only", func(t *testing.T) {
		cfg := testConfig()
		cfg.SegmentBytes = 1 << 20
		l := mustOpen(t, t.TempDir(), cfg, Options{})
		defer l.Close()
		mustAppend(t, l, makeBatch(t, plain(1, 10, 1000))) // the first epoch's checkpoint
		for i := range 10 {
			res, err := try(t, l, makeBatch(t, plain(2, 10, 1000)))
			if err != nil {
				t.Fatalf("TryAppend %d: %v", i, err)
			}
			if want := int64(1 + 2*i); res.BaseOffset != want {
				t.Fatalf("TryAppend %d at %d; want %d", i, res.BaseOffset, want)
			}
		}
		if got := readBatches(t, l, 0); len(got) != 11 {
			t.Fatalf("read %d batches; want 11", len(got))
		}
	})
	t.Run("roll", func(t *testing.T) {
		cfg := testConfig() // 16 KiB segments
		l := mustOpen(t, t.TempDir(), cfg, Options{})
		defer l.Close()
		mustAppend(t, l, makeBatch(t, plain(1, 10, 1000)))
		big := makeBatch(t, plain(1, int(cfg.SegmentBytes)-120, 1000))
		if _, err := try(t, l, big); !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("TryAppend needing a roll: %v; want ErrWouldBlock", err)
		}
		if n := len(*l.segs.Load()); n != 1 {
			t.Fatalf("%d segments after a refused roll; want 1", n)
		}
		if res := mustAppend(t, l, big); res.BaseOffset != 1 {
			t.Fatalf("Append after refusal at %d; want 1", res.BaseOffset)
		}
		if n := len(*l.segs.Load()); n != 2 {
			t.Fatalf("%d segments after Append; want 2", n)
		}
	})
	t.Run("flush.messages", func(t *testing.T) {
		cfg := testConfig()
		cfg.SegmentBytes = 1 << 20
		cfg.FlushMessages = 3
		l := mustOpen(t, t.TempDir(), cfg, Options{})
		defer l.Close()
		mustAppend(t, l, makeBatch(t, plain(1, 10, 1000)))
		if _, err := try(t, l, makeBatch(t, plain(1, 10, 1000))); err != nil {
			t.Fatalf("TryAppend of the 2nd record: %v", err)
		}
		if _, err := try(t, l, makeBatch(t, plain(1, 10, 1000))); !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("TryAppend of the 3rd record (flush due): %v; want ErrWouldBlock", err)
		}
	})
	t.Run("new leader epoch", func(t *testing.T) {
		cfg := testConfig()
		cfg.SegmentBytes = 1 << 20
		l := mustOpen(t, t.TempDir(), cfg, Options{})
		defer l.Close()
		// A log that knows no epoch records its first batch's in the checkpoint file.
		if _, err := try(t, l, makeBatch(t, plain(1, 10, 1000))); !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("TryAppend of the first epoch's first batch: %v; want ErrWouldBlock", err)
		}
		mustAppend(t, l, makeBatch(t, plain(1, 10, 1000)))
		if _, err := try(t, l, makeBatch(t, plain(1, 10, 1000))); err != nil {
			t.Fatalf("TryAppend once the epoch is recorded: %v", err)
		}
	})
	t.Run("index space", func(t *testing.T) {
		cfg := testConfig()
		cfg.SegmentBytes = 1 << 20
		cfg.MaxIndexBytes = 1 << 20
		cfg.IndexIntervalBytes = 0 // an index entry per batch
		l := mustOpen(t, t.TempDir(), cfg, Options{})
		defer l.Close()
		if l.active.offIdx.noFallocate {
			t.Skip("the file system has no fallocate: index space is never reserved")
		}
		b := makeBatch(t, plain(1, 1, 1000))
		refused := 0
		for range 3 * reserveChunk / offsetEntrySize {
			if _, err := try(t, l, b); errors.Is(err, ErrWouldBlock) {
				refused++
				mustAppend(t, l, b)
			} else if err != nil {
				t.Fatal(err)
			}
		}
		// The first append records the epoch; then one refusal per chunk of offset entries.
		if refused < 3 {
			t.Fatalf("%d refusals over 3 chunks of index entries; want at least 3", refused)
		}
	})
	t.Run("busy", func(t *testing.T) {
		l := mustOpen(t, t.TempDir(), testConfig(), Options{})
		defer l.Close()
		mustAppend(t, l, makeBatch(t, plain(1, 10, 1000)))
		l.mu.Lock()
		_, err := l.TryAppend(makeBatch(t, plain(1, 10, 1000)))
		l.mu.Unlock()
		if !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("TryAppend while another append holds the log: %v; want ErrWouldBlock", err)
		}
	})
}
