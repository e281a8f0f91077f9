// Package codec compresses and decompresses Kafka record batch payloads with the five codecs
// Kafka defines (none, gzip, snappy, lz4, zstd), byte-compatible with the Java client. It is
// shared by wire (record decoding and batch building, for the broker's checks of compacted
// topics and its __consumer_offsets records) and log (the compaction cleaner), which must not
// import each other.
package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a record batch compression codec: attributes & 7.
type Codec int8

// The codecs Kafka defines.
const (
	None Codec = iota
	Gzip
	Snappy
	LZ4
	Zstd
)

// Sentinel errors, wrapped with detail by Decompress and Compress.
var (
	// ErrDecompressedTooLarge reports decompressed output that would exceed the caller's
	// limit; nothing beyond the limit (plus one read) is allocated.
	ErrDecompressedTooLarge = errors.New("decompressed size exceeds limit")
	// ErrUnknownCodec reports a compression codec id outside 0..4.
	ErrUnknownCodec = errors.New("unknown compression codec")
	// ErrTruncated reports compressed input that ends inside a frame.
	ErrTruncated = errors.New("truncated compressed input")
)

// String names the codec as Kafka's compression.type does.
func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// Valid reports whether c is one of the five codecs Kafka defines.
func (c Codec) Valid() bool { return c >= None && c <= Zstd }

const (
	// ZstdMaxWindow is the largest zstd window accepted when decoding. The
	// zstd format recommends decoders support 8 MiB; a frame asking for
	// more is rejected so one batch cannot make the decoder reserve an
	// arbitrarily large history.
	ZstdMaxWindow = 8 << 20

	// xerialBlockSize is the block size of the Java client's
	// SnappyOutputStream.
	xerialBlockSize = 32 << 10
	// xerialHeaderLen is the magic, version and compatible version.
	xerialHeaderLen = 16
	// lz4BlockSize matches the Java client's KafkaLZ4BlockOutputStream.
	lz4BlockSize = lz4.Block64Kb
	// minReadGrow is the smallest growth of a bounded streaming read.
	minReadGrow = 32 << 10
)

// xerialHeader is the xerial-snappy stream header: magic "\x82SNAPPY\x00",
// version 1 and minimum compatible version 1 (the Java reader rejects lower).
var xerialHeader = [xerialHeaderLen]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

// Codecs compresses and decompresses record payloads, reusing decoder and
// encoder state across calls through pools it owns. It is safe for
// concurrent use; share one per process or per core.
type Codecs struct {
	gzipReaders  sync.Pool // *gzipReader
	gzipWriters  sync.Pool // *gzipWriter
	lz4Readers   sync.Pool // *lz4Reader
	lz4Writers   sync.Pool // *lz4Writer
	zstdDecoders sync.Pool // *zstdDecoder
	zstdEncoders sync.Pool // *zstdEncoder
	// levelWriters holds a pool of writers per codec and level other than the default
	// (levelKey -> *sync.Pool of the codec's writer type), made at first use.
	levelWriters sync.Map
}

// DefaultLevel asks CompressLevel for the codec's default level: what Compress uses.
const DefaultLevel = math.MinInt

// levelKey names one pool of levelWriters.
type levelKey struct {
	codec Codec
	level int
}

type gzipReader struct {
	src bytes.Reader
	r   gzip.Reader
}

type gzipWriter struct {
	dst appendWriter
	w   *gzip.Writer
}

type lz4Reader struct {
	src bytes.Reader
	r   *lz4.Reader
}

type lz4Writer struct {
	dst appendWriter
	w   *lz4.Writer
}

type zstdDecoder struct {
	src bytes.Reader
	d   *zstd.Decoder
}

type zstdEncoder struct {
	e *zstd.Encoder
}

// appendWriter is an io.Writer appending to a slice.
type appendWriter struct{ b []byte }

