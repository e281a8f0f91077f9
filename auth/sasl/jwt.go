package sasl

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// JWS is a JSON Web Signature in compact serialization (RFC 7515), decoded but not verified:
// the token format of OAUTHBEARER.
type JWS struct {
	// Header is the JOSE header.
	Header map[string]any
	// Claims is the payload, a JWT claims set.
	Claims map[string]any
	// SigningInput is the header and payload as sent, "<header>.<payload>", which the signature
	// signs.
	SigningInput string
	// Signature is the decoded signature; empty for an unsecured JWS.
	Signature []byte
}

// ParseJWS decodes a compact JWS: three base64url sections separated by dots, the first two JSON
// objects, the third the signature, which may be empty. Numbers in the JSON are kept as
// json.Number. It checks the form only; validators check the algorithm, signature and claims.
func ParseJWS(token string) (*JWS, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("JWS compact serialization has %d dot-separated sections, want 3", len(parts))
	}
	header, err := decodeJWSObject(parts[0])
	if err != nil {
		return nil, fmt.Errorf("JWS header: %w", err)
	}
	claims, err := decodeJWSObject(parts[1])
	if err != nil {
		return nil, fmt.Errorf("JWS payload: %w", err)
	}
	sig, err := decodeBase64URL(parts[2])
	if err != nil {
		return nil, fmt.Errorf("JWS signature: %w", err)
	}
	return &JWS{Header: header, Claims: claims, SigningInput: parts[0] + "." + parts[1], Signature: sig}, nil
}

// decodeJWSObject decodes a non-empty base64url section holding one JSON object.
func decodeJWSObject(s string) (map[string]any, error) {
	if s == "" {
		return nil, errors.New("empty section")
	}
	b, err := decodeBase64URL(s)
	if err != nil {
		return nil, err
	}
	return decodeJSONObject(b)
}

// decodeBase64URL decodes base64url with or without padding.
func decodeBase64URL(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, fmt.Errorf("malformed base64url value %q: %w", prefix(s, 32), err)
	}
	return b, nil
}

// decodeJSONObject decodes exactly one JSON object, keeping numbers as json.Number.
func decodeJSONObject(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("malformed JSON: %w", err)
	}
	if m == nil {
		return nil, errors.New("malformed JSON: not an object")
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("malformed JSON: data after the object")
	}
	return m, nil
}

// claimString returns a string claim: ok is false when absent, err set when of another type.
func claimString(claims map[string]any, name string) (s string, ok bool, err error) {
	v, ok := claims[name]
	if !ok || v == nil {
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", true, fmt.Errorf("the '%s' claim is %s, not a string", name, jsonType(v))
	}
	return s, true, nil
}

// claimNumber returns a numeric claim as float64: ok is false when absent, err set when of another
// type.
func claimNumber(claims map[string]any, name string) (f float64, ok bool, err error) {
	v, ok := claims[name]
	if !ok || v == nil {
		return 0, false, nil
	}
	f, err = numberValue(v)
	if err != nil {
		return 0, true, fmt.Errorf("the '%s' claim: %w", name, err)
	}
	return f, true, nil
}

// numberValue returns a decoded JSON number as float64; numbers beyond float64's range become
// ±Inf, as Java's doubleValue makes them.
func numberValue(v any) (float64, error) {
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, fmt.Errorf("%s, not a number", jsonType(v))
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("number %q: %w", n, err)
	}
	return f, nil
}

// jsonType names the JSON type of a decoded value, for errors.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	}
	return "an object"
}

// secondsToTime converts seconds since the epoch to a time, rounded to the millisecond as Kafka
// does and clamped to what int64 milliseconds hold.
func secondsToTime(sec float64) time.Time {
	ms := math.Round(sec * 1000)
	switch {
	case math.IsNaN(ms):
		return time.UnixMilli(0)
	case ms >= math.MaxInt64:
		return time.UnixMilli(math.MaxInt64)
	case ms <= math.MinInt64:
		return time.UnixMilli(math.MinInt64)
	}
	return time.UnixMilli(int64(ms))
}
