package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/recordbatch"
	"ringbroker/internal/testutil"
)

// checkRecords decodes b and compares every record with want.
func checkRecords(t *testing.T, c *Codecs, b Batch, want []kmsg.Record) {
	t.Helper()
	i := 0
	err := c.DecodeRecords(b, 1<<24, func(r *Record) error {
		w := want[i]
		if r.OffsetDelta != w.OffsetDelta || r.TimestampDelta != w.TimestampDelta64 {
			return fmt.Errorf("record %d: deltas %d/%d, want %d/%d", i, r.OffsetDelta, r.TimestampDelta, w.OffsetDelta, w.TimestampDelta64)
		}
		if !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) {
			return fmt.Errorf("record %d: key %q, want %q", i, r.Key, w.Key)
		}
		if !bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) {
			return fmt.Errorf("record %d: value differs (nil %v, want nil %v)", i, r.Value == nil, w.Value == nil)
		}
		if len(r.Headers) != len(w.Headers) {
			return fmt.Errorf("record %d: %d headers, want %d", i, len(r.Headers), len(w.Headers))
		}
		for j, h := range r.Headers {
			if string(h.Key) != w.Headers[j].Key || !bytes.Equal(h.Value, w.Headers[j].Value) || (h.Value == nil) != (w.Headers[j].Value == nil) {
				return fmt.Errorf("record %d header %d differs", i, j)
			}
		}
		i++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if i != len(want) {
		t.Fatalf("decoded %d records, want %d", i, len(want))
	}
}

func TestBatchAccessorsMatchKmsg(t *testing.T) {
	c := NewCodecs()
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			recs := testRecords(25, 100)
			spec := batchSpec{codec: codec, baseOffset: 1000, producerID: 42, producerEpoch: 3,
				baseSequence: 17, attrs: recordbatch.AttrTransactional, firstTS: 1_700_000_000_123}
			raw := buildBatch(t, c, spec, recs)
			b, rest, err := NextBatch(raw, 0, 0)
			if err != nil || len(rest) != 0 {
				t.Fatalf("next: %v, rest %d", err, len(rest))
			}
			var k kmsg.RecordBatch
			if err := k.ReadFrom(raw); err != nil {
				t.Fatal(err)
			}
			got := []int64{b.BaseOffset(), int64(b.Length()), int64(b.PartitionLeaderEpoch()), int64(b.Magic()),
				int64(int32(b.CRC())), int64(b.Attributes()), int64(b.LastOffsetDelta()), b.FirstTimestamp(),
				b.MaxTimestamp(), b.ProducerID(), int64(b.ProducerEpoch()), int64(b.BaseSequence()), int64(b.NumRecords())}
			want := []int64{k.FirstOffset, int64(k.Length), int64(k.PartitionLeaderEpoch), int64(k.Magic),
				int64(k.CRC), int64(k.Attributes), int64(k.LastOffsetDelta), k.FirstTimestamp,
				k.MaxTimestamp, k.ProducerID, int64(k.ProducerEpoch), int64(k.FirstSequence), int64(k.NumRecords)}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("field %d: %d, want %d", i, got[i], want[i])
				}
			}
			if b.Codec() != codec || !b.IsTransactional() || b.IsControl() || b.TimestampType() != CreateTime ||
				b.HasDeleteHorizon() || b.LastOffset() != 1024 || !bytes.Equal(b.Records(), k.Records) {
				t.Fatal("derived accessors")
			}
			checkRecords(t, c, b, recs)
		})
	}
}

