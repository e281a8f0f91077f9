package log

import (
	"errors"
	"sync"
	"testing"
)

// TestGroupCommit runs appenders that each wait for their batch to be fsynced: every wait
// ends only once the recovery point covers the batch, and concurrent waits share fsyncs.
func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.GroupCommit = true
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, dir, cfg, Options{})
	const writers, perWriter = 8, 40
	var appendMu sync.Mutex // the broker serialises appends per partition the same way
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter)
	for range writers {
		wg.Go(func() {
			for range perWriter {
				appendMu.Lock()
				res, err := l.Append(makeBatch(t, plain(2, 100, 1000)))
				appendMu.Unlock()
				if err != nil {
					errs <- err
					return
				}
				done := make(chan error, 1)
				l.SyncAsync(res.LastOffset+1, func(err error) {
					if err == nil && l.RecoveryPoint() <= res.LastOffset {
						err = errors.New("acknowledged before the recovery point passed the batch")
					}
					done <- err
				})
				if err := <-done; err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rounds := l.GroupCommitRounds()
	if rounds == 0 || rounds >= writers*perWriter {
		t.Fatalf("%d fsync rounds for %d waits; want them shared", rounds, writers*perWriter)
	}
	t.Logf("%d waits answered by %d fsync rounds", writers*perWriter, rounds)
	if !l.GroupCommit() {
		t.Fatal("GroupCommit() = false with flush.group.commit set")
	}
	rp := l.RecoveryPoint()
	crash(l)
	l = mustOpen(t, dir, cfg, Options{RecoveryPoint: rp})
	defer l.Close()
	if got := readBatches(t, l, 0); len(got) != writers*perWriter {
		t.Fatalf("%d batches after a crash; want %d", len(got), writers*perWriter)
	}
	done := make(chan error, 1)
	l.SyncAsync(l.LogEndOffset(), func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatalf("SyncAsync of durable offsets: %v", err)
	}
}
