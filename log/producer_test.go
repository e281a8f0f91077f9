package log

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// TestIdempotentProducer runs append scenarios of one producer against a real log. Each step
// appends a batch (producer 1 unless pid is set) and expects its base offset or an error.
func TestIdempotentProducer(t *testing.T) {
	type step struct {
		pid     int64
		epoch   int16
		seq     int32
		records int
		wBase   int64 // expected base offset; for a duplicate, the original's
		wDup    bool
		wErr    error
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"in sequence", []step{
			{epoch: 0, seq: 0, records: 3, wBase: 0},
			{epoch: 0, seq: 3, records: 2, wBase: 3},
			{epoch: 0, seq: 5, records: 1, wBase: 5},
		}},
		{"retry of the last batch is a duplicate", []step{
			{epoch: 0, seq: 0, records: 3, wBase: 0},
			{epoch: 0, seq: 3, records: 2, wBase: 3},
			{epoch: 0, seq: 3, records: 2, wBase: 3, wDup: true},
			{epoch: 0, seq: 5, records: 1, wBase: 5},
		}},
		{"any of the last five is a duplicate, older ones are out of order", []step{
			{epoch: 0, seq: 0, records: 1, wBase: 0},
			{epoch: 0, seq: 1, records: 1, wBase: 1},
			{epoch: 0, seq: 2, records: 1, wBase: 2},
			{epoch: 0, seq: 3, records: 1, wBase: 3},
			{epoch: 0, seq: 4, records: 1, wBase: 4},
			{epoch: 0, seq: 5, records: 1, wBase: 5},
			{epoch: 0, seq: 1, records: 1, wBase: 1, wDup: true},
			{epoch: 0, seq: 0, records: 1, wErr: ErrOutOfOrderSequence},
		}},
		{"gap", []step{
			{epoch: 0, seq: 0, records: 3, wBase: 0},
			{epoch: 0, seq: 4, records: 1, wErr: ErrOutOfOrderSequence},
			{epoch: 0, seq: 3, records: 1, wBase: 3},
		}},
		{"overlapping range is out of order", []step{
			{epoch: 0, seq: 0, records: 3, wBase: 0},
			{epoch: 0, seq: 1, records: 3, wErr: ErrOutOfOrderSequence},
		}},
		{"unknown producer may start anywhere", []step{
			{epoch: 5, seq: 42, records: 2, wBase: 0},
			{epoch: 5, seq: 44, records: 1, wBase: 2},
		}},
		{"new epoch starts at zero", []step{
			{epoch: 0, seq: 0, records: 3, wBase: 0},
			{epoch: 1, seq: 3, records: 1, wErr: ErrOutOfOrderSequence},
			{epoch: 1, seq: 0, records: 1, wBase: 3},
			{epoch: 0, seq: 3, records: 1, wErr: ErrInvalidProducerEpoch},
			{epoch: 1, seq: 1, records: 1, wBase: 4},
		}},
		{"a duplicate needs the same epoch", []step{
			{epoch: 0, seq: 0, records: 1, wBase: 0},
			{epoch: 1, seq: 0, records: 1, wBase: 1},
			{epoch: 0, seq: 0, records: 1, wErr: ErrInvalidProducerEpoch},
		}},
		{"sequence wraps past MaxInt32", []step{
			{epoch: 0, seq: math.MaxInt32 - 1, records: 2, wBase: 0},
			{epoch: 0, seq: 0, records: 1, wBase: 2},
			{epoch: 0, seq: math.MaxInt32 - 1, records: 2, wBase: 0, wDup: true},
		}},
		{"batch spanning the wrap", []step{
			{epoch: 0, seq: math.MaxInt32, records: 3, wBase: 0},
			{epoch: 0, seq: 2, records: 1, wBase: 3},
		}},
		{"producers are independent", []step{
			{pid: 1, epoch: 0, seq: 0, records: 1, wBase: 0},
			{pid: 2, epoch: 0, seq: 0, records: 1, wBase: 1},
			{pid: 1, epoch: 0, seq: 0, records: 1, wBase: 0, wDup: true},
			{pid: 2, epoch: 0, seq: 1, records: 1, wBase: 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustOpen(t, t.TempDir(), testConfig(), Options{})
			defer l.Close()
			for i, s := range tt.steps {
				pid := s.pid
				if pid == 0 {
					pid = 1
				}
				end := l.LogEndOffset()
				res, err := l.Append(makeBatch(t, idem(pid, s.epoch, s.seq, s.records)))
				if !errors.Is(err, s.wErr) {
					t.Fatalf("step %d: Append = %v; want %v", i, err, s.wErr)
				}
				if err != nil {
					if l.LogEndOffset() != end {
						t.Fatalf("step %d: failed append moved the log end to %d", i, l.LogEndOffset())
					}
					continue
				}
				if res.BaseOffset != s.wBase || res.LastOffset != s.wBase+int64(s.records-1) || res.Duplicate != s.wDup {
					t.Fatalf("step %d: %+v; want base %d, duplicate %v", i, res, s.wBase, s.wDup)
				}
				if s.wDup && l.LogEndOffset() != end {
					t.Fatalf("step %d: duplicate moved the log end to %d", i, l.LogEndOffset())
				}
			}
		})
	}
}