func TestBatchSetters(t *testing.T) {
	c := NewCodecs()
	raw := buildBatch(t, c, plainSpec(CodecLZ4), testRecords(5, 10))
	b := Batch(raw)
	crc := b.CRC()
	b.SetBaseOffset(1 << 40)
	b.SetPartitionLeaderEpoch(77)
	if b.CRC() != crc || b.ComputeCRC() != crc {
		t.Fatal("offset/epoch setters must not touch the CRC")
	}
	if b.BaseOffset() != 1<<40 || b.PartitionLeaderEpoch() != 77 {
		t.Fatal("offset/epoch not set")
	}
	b.SetMaxTimestamp(123456)
	if b.MaxTimestamp() != 123456 || b.TimestampType() != CreateTime || b.CRC() != b.ComputeCRC() || b.CRC() == crc {
		t.Fatal("SetMaxTimestamp")
	}
	b.SetLogAppendTime(999)
	if b.MaxTimestamp() != 999 || b.TimestampType() != LogAppendTime || b.Codec() != CodecLZ4 || b.CRC() != b.ComputeCRC() {
		t.Fatal("SetLogAppendTime")
	}
	if _, err := ValidateBatches(raw); err != nil {
		t.Fatalf("batch invalid after setters: %v", err)
	}
	var k kmsg.RecordBatch
	if err := k.ReadFrom(raw); err != nil || k.MaxTimestamp != 999 || k.FirstOffset != 1<<40 || k.PartitionLeaderEpoch != 77 {
		t.Fatalf("kmsg sees %+v, %v", k, err)
	}
}

func TestValidateBatchesSummary(t *testing.T) {
	c := NewCodecs()
	var set []byte
	specs := []batchSpec{
		{codec: CodecZstd, baseOffset: 0, producerID: 5, producerEpoch: 1, baseSequence: 0, firstTS: 100},
		{codec: CodecZstd, baseOffset: 3, producerID: 5, producerEpoch: 1, baseSequence: 3, firstTS: 500},
		{codec: CodecGzip, baseOffset: 7, producerID: 6, producerEpoch: 2, baseSequence: 9, firstTS: 200},
	}
	counts := []int{3, 4, 2}
	for i, s := range specs {
		set = append(set, buildBatch(t, c, s, testRecords(counts[i], 20))...)
	}
	s, err := ValidateBatches(set)
	if err != nil {
		t.Fatal(err)
	}
	want := BatchSummary{
		Batches: 3, Records: 9, Bytes: len(set),
		First:        BatchInfo{BaseOffset: 0, ProducerID: 5, ProducerEpoch: 1, BaseSequence: 0, LastOffsetDelta: 2},
		Last:         BatchInfo{BaseOffset: 7, ProducerID: 6, ProducerEpoch: 2, BaseSequence: 9, LastOffsetDelta: 1},
		MaxTimestamp: 512, Codec: CodecZstd, MixedCodecs: true,
	}
	if s != want {
		t.Fatalf("summary\n got %+v\nwant %+v", s, want)
	}
	if s, err := ValidateBatches(nil); err != nil || s.Batches != 0 {
		t.Fatalf("empty set: %+v %v", s, err)
	}
}

func TestValidateBatchesNoAllocs(t *testing.T) {
	c := NewCodecs()
	var set []byte
	for i := range 4 {
		set = append(set, buildBatch(t, c, plainSpec(allCodecs[i]), testRecords(10, 50))...)
	}
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := ValidateBatches(set); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs", allocs)
	}
}

// mutate returns a copy of b changed by fn, with the CRC recomputed when
// fix is set.
func mutate(b []byte, fix bool, fn func(b []byte)) []byte {
	b = bytes.Clone(b)
	fn(b)
	if fix && len(b) >= BatchHeaderLen {
		binary.BigEndian.PutUint32(b[recordbatch.OffCRC:], CRC32C(b[recordbatch.OffAttributes:]))
	}
	return b
}

