package sasl

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/plain"
)

const genericPlain = "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"

func TestPlainServer(t *testing.T) {
	users := PlainUserTable{"alice": "alice-secret", "admin": "admin-secret"}
	for _, tc := range []struct {
		name       string
		msg        string
		wPrincipal string // "" when the exchange must fail
		wMessage   string
	}{
		{"valid", "\x00alice\x00alice-secret", "alice", ""},
		{"authzid is the user", "alice\x00alice\x00alice-secret", "alice", ""},
		{"wrong password", "\x00alice\x00nope", "", "Authentication failed: Invalid username or password"},
		{"unknown user", "\x00mallory\x00alice-secret", "", "Authentication failed: Invalid username or password"},
		{"password of another user", "\x00alice\x00admin-secret", "", "Authentication failed: Invalid username or password"},
		{"authzid of another user", "admin\x00alice\x00alice-secret", "", "Authentication failed: Client requested an authorization id that is different from username"},
		{"wrong password and other authzid", "admin\x00alice\x00nope", "", "Authentication failed: Invalid username or password"},
		{"empty user", "\x00\x00alice-secret", "", "Authentication failed: username not specified"},
		{"empty password", "\x00alice\x00", "", "Authentication failed: password not specified"},
		{"one NUL", "alice\x00alice-secret", "", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"},
		{"no NUL", "alice", "", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"},
		{"three NULs", "\x00alice\x00alice-secret\x00", "", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"},
		{"empty", "", "", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"},
		{"not UTF-8", "\x00al\xffice\x00alice-secret", "", "Authentication failed: Invalid username or password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewPlainServer(users)
			reply, done, err := s.Step([]byte(tc.msg))
			if tc.wPrincipal != "" {
				if err != nil || !done || len(reply) != 0 || s.Principal() != tc.wPrincipal {
					t.Fatalf("Step = %q, %v, %v, principal %q; want empty reply, done, principal %q", reply, done, err, s.Principal(), tc.wPrincipal)
				}
				return
			}
			var ae *AuthenticationError
			if !errors.As(err, &ae) || done || ae.Error() != tc.wMessage || ae.Mechanism != MechanismPlain {
				t.Fatalf("Step = %v, %v; want *AuthenticationError %q", done, err, tc.wMessage)
			}
			if s.Principal() != "" {
				t.Fatalf("principal %q after a failure", s.Principal())
			}
			if ae.Err == nil {
				t.Fatal("failure without a cause for the log")
			}
		})
	}
}

func TestPlainServerOneMessageOnly(t *testing.T) {
	s := NewPlainServer(PlainUserTable{"alice": "pw"})
	if _, done, err := s.Step([]byte("\x00alice\x00pw")); !done || err != nil {
		t.Fatalf("first Step = %v, %v", done, err)
	}
	if _, done, err := s.Step([]byte("\x00alice\x00pw")); done || err == nil || err.Error() != genericPlain {
		t.Fatalf("second Step = %v, %v; want the generic failure", done, err)
	}
}

// TestPlainFranzGoClient runs franz-go's PLAIN client against the server.
func TestPlainFranzGoClient(t *testing.T) {
	users := PlainUserTable{"alice": "alice-secret"}
	for _, tc := range []struct {
		auth plain.Auth
		ok   bool
	}{
		{plain.Auth{User: "alice", Pass: "alice-secret"}, true},
		{plain.Auth{Zid: "alice", User: "alice", Pass: "alice-secret"}, true},
		{plain.Auth{User: "alice", Pass: "wrong"}, false},
	} {
		_, first, err := tc.auth.AsMechanism().Authenticate(context.Background(), "broker:9092")
		if err != nil {
			t.Fatal(err)
		}
		s := NewPlainServer(users)
		_, done, err := s.Step(first)
		if done != tc.ok || (err == nil) != tc.ok {
			t.Fatalf("%+v: Step = %v, %v; want ok %v", tc.auth, done, err, tc.ok)
		}
	}
}

func TestPlainUserTable(t *testing.T) {
	users := PlainUserTable{"alice": "secret", "empty": ""}
	for _, tc := range []struct {
		user, pass string
		w          bool
	}{
		{"alice", "secret", true},
		{"alice", "secret2", false},
		{"alice", "", false},
		{"bob", "", false},
		{"bob", "secret", false},
		{"empty", "", true},
	} {
		if got := users.CheckPassword(tc.user, tc.pass); got != tc.w {
			t.Errorf("CheckPassword(%q, %q) = %v, want %v", tc.user, tc.pass, got, tc.w)
		}
	}
}

func TestPlainUsersFromJAAS(t *testing.T) {
	mods, err := ParseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";
		org.apache.kafka.common.security.scram.ScramLoginModule required user_eve="eve-secret";
		org.apache.kafka.common.security.plain.PlainLoginModule optional user_alice="second" user_bob="bob-secret";`)
	if err != nil {
		t.Fatal(err)
	}
	got := PlainUsersFromJAAS(mods)
	want := PlainUserTable{"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
	if len(got) != len(want) {
		t.Fatalf("users = %v, want %v", got, want)
	}
	for u, p := range want {
		if got[u] != p {
			t.Fatalf("users = %v, want %v", got, want)
		}
	}
}
