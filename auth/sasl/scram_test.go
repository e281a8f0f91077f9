package sasl

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// credTable is a ScramCredentials of (user, mechanism) to credential.
type credTable map[[2]string]Credential

func (c credTable) ScramCredential(user, mechanism string) (Credential, bool) {
	cred, ok := c[[2]string{user, mechanism}]
	return cred, ok
}

// mustCred derives a credential or fails the test.
func mustCred(t testing.TB, mechanism, password string, salt []byte, iterations int) Credential {
	t.Helper()
	c, err := CredentialFromPassword(mechanism, password, salt, iterations)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newScram returns a server of mechanism over creds with a fixed unknown-user key.
func newScram(t testing.TB, mechanism string, creds ScramCredentials) *ScramServer {
	t.Helper()
	s, err := NewScramServer(mechanism, ScramConfig{Credentials: creds, UnknownUserKey: []byte("test key")})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runScram runs franz-go's SCRAM client against s: it returns the server's error and at which
// step (1: client-first, 2: client-final) it failed, or 0 and nil on success, after checking
// that the client accepted the server's signature.
func runScram(t *testing.T, s *ScramServer, auth kscram.Auth) (int, error) {
	t.Helper()
	mech := kscram.Sha256(func(context.Context) (kscram.Auth, error) { return auth, nil })
	if s.Mechanism() == MechanismScramSHA512 {
		mech = kscram.Sha512(func(context.Context) (kscram.Auth, error) { return auth, nil })
	}
	session, clientFirst, err := mech.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	serverFirst, done, err := s.Step(clientFirst)
	if err != nil {
		return 1, err
	}
	if done {
		t.Fatal("done after the client-first message")
	}
	_, clientFinal, err := session.Challenge(serverFirst)
	if err != nil {
		t.Fatalf("client refused the server-first message %q: %v", serverFirst, err)
	}
	serverFinal, done, err := s.Step(clientFinal)
	if err != nil {
		return 2, err
	}
	if !done {
		t.Fatal("not done after the client-final message")
	}
	if ok, _, err := session.Challenge(serverFinal); !ok || err != nil {
		t.Fatalf("client refused the server-final message %q: %v, %v", serverFinal, ok, err)
	}
	return 0, nil
}

func TestScramFranzGoClient(t *testing.T) {
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		creds := credTable{
			{"alice", mech}:    mustCred(t, mech, "alice-secret", []byte("salt-of-alice"), 4096),
			{"a,b=c", mech}:    mustCred(t, mech, "pw,=", []byte("salt-of-abc"), 8192),
			{"bob", "SCRAM-X"}: mustCred(t, mech, "bob-secret", []byte("salt"), 4096),
			{"carol", mech}:    mustCred(t, mech, "carol-secret", []byte("salt-of-carol"), ScramMaxIterations),
		}
		generic := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mech
		for _, tc := range []struct {
			name       string
			auth       kscram.Auth
			wStep      int
			wMessage   string
			wPrincipal string
		}{
			{"valid", kscram.Auth{User: "alice", Pass: "alice-secret"}, 0, "", "alice"},
			{"authzid is the user", kscram.Auth{Zid: "alice", User: "alice", Pass: "alice-secret"}, 0, "", "alice"},
			{"escaped name", kscram.Auth{User: "a,b=c", Pass: "pw,="}, 0, "", "a,b=c"},
			{"max iterations", kscram.Auth{User: "carol", Pass: "carol-secret"}, 0, "", "carol"},
			{"wrong password", kscram.Auth{User: "alice", Pass: "nope"}, 2, generic, ""},
			{"unknown user", kscram.Auth{User: "mallory", Pass: "x"}, 2, generic, ""},
			{"user of another mechanism", kscram.Auth{User: "bob", Pass: "bob-secret"}, 2, generic, ""},
			{"authzid of another user", kscram.Auth{Zid: "carol", User: "alice", Pass: "alice-secret"}, 1,
				"Authentication failed: Client requested an authorization id that is different from username", ""},
			{"delegation token", kscram.Auth{User: "alice", Pass: "alice-secret", IsToken: true}, 1, generic, ""},
		} {
			t.Run(mech+"/"+tc.name, func(t *testing.T) {
				s := newScram(t, mech, creds)
				step, err := runScram(t, s, tc.auth)
				if tc.wStep == 0 {
					if err != nil || s.Principal() != tc.wPrincipal {
						t.Fatalf("failed at step %d: %v; principal %q, want %q", step, err, s.Principal(), tc.wPrincipal)
					}
					return
				}
				var ae *AuthenticationError
				if step != tc.wStep || !errors.As(err, &ae) || ae.Error() != tc.wMessage || ae.Mechanism != mech {
					t.Fatalf("step %d error %v; want step %d and %q", step, err, tc.wStep, tc.wMessage)
				}
				if s.Principal() != "" {
					t.Fatalf("principal %q after a failure", s.Principal())
				}
			})
		}
	}
}

// TestScramRFC7677 checks the server against the SCRAM-SHA-256 example of RFC 7677 section 3:
// the credential derived from the password, the server-first message's salt and iterations, and
// the verification of the client's proof with the server's signature.
func TestScramRFC7677(t *testing.T) {
	const (
		clientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
		serverFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
		clientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
		serverFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
	)
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred := mustCred(t, MechanismScramSHA256, "pencil", salt, 4096)
	s := newScram(t, MechanismScramSHA256, credTable{{"user", MechanismScramSHA256}: cred})

	reply, done, err := s.Step([]byte(clientFirst))
	if err != nil || done {
		t.Fatalf("client-first: %v, %v", done, err)
	}
	if !strings.HasPrefix(string(reply), "r=rOprNGfwEbeRWgbNEkqO") || !strings.HasSuffix(string(reply), ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096") {
		t.Fatalf("server-first %q: want the client nonce, the vector's salt and 4096 iterations", reply)
	}
	// The server's nonce is random; continue as if it had chosen the vector's.
	s.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	s.served = serverFirst
	reply, done, err = s.Step([]byte(clientFinal))
	if err != nil || !done || string(reply) != serverFinal {
		t.Fatalf("client-final: %q, %v, %v; want %q, done", reply, done, err, serverFinal)
	}
	if s.Principal() != "user" {
		t.Fatalf("principal %q, want user", s.Principal())
	}
}

// TestScramUnknownUserLooksKnown checks that a client cannot tell an unknown user from a known
// one by the server-first message: it has a salt like Kafka's, the same at every attempt and
// different for every user, and the minimum iterations.
func TestScramUnknownUserLooksKnown(t *testing.T) {
	first := func(user string) (salt string, iterations string) {
		s := newScram(t, MechanismScramSHA256, credTable{})
		reply, _, err := s.Step([]byte("n,,n=" + user + ",r=abc"))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Split(string(reply), ",")
		if len(f) != 3 || !strings.HasPrefix(f[0], "r=abc") || len(f[0]) <= len("r=abc") {
			t.Fatalf("server-first %q", reply)
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(f[1], "s="))
		if err != nil || len(b) < 20 || strings.Trim(string(b), "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
			t.Fatalf("salt %q: want base-36 text like Kafka's (%v)", b, err)
		}
		return f[1], f[2]
	}
	s1, i1 := first("mallory")
	s2, _ := first("mallory")
	s3, _ := first("trudy")
	if s1 != s2 || s1 == s3 || i1 != "i=4096" {
		t.Fatalf("salts %q %q %q, iterations %q: want the same salt per user, different across users, i=4096", s1, s2, s3, i1)
	}
}

func TestScramMalformed(t *testing.T) {
	mech := MechanismScramSHA256
	generic := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mech
	creds := credTable{{"alice", mech}: mustCred(t, mech, "pw", []byte("salt"), 4096)}
	for _, msg := range []string{
		"",
		"y,,n=alice,r=abc", // channel binding flags other than n
		"p=tls-unique,,n=alice,r=abc",
		"n,n=alice,r=abc",        // gs2 header without its second comma
		"n,a=alice",              // unterminated authzid
		"n,,m=ext,n=alice,r=abc", // mandatory extension
		"n,,n=alice",             // no nonce
		"n,,r=abc,n=alice",       // fields swapped
		"n,,n=,r=abc",            // empty user
		"n,,n=al=ice,r=abc",      // bad escape
		"n,,n=al\xffice,r=abc",   // non-ASCII name
		"n,,n=alice,r=",          // empty nonce
		"n,,n=alice,r=a b",       // nonce with a space
		"n,,n=alice,r=abc,1=x",   // extension key not letters
		"n,,n=alice,r=abc,ext=",  // empty extension value
		"n,a=,n=alice,r=abc",     // empty authzid
	} {
		s := newScram(t, mech, creds)
		if _, _, err := s.Step([]byte(msg)); err == nil || err.Error() != generic {
			t.Errorf("client-first %q: %v; want the generic failure", msg, err)
		}
	}

	// Client-final messages after a valid client-first message.
	s := newScram(t, mech, creds)
	serverFirst, _, err := s.Step([]byte("n,,n=alice,r=abc"))
	if err != nil {
		t.Fatal(err)
	}
	nonce := strings.TrimPrefix(strings.Split(string(serverFirst), ",")[0], "r=")
	proof := base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, msg := range []string{
		"",
		"c=biws,r=" + nonce,                  // no proof
		"c=biws,p=" + proof,                  // no nonce
		"c=biws,r=abc,p=" + proof,            // the client's nonce alone
		"c=biws,r=" + nonce + "x,p=" + proof, // another nonce
		"c=eSws,r=" + nonce + ",p=" + proof,  // channel binding "y,"
		"c=bi,r=" + nonce + ",p=" + proof,    // unpadded base64
		"c=biws,r=" + nonce + ",p=AAAA",      // short proof
		"c=biws,r=" + nonce + ",p=" + proof[:len(proof)-1], // bad padding
		"c=biws,r=" + nonce + ",9=x,p=" + proof,            // bad extension
		"r=" + nonce + ",c=biws,p=" + proof,                // fields swapped
		"c=biws,r=" + nonce + ",p=" + proof,                // wrong proof
	} {
		s2 := *s
		if _, _, err := s2.Step([]byte(msg)); err == nil || err.Error() != generic {
			t.Errorf("client-final %q: %v; want the generic failure", msg, err)
		}
	}
	// A failed exchange stays failed.
	if _, _, err := s.Step([]byte("c=biws,r=" + nonce + ",p=" + proof)); err == nil {
		t.Fatal("wrong proof accepted")
	}
	if _, _, err := s.Step([]byte("c=biws,r=" + nonce + ",p=" + proof)); err == nil || err.Error() != generic {
		t.Fatalf("Step after a failure: %v; want the generic failure", err)
	}
}

// TestScramClientFinalExtensions checks that client-final extensions are part of AuthMessage as
// sent (RFC 5802), with a proof computed by hand.
func TestScramClientFinalExtensions(t *testing.T) {
	mech := MechanismScramSHA256
	salt := []byte("salty")
	cred := mustCred(t, mech, "pw", salt, 4096)
	s := newScram(t, mech, credTable{{"alice", mech}: cred})
	serverFirst, _, err := s.Step([]byte("n,,n=alice,r=abc,ext=1"))
	if err != nil {
		t.Fatal(err)
	}
	nonce := strings.TrimPrefix(strings.Split(string(serverFirst), ",")[0], "r=")
	withoutProof := "c=biws,r=" + nonce + ",foo=bar"
	authMessage := "n=alice,r=abc,ext=1," + string(serverFirst) + "," + withoutProof
	sp, err := SaltedPassword(mech, "pw", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := scramHash(mech)
	clientKey := hmacSum(h, sp, []byte("Client Key"))
	sig := hmacSum(h, cred.StoredKey, []byte(authMessage))
	for i := range sig {
		sig[i] ^= clientKey[i]
	}
	reply, done, err := s.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(sig)))
	wantSig := base64.StdEncoding.EncodeToString(hmacSum(h, cred.ServerKey, []byte(authMessage)))
	if err != nil || !done || string(reply) != "v="+wantSig {
		t.Fatalf("Step = %q, %v, %v; want v=%s", reply, done, err, wantSig)
	}
}