func TestValidateBatchesErrors(t *testing.T) {
	c := NewCodecs()
	good := buildBatch(t, c, plainSpec(CodecNone), testRecords(4, 30))
	tests := []struct {
		name  string
		in    []byte
		want  *kerr.Error
		index int
	}{
		{"short", good[:10], kerr.CorruptMessage, 0},
		{"truncated header", good[:40], kerr.CorruptMessage, 0},
		{"truncated records", good[:len(good)-1], kerr.CorruptMessage, 0},
		{"trailing garbage", append(bytes.Clone(good), 1, 2, 3), kerr.CorruptMessage, 1},
		{"second batch truncated", append(bytes.Clone(good), good[:70]...), kerr.CorruptMessage, 1},
		{"magic 1", mutate(good, false, func(b []byte) { b[recordbatch.OffMagic] = 1 }), kerr.UnsupportedForMessageFormat, 0},
		{"magic 0", mutate(good, false, func(b []byte) { b[recordbatch.OffMagic] = 0 }), kerr.UnsupportedForMessageFormat, 0},
		{"magic 3", mutate(good, false, func(b []byte) { b[recordbatch.OffMagic] = 3 }), kerr.CorruptMessage, 0},
		{"length below header", mutate(good, false, func(b []byte) { binary.BigEndian.PutUint32(b[recordbatch.OffBatchLength:], 48) }), kerr.CorruptMessage, 0},
		{"negative length", mutate(good, false, func(b []byte) { binary.BigEndian.PutUint32(b[recordbatch.OffBatchLength:], 0xFFFFFFF0) }), kerr.CorruptMessage, 0},
		{"crc", mutate(good, false, func(b []byte) { b[len(b)-1] ^= 1 }), kerr.CorruptMessage, 0},
		{"codec 5", mutate(good, true, func(b []byte) { b[recordbatch.OffAttributes+1] |= 5 }), kerr.UnsupportedCompressionType, 0},
		{"count mismatch", mutate(good, true, func(b []byte) { binary.BigEndian.PutUint32(b[recordbatch.OffNumRecords:], 3) }), kerr.InvalidRecord, 0},
		{"negative count", mutate(good, true, func(b []byte) { binary.BigEndian.PutUint32(b[recordbatch.OffNumRecords:], 0xFFFFFFFF) }), kerr.InvalidRecord, 0},
		{"count beyond payload", mutate(good, true, func(b []byte) {
			binary.BigEndian.PutUint32(b[recordbatch.OffNumRecords:], 1000)
			binary.BigEndian.PutUint32(b[recordbatch.OffLastOffsetDelta:], 999)
		}), kerr.CorruptMessage, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ValidateBatches(tt.in)
			var be *BatchError
			if !errors.As(err, &be) {
				t.Fatalf("err %T %v", err, err)
			}
			if !errors.Is(err, tt.want) || ErrorCode(err) != tt.want.Code || be.Index != tt.index {
				t.Fatalf("err = %v (index %d), want %s at %d", err, be.Index, tt.want.Message, tt.index)
			}
		})
	}
}

// TestValidateBatchesEveryFlipAndCut flips every CRC-covered byte and cuts
// at every length; each must be rejected.
func TestValidateBatchesEveryFlipAndCut(t *testing.T) {
	c := NewCodecs()
	good := buildBatch(t, c, plainSpec(CodecSnappy), testRecords(6, 40))
	for i := recordbatch.OffAttributes; i < len(good); i++ {
		bad := mutate(good, false, func(b []byte) { b[i] ^= 0x40 })
		if _, err := ValidateBatches(bad); !errors.Is(err, kerr.CorruptMessage) {
			t.Fatalf("flip at %d: %v", i, err)
		}
	}
	for i := recordbatch.OffCRC; i < recordbatch.OffAttributes; i++ {
		bad := mutate(good, false, func(b []byte) { b[i] ^= 1 })
		if _, err := ValidateBatches(bad); !errors.Is(err, kerr.CorruptMessage) {
			t.Fatalf("crc flip at %d: %v", i, err)
		}
	}
	for i := recordbatch.OffBaseOffset; i < recordbatch.OffBatchLength; i++ {
		if _, err := ValidateBatches(mutate(good, false, func(b []byte) { b[i] ^= 0xFF })); err != nil {
			t.Fatalf("base offset byte %d is outside the CRC: %v", i, err)
		}
	}
	for n := 1; n < len(good); n++ {
		if _, err := ValidateBatches(good[:n]); err == nil {
			t.Fatalf("cut at %d accepted", n)
		}
	}
}

