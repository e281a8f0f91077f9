package sasl

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// checkStep checks what every Step must hold: a failure is an *AuthenticationError of the
// mechanism, not done, and leaves no principal; done has a principal.
func checkStep(t *testing.T, s Server, done bool, err error) {
	t.Helper()
	if err != nil {
		var ae *AuthenticationError
		if !errors.As(err, &ae) || ae.Mechanism != s.Mechanism() || done || s.Principal() != "" {
			t.Fatalf("failure %v (done %v, principal %q): want an *AuthenticationError of %s", err, done, s.Principal(), s.Mechanism())
		}
	}
	if done && s.Principal() == "" {
		t.Fatal("done without a principal")
	}
}

func FuzzPlainMessage(f *testing.F) {
	for _, s := range []string{"\x00alice\x00pw", "alice\x00alice\x00pw", "bob\x00alice\x00pw", "\x00\x00", "", "\xff\x00a\x00b"} {
		f.Add([]byte(s))
	}
	users := PlainUserTable{"alice": "pw"}
	f.Fuzz(func(t *testing.T, msg []byte) {
		s := NewPlainServer(users)
		_, done, err := s.Step(msg)
		checkStep(t, s, done, err)
		if done && (s.Principal() != "alice" || !bytes.HasSuffix(msg, []byte("\x00alice\x00pw"))) {
			t.Fatalf("%q authenticated as %q", msg, s.Principal())
		}
	})
}

// fuzzScramCreds returns the credentials of the SCRAM fuzz targets.
func fuzzScramCreds(t testing.TB) credTable {
	return credTable{{"alice", MechanismScramSHA256}: mustCred(t, MechanismScramSHA256, "pw", []byte("salt"), 4096)}
}

func FuzzScramClientFirst(f *testing.F) {
	for _, s := range []string{"n,,n=alice,r=abc", "n,a=alice,n=alice,r=abc,tokenauth=true", "n,,n=a=2Cb=3D,r=x,ext=1",
		"y,,n=alice,r=abc", "n,,m=x,n=alice,r=abc", "n,a=bob,n=alice,r=abc", "n,,n=,r=", "",
		"n,,n=tok,r=abc,tokenauth=true", "n,a=tok,n=tok,r=abc,tokenauth=TRUE", "n,,n=tok,r=abc,tokenauth=false"} {
		f.Add([]byte(s))
	}
	creds := fuzzScramCreds(f)
	token := TokenCredential{Credential: mustCred(f, MechanismScramSHA256, "hmac", []byte("salt"), 4096), Owner: "alice"}
	tokens := tokenFunc(func(id, _ string) (TokenCredential, bool) { return token, id == "tok" })
	f.Fuzz(func(t *testing.T, msg []byte) {
		s, err := NewScramServer(MechanismScramSHA256, ScramConfig{Credentials: creds, Tokens: tokens, UnknownUserKey: []byte("test key")})
		if err != nil {
			t.Fatal(err)
		}
		reply, done, err := s.Step(msg)
		checkStep(t, s, done, err)
		if done {
			t.Fatal("done after the client-first message")
		}
		if err == nil && !strings.Contains(string(reply), ",s=") {
			t.Fatalf("server-first %q", reply)
		}
	})
}

func FuzzScramClientFinal(f *testing.F) {
	for _, s := range []string{"c=biws,r=abcX,p=AAAA", "c=biws,r=abc,x=y,p=" + strings.Repeat("A", 44), "c=,r=,p=", "", ",,,"} {
		f.Add([]byte(s))
	}
	creds := fuzzScramCreds(f)
	f.Fuzz(func(t *testing.T, msg []byte) {
		s := newScram(t, MechanismScramSHA256, creds)
		if _, _, err := s.Step([]byte("n,,n=alice,r=abc")); err != nil {
			t.Fatal(err)
		}
		_, done, err := s.Step(msg)
		checkStep(t, s, done, err)
		if done {
			t.Fatalf("%q proved the password", msg) // the server nonce is random: no input can
		}
	})
}

