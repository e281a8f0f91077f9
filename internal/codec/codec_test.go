package codec

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/internal/testutil"
)

// allCodecs lists every codec, None first.
var allCodecs = []Codec{None, Gzip, Snappy, LZ4, Zstd}

func TestCodecRoundTrip(t *testing.T) {
	c := New()
	for _, codec := range allCodecs {
		for _, n := range []int{0, 1, 1000, xerialBlockSize, 200 << 10} {
			t.Run(fmt.Sprintf("%s/%d", codec, n), func(t *testing.T) {
				src := testutil.Payload(n, uint64(n))
				comp, err := c.Compress(codec, src, []byte("pre"))
				if err != nil {
					t.Fatal(err)
				}
				if string(comp[:3]) != "pre" {
					t.Fatal("compress clobbered dst prefix")
				}
				out, err := c.Decompress(codec, comp[3:], []byte("x"), n)
				if err != nil {
					t.Fatal(err)
				}
				if out[0] != 'x' || !bytes.Equal(out[1:], src) {
					t.Fatalf("round trip differs: %d bytes, want %d", len(out)-1, n)
				}
				if n > 0 {
					if _, err := c.Decompress(codec, comp[3:], nil, n-1); !errors.Is(err, ErrDecompressedTooLarge) {
						t.Fatalf("limit %d of %d: err = %v", n-1, n, err)
					}
				}
			})
		}
	}
}