func TestScramCredentialBelowMinimum(t *testing.T) {
	mech := MechanismScramSHA512
	cred := mustCred(t, mech, "pw", []byte("salt"), 4096)
	cred.Iterations = 4095
	s := newScram(t, mech, credTable{{"alice", mech}: cred})
	_, _, err := s.Step([]byte("n,,n=alice,r=abc"))
	var ae *AuthenticationError
	if !errors.As(err, &ae) || ae.Message != "" || !strings.Contains(ae.Detail(), "4095") {
		t.Fatalf("Step: %v; want the generic failure naming the iterations", err)
	}
}

func TestCheckScramIterations(t *testing.T) {
	for _, tc := range []struct {
		n    int
		wErr error
	}{
		{4095, ErrTooFewIterations},
		{4096, nil},
		{16384, nil},
		{16385, ErrTooManyIterations},
		{-1, ErrTooFewIterations},
	} {
		err := CheckScramIterations(tc.n)
		if !errors.Is(err, tc.wErr) || (tc.wErr == nil) != (err == nil) {
			t.Errorf("CheckScramIterations(%d) = %v, want %v", tc.n, err, tc.wErr)
		}
	}
	if ErrTooFewIterations.Error() != "Too few iterations" || ErrTooManyIterations.Error() != "Too many iterations" {
		t.Fatal("iteration errors must read as Kafka's")
	}
}