func FuzzOAuthBearerInitial(f *testing.F) {
	v, err := NewUnsecuredValidator(map[string]string{UnsecuredRequiredScopeOption: "s"})
	if err != nil {
		f.Fatal(err)
	}
	v.Now = fixedClock(testNow)
	tok := unsecuredJWS(f, map[string]any{"sub": "alice", "exp": 2e9, "scope": "s"})
	for _, s := range []string{"n,,\x01auth=Bearer " + tok + "\x01\x01", "n,a=alice,\x01auth=bearer  " + tok + "\x01k=v\x01\x01",
		"n,,\x01auth=Bearer x.y.z\x01\x01", "\x01", "n,,\x01\x01", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		s := NewOAuthBearerServer(v)
		reply, done, err := s.Step(msg)
		checkStep(t, s, done, err)
		if err == nil && !done {
			// An error challenge: the client's 0x01 fails the exchange with it.
			_, done, err = s.Step([]byte{0x01})
			if err == nil || done || err.Error() != string(reply) {
				t.Fatalf("after challenge %q: %v, %v", reply, done, err)
			}
		}
	})
}

func FuzzParseJWS(f *testing.F) {
	k := getTestKeys(f)
	set := testKeySet(f)
	f.Add(unsecuredJWS(f, map[string]any{"sub": "alice", "exp": 2e9, "iat": 1, "scope": []string{"a", "b"}}))
	f.Add(signJWS(f, map[string]any{"alg": "ES256", "kid": "p256"}, map[string]any{"sub": "a", "exp": 2e9, "iat": 1, "aud": []string{"x"}}, k.p256))
	f.Add(signJWS(f, map[string]any{"alg": "RS256"}, map[string]any{"sub": "a", "exp": 2e9, "iat": 1}, k.rsa))
	f.Add("a.b.c")
	f.Add("..")
	f.Add("e30.e30.")
	unsecured, err := NewUnsecuredValidator(nil)
	if err != nil {
		f.Fatal(err)
	}
	unsecured.Now = fixedClock(testNow)
	signed, err := NewJWTValidator(DefaultJWTConfig(), set)
	if err != nil {
		f.Fatal(err)
	}
	signed.Now = fixedClock(testNow)
	f.Fuzz(func(t *testing.T, token string) {
		if jws, err := ParseJWS(token); err == nil && (jws.Header == nil || jws.Claims == nil) {
			t.Fatalf("ParseJWS(%q) without header or claims", token)
		}
		for _, v := range []TokenValidator{unsecured, signed} {
			tok, err := v.ValidateToken(token)
			var te *TokenError
			if err != nil && !errors.As(err, &te) {
				t.Fatalf("%T: %v is not a *TokenError", v, err)
			}
			if err == nil && (strings.TrimSpace(tok.Principal) == "" || !tok.Expiry.After(testNow.Add(-time.Minute))) {
				t.Fatalf("%T accepted %q as %+v", v, token, tok)
			}
		}
	})
}

func FuzzParseJWKS(f *testing.F) {
	k := getTestKeys(f)
	f.Add(jwksJSON(f, publicJWK(f, k.rsa, "r", "RS256"), publicJWK(f, k.p521, "e", ""), publicJWK(f, k.ed, "", "")))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"},{"kty":"RSA","n":"AQ","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":[]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		set, err := ParseJWKS(doc)
		if err != nil {
			return
		}
		for _, key := range set.All() {
			if key.Key == nil {
				t.Fatalf("key without a public key: %+v", key)
			}
		}
	})
}

func FuzzParseJAAS(f *testing.F) {
	for _, s := range []string{
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";`,
		"A optional a='x\\'y' b=\"\\101\\n\"; B Sufficient;",
		"// c\nM /* x */ required a=b/c\n d=e;",
		"M required a=\"unterminated\n;",
		"\u0085 \u00a0 ;=",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, config string) {
		mods, err := ParseJAAS(config)
		if err != nil {
			return
		}
		if len(mods) == 0 {
			t.Fatal("no modules and no error")
		}
		for _, m := range mods {
			if m.Class == "" || m.Flag < FlagRequired || m.Flag > FlagOptional || m.Options == nil {
				t.Fatalf("ParseJAAS(%q) = %+v", config, m)
			}
		}
	})
}