// TestCodecFranzGoInterop checks both directions against franz-go's codecs,
// which interoperate with the Java client and librdkafka.
func TestCodecFranzGoInterop(t *testing.T) {
	c := New()
	dec := kgo.DefaultDecompressor()
	for _, codec := range allCodecs[1:] {
		t.Run(codec.String(), func(t *testing.T) {
			src := testutil.Payload(100<<10, 3)
			ours, err := c.Compress(codec, src, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := dec.Decompress(ours, kgo.CompressionCodecType(codec))
			if err != nil || !bytes.Equal(got, src) {
				t.Fatalf("franz-go decoding ours: err=%v equal=%v", err, bytes.Equal(got, src))
			}
			comp, err := testutil.KgoCompressor(int8(codec))
			if err != nil {
				t.Fatal(err)
			}
			theirs, used := comp.Compress(new(bytes.Buffer), src)
			if used != kgo.CompressionCodecType(codec) {
				t.Fatalf("franz-go used codec %d", used)
			}
			back, err := c.Decompress(codec, theirs, nil, len(src))
			if err != nil || !bytes.Equal(back, src) {
				t.Fatalf("decoding franz-go's: err=%v", err)
			}
		})
	}
}

func TestSnappyFraming(t *testing.T) {
	c := New()
	src := testutil.Payload(3*xerialBlockSize+5, 9)
	x, err := c.Compress(Snappy, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x[:xerialHeaderLen], xerialHeader[:]) {
		t.Fatalf("no xerial header: %x", x[:xerialHeaderLen])
	}
	raw := s2.EncodeSnappy(nil, src)
	got, err := c.Decompress(Snappy, raw, nil, len(src))
	if err != nil || !bytes.Equal(got, src) {
		t.Fatalf("raw snappy: %v", err)
	}
	bad := map[string][]byte{
		"xerial short block length": append(bytes.Clone(x[:xerialHeaderLen]), 0, 0),
		"xerial block beyond input": append(bytes.Clone(x[:xerialHeaderLen]), 0, 0, 1, 0, 1),
		"xerial negative block":     append(bytes.Clone(x[:xerialHeaderLen]), 0xFF, 0, 0, 0),
		"xerial corrupt block":      append(bytes.Clone(x[:xerialHeaderLen]), 0, 0, 0, 2, 0x05, 0xFF),
		"raw garbage":               {0xFF, 0xFF, 0xFF},
	}
	for name, in := range bad {
		if _, err := c.Decompress(Snappy, in, nil, 1<<20); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestDecompressGarbage(t *testing.T) {
	c := New()
	garbage := testutil.Payload(4096, 5)
	for _, codec := range allCodecs[1:] {
		if _, err := c.Decompress(codec, garbage, nil, 1<<20); err == nil {
			t.Errorf("%s: garbage decoded", codec)
		}
		comp, _ := c.Compress(codec, testutil.Payload(5000, 1), nil)
		if _, err := c.Decompress(codec, comp[:len(comp)/2], nil, 1<<20); err == nil {
			t.Errorf("%s: truncated input decoded", codec)
		}
	}
	for _, id := range []Codec{5, 7, -1} {
		if _, err := c.Decompress(id, nil, nil, 10); !errors.Is(err, ErrUnknownCodec) {
			t.Errorf("codec %d: %v", id, err)
		}
		if _, err := c.Compress(id, nil, nil); !errors.Is(err, ErrUnknownCodec) {
			t.Errorf("codec %d: %v", id, err)
		}
	}
}

// TestDecompressBomb decompresses 64 MiB of zeros with a 1 MiB limit and
// checks the memory allocated stays near the limit.
func TestDecompressBomb(t *testing.T) {
	c := New()
	zeros := make([]byte, 64<<20)
	const limit = 1 << 20
	for _, codec := range allCodecs[1:] {
		t.Run(codec.String(), func(t *testing.T) {
			bomb, err := c.Compress(codec, zeros, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Warm the pools so the measurement sees only the decode.
			if _, err := c.Decompress(codec, bomb, nil, limit); !errors.Is(err, ErrDecompressedTooLarge) {
				t.Fatalf("err = %v", err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err = c.Decompress(codec, bomb, nil, limit)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrDecompressedTooLarge) {
				t.Fatalf("err = %v", err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 12*limit {
				t.Fatalf("%s bomb (%d bytes) allocated %d bytes with limit %d", codec, len(bomb), n, limit)
			}
		})
	}
}

// FuzzDecompress decodes arbitrary input with every codec under a small
// limit: no panic, and never more output than the limit.
func FuzzDecompress(f *testing.F) {
	c := New()
	for _, codec := range allCodecs {
		comp, _ := c.Compress(codec, testutil.Payload(3000, 2), nil)
		f.Add(uint8(codec), comp)
	}
	f.Add(uint8(Snappy), s2.EncodeSnappy(nil, []byte("raw snappy block")))
	f.Fuzz(func(t *testing.T, codec uint8, src []byte) {
		const limit = 64 << 10
		out, err := c.Decompress(Codec(codec%8), src, nil, limit)
		if err == nil && len(out) > limit {
			t.Fatalf("%d bytes out, limit %d", len(out), limit)
		}
	})
}

// TestCodecsConcurrent shares one Codecs between goroutines, as cores
// share it in the broker; run with -race.
func TestCodecsConcurrent(t *testing.T) {
	c := New()
	src := testutil.Payload(20000, 4)
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := range 10 {
				codec := allCodecs[(g+i)%len(allCodecs)]
				comp, err := c.Compress(codec, src, nil)
				if err != nil {
					errs <- err
					return
				}
				out, err := c.Decompress(codec, comp, nil, len(src))
				if err != nil || !bytes.Equal(out, src) {
					errs <- fmt.Errorf("goroutine %d %s: %v", g, codec, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompressLevel: every level of Kafka's compression.<codec>.level ranges round-trips, the
// default level gives Compress's output, and a level is applied (gzip at 1 and 9 differ on
// compressible input).
func TestCompressLevel(t *testing.T) {
	c := New()
	src := bytes.Repeat([]byte("ringbroker compresses what Kafka compresses, at the topic's level. "), 2000)
	for _, tc := range []struct {
		codec  Codec
		levels []int
	}{
		{Gzip, []int{-1, 1, 5, 9, 42}},
		{LZ4, []int{1, 9, 17, 0}},
		{Zstd, []int{-131072, -1, 3, 6, 22}},
		{Snappy, []int{1}},
		{None, []int{7}},
	} {
		for _, level := range append(tc.levels, DefaultLevel) {
			out, err := c.CompressLevel(tc.codec, level, src, nil)
			if err != nil {
				t.Fatalf("%v level %d: %v", tc.codec, level, err)
			}
			back, err := c.Decompress(tc.codec, out, nil, len(src))
			if err != nil || !bytes.Equal(back, src) {
				t.Fatalf("%v level %d: %d bytes decompress to %d (%v); want the input back", tc.codec, level, len(out), len(back), err)
			}
		}
	}
	dflt, _ := c.Compress(Gzip, src, nil)
	viaLevel, _ := c.CompressLevel(Gzip, -1, src, nil)
	fast, _ := c.CompressLevel(Gzip, 1, src, nil)
	best, _ := c.CompressLevel(Gzip, 9, src, nil)
	if !bytes.Equal(dflt, viaLevel) || bytes.Equal(fast, best) {
		t.Fatalf("gzip: default %d bytes, level -1 %d, level 1 %d, level 9 %d; want -1 as the default and 1 unlike 9",
			len(dflt), len(viaLevel), len(fast), len(best))
	}
}
