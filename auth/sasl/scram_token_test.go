package sasl

import (
	"errors"
	"testing"
	"time"

	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// tokenFunc is a TokenCredentials that asks a function.
type tokenFunc func(tokenID, mechanism string) (TokenCredential, bool)

func (f tokenFunc) TokenCredential(tokenID, mechanism string) (TokenCredential, bool) {
	return f(tokenID, mechanism)
}

// TestScramDelegationTokens: with the tokenauth extension the user is a token id and the
// password its HMAC, and the exchange authenticates the token's owner; a wrong HMAC fails at
// the final message, an unknown token at the first, a token id without the extension is an
// unknown user, and a user's password with the extension is an unknown token. Every failure
// has Kafka's generic message.
func TestScramDelegationTokens(t *testing.T) {
	expiry := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	const tokenID, hmac = "Qm9ndXNUb2tlbklk", "c2VjcmV0LWhtYWMtaW4tYmFzZTY0"
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		creds := credTable{{"alice", mech}: mustCred(t, mech, "alice-secret", []byte("salt-of-alice"), 4096)}
		token := TokenCredential{Credential: mustCred(t, mech, hmac, []byte("salt-of-token"), ScramMinIterations), Owner: "alice", Expiry: expiry}
		tokens := tokenFunc(func(id, m string) (TokenCredential, bool) { return token, id == tokenID && m == mech })
		generic := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mech
		for _, tc := range []struct {
			name  string
			auth  kscram.Auth
			wStep int
		}{
			{"token", kscram.Auth{User: tokenID, Pass: hmac, IsToken: true}, 0},
			{"wrong hmac", kscram.Auth{User: tokenID, Pass: "c2VjcmV0", IsToken: true}, 2},
			{"unknown token", kscram.Auth{User: "bm9uZQ", Pass: hmac, IsToken: true}, 1},
			{"token id without tokenauth", kscram.Auth{User: tokenID, Pass: hmac}, 2},
			{"password with tokenauth", kscram.Auth{User: "alice", Pass: "alice-secret", IsToken: true}, 1},
		} {
			t.Run(mech+"/"+tc.name, func(t *testing.T) {
				s, err := NewScramServer(mech, ScramConfig{Credentials: creds, Tokens: tokens, UnknownUserKey: []byte("test key")})
				if err != nil {
					t.Fatal(err)
				}
				step, err := runScram(t, s, tc.auth)
				if tc.wStep == 0 {
					if err != nil || s.Principal() != "alice" || !s.TokenAuthenticated() || !s.TokenExpiry().Equal(expiry) {
						t.Fatalf("step %d: %v; principal %q, token %v, expiry %v; want alice by a token expiring %v",
							step, err, s.Principal(), s.TokenAuthenticated(), s.TokenExpiry(), expiry)
					}
					return
				}
				var ae *AuthenticationError
				if step != tc.wStep || !errors.As(err, &ae) || ae.Error() != generic {
					t.Fatalf("step %d error %v; want step %d and %q", step, err, tc.wStep, generic)
				}
				if s.Principal() != "" || s.TokenAuthenticated() {
					t.Fatalf("principal %q, token %v after a failure", s.Principal(), s.TokenAuthenticated())
				}
			})
		}
	}
}

// TestScramPasswordNotToken: a user's exchange is not token-authenticated and has no expiry.
func TestScramPasswordNotToken(t *testing.T) {
	mech := MechanismScramSHA512
	s := newScram(t, mech, credTable{{"alice", mech}: mustCred(t, mech, "alice-secret", []byte("salt"), 4096)})
	if step, err := runScram(t, s, kscram.Auth{User: "alice", Pass: "alice-secret"}); err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	if s.TokenAuthenticated() || !s.TokenExpiry().IsZero() {
		t.Fatalf("password exchange: token %v, expiry %v; want neither", s.TokenAuthenticated(), s.TokenExpiry())
	}
}
