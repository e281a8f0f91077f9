package sasl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
)

// JWK is one public key of a JWKS (RFC 7517).
type JWK struct {
	// KeyID is the kid, which a token's header names to pick its key; "" when absent.
	KeyID string
	// Use is the use parameter, "sig" or "enc"; "" when absent.
	Use string
	// Algorithm is the alg parameter, the one algorithm the key is for; "" when absent.
	Algorithm string
	// Key is *rsa.PublicKey, *ecdsa.PublicKey (P-256, P-384, P-521) or ed25519.PublicKey.
	Key crypto.PublicKey
}

// KeySet is a parsed JWKS: the keys the signatures of tokens are checked against. It is
// immutable, so safe for concurrent use.
type KeySet struct {
	keys    []JWK
	ignored []error
}

// KeySource gives the current key set: a KeySet itself, or a JWKSFetcher refreshing one.
type KeySource interface {
	// Keys returns the current key set, or nil when there is none yet.
	Keys() *KeySet
}

// Keys returns s, a KeySet being its own KeySource.
func (s *KeySet) Keys() *KeySet { return s }

// All returns the keys.
func (s *KeySet) All() []JWK { return s.keys }

// Ignored returns why each key left out of the set was left out.
func (s *KeySet) Ignored() []error { return s.ignored }

// jwkJSON is a JWK's members that ParseJWKS reads; private key members are ignored.
type jwkJSON struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// ParseJWKS parses a JSON Web Key Set, {"keys":[...]}, as served by an OAuth provider's JWKS
// endpoint (sasl.oauthbearer.jwks.endpoint.url). It takes RSA keys (kty RSA: n, e), elliptic
// curve keys (kty EC: crv P-256, P-384 or P-521, x, y) and Ed25519 keys (kty OKP: crv Ed25519,
// x). Like jose4j under Kafka, it leaves out a key it cannot use (another kty or curve, malformed
// members), saying why in Ignored, and fails only when the document is not a JWKS.
func ParseJWKS(data []byte) (*KeySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse JWKS: %w", err)
	}
	if doc.Keys == nil {
		return nil, errors.New("parse JWKS: the JSON JWKS content does not include the keys member")
	}
	s := &KeySet{}
	for i, raw := range doc.Keys {
		k, err := parseJWK(raw)
		if err != nil {
			s.ignored = append(s.ignored, fmt.Errorf("JWKS key %d: %w", i, err))
			continue
		}
		s.keys = append(s.keys, k)
	}
	return s, nil
}

// parseJWK parses one key.
func parseJWK(raw json.RawMessage) (JWK, error) {
	var j jwkJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return JWK{}, err
	}
	k := JWK{KeyID: j.Kid, Use: j.Use, Algorithm: j.Alg}
	var err error
	switch j.Kty {
	case "RSA":
		k.Key, err = parseRSAJWK(j)
	case "EC":
		k.Key, err = parseECJWK(j)
	case "OKP":
		k.Key, err = parseOKPJWK(j)
	default:
		err = fmt.Errorf("kid %q: unsupported kty %q", j.Kid, j.Kty)
	}
	return k, err
}

// parseRSAJWK returns the RSA public key of n and e.
func parseRSAJWK(j jwkJSON) (*rsa.PublicKey, error) {
	n, err := decodeBase64URL(j.N)
	if err != nil {
		return nil, fmt.Errorf("kid %q: RSA modulus: %w", j.Kid, err)
	}
	e, err := decodeBase64URL(j.E)
	if err != nil {
		return nil, fmt.Errorf("kid %q: RSA exponent: %w", j.Kid, err)
	}
	ev := new(big.Int).SetBytes(e)
	if len(n) == 0 || !ev.IsInt64() || ev.Int64() < 3 || ev.Int64() > 1<<31-1 || ev.Bit(0) == 0 {
		return nil, fmt.Errorf("kid %q: RSA key with a %d-byte modulus and exponent %v", j.Kid, len(n), ev)
	}
	return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(ev.Int64())}, nil
}

