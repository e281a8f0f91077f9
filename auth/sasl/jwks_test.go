package sasl

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ringbroker/internal/testutil"
)

func TestParseJWKS(t *testing.T) {
	k := getTestKeys(t)
	offCurve := publicJWK(t, k.p256, "off", "")
	offCurve["y"] = offCurve["x"]
	evenExponent := publicJWK(t, k.rsa, "even", "")
	evenExponent["e"] = b64([]byte{2})
	doc := jwksJSON(t,
		publicJWK(t, k.rsa, "r", "RS256"),
		publicJWK(t, k.p384, "e", ""),
		publicJWK(t, k.ed, "o", ""),
		map[string]any{"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
		map[string]any{"kty": "EC", "crv": "secp256k1", "x": "AA", "y": "AA"},
		map[string]any{"kty": "OKP", "crv": "X25519", "x": b64(make([]byte, 32))},
		map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(make([]byte, 31))},
		map[string]any{"kty": "RSA", "n": "!!", "e": "AQAB"},
		offCurve,
		evenExponent,
		map[string]any{"kty": 7},
	)
	set, err := ParseJWKS(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := set.All()
	if len(got) != 3 || len(set.Ignored()) != 8 {
		t.Fatalf("%d keys, %d ignored (%v); want 3 and 8", len(got), len(set.Ignored()), set.Ignored())
	}
	if r, ok := got[0].Key.(*rsa.PublicKey); !ok || got[0].KeyID != "r" || got[0].Algorithm != "RS256" || !r.Equal(k.rsa.Public()) {
		t.Fatalf("key 0: %+v", got[0])
	}
	if e, ok := got[1].Key.(*ecdsa.PublicKey); !ok || !e.Equal(k.p384.Public()) {
		t.Fatalf("key 1: %+v", got[1])
	}
	if o, ok := got[2].Key.(ed25519.PublicKey); !ok || !o.Equal(k.ed.Public()) {
		t.Fatalf("key 2: %+v", got[2])
	}
	if set.Keys() != set {
		t.Fatal("a KeySet is its own KeySource")
	}
	for _, bad := range []string{``, `[]`, `{}`, `{"keys":{}}`, `{"keys":null}`, `{"keys":[]`} {
		if _, err := ParseJWKS([]byte(bad)); err == nil {
			t.Errorf("ParseJWKS(%q) accepted", bad)
		}
	}
	if set, err := ParseJWKS([]byte(`{"keys":[]}`)); err != nil || len(set.All()) != 0 {
		t.Fatalf("empty JWKS: %v, %v", set, err)
	}
}

func TestJWKSFetcher(t *testing.T) {
	k := getTestKeys(t)
	var doc atomic.Pointer[[]byte]
	var status atomic.Int32
	status.Store(http.StatusOK)
	first := jwksJSON(t, publicJWK(t, k.rsa, "one", ""))
	doc.Store(&first)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := int(status.Load()); s != http.StatusOK {
			http.Error(w, "down", s)
			return
		}
		w.Write(*doc.Load())
	}))
	defer srv.Close()

	f := &JWKSFetcher{URL: srv.URL, Refresh: 20 * time.Millisecond, RetryBackoff: time.Millisecond, RetryBackoffMax: 4 * time.Millisecond}
	if f.Keys() != nil {
		t.Fatal("keys before the first fetch")
	}
	if err := f.Fetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if all := f.Keys().All(); len(all) != 1 || all[0].KeyID != "one" {
		t.Fatalf("keys %+v", all)
	}

	// A failing endpoint keeps the last good set and reports each failure.
	status.Store(http.StatusServiceUnavailable)
	if err := f.Fetch(context.Background()); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Fetch from a failing endpoint: %v", err)
	}
	var failures atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		f.Run(ctx, func(error) { failures.Add(1) })
		close(done)
	}()
	testutil.WaitFor(t, 5*time.Second, testutil.Holds("retries of the failing endpoint", func() bool { return failures.Load() >= 3 }))
	if all := f.Keys().All(); len(all) != 1 || all[0].KeyID != "one" {
		t.Fatalf("keys after failures %+v", all)
	}

	// The endpoint recovers with a new key; Run picks it up.
	second := jwksJSON(t, publicJWK(t, k.p256, "two", ""))
	doc.Store(&second)
	status.Store(http.StatusOK)
	testutil.WaitFor(t, 5*time.Second, testutil.Holds("the new key set", func() bool {
		all := f.Keys().All()
		return len(all) == 1 && all[0].KeyID == "two"
	}))
	cancel()
	<-done

	bad := []byte("not json")
	doc.Store(&bad)
	if err := f.Fetch(context.Background()); err == nil {
		t.Fatal("Fetch of a malformed document succeeded")
	}
	big := []byte(`{"keys":[],"pad":"` + strings.Repeat("x", maxJWKSBytes) + `"}`)
	doc.Store(&big)
	if err := f.Fetch(context.Background()); err == nil {
		t.Fatal("Fetch of an oversized document succeeded")
	}
	f2 := &JWKSFetcher{URL: "http://127.0.0.1:1/jwks"}
	if err := f2.Fetch(context.Background()); err == nil || errors.Unwrap(err) == nil {
		t.Fatalf("Fetch from a closed port: %v", err)
	}
}
