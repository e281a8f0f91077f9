package sasl

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

const genericOAuth = "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"

// newUnsecured returns an unsecured validator with options, on the test clock.
func newUnsecured(t testing.TB, options map[string]string) *UnsecuredValidator {
	t.Helper()
	v, err := NewUnsecuredValidator(options)
	if err != nil {
		t.Fatal(err)
	}
	v.Now = fixedClock(testNow)
	return v
}

// runOAuth runs franz-go's OAUTHBEARER client against s and returns the server's error, after
// checking that the client ends the exchange as the server does.
func runOAuth(t *testing.T, s *OAuthBearerServer, auth oauth.Auth) error {
	t.Helper()
	session, msg, err := auth.AsMechanism().Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		reply, done, err := s.Step(msg)
		if err != nil {
			return err
		}
		clientDone, next, cerr := session.Challenge(reply)
		if done {
			if !clientDone || cerr != nil {
				t.Fatalf("server done, client not: %v, %v", clientDone, cerr)
			}
			return nil
		}
		if cerr != nil || clientDone {
			t.Fatalf("client ended (%v, %v) while the server waits", clientDone, cerr)
		}
		msg = next
	}
	t.Fatal("exchange did not end in 3 steps")
	return nil
}

func TestOAuthBearerUnsecuredExchange(t *testing.T) {
	exp := float64(testNow.Add(time.Hour).Unix())
	v := newUnsecured(t, map[string]string{UnsecuredRequiredScopeOption: "LOGIN_TO_KAFKA"})
	good := unsecuredJWS(t, map[string]any{"sub": "alice", "exp": exp, "scope": []string{"LOGIN_TO_KAFKA", "x"}})
	noScope := unsecuredJWS(t, map[string]any{"sub": "alice", "exp": exp})
	expired := unsecuredJWS(t, map[string]any{"sub": "alice", "exp": float64(testNow.Add(-time.Second).Unix()), "scope": "LOGIN_TO_KAFKA"})
	for _, tc := range []struct {
		name     string
		auth     oauth.Auth
		wMessage string // "" for success
	}{
		{"valid", oauth.Auth{Token: good}, ""},
		{"authzid is the principal", oauth.Auth{Zid: "alice", Token: good}, ""},
		{"extensions", oauth.Auth{Token: good, Extensions: map[string]string{"logicalCluster": "lkc-1", "x": "a=b c"}}, ""},
		{"expired", oauth.Auth{Token: expired}, `{"status":"invalid_token"}`},
		{"missing scope", oauth.Auth{Token: noScope}, `{"status":"insufficient_scope", "scope":"[LOGIN_TO_KAFKA]"}`},
		{"not a JWS", oauth.Auth{Token: "abc"}, `{"status":"invalid_token"}`},
		{"authzid of another user", oauth.Auth{Zid: "bob", Token: good},
			"Authentication failed: Client requested an authorization id (bob) that is different from the token's principal name (alice)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewOAuthBearerServer(v)
			err := runOAuth(t, s, tc.auth)
			if tc.wMessage == "" {
				if err != nil || s.Principal() != "alice" || s.Token() == nil || s.Token().Value != good {
					t.Fatalf("exchange: %v; principal %q", err, s.Principal())
				}
				wExt := tc.auth.Extensions
				if wExt == nil {
					wExt = map[string]string{}
				}
				if !reflect.DeepEqual(s.Extensions(), wExt) {
					t.Fatalf("extensions %v, want %v", s.Extensions(), wExt)
				}
				if !s.Token().Expiry.Equal(testNow.Add(time.Hour)) || !reflect.DeepEqual(s.Token().Scope, []string{"LOGIN_TO_KAFKA", "x"}) {
					t.Fatalf("token %+v", s.Token())
				}
				return
			}
			var ae *AuthenticationError
			if !errors.As(err, &ae) || ae.Error() != tc.wMessage || ae.Mechanism != MechanismOAuthBearer {
				t.Fatalf("exchange: %v; want %q", err, tc.wMessage)
			}
			if s.Principal() != "" || s.Token() != nil {
				t.Fatalf("principal %q after a failure", s.Principal())
			}
		})
	}
}

