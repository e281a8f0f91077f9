package sasl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"
)

// testKeys are the signing keys of the JWT tests, made once.
type testKeys struct {
	rsa, rsa2, rsa1024 *rsa.PrivateKey
	p256, p384, p521   *ecdsa.PrivateKey
	ed                 ed25519.PrivateKey
}

var (
	keysOnce sync.Once
	keys     testKeys
	keysErr  error
)

// getTestKeys returns the test keys.
func getTestKeys(t testing.TB) testKeys {
	t.Helper()
	keysOnce.Do(func() {
		var errs [7]error
		keys.rsa, errs[0] = rsa.GenerateKey(rand.Reader, 2048)
		keys.rsa2, errs[1] = rsa.GenerateKey(rand.Reader, 2048)
		keys.rsa1024, errs[2] = rsa.GenerateKey(rand.Reader, 1024)
		keys.p256, errs[3] = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		keys.p384, errs[4] = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
		keys.p521, errs[5] = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
		_, keys.ed, errs[6] = ed25519.GenerateKey(rand.Reader)
		keysErr = errors.Join(errs[:]...)
	})
	if keysErr != nil {
		t.Fatal(keysErr)
	}
	return keys
}

// testKeySet returns the JWKS of the test keys, kid = the key's name.
func testKeySet(t testing.TB) *KeySet {
	t.Helper()
	k := getTestKeys(t)
	set, err := ParseJWKS(jwksJSON(t,
		publicJWK(t, k.rsa, "rsa", ""),
		publicJWK(t, k.rsa2, "rsa2", "RS256"),
		publicJWK(t, k.rsa1024, "rsa1024", ""),
		publicJWK(t, k.p256, "p256", ""),
		publicJWK(t, k.p384, "p384", ""),
		publicJWK(t, k.p521, "p521", ""),
		publicJWK(t, k.ed, "ed", ""),
	))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestJWTValidator(t *testing.T) {
	k := getTestKeys(t)
	set := testKeySet(t)
	now := testNow.Unix()
	claims := func(extra map[string]any) map[string]any {
		c := map[string]any{"sub": "alice", "iat": now - 60, "exp": now + 3600}
		for key, v := range extra {
			if v == nil {
				delete(c, key)
			} else {
				c[key] = v
			}
		}
		return c
	}
	for _, tc := range []struct {
		name       string
		cfg        func(*JWTConfig)
		header     map[string]any
		claims     map[string]any
		key        crypto.Signer
		tamper     bool
		wPrincipal string // "" for a failure
		wScope     []string
	}{
		{name: "RS256", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(nil), key: k.rsa, wPrincipal: "alice", wScope: []string{}},
		{name: "RS384", header: map[string]any{"alg": "RS384", "kid": "rsa"}, claims: claims(nil), key: k.rsa, wPrincipal: "alice", wScope: []string{}},
		{name: "RS512", header: map[string]any{"alg": "RS512", "kid": "rsa"}, claims: claims(nil), key: k.rsa, wPrincipal: "alice", wScope: []string{}},
		{name: "PS256", header: map[string]any{"alg": "PS256", "kid": "rsa"}, claims: claims(nil), key: k.rsa, wPrincipal: "alice", wScope: []string{}},
		{name: "PS512", header: map[string]any{"alg": "PS512", "kid": "rsa"}, claims: claims(nil), key: k.rsa, wPrincipal: "alice", wScope: []string{}},
		{name: "ES256", header: map[string]any{"alg": "ES256", "kid": "p256"}, claims: claims(nil), key: k.p256, wPrincipal: "alice", wScope: []string{}},
		{name: "ES384", header: map[string]any{"alg": "ES384", "kid": "p384"}, claims: claims(nil), key: k.p384, wPrincipal: "alice", wScope: []string{}},
		{name: "ES512", header: map[string]any{"alg": "ES512", "kid": "p521"}, claims: claims(nil), key: k.p521, wPrincipal: "alice", wScope: []string{}},
		{name: "EdDSA", header: map[string]any{"alg": "EdDSA", "kid": "ed"}, claims: claims(nil), key: k.ed, wPrincipal: "alice", wScope: []string{}},
		{name: "no kid tries every key", header: map[string]any{"alg": "RS256"}, claims: claims(nil), key: k.rsa2, wPrincipal: "alice", wScope: []string{}},
		{name: "tampered", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(nil), key: k.rsa, tamper: true},
		{name: "kid of another key", header: map[string]any{"alg": "RS256", "kid": "rsa2"}, claims: claims(nil), key: k.rsa},
		{name: "unknown kid", header: map[string]any{"alg": "RS256", "kid": "nope"}, claims: claims(nil), key: k.rsa},
		{name: "key for another alg", header: map[string]any{"alg": "PS256", "kid": "rsa2"}, claims: claims(nil), key: k.rsa2},
		{name: "alg of another key type", header: map[string]any{"alg": "ES256", "kid": "rsa"}, claims: claims(nil), key: k.p256},
		{name: "curve of another alg", header: map[string]any{"alg": "ES384", "kid": "p256"}, claims: claims(nil), key: k.p256},
		{name: "RSA key under 2048 bits", header: map[string]any{"alg": "RS256", "kid": "rsa1024"}, claims: claims(nil), key: k.rsa1024},
		{name: "alg none", header: map[string]any{"alg": "none"}, claims: claims(nil), key: k.rsa},
		{name: "alg HS256", header: map[string]any{"alg": "HS256"}, claims: claims(nil), key: k.rsa},
		{name: "no alg", header: map[string]any{"kid": "rsa"}, claims: claims(nil), key: k.rsa},
		{name: "crit header", header: map[string]any{"alg": "RS256", "kid": "rsa", "crit": []string{"exp"}}, claims: claims(nil), key: k.rsa},
		{name: "no exp", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"exp": nil}), key: k.rsa},
		{name: "no iat", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"iat": nil}), key: k.rsa},
		{name: "exp a string", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"exp": "soon"}), key: k.rsa},
		{name: "expired beyond the skew", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"exp": now - 30}), key: k.rsa},
		{name: "expired within the skew", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"exp": now - 29, "iat": now - 100}), key: k.rsa, wPrincipal: "alice", wScope: []string{}},
		{name: "no skew", cfg: func(c *JWTConfig) { c.ClockSkew = 0 }, header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"exp": now}), key: k.rsa},
		{name: "exp before iat", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"iat": now + 7200}), key: k.rsa},
		{name: "nbf in the future", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"nbf": now + 31}), key: k.rsa},
		{name: "nbf within the skew", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"nbf": now + 30}), key: k.rsa, wPrincipal: "alice", wScope: []string{}},
		{name: "fractional times", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"exp": float64(now) + 0.5, "iat": 1.5}), key: k.rsa, wPrincipal: "alice", wScope: []string{}},
		{name: "aud without expected audience", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"aud": "kafka"}), key: k.rsa},
		{name: "aud expected", cfg: func(c *JWTConfig) { c.ExpectedAudiences = []string{"x", "kafka"} }, header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"aud": "kafka"}), key: k.rsa, wPrincipal: "alice", wScope: []string{}},
		{name: "aud list expected", cfg: func(c *JWTConfig) { c.ExpectedAudiences = []string{"kafka"} }, header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"aud": []string{"web", "kafka"}}), key: k.rsa, wPrincipal: "alice", wScope: []string{}},
		{name: "aud not expected", cfg: func(c *JWTConfig) { c.ExpectedAudiences = []string{"kafka"} }, header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"aud": []string{"web"}}), key: k.rsa},
		{name: "aud missing", cfg: func(c *JWTConfig) { c.ExpectedAudiences = []string{"kafka"} }, header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(nil), key: k.rsa},
		{name: "aud a number", cfg: func(c *JWTConfig) { c.ExpectedAudiences = []string{"1"} }, header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"aud": 1}), key: k.rsa},
		{name: "issuer expected", cfg: func(c *JWTConfig) { c.ExpectedIssuer = "https://idp" }, header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"iss": "https://idp"}), key: k.rsa, wPrincipal: "alice", wScope: []string{}},
		{name: "issuer other", cfg: func(c *JWTConfig) { c.ExpectedIssuer = "https://idp" }, header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"iss": "https://evil"}), key: k.rsa},
		{name: "issuer missing", cfg: func(c *JWTConfig) { c.ExpectedIssuer = "https://idp" }, header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(nil), key: k.rsa},
		{name: "issuer not checked", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"iss": "anyone"}), key: k.rsa, wPrincipal: "alice", wScope: []string{}},
		{name: "custom sub claim", cfg: func(c *JWTConfig) { c.SubClaimName = "client_id" }, header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"client_id": " svc "}), key: k.rsa, wPrincipal: "svc", wScope: []string{}},
		{name: "no sub", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"sub": nil}), key: k.rsa},
		{name: "blank sub", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"sub": " "}), key: k.rsa},
		{name: "sub a number", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"sub": 1}), key: k.rsa},
		{name: "scope string", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"scope": " read write "}), key: k.rsa, wPrincipal: "alice", wScope: []string{"read write"}},
		{name: "scope list", cfg: func(c *JWTConfig) { c.ScopeClaimName = "scp" }, header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"scp": []string{"b", "a"}}), key: k.rsa, wPrincipal: "alice", wScope: []string{"a", "b"}},
		{name: "scope of another type ignored", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"scope": 5}), key: k.rsa, wPrincipal: "alice", wScope: []string{}},
		{name: "scope duplicates", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"scope": []string{"a", " a"}}), key: k.rsa},
		{name: "scope blank", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"scope": ""}), key: k.rsa},
		{name: "scope list of numbers", header: map[string]any{"alg": "RS256", "kid": "rsa"}, claims: claims(map[string]any{"scope": []int{1}}), key: k.rsa},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultJWTConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			v, err := NewJWTValidator(cfg, set)
			if err != nil {
				t.Fatal(err)
			}
			v.Now = fixedClock(testNow)
			token := signJWS(t, tc.header, tc.claims, tc.key)
			if tc.tamper {
				token = token[:len(token)-4] + "AAAA"
			}
			tok, err := v.ValidateToken(token)
			if tc.wPrincipal == "" {
				var te *TokenError
				if !errors.As(err, &te) || te.Status != StatusInvalidToken || te.Reason == "" {
					t.Fatalf("ValidateToken = %+v, %v; want invalid_token", tok, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tok.Principal != tc.wPrincipal || !reflect.DeepEqual(tok.Scope, tc.wScope) || tok.Value != token {
				t.Fatalf("token %+v; want principal %q scope %q", tok, tc.wPrincipal, tc.wScope)
			}
			exp, _, _ := jwtNumericDate(tok.Claims, "exp")
			if !tok.Expiry.Equal(time.Unix(exp, 0)) {
				t.Fatalf("expiry %v, want %v", tok.Expiry, time.Unix(exp, 0))
			}
		})
	}
}

