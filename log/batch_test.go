package log

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"ringbroker/internal/recordbatch"
)

func TestCheckBatch(t *testing.T) {
	good := makeBatch(t, plain(2, 10, 0))
	mut := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	tests := []struct {
		name string
		b    []byte
		wErr string // substring; empty for success
	}{
		{"good", good, ""},
		{"good with trailing bytes", append(bytes.Clone(good), 9, 9), ""},
		{"short header", good[:60], "truncated header"},
		{"short batch", good[:len(good)-1], "truncated batch"},
		{"tiny length", mut(func(b []byte) { binary.BigEndian.PutUint32(b[recordbatch.OffBatchLength:], 10) }), "batchLength=10"},
		{"negative length", mut(func(b []byte) { binary.BigEndian.PutUint32(b[recordbatch.OffBatchLength:], math.MaxUint32) }), "batchLength=-1"},
		{"magic", mut(func(b []byte) { b[recordbatch.OffMagic] = 1 }), "magic=1"},
		{"negative delta", mut(func(b []byte) { binary.BigEndian.PutUint32(b[recordbatch.OffLastOffsetDelta:], math.MaxUint32) }), "lastOffsetDelta=-1"},
		{"crc", mut(func(b []byte) { b[len(b)-1] ^= 1 }), "crc mismatch"},
		{"base offset and epoch lie outside the crc", mut(func(b []byte) {
			binary.BigEndian.PutUint64(b[recordbatch.OffBaseOffset:], 77)
			binary.BigEndian.PutUint32(b[recordbatch.OffLeaderEpoch:], 5)
		}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := checkBatch(tt.b, true)
			if (err == nil) != (tt.wErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wErr)) {
				t.Fatalf("checkBatch = %v; want %q", err, tt.wErr)
			}
		})
	}
}

func TestIncrementSequence(t *testing.T) {
	for _, tt := range []struct{ seq, delta, w int32 }{
		{0, 0, 0}, {5, 3, 8}, {math.MaxInt32, 0, math.MaxInt32}, {math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 3, 1}, {math.MaxInt32 - 10, 10, math.MaxInt32},
	} {
		if got := incrementSequence(tt.seq, tt.delta); got != tt.w {
			t.Errorf("incrementSequence(%d, %d) = %d; want %d", tt.seq, tt.delta, got, tt.w)
		}
	}
}

func TestFirstRecordAtOrAfter(t *testing.T) {
	b := makeBatch(t, plain(5, 3, 100)) // records at offsets 0..4, timestamps 100..104
	binary.BigEndian.PutUint64(b[recordbatch.OffBaseOffset:], 50)
	for _, tt := range []struct {
		ts, minOffset, wOff, wTs int64
		wOK                      bool
	}{
		{0, 0, 50, 100, true}, {102, 0, 52, 102, true}, {104, 0, 54, 104, true}, {105, 0, 0, 0, false},
		{100, 53, 53, 103, true},
	} {
		off, ts, ok := firstRecordAtOrAfter(b, tt.ts, tt.minOffset)
		if off != tt.wOff || ts != tt.wTs || ok != tt.wOK {
			t.Errorf("firstRecordAtOrAfter(%d, %d) = %d, %d, %v; want %d, %d, %v", tt.ts, tt.minOffset, off, ts, ok, tt.wOff, tt.wTs, tt.wOK)
		}
	}
	compressed := makeBatch(t, batchSpec{records: 2, valueSize: 3, ts: 1, producerID: -1, codec: 2})
	if _, _, ok := firstRecordAtOrAfter(compressed, 0, 0); ok {
		t.Error("walked the records of a compressed batch")
	}
	broken := bytes.Clone(b)
	broken[recordbatch.HeaderSize] = 0x7f // first record's length far past the end
	if _, _, ok := firstRecordAtOrAfter(broken, 0, 0); ok {
		t.Error("walked a record longer than the batch")
	}
}