// TestProducerStateInOneAppend validates several batches of one producer in one append
// against each other, and rejects the whole append when one fails.
func TestProducerStateInOneAppend(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(), Options{})
	defer l.Close()
	two := append(makeBatch(t, idem(1, 0, 0, 2)), makeBatch(t, idem(1, 0, 2, 2))...)
	if res := mustAppend(t, l, two); res.BaseOffset != 0 || res.LastOffset != 3 {
		t.Fatalf("two batches: %+v; want 0..3", res)
	}
	bad := append(makeBatch(t, idem(1, 0, 4, 1)), makeBatch(t, idem(1, 0, 9, 1))...)
	if _, err := l.Append(bad); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("second batch out of order: %v", err)
	}
	if res := mustAppend(t, l, makeBatch(t, idem(1, 0, 4, 1))); res.BaseOffset != 4 {
		t.Fatalf("after a rejected append: %+v; want base 4 (state not committed)", res)
	}
}

// TestProducerStateSurvivesReopen rebuilds the producer state from the log on Open.
func TestProducerStateSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig(), Options{})
	for i := range 10 {
		mustAppend(t, l, makeBatch(t, idem(9, 2, int32(i*2), 2)))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, testConfig(), Options{CleanShutdown: true})
	defer l.Close()
	if res := mustAppend(t, l, makeBatch(t, idem(9, 2, 16, 2))); !res.Duplicate || res.BaseOffset != 16 {
		t.Fatalf("retry after reopen: %+v; want duplicate at 16", res)
	}
	if _, err := l.Append(makeBatch(t, idem(9, 1, 20, 1))); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch after reopen: %v", err)
	}
	if res := mustAppend(t, l, makeBatch(t, idem(9, 2, 20, 1))); res.BaseOffset != 20 {
		t.Fatalf("next batch after reopen: %+v; want base 20", res)
	}
}

// TestActiveProducers reads the producer state of txnFixture's producers, and again after a
// reopen from the snapshot, as DescribeProducers reports it.
func TestActiveProducers(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig(), Options{})
	txnFixture(t, l)
	mustAppend(t, l, makeBatch(t, idem(4, 3, 7, 2)))
	want := []ProducerState{
		{ProducerID: 1, Epoch: 0, LastSequence: 1, LastTimestamp: 1000, CoordinatorEpoch: 5, TxnStartOffset: -1},
		{ProducerID: 2, Epoch: 0, LastSequence: 1, LastTimestamp: 1000, CoordinatorEpoch: 5, TxnStartOffset: -1},
		{ProducerID: 3, Epoch: 0, LastSequence: 1, LastTimestamp: 1001, CoordinatorEpoch: -1, TxnStartOffset: 7},
		{ProducerID: 4, Epoch: 3, LastSequence: 8, LastTimestamp: 1001, CoordinatorEpoch: -1, TxnStartOffset: -1},
	}
	if got := l.ActiveProducers(); !slices.Equal(got, want) {
		t.Fatalf("ActiveProducers = %+v; want %+v", got, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, testConfig(), Options{CleanShutdown: true})
	defer l.Close()
	if got := l.ActiveProducers(); !slices.Equal(got, want) {
		t.Fatalf("ActiveProducers after reopen = %+v; want %+v", got, want)
	}
}