// parseECJWK returns the elliptic curve public key of crv, x and y, which must be on the curve.
func parseECJWK(j jwkJSON) (*ecdsa.PublicKey, error) {
	var curve elliptic.Curve
	switch j.Crv {
	case "P-256":
		curve = elliptic.P256()
	case "P-384":
		curve = elliptic.P384()
	case "P-521":
		curve = elliptic.P521()
	default:
		return nil, fmt.Errorf("kid %q: unsupported EC curve %q", j.Kid, j.Crv)
	}
	x, err := decodeBase64URL(j.X)
	if err != nil {
		return nil, fmt.Errorf("kid %q: EC x: %w", j.Kid, err)
	}
	y, err := decodeBase64URL(j.Y)
	if err != nil {
		return nil, fmt.Errorf("kid %q: EC y: %w", j.Kid, err)
	}
	size := (curve.Params().BitSize + 7) / 8
	if len(x) > size || len(y) > size {
		return nil, fmt.Errorf("kid %q: EC coordinates of %d and %d bytes on %s, want at most %d", j.Kid, len(x), len(y), j.Crv, size)
	}
	point := make([]byte, 1+2*size)
	point[0] = 4
	copy(point[1+size-len(x):1+size], x)
	copy(point[1+2*size-len(y):], y)
	pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
	if err != nil {
		return nil, fmt.Errorf("kid %q: EC point: %w", j.Kid, err)
	}
	return pub, nil
}

// parseOKPJWK returns the Ed25519 public key of x.
func parseOKPJWK(j jwkJSON) (ed25519.PublicKey, error) {
	if j.Crv != "Ed25519" {
		return nil, fmt.Errorf("kid %q: unsupported OKP curve %q", j.Kid, j.Crv)
	}
	x, err := decodeBase64URL(j.X)
	if err != nil {
		return nil, fmt.Errorf("kid %q: Ed25519 x: %w", j.Kid, err)
	}
	if len(x) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("kid %q: Ed25519 key of %d bytes, want %d", j.Kid, len(x), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(x), nil
}

// minRSABits is the smallest RSA key jose4j, and so Kafka, verifies signatures with.
const minRSABits = 2048

// jwsAlgorithm is a JWS signature algorithm (RFC 7518).
type jwsAlgorithm struct {
	hash  crypto.Hash
	kind  string         // "RS", "PS", "ES" or "EdDSA"
	curve elliptic.Curve // for ES
}

// jwsAlgorithms are the algorithms JWTValidator accepts; "none" and the HMAC ones are not, as a
// broker has no shared secret.
var jwsAlgorithms = map[string]jwsAlgorithm{
	"RS256": {crypto.SHA256, "RS", nil},
	"RS384": {crypto.SHA384, "RS", nil},
	"RS512": {crypto.SHA512, "RS", nil},
	"PS256": {crypto.SHA256, "PS", nil},
	"PS384": {crypto.SHA384, "PS", nil},
	"PS512": {crypto.SHA512, "PS", nil},
	"ES256": {crypto.SHA256, "ES", elliptic.P256()},
	"ES384": {crypto.SHA384, "ES", elliptic.P384()},
	"ES512": {crypto.SHA512, "ES", elliptic.P521()},
	"EdDSA": {0, "EdDSA", nil},
}

// fits reports whether key can verify signatures of alg.
func (a jwsAlgorithm) fits(key crypto.PublicKey) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return (a.kind == "RS" || a.kind == "PS") && k.N.BitLen() >= minRSABits
	case *ecdsa.PublicKey:
		return a.kind == "ES" && k.Curve == a.curve
	case ed25519.PublicKey:
		return a.kind == "EdDSA"
	}
	return false
}

// verify reports whether sig is a valid signature of input by key, which must fit a.
func (a jwsAlgorithm) verify(key crypto.PublicKey, input string, sig []byte) bool {
	if a.kind == "EdDSA" {
		return ed25519.Verify(key.(ed25519.PublicKey), []byte(input), sig)
	}
	digest := hashOf(a.hash, input)
	switch a.kind {
	case "RS":
		return rsa.VerifyPKCS1v15(key.(*rsa.PublicKey), a.hash, digest, sig) == nil
	case "PS":
		return rsa.VerifyPSS(key.(*rsa.PublicKey), a.hash, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: a.hash}) == nil
	}
	size := (a.curve.Params().BitSize + 7) / 8
	if len(sig) != 2*size {
		return false
	}
	r := new(big.Int).SetBytes(sig[:size])
	s := new(big.Int).SetBytes(sig[size:])
	return ecdsa.Verify(key.(*ecdsa.PublicKey), digest, r, s)
}

// hashOf returns the digest of s with h, one of SHA-256, SHA-384 and SHA-512.
func hashOf(h crypto.Hash, s string) []byte {
	switch h {
	case crypto.SHA256:
		d := sha256.Sum256([]byte(s))
		return d[:]
	case crypto.SHA384:
		d := sha512.Sum384([]byte(s))
		return d[:]
	}
	d := sha512.Sum512([]byte(s))
	return d[:]
}