func TestValidateProduce(t *testing.T) {
	c := NewCodecs()
	good := buildBatch(t, c, plainSpec(CodecNone), testRecords(3, 10))
	zstd := buildBatch(t, c, plainSpec(CodecZstd), testRecords(3, 10))
	empty := testutil.SealBatch(kmsg.RecordBatch{Magic: 2, LastOffsetDelta: -1, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1})
	control := buildBatch(t, c, batchSpec{producerID: 1, attrs: recordbatch.AttrControl | recordbatch.AttrTransactional}, testRecords(1, 0))
	noSeq := buildBatch(t, c, batchSpec{producerID: 1, baseSequence: -1}, testRecords(1, 0))
	tests := []struct {
		name    string
		in      []byte
		version int16
		max     int
		want    *kerr.Error
	}{
		{"ok", good, 9, 0, nil},
		{"ok zstd v7", zstd, 7, 0, nil},
		{"zstd v6", zstd, 6, 0, kerr.UnsupportedCompressionType},
		{"no batch", nil, 9, 0, kerr.InvalidRecord},
		{"two batches", append(bytes.Clone(good), good...), 9, 0, kerr.InvalidRecord},
		{"magic 1", mutate(good, false, func(b []byte) { b[recordbatch.OffMagic] = 1 }), 9, 0, kerr.InvalidRecord},
		{"too large", good, 9, len(good) - 1, kerr.MessageTooLarge},
		{"at max", good, 9, len(good), nil},
		{"no records", empty, 9, 0, kerr.InvalidRecord},
		{"control", control, 9, 0, kerr.InvalidRecord},
		{"producer id without sequence", noSeq, 9, 0, kerr.InvalidRecord},
		{"crc", mutate(good, false, func(b []byte) { b[70] ^= 1 }), 9, 0, kerr.CorruptMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ValidateProduce(tt.in, tt.version, tt.max)
			if tt.want == nil {
				if err != nil || s.Batches != 1 {
					t.Fatalf("err %v summary %+v", err, s)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %s", err, tt.want.Message)
			}
		})
	}
}

// rawRecord encodes one record from parts given as already-encoded
// fields, then prefixes the length (or the given bogus length).
func rawRecord(length int64, fields ...[]byte) []byte {
	body := bytes.Join(fields, nil)
	if length < 0 {
		length = int64(len(body))
	}
	return append(binary.AppendVarint(nil, length), body...)
}

func vi(v int64) []byte { return binary.AppendVarint(nil, v) }

func TestDecodeRecordsErrors(t *testing.T) {
	c := NewCodecs()
	attrs := []byte{0}
	okRec := rawRecord(-1, attrs, vi(0), vi(0), vi(1), []byte("k"), vi(-1), vi(0))
	withBatch := func(n int32, payload []byte) Batch {
		return Batch(testutil.SealBatch(kmsg.RecordBatch{Magic: 2, LastOffsetDelta: n - 1, NumRecords: n, Records: payload,
			ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1}))
	}
	tests := []struct {
		name string
		b    Batch
	}{
		{"fewer records than count", withBatch(2, okRec)},
		{"more bytes than count", withBatch(1, append(bytes.Clone(okRec), okRec...))},
		{"length too long", withBatch(1, rawRecord(50, attrs, vi(0), vi(0), vi(-1), vi(-1), vi(0)))},
		{"length too short", withBatch(1, rawRecord(3, attrs, vi(0), vi(0), vi(-1), vi(-1), vi(0)))},
		{"negative length", withBatch(1, rawRecord(-5, attrs))},
		{"key beyond record", withBatch(1, rawRecord(-1, attrs, vi(0), vi(0), vi(9), []byte("k"), vi(-1), vi(0)))},
		{"key length -2", withBatch(1, rawRecord(-1, attrs, vi(0), vi(0), vi(-2), vi(-1), vi(0)))},
		{"negative header count", withBatch(1, rawRecord(-1, attrs, vi(0), vi(0), vi(-1), vi(-1), vi(-1)))},
		{"huge header count", withBatch(1, rawRecord(-1, attrs, vi(0), vi(0), vi(-1), vi(-1), vi(1<<30)))},
		{"null header key", withBatch(1, rawRecord(-1, attrs, vi(0), vi(0), vi(-1), vi(-1), vi(1), vi(-1), vi(-1)))},
		{"offset delta overflow", withBatch(1, rawRecord(-1, attrs, vi(0), vi(1<<40), vi(-1), vi(-1), vi(0)))},
		{"bad varint", withBatch(1, rawRecord(-1, attrs, bytes.Repeat([]byte{0xFF}, 11)))},
		{"empty record", withBatch(1, rawRecord(-1))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.DecodeRecords(tt.b, 1<<20, func(*Record) error { return nil })
			if !errors.Is(err, kerr.InvalidRecord) {
				t.Fatalf("err = %v, want INVALID_RECORD", err)
			}
		})
	}
	if err := c.DecodeRecords(withBatch(1, okRec), 1<<20, func(*Record) error { return nil }); err != nil {
		t.Fatalf("valid record rejected: %v", err)
	}
	stop := errors.New("stop")
	if err := c.DecodeRecords(withBatch(1, okRec), 1<<20, func(*Record) error { return stop }); err != stop {
		t.Fatalf("callback error not returned as is: %v", err)
	}
}

