package sasl

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

func TestAuthenticator(t *testing.T) {
	none, err := NewAuthenticator(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m := none.Mechanisms(); len(m) != 0 {
		t.Fatalf("mechanisms without configuration: %v", m)
	}
	if _, err := none.NewServer(MechanismPlain); !errors.Is(err, ErrUnsupportedMechanism) || err.Error() != "Unsupported SASL mechanism PLAIN" {
		t.Fatalf("PLAIN unconfigured: %v", err)
	}

	mech := MechanismScramSHA512
	a, err := NewAuthenticator(Options{
		PlainUsers:       PlainUserTable{"alice": "pw"},
		ScramCredentials: credTable{{"alice", mech}: mustCred(t, mech, "pw", []byte("salt"), 4096)},
		TokenValidator:   newUnsecured(t, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	if m := a.Mechanisms(); !reflect.DeepEqual(m, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}) {
		t.Fatalf("mechanisms %v", m)
	}
	for _, name := range a.Mechanisms() {
		s, err := a.NewServer(name)
		if err != nil || s.Mechanism() != name {
			t.Fatalf("NewServer(%s) = %v, %v", name, s, err)
		}
	}
	for _, name := range []string{"GSSAPI", "plain", "SCRAM-SHA-1", ""} {
		if _, err := a.NewServer(name); !errors.Is(err, ErrUnsupportedMechanism) || !strings.HasSuffix(err.Error(), " "+name) {
			t.Errorf("NewServer(%q): %v", name, err)
		}
	}

	// Two servers of one Authenticator invent the same salt for an unknown user; another
	// Authenticator invents another.
	salt := func(a *Authenticator) string {
		s, err := a.NewServer(mech)
		if err != nil {
			t.Fatal(err)
		}
		reply, _, err := s.Step([]byte("n,,n=nobody,r=abc"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(string(reply), ",")[1]
	}
	b, err := NewAuthenticator(Options{ScramCredentials: credTable{}})
	if err != nil {
		t.Fatal(err)
	}
	if salt(a) != salt(a) || salt(a) == salt(b) {
		t.Fatal("unknown-user salts: want the same per Authenticator, different across them")
	}

	// A full SCRAM exchange through the Authenticator.
	s, err := a.NewServer(mech)
	if err != nil {
		t.Fatal(err)
	}
	if step, err := runScram(t, s.(*ScramServer), kscram.Auth{User: "alice", Pass: "pw"}); err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	if s.Principal() != "alice" {
		t.Fatalf("principal %q", s.Principal())
	}

	if _, err := NewAuthenticator(Options{Rand: strings.NewReader("short")}); err == nil {
		t.Fatal("NewAuthenticator with a short random source succeeded")
	}
}

func TestAuthenticationErrorMessages(t *testing.T) {
	cause := errors.New("no such user")
	generic := &AuthenticationError{Mechanism: MechanismScramSHA256, Err: cause}
	if got := generic.ClientMessage(false); got != "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256" {
		t.Fatalf("generic message %q", got)
	}
	if got := generic.ClientMessage(true); got != "Authentication failed during re-authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256" {
		t.Fatalf("re-authentication message %q", got)
	}
	if !errors.Is(generic, cause) || !strings.HasSuffix(generic.Detail(), ": no such user") || strings.Contains(generic.Error(), "no such user") {
		t.Fatalf("cause must be in Detail and Unwrap, not Error: %q, %q", generic.Error(), generic.Detail())
	}
	specific := &AuthenticationError{Mechanism: MechanismPlain, Message: "Authentication failed: Invalid username or password"}
	if specific.ClientMessage(true) != specific.Message || specific.Detail() != specific.Message {
		t.Fatalf("specific message %q, detail %q", specific.ClientMessage(true), specific.Detail())
	}
}
