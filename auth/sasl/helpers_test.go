package sasl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"testing"
	"time"
)

// testNow is the fixed time of the validator tests.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// fixedClock returns a clock stopped at t.
func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

// b64 is base64url without padding, the encoding of JWS sections.
func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jsonB64 encodes v as JSON, then b64.
func jsonB64(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b64(b)
}

// unsecuredJWS returns an unsecured JWS of claims: header {"alg":"none"}, no signature.
func unsecuredJWS(t testing.TB, claims map[string]any) string {
	t.Helper()
	return jsonB64(t, map[string]any{"alg": "none"}) + "." + jsonB64(t, claims) + "."
}

// signJWS returns a JWS of claims under header, signed by key with header["alg"].
func signJWS(t testing.TB, header, claims map[string]any, key crypto.Signer) string {
	t.Helper()
	input := jsonB64(t, header) + "." + jsonB64(t, claims)
	alg, _ := header["alg"].(string)
	a, ok := jwsAlgorithms[alg]
	if !ok {
		// An algorithm the validator refuses: any signature will do.
		return input + "." + b64([]byte("signature"))
	}
	var sig []byte
	var err error
	switch a.kind {
	case "EdDSA":
		sig = ed25519.Sign(key.(ed25519.PrivateKey), []byte(input))
	case "RS":
		sig, err = rsa.SignPKCS1v15(rand.Reader, key.(*rsa.PrivateKey), a.hash, hashOf(a.hash, input))
	case "PS":
		sig, err = rsa.SignPSS(rand.Reader, key.(*rsa.PrivateKey), a.hash, hashOf(a.hash, input), &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	case "ES":
		var r, s *big.Int
		r, s, err = ecdsa.Sign(rand.Reader, key.(*ecdsa.PrivateKey), hashOf(a.hash, input))
		size := (a.curve.Params().BitSize + 7) / 8
		sig = make([]byte, 2*size)
		r.FillBytes(sig[:size])
		s.FillBytes(sig[size:])
	}
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + b64(sig)
}

// publicJWK returns the JWK of key's public key with kid and alg ("" to leave them out).
func publicJWK(t testing.TB, key crypto.Signer, kid, alg string) map[string]any {
	t.Helper()
	m := map[string]any{}
	switch k := key.Public().(type) {
	case *rsa.PublicKey:
		m["kty"] = "RSA"
		m["n"] = b64(k.N.Bytes())
		m["e"] = b64(big.NewInt(int64(k.E)).Bytes())
	case *ecdsa.PublicKey:
		m["kty"] = "EC"
		m["crv"] = k.Curve.Params().Name
		size := (k.Curve.Params().BitSize + 7) / 8
		x, y := make([]byte, size), make([]byte, size)
		k.X.FillBytes(x)
		k.Y.FillBytes(y)
		m["x"] = b64(x)
		m["y"] = b64(y)
	case ed25519.PublicKey:
		m["kty"] = "OKP"
		m["crv"] = "Ed25519"
		m["x"] = b64(k)
	default:
		t.Fatalf("key type %T", k)
	}
	if kid != "" {
		m["kid"] = kid
	}
	if alg != "" {
		m["alg"] = alg
	}
	return m
}

// jwksJSON returns the JWKS document of keys.
func jwksJSON(t testing.TB, keys ...map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// oauthInitialResponse returns an OAUTHBEARER client initial response for token.
func oauthInitialResponse(authzid, token string) []byte {
	gs2 := "n,,"
	if authzid != "" {
		gs2 = "n,a=" + authzid + ","
	}
	return []byte(gs2 + "\x01auth=Bearer " + token + "\x01\x01")
}
