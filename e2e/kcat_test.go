package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	kcatRecords = 100_000
	// kcatChunks splits the records over several kcat -P runs, each with its own header
	// values (kcat -H sets the same headers on every record of one run).
	kcatChunks = 4
	// kcatKeyDelim separates key and value on kcat -P input; records never contain it.
	kcatKeyDelim = '\t'
)

// kcatRecord is one record as kcat produces and prints it.
type kcatRecord struct {
	key, value []byte
	headers    string // kcat's %h: name=value pairs joined by commas
}

// TestKcat checks librdkafka (through kcat) against the broker: the metadata listing,
// and 100,000 records with random binary keys and values and two headers each that come
// back byte-identical, uncompressed and with every codec.
func TestKcat(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t)

		t.Run("list", func(t *testing.T) {
			out := runKcat(t, "-b", b.Addr(), "-L", "-m", "10").stdout
			for _, want := range []string{"1 brokers:", " at " + b.Addr()} {
				if !strings.Contains(out, want) {
					t.Fatalf("kcat -L output lacks %q:\n%s", want, out)
				}
			}
		})

		for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
			// The codecs share the broker; after a failure the rest would mostly wait
			// out the same timeout.
			ok := t.Run(codec, func(t *testing.T) {
				seed := uint64(time.Now().UnixNano())
				t.Logf("seed %d", seed)
				rng := rand.New(rand.NewPCG(seed, uint64(len(codec))))
				topic := "kcat-" + codec
				b.CreateTopic(t, topic, 1)

				want := make([]kcatRecord, 0, kcatRecords)
				for range kcatChunks {
					h1, h2 := randAlnum(rng, 1+rng.IntN(16)), randAlnum(rng, rng.IntN(16))
					headers := fmt.Sprintf("h1=%s,h2=%s", h1, h2)
					var in bytes.Buffer
					for range kcatRecords / kcatChunks {
						r := kcatRecord{
							key:     randBytesExcept(rng, 1+rng.IntN(24), kcatKeyDelim, '\n'),
							value:   randBytesExcept(rng, rng.IntN(200), kcatKeyDelim, '\n'),
							headers: headers,
						}
						in.Write(r.key)
						in.WriteByte(kcatKeyDelim)
						in.Write(r.value)
						in.WriteByte('\n')
						want = append(want, r)
					}
					args := []string{"-b", b.Addr(), "-P", "-t", topic, "-p", "0", "-K", string(kcatKeyDelim),
						"-H", "h1=" + h1, "-H", "h2=" + h2, "-X", "acks=all"}
					if codec != "none" {
						args = append(args, "-z", codec)
					}
					runKcatStdin(t, in.Bytes(), args...)
				}

				out := runKcat(t, "-b", b.Addr(), "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
					"-f", `K%K:%kV%S:%sH%h\n`).stdout
				got, err := parseKcatOutput([]byte(out))
				if err != nil {
					t.Fatalf("parse kcat -C output: %v", err)
				}
				if len(got) != len(want) {
					t.Fatalf("consumed %d records, produced %d", len(got), len(want))
				}
				for i := range want {
					g, w := got[i], want[i]
					if !bytes.Equal(g.key, w.key) || !bytes.Equal(g.value, w.value) || g.headers != w.headers {
						t.Fatalf("record %d differs:\n got key %q value %q headers %q\nwant key %q value %q headers %q",
							i, g.key, g.value, g.headers, w.key, w.value, w.headers)
					}
				}
			})
			if !ok {
				break
			}
		}
	})
}

// parseKcatOutput parses records printed with -f 'K%K:%kV%S:%sH%h\n'; the lengths
// make it exact for any bytes in keys and values.
func parseKcatOutput(out []byte) ([]kcatRecord, error) {
	var recs []kcatRecord
	for len(out) > 0 {
		var r kcatRecord
		var err error
		if r.key, out, err = cutLengthPrefixed(out, 'K'); err != nil {
			return nil, fmt.Errorf("record %d key: %w", len(recs), err)
		}
		if r.value, out, err = cutLengthPrefixed(out, 'V'); err != nil {
			return nil, fmt.Errorf("record %d value: %w", len(recs), err)
		}
		if len(out) == 0 || out[0] != 'H' {
			return nil, fmt.Errorf("record %d: headers marker missing at %q", len(recs), head(out))
		}
		line, rest, ok := bytes.Cut(out[1:], []byte{'\n'})
		if !ok {
			return nil, fmt.Errorf("record %d: headers not ended by a newline", len(recs))
		}
		r.headers, out = string(line), rest
		recs = append(recs, r)
	}
	return recs, nil
}

// cutLengthPrefixed cuts "<marker><len>:<len bytes>" off the front of b. A null field
// (length -1) is an error: the test never produces one.
func cutLengthPrefixed(b []byte, marker byte) (field, rest []byte, err error) {
	if len(b) == 0 || b[0] != marker {
		return nil, nil, fmt.Errorf("marker %q missing at %q", marker, head(b))
	}
	num, rest, ok := bytes.Cut(b[1:], []byte{':'})
	if !ok {
		return nil, nil, fmt.Errorf("length after %q not ended by ':'", marker)
	}
	n, err := strconv.Atoi(string(num))
	if err != nil || n < 0 || n > len(rest) {
		return nil, nil, fmt.Errorf("bad length %q after %q with %d bytes left", num, marker, len(rest))
	}
	return rest[:n], rest[n:], nil
}

func head(b []byte) []byte { return b[:min(len(b), 32)] }

// randBytesExcept returns n random bytes, none of them in except.
func randBytesExcept(rng *rand.Rand, n int, except ...byte) []byte {
	out := make([]byte, 0, n)
	for len(out) < n {
		c := byte(rng.UintN(256))
		if bytes.IndexByte(except, c) < 0 {
			out = append(out, c)
		}
	}
	return out
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// randAlnum returns n random letters and digits: safe inside kcat's header listing.
func randAlnum(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[rng.IntN(len(alnum))]
	}
	return string(b)
}
