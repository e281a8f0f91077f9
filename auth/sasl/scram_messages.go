package sasl

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// scramClientFirst is a parsed client-first-message (RFC 5802 section 7):
//
//	gs2-header [reserved-mext ","] username "," nonce ["," extensions]
//
// with the gs2 header "n," [ "a=" saslname ] ",", the only one Kafka accepts (no channel
// binding).
type scramClientFirst struct {
	gs2Header string // "n,,", or "n,a=<saslname>,"
	authzid   string // decoded; "" when absent
	user      string // decoded
	nonce     string
	bare      string            // the message after the gs2 header, as sent; part of AuthMessage
	ext       map[string]string // extensions; a key given twice keeps its last value, as in Kafka
}

// parseScramClientFirst parses a client-first-message with Kafka's grammar (ScramMessages): names
// of ASCII 0x01..0x7F with "=2C" and "=3D" for ',' and '='; a nonce of printable ASCII but ',';
// extensions `,key=value` with a key of letters and a value of ASCII 0x01..0x7F but ','. It
// refuses the reserved "m=" extension, which RFC 5802 requires servers that do not know it to
// refuse (Kafka accepts it but its proof then cannot match).
func parseScramClientFirst(msg []byte) (scramClientFirst, error) {
	s := string(msg)
	var cf scramClientFirst
	rest, ok := strings.CutPrefix(s, "n,")
	if !ok {
		return cf, fmt.Errorf("invalid SCRAM client first message: gs2 header of %q is not \"n,\" (channel binding is not supported)", prefix(s, 8))
	}
	if a, ok := strings.CutPrefix(rest, "a="); ok {
		i := strings.IndexByte(a, ',')
		if i < 0 {
			return cf, fmt.Errorf("invalid SCRAM client first message: unterminated authorization id in %q", prefix(s, 64))
		}
		z, err := decodeSASLName(a[:i])
		if err != nil {
			return cf, fmt.Errorf("invalid SCRAM client first message: authorization id: %w", err)
		}
		cf.authzid = z
		rest = a[i:]
	}
	bare, ok := strings.CutPrefix(rest, ",")
	if !ok {
		return cf, fmt.Errorf("invalid SCRAM client first message: gs2 header of %q not ended by ','", prefix(s, 64))
	}
	cf.gs2Header = s[:len(s)-len(bare)]
	cf.bare = bare
	fields := strings.Split(bare, ",")
	if strings.HasPrefix(fields[0], "m=") {
		return cf, fmt.Errorf("invalid SCRAM client first message: mandatory extension %q not supported", prefix(fields[0], 64))
	}
	if len(fields) < 2 {
		return cf, fmt.Errorf("invalid SCRAM client first message: %d fields after the gs2 header, want at least 2", len(fields))
	}
	n, ok := strings.CutPrefix(fields[0], "n=")
	if !ok {
		return cf, fmt.Errorf("invalid SCRAM client first message: %q where n=<username> expected", prefix(fields[0], 64))
	}
	user, err := decodeSASLName(n)
	if err != nil {
		return cf, fmt.Errorf("invalid SCRAM client first message: username: %w", err)
	}
	cf.user = user
	r, ok := strings.CutPrefix(fields[1], "r=")
	if !ok || !isPrintable(r) {
		return cf, fmt.Errorf("invalid SCRAM client first message: %q where r=<nonce> expected", prefix(fields[1], 64))
	}
	cf.nonce = r
	ext, err := parseScramExtensions(fields[2:])
	if err != nil {
		return cf, fmt.Errorf("invalid SCRAM client first message: %w", err)
	}
	cf.ext = ext
	return cf, nil
}

// scramClientFinal is a parsed client-final-message (RFC 5802 section 7):
//
//	channel-binding "," nonce ["," extensions] "," proof
type scramClientFinal struct {
	channelBinding []byte
	nonce          string
	withoutProof   string // the message up to ",p=", as sent; part of AuthMessage
	proof          []byte
}

// parseScramClientFinal parses a client-final-message with Kafka's grammar: c= and p= padded
// standard base64, r= printable ASCII but ',', extensions as in the first message.
func parseScramClientFinal(msg []byte) (scramClientFinal, error) {
	s := string(msg)
	var cf scramClientFinal
	fields := strings.Split(s, ",")
	if len(fields) < 3 {
		return cf, fmt.Errorf("invalid SCRAM client final message: %d fields, want at least 3", len(fields))
	}
	c, ok := strings.CutPrefix(fields[0], "c=")
	if !ok {
		return cf, fmt.Errorf("invalid SCRAM client final message: %q where c=<channel binding> expected", prefix(fields[0], 64))
	}
	cb, err := base64.StdEncoding.Strict().DecodeString(c)
	if err != nil {
		return cf, fmt.Errorf("invalid SCRAM client final message: channel binding %q: %w", prefix(c, 64), err)
	}
	r, ok := strings.CutPrefix(fields[1], "r=")
	if !ok || !isPrintable(r) {
		return cf, fmt.Errorf("invalid SCRAM client final message: %q where r=<nonce> expected", prefix(fields[1], 64))
	}
	last := fields[len(fields)-1]
	p, ok := strings.CutPrefix(last, "p=")
	if !ok {
		return cf, fmt.Errorf("invalid SCRAM client final message: %q where p=<proof> expected", prefix(last, 64))
	}
	proof, err := base64.StdEncoding.Strict().DecodeString(p)
	if err != nil {
		return cf, fmt.Errorf("invalid SCRAM client final message: proof %q: %w", prefix(p, 64), err)
	}
	if _, err := parseScramExtensions(fields[2 : len(fields)-1]); err != nil {
		return cf, fmt.Errorf("invalid SCRAM client final message: %w", err)
	}
	cf.channelBinding = cb
	cf.nonce = r
	cf.withoutProof = s[:len(s)-len(last)-1]
	cf.proof = proof
	return cf, nil
}

// parseScramExtensions parses `key=value` extension fields: a key of ASCII letters, a non-empty
// value of ASCII 0x01..0x7F (',' cannot occur, fields being split at it).
func parseScramExtensions(fields []string) (map[string]string, error) {
	ext := make(map[string]string, len(fields))
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || !isAlpha(k) || v == "" || !isASCIINoNUL(v) {
			return nil, fmt.Errorf("invalid extension %q", prefix(f, 64))
		}
		ext[k] = v
	}
	return ext, nil
}

// decodeSASLName decodes a saslname: non-empty ASCII 0x01..0x7F, with '=' only in "=2C" (',') and
// "=3D" ('=').
func decodeSASLName(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("empty name")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '=' && strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
			i += 2
		case c == '=' && strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
			i += 2
		case c == 0 || c >= 0x80 || c == '=' || c == ',':
			return "", fmt.Errorf("name %q: byte 0x%02x at %d not allowed", prefix(s, 64), c, i)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// isPrintable reports whether s is non-empty printable ASCII (0x21..0x7E) without ','.
func isPrintable(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7E || c == ',' {
			return false
		}
	}
	return true
}

// isAlpha reports whether s is non-empty ASCII letters.
func isAlpha(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// isASCIINoNUL reports whether every byte of s is in 0x01..0x7F.
func isASCIINoNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == 0 || c >= 0x80 {
			return false
		}
	}
	return true
}

// prefix returns at most the first n bytes of s, to quote peer input in errors without echoing
// all of it.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