// Write appends p; it never fails.
func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// New returns a Codecs with empty pools.
func New() *Codecs {
	c := &Codecs{}
	c.gzipReaders.New = func() any { return new(gzipReader) }
	c.gzipWriters.New = func() any { return newGzipWriter(gzip.DefaultCompression) }
	c.lz4Readers.New = func() any { return &lz4Reader{r: lz4.NewReader(nil)} }
	c.lz4Writers.New = func() any { return newLZ4Writer(lz4.Fast) }
	c.zstdDecoders.New = func() any {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(ZstdMaxWindow),
			zstd.WithDecoderLowmem(false))
		if err != nil {
			return nil
		}
		zd := &zstdDecoder{d: d}
		runtime.AddCleanup(zd, func(d *zstd.Decoder) { d.Close() }, d)
		return zd
	}
	c.zstdEncoders.New = func() any { return newZstdEncoder(zstd.SpeedDefault) }
	return c
}

// newGzipWriter is a gzip writer at level, which the caller has checked.
func newGzipWriter(level int) *gzipWriter {
	w, _ := gzip.NewWriterLevel(nil, level)
	return &gzipWriter{w: w}
}

// newLZ4Writer is an LZ4 frame writer as Kafka writes LZ4 (64 KiB blocks, no content
// checksum), at level.
func newLZ4Writer(level lz4.CompressionLevel) *lz4Writer {
	w := lz4.NewWriter(nil)
	// Options are constants known to be valid; Apply cannot fail.
	_ = w.Apply(lz4.BlockSizeOption(lz4BlockSize), lz4.ChecksumOption(false), lz4.CompressionLevelOption(level))
	return &lz4Writer{w: w}
}

// newZstdEncoder is a zstd encoder at level, or nil when one cannot be made.
func newZstdEncoder(level zstd.EncoderLevel) *zstdEncoder {
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderConcurrency(1),
		zstd.WithZeroFrames(true),
		zstd.WithEncoderLevel(level))
	if err != nil {
		return nil
	}
	ze := &zstdEncoder{e: e}
	runtime.AddCleanup(ze, func(e *zstd.Encoder) { e.Close() }, e)
	return ze
}

// lz4Levels maps Kafka's compression.lz4.level (1-17, LZ4 HC levels) to the lz4 package's,
// whose highest is 9.
var lz4Levels = [...]lz4.CompressionLevel{lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4, lz4.Level5,
	lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}

// CompressLevel is Compress at a level of Kafka's compression.<codec>.level (KIP-390): gzip
// 1-9 (-1 its default), lz4 1-17 (levels past 9 compress as 9, the lz4 package's highest),
// zstd -131072-22 (in the zstd package's four speeds). Snappy and none have no level, and
// DefaultLevel (or the codec's default) is Compress. Levels out of range are clamped.
func (c *Codecs) CompressLevel(codec Codec, level int, src, dst []byte) ([]byte, error) {
	switch {
	case level == DefaultLevel,
		codec == Gzip && level == gzip.DefaultCompression,
		codec == Zstd && zstd.EncoderLevelFromZstd(level) == zstd.SpeedDefault,
		codec != Gzip && codec != LZ4 && codec != Zstd:
		return c.Compress(codec, src, dst)
	}
	return c.compress(codec, c.levelPool(codec, level), src, dst)
}

// levelPool is the pool of codec's writers at level.
func (c *Codecs) levelPool(codec Codec, level int) *sync.Pool {
	key := levelKey{codec, level}
	if p, ok := c.levelWriters.Load(key); ok {
		return p.(*sync.Pool)
	}
	p := &sync.Pool{}
	switch codec {
	case Gzip:
		l := min(max(level, gzip.BestSpeed), gzip.BestCompression)
		p.New = func() any { return newGzipWriter(l) }
	case LZ4:
		l := lz4Levels[min(max(level, 1), len(lz4Levels))-1]
		p.New = func() any { return newLZ4Writer(l) }
	case Zstd:
		l := zstd.EncoderLevelFromZstd(level)
		p.New = func() any { return newZstdEncoder(l) }
	}
	actual, _ := c.levelWriters.LoadOrStore(key, p)
	return actual.(*sync.Pool)
}