func TestCredentialDerivation(t *testing.T) {
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		salt := []byte("0123456789abcdef")
		sp, err := SaltedPassword(mech, "secret", salt, 4096)
		if err != nil {
			t.Fatal(err)
		}
		fromSalted, err := CredentialFromSaltedPassword(mech, sp, salt, 4096)
		if err != nil {
			t.Fatal(err)
		}
		fromPlain := mustCred(t, mech, "secret", salt, 4096)
		if !bytes.Equal(fromSalted.StoredKey, fromPlain.StoredKey) || !bytes.Equal(fromSalted.ServerKey, fromPlain.ServerKey) ||
			!bytes.Equal(fromSalted.Salt, salt) || fromSalted.Iterations != 4096 {
			t.Fatalf("%s: from salted password %+v, from password %+v", mech, fromSalted, fromPlain)
		}
		// Kafka's controller stores any salt and salted password (kafka-go's test suite sends
		// an 18-byte one); the keys are still the HMACs of the bytes given.
		odd, err := CredentialFromSaltedPassword(mech, []byte("my-salted-password"), nil, 4096)
		if err != nil {
			t.Fatalf("%s: 18-byte salted password and no salt: %v; want stored, as Kafka", mech, err)
		}
		h, _ := scramHash(mech)
		if want := hmacSum(h, []byte("my-salted-password"), []byte("Server Key")); !bytes.Equal(odd.ServerKey, want) {
			t.Fatalf("%s: server key %x; want %x", mech, odd.ServerKey, want)
		}
		if _, err := CredentialFromSaltedPassword(mech, sp, salt, 20000); !errors.Is(err, ErrTooManyIterations) {
			t.Fatalf("%s: 20000 iterations: %v", mech, err)
		}
	}
	if _, err := CredentialFromPassword("SCRAM-SHA-1", "pw", []byte("s"), 4096); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("SCRAM-SHA-1: %v", err)
	}
}

func TestNewScramSalt(t *testing.T) {
	a, err := NewScramSalt(strings.NewReader(strings.Repeat("\xff", 17)))
	if err != nil {
		t.Fatal(err)
	}
	// 2^130-1 in base 36 has 26 digits.
	if len(a) != 26 || strings.Trim(string(a), "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
		t.Fatalf("salt %q: want 26 base-36 digits", a)
	}
	if _, err := NewScramSalt(strings.NewReader("short")); err == nil {
		t.Fatal("salt from a short reader")
	}
}

func TestNewScramServerErrors(t *testing.T) {
	if _, err := NewScramServer("SCRAM-SHA-1", ScramConfig{Credentials: credTable{}, UnknownUserKey: []byte("k")}); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("SCRAM-SHA-1: %v", err)
	}
	if _, err := NewScramServer(MechanismScramSHA256, ScramConfig{UnknownUserKey: []byte("k")}); err == nil {
		t.Fatal("no credentials accepted")
	}
	if _, err := NewScramServer(MechanismScramSHA256, ScramConfig{Credentials: credTable{}}); err == nil {
		t.Fatal("no unknown-user key accepted")
	}
}