// TestJWTValidatorOAuthBearer runs a signed token through the OAUTHBEARER server.
func TestJWTValidatorOAuthBearer(t *testing.T) {
	k := getTestKeys(t)
	v, err := NewJWTValidator(DefaultJWTConfig(), testKeySet(t))
	if err != nil {
		t.Fatal(err)
	}
	v.Now = fixedClock(testNow)
	good := signJWS(t, map[string]any{"alg": "ES256", "kid": "p256"}, map[string]any{"sub": "svc", "iat": testNow.Unix(), "exp": testNow.Unix() + 60}, k.p256)
	s := NewOAuthBearerServer(v)
	if _, done, err := s.Step(oauthInitialResponse("svc", good)); !done || err != nil || s.Principal() != "svc" {
		t.Fatalf("Step: %v, %v, principal %q", done, err, s.Principal())
	}
	expired := signJWS(t, map[string]any{"alg": "ES256", "kid": "p256"}, map[string]any{"sub": "svc", "iat": 1, "exp": 2}, k.p256)
	s = NewOAuthBearerServer(v)
	if reply, _, err := s.Step(oauthInitialResponse("", expired)); err != nil || string(reply) != `{"status":"invalid_token"}` {
		t.Fatalf("expired: %q, %v", reply, err)
	}
}

// emptySource is a KeySource without keys yet.
type emptySource struct{}

func (emptySource) Keys() *KeySet { return nil }

func TestJWTValidatorConfig(t *testing.T) {
	set := testKeySet(t)
	for _, cfg := range []JWTConfig{
		{SubClaimName: " ", ScopeClaimName: "scope"},
		{SubClaimName: "sub", ScopeClaimName: ""},
		{SubClaimName: "sub", ScopeClaimName: "scope", ClockSkew: -time.Second},
	} {
		if _, err := NewJWTValidator(cfg, set); err == nil {
			t.Errorf("NewJWTValidator(%+v) accepted", cfg)
		}
	}
	if _, err := NewJWTValidator(DefaultJWTConfig(), nil); err == nil {
		t.Error("NewJWTValidator without keys accepted")
	}
	v, err := NewJWTValidator(DefaultJWTConfig(), emptySource{})
	if err != nil {
		t.Fatal(err)
	}
	var te *TokenError
	tok := signJWS(t, map[string]any{"alg": "RS256"}, map[string]any{"sub": "a"}, getTestKeys(t).rsa)
	if _, err := v.ValidateToken(tok); !errors.As(err, &te) {
		t.Fatalf("no keys yet: %v; want invalid_token", err)
	}
}