// Decompress appends the decompression of src to dst and returns the
// result. More than limit decompressed bytes is an error wrapping
// ErrDecompressedTooLarge, detected before more than about limit bytes are
// allocated. Snappy input may be xerial-framed (Java client) or raw.
// None copies src.
func (c *Codecs) Decompress(codec Codec, src, dst []byte, limit int) ([]byte, error) {
	switch codec {
	case None:
		if len(src) > limit {
			return dst, fmt.Errorf("uncompressed %d bytes, limit %d: %w", len(src), limit, ErrDecompressedTooLarge)
		}
		return append(dst, src...), nil
	case Gzip:
		g := c.gzipReaders.Get().(*gzipReader)
		defer c.gzipReaders.Put(g)
		g.src.Reset(src)
		if err := g.r.Reset(&g.src); err != nil {
			return dst, fmt.Errorf("gzip header (%d bytes): %w", len(src), err)
		}
		return readBounded(dst, &g.r, limit, codec)
	case Snappy:
		return decompressSnappy(dst, src, limit)
	case LZ4:
		l := c.lz4Readers.Get().(*lz4Reader)
		defer c.lz4Readers.Put(l)
		l.src.Reset(src)
		l.r.Reset(&l.src)
		return readBounded(dst, l.r, limit, codec)
	case Zstd:
		z, _ := c.zstdDecoders.Get().(*zstdDecoder)
		if z == nil {
			return dst, fmt.Errorf("zstd: cannot create decoder")
		}
		defer c.zstdDecoders.Put(z)
		z.src.Reset(src)
		if err := z.d.Reset(&z.src); err != nil {
			return dst, fmt.Errorf("zstd reset (%d bytes): %w", len(src), err)
		}
		return readBounded(dst, z.d, limit, codec)
	}
	return dst, fmt.Errorf("decompress codec id %d: %w", int8(codec), ErrUnknownCodec)
}

// Compress appends the compression of src with codec to dst. Snappy output
// is xerial-framed like the Java client's; LZ4 is the LZ4 frame format with
// 64 KiB blocks, as Kafka writes it. None copies src.
func (c *Codecs) Compress(codec Codec, src, dst []byte) ([]byte, error) {
	var pool *sync.Pool
	switch codec {
	case Gzip:
		pool = &c.gzipWriters
	case LZ4:
		pool = &c.lz4Writers
	case Zstd:
		pool = &c.zstdEncoders
	}
	return c.compress(codec, pool, src, dst)
}

// compress appends the compression of src with codec to dst, with a writer of pool (the
// codec's writer type; nil for none and snappy).
func (c *Codecs) compress(codec Codec, pool *sync.Pool, src, dst []byte) ([]byte, error) {
	switch codec {
	case None:
		return append(dst, src...), nil
	case Gzip:
		g := pool.Get().(*gzipWriter)
		defer pool.Put(g)
		g.dst.b = dst
		g.w.Reset(&g.dst)
		if _, err := g.w.Write(src); err != nil {
			return dst, fmt.Errorf("gzip %d bytes: %w", len(src), err)
		}
		if err := g.w.Close(); err != nil {
			return dst, fmt.Errorf("gzip close: %w", err)
		}
		out := g.dst.b
		g.dst.b = nil
		return out, nil
	case Snappy:
		return appendXerial(dst, src), nil
	case LZ4:
		l := pool.Get().(*lz4Writer)
		defer pool.Put(l)
		l.dst.b = dst
		l.w.Reset(&l.dst)
		if _, err := l.w.Write(src); err != nil {
			return dst, fmt.Errorf("lz4 %d bytes: %w", len(src), err)
		}
		if err := l.w.Close(); err != nil {
			return dst, fmt.Errorf("lz4 close: %w", err)
		}
		out := l.dst.b
		l.dst.b = nil
		return out, nil
	case Zstd:
		z, _ := pool.Get().(*zstdEncoder)
		if z == nil {
			return dst, fmt.Errorf("zstd: cannot create encoder")
		}
		defer pool.Put(z)
		return z.e.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("compress codec id %d: %w", int8(codec), ErrUnknownCodec)
}

// readBounded appends everything r yields to dst, failing once more than
// limit bytes arrive. dst grows geometrically with the data actually
// produced, never past limit+1 new bytes.
func readBounded(dst []byte, r io.Reader, limit int, codec Codec) ([]byte, error) {
	start := len(dst)
	for {
		room := start + limit + 1 - len(dst)
		if room <= 0 {
			return dst[:start], fmt.Errorf("%s: more than %d bytes: %w", codec, limit, ErrDecompressedTooLarge)
		}
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, min(max(len(dst)-start, minReadGrow), room))
		}
		n, err := r.Read(dst[len(dst):min(cap(dst), len(dst)+room)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			if len(dst)-start > limit {
				return dst[:start], fmt.Errorf("%s: more than %d bytes: %w", codec, limit, ErrDecompressedTooLarge)
			}
			return dst, nil
		}
		if err != nil {
			return dst[:start], fmt.Errorf("%s decode after %d bytes: %w", codec, len(dst)-start, err)
		}
	}
}

