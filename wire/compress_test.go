package wire

import (
	"bytes"
	"errors"
	"testing"

	"ringbroker/internal/testutil"
)

// TestCodecsDelegate checks that wire's Codecs round-trips through internal/codec (whose own
// tests cover the codecs in depth) and that the error sentinels match under both names.
func TestCodecsDelegate(t *testing.T) {
	c := NewCodecs()
	src := testutil.Payload(10000, 7)
	for _, codec := range allCodecs {
		comp, err := c.Compress(codec, src, nil)
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		out, err := c.Decompress(codec, comp, nil, len(src))
		if err != nil || !bytes.Equal(out, src) {
			t.Fatalf("%s: round trip: err=%v equal=%v", codec, err, bytes.Equal(out, src))
		}
		if codec != CodecNone {
			if _, err := c.Decompress(codec, comp, nil, len(src)-1); !errors.Is(err, ErrDecompressedTooLarge) {
				t.Fatalf("%s: limit below size: err = %v; want ErrDecompressedTooLarge", codec, err)
			}
		}
	}
	if _, err := c.Compress(9, src, nil); !errors.Is(err, ErrUnknownCodec) {
		t.Fatalf("codec 9: err = %v; want ErrUnknownCodec", err)
	}
}