// TestOAuthBearerChallenge follows the error challenge by hand: the challenge as reply, then the
// client's 0x01 fails the exchange with the challenge as message; a new initial response instead
// starts over.
func TestOAuthBearerChallenge(t *testing.T) {
	v := newUnsecured(t, nil)
	good := unsecuredJWS(t, map[string]any{"sub": "alice", "exp": float64(testNow.Add(time.Hour).Unix())})
	bad := unsecuredJWS(t, map[string]any{"sub": "alice"})

	s := NewOAuthBearerServer(v)
	reply, done, err := s.Step(oauthInitialResponse("", bad))
	if err != nil || done || string(reply) != `{"status":"invalid_token"}` {
		t.Fatalf("bad token: %q, %v, %v", reply, done, err)
	}
	reply, done, err = s.Step(oauthInitialResponse("", good))
	if err != nil || !done || len(reply) != 0 || s.Principal() != "alice" {
		t.Fatalf("retry with a good token: %q, %v, %v", reply, done, err)
	}

	s = NewOAuthBearerServer(v)
	if _, _, err := s.Step(oauthInitialResponse("", bad)); err != nil {
		t.Fatal(err)
	}
	_, done, err = s.Step([]byte{0x01})
	if err == nil || done || err.Error() != `{"status":"invalid_token"}` {
		t.Fatalf("0x01 after the challenge: %v, %v", done, err)
	}

	// 0x01 without a challenge is a malformed initial response.
	s = NewOAuthBearerServer(v)
	if _, _, err := s.Step([]byte{0x01}); err == nil || err.Error() != genericOAuth {
		t.Fatalf("0x01 first: %v", err)
	}
}

// failingValidator fails every token with err.
type failingValidator struct{ err error }

func (f failingValidator) ValidateToken(string) (*Token, error) { return nil, f.err }

func TestOAuthBearerInternalError(t *testing.T) {
	s := NewOAuthBearerServer(failingValidator{errors.New("keys unavailable")})
	_, _, err := s.Step(oauthInitialResponse("", "a.b.c"))
	var ae *AuthenticationError
	if !errors.As(err, &ae) || ae.Error() != genericOAuth || ae.Err == nil {
		t.Fatalf("Step: %v; want the generic failure", err)
	}
}

func TestOAuthBearerMalformed(t *testing.T) {
	v := newUnsecured(t, nil)
	tok := unsecuredJWS(t, map[string]any{"sub": "alice", "exp": float64(testNow.Add(time.Hour).Unix())})
	for _, msg := range []string{
		"",
		"n,,auth=Bearer " + tok + "\x01\x01",            // no 0x01 after the gs2 header
		"y,,\x01auth=Bearer " + tok + "\x01\x01",        // channel binding flag
		"n,,\x01auth=Bearer " + tok + "\x01",            // no final 0x01
		"n,,\x01\x01",                                   // no auth
		"n,,\x01auth=Basic " + tok + "\x01\x01",         // another scheme
		"n,,\x01auth=Bearer" + tok + "\x01\x01",         // no space
		"n,,\x01auth=Bearer a+b/c=\x01\x01",             // token characters Kafka refuses
		"n,,\x01auth=Bearer " + tok + "\x01x\x01\x01",   // key without value
		"n,,\x01auth=Bearer " + tok + "\x011=2\x01\x01", // key not letters
		"n,,\x01auth=Bearer " + tok + "\x01k=\x00\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01\x01k=v\x01\x01",
		"n,a=,\x01auth=Bearer " + tok + "\x01\x01",
	} {
		s := NewOAuthBearerServer(v)
		if _, _, err := s.Step([]byte(msg)); err == nil || err.Error() != genericOAuth {
			t.Errorf("Step(%q): %v; want the generic failure", msg, err)
		}
	}
	// The scheme in any case, several spaces, and an escaped authzid.
	s := NewOAuthBearerServer(newUnsecured(t, map[string]string{UnsecuredPrincipalClaimNameOption: "name"}))
	tok = unsecuredJWS(t, map[string]any{"name": "a,b", "exp": float64(testNow.Add(time.Hour).Unix())})
	if _, done, err := s.Step([]byte("n,a=a=2Cb,\x01auth=bEaReR   " + tok + "\x01\x01")); !done || err != nil || s.Principal() != "a,b" {
		t.Fatalf("Step: %v, %v, principal %q", done, err, s.Principal())
	}
	if _, _, err := s.Step(oauthInitialResponse("", tok)); err == nil {
		t.Fatal("Step after done succeeded")
	}
}

func TestTokenErrorChallenge(t *testing.T) {
	for _, tc := range []struct {
		e TokenError
		w string
	}{
		{TokenError{Status: StatusInvalidToken}, `{"status":"invalid_token"}`},
		{TokenError{Status: StatusInsufficientScope, Scope: "[a, b]"}, `{"status":"insufficient_scope", "scope":"[a, b]"}`},
		{TokenError{Status: StatusInvalidToken, OpenIDConfiguration: "https://idp/.well-known"}, `{"status":"invalid_token", "openid-configuration":"https://idp/.well-known"}`},
	} {
		if got := tc.e.challenge(); got != tc.w {
			t.Errorf("challenge = %s, want %s", got, tc.w)
		}
	}
}