// decompressSnappy decodes xerial-framed or raw snappy, checking each
// block's declared length against limit before allocating.
func decompressSnappy(dst, src []byte, limit int) ([]byte, error) {
	if len(src) < xerialHeaderLen || !bytes.Equal(src[:8], xerialHeader[:8]) {
		return appendSnappyBlock(dst, src, limit)
	}
	start := len(dst)
	total := 0
	for rem := src[xerialHeaderLen:]; len(rem) > 0; {
		if len(rem) < 4 {
			return dst[:start], fmt.Errorf("xerial block length: %d bytes left: %w", len(rem), ErrTruncated)
		}
		size := int(int32(binary.BigEndian.Uint32(rem)))
		rem = rem[4:]
		if size < 0 || size > len(rem) {
			return dst[:start], fmt.Errorf("xerial block size %d, %d bytes left: %w", size, len(rem), ErrTruncated)
		}
		n, err := s2.DecodedLen(rem[:size])
		if err != nil {
			return dst[:start], fmt.Errorf("xerial block of %d bytes: %w", size, err)
		}
		total += n
		if total > limit {
			return dst[:start], fmt.Errorf("snappy: at least %d bytes, limit %d: %w", total, limit, ErrDecompressedTooLarge)
		}
		rem = rem[size:]
	}
	dst = slices.Grow(dst, total)
	for rem := src[xerialHeaderLen:]; len(rem) > 0; {
		size := int(binary.BigEndian.Uint32(rem))
		var err error
		dst, err = appendSnappyBlock(dst, rem[4:4+size], limit)
		if err != nil {
			return dst[:start], err
		}
		rem = rem[4+size:]
	}
	return dst, nil
}

// appendSnappyBlock decodes one raw snappy block onto dst.
func appendSnappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return dst, fmt.Errorf("snappy block of %d bytes: %w", len(block), err)
	}
	if n > limit {
		return dst, fmt.Errorf("snappy: %d bytes, limit %d: %w", n, limit, ErrDecompressedTooLarge)
	}
	dst = slices.Grow(dst, n)
	at := len(dst)
	if _, err := s2.Decode(dst[at:at+n], block); err != nil {
		return dst, fmt.Errorf("snappy block of %d bytes: %w", len(block), err)
	}
	return dst[:at+n], nil
}

// appendXerial appends src as a xerial snappy stream: the header, then per
// 32 KiB of input a big-endian block length and a raw snappy block.
func appendXerial(dst, src []byte) []byte {
	dst = append(dst, xerialHeader[:]...)
	for len(src) > 0 {
		n := min(len(src), xerialBlockSize)
		dst = slices.Grow(dst, 4+s2.MaxEncodedLen(n))
		at := len(dst)
		block := s2.EncodeSnappy(dst[at+4:cap(dst)], src[:n])
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(block)))
		dst = dst[:at+4+len(block)]
		src = src[n:]
	}
	return dst
}