func TestDecodeRecordsCompressedErrors(t *testing.T) {
	c := NewCodecs()
	recs := testRecords(50, 1000)
	b := Batch(buildBatch(t, c, plainSpec(CodecZstd), recs))
	err := c.DecodeRecords(b, 1000, func(*Record) error { return nil })
	if !errors.Is(err, kerr.MessageTooLarge) || !errors.Is(err, ErrDecompressedTooLarge) {
		t.Fatalf("over limit: %v", err)
	}
	garbled := Batch(testutil.SealBatch(kmsg.RecordBatch{Magic: 2, Attributes: int16(CodecGzip), NumRecords: 1,
		Records: []byte("not gzip at all")}))
	if err := c.DecodeRecords(garbled, 1<<20, func(*Record) error { return nil }); !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("garbled gzip: %v", err)
	}
}

// TestDecodeRecordsFranzGoCompressed decodes batches whose payload franz-go
// compressed, as a franz-go producer would send them.
func TestDecodeRecordsFranzGoCompressed(t *testing.T) {
	c := NewCodecs()
	recs := testRecords(40, 300)
	payload := testutil.EncodeRecords(recs...)
	for _, codec := range allCodecs[1:] {
		comp, _ := kgoCompress(t, codec, payload)
		raw := testutil.SealBatch(kmsg.RecordBatch{Magic: 2, Attributes: int16(codec), LastOffsetDelta: 39, NumRecords: 40,
			ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, Records: comp})
		if _, err := ValidateBatches(raw); err != nil {
			t.Fatal(err)
		}
		checkRecords(t, c, Batch(raw), recs)
	}
}

func kgoCompress(t *testing.T, codec Codec, src []byte) ([]byte, Codec) {
	t.Helper()
	comp, err := testutil.KgoCompressor(int8(codec))
	if err != nil {
		t.Fatal(err)
	}
	out, used := comp.Compress(new(bytes.Buffer), src)
	return bytes.Clone(out), Codec(used)
}

// FuzzValidateBatches validates arbitrary record sets and decodes the
// records of every batch that passes, under a small decompression limit.
// With seal set, the first batch's length and CRC are fixed up first, so
// mutations reach the record decoder instead of failing the CRC.
func FuzzValidateBatches(f *testing.F) {
	c := NewCodecs()
	for _, codec := range allCodecs {
		f.Add(buildBatch(f, c, plainSpec(codec), testRecords(3, 20)), false)
		f.Add(buildBatch(f, c, plainSpec(codec), testRecords(3, 20)), true)
	}
	two := append(buildBatch(f, c, plainSpec(CodecNone), testRecords(2, 5)), buildBatch(f, c, plainSpec(CodecGzip), testRecords(2, 5))...)
	f.Add(two, false)
	f.Fuzz(func(t *testing.T, data []byte, seal bool) {
		if seal && len(data) >= BatchHeaderLen {
			data[recordbatch.OffMagic] = 2
			binary.BigEndian.PutUint32(data[recordbatch.OffBatchLength:], uint32(len(data)-recordbatch.LogOverhead))
			binary.BigEndian.PutUint32(data[recordbatch.OffCRC:], CRC32C(data[recordbatch.OffAttributes:]))
		}
		s, err := ValidateBatches(data)
		if err != nil {
			var be *BatchError
			if !errors.As(err, &be) || ErrorCode(err) == 0 {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if s.Bytes != len(data) {
			t.Fatalf("summary bytes %d of %d", s.Bytes, len(data))
		}
		for rest := data; len(rest) > 0; {
			b, next, err := NextBatch(rest, 0, 0)
			if err != nil {
				t.Fatalf("batch passed validation then failed: %v", err)
			}
			n := int32(0)
			err = c.DecodeRecords(b, 64<<10, func(*Record) error { n++; return nil })
			if err == nil && n != b.NumRecords() {
				t.Fatalf("decoded %d records of %d", n, b.NumRecords())
			}
			if err != nil && ErrorCode(err) == 0 {
				t.Fatalf("untyped record error %v", err)
			}
			rest = next
		}
	})
}
