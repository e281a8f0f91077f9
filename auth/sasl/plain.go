package sasl

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
)

// PlainUsers checks PLAIN passwords; the broker implements it over its user table.
type PlainUsers interface {
	// CheckPassword reports whether password is user's. It should take the same time whether
	// or not the user exists and whatever the password, as PlainUserTable does.
	CheckPassword(user, password string) bool
}

// PlainUserTable is a PlainUsers of user name to password, as Kafka's PlainServerCallbackHandler
// keeps them in the user_<name>="<password>" options of PlainLoginModule.
type PlainUserTable map[string]string

// CheckPassword compares SHA-256 digests of the passwords in constant time, so neither the
// password's length nor the user's existence shows in the time taken.
func (t PlainUserTable) CheckPassword(user, password string) bool {
	want, ok := t[user]
	w := sha256.Sum256([]byte(want))
	g := sha256.Sum256([]byte(password))
	return subtle.ConstantTimeCompare(w[:], g[:]) == 1 && ok
}

// jaasUserPrefix prefixes the PLAIN user options of PlainLoginModule.
const jaasUserPrefix = "user_"

// PlainUsersFromJAAS returns the users of the PlainLoginModule entries of a JAAS configuration:
// option user_alice="secret" is user alice with password secret. Entries of other login modules
// are ignored, and where two entries name the same user the first wins, as in Kafka's
// JaasContext.configEntryOption.
func PlainUsersFromJAAS(modules []LoginModule) PlainUserTable {
	t := make(PlainUserTable)
	for _, m := range modules {
		if m.Class != PlainLoginModule {
			continue
		}
		for k, v := range m.Options {
			name, ok := strings.CutPrefix(k, jaasUserPrefix)
			if !ok {
				continue
			}
			if _, dup := t[name]; !dup {
				t[name] = v
			}
		}
	}
	return t
}

// Kafka's PLAIN client messages.
const (
	plainInvalidCredentials = "Authentication failed: Invalid username or password"
	plainAuthzidMismatch    = "Authentication failed: Client requested an authorization id that is different from username"
)

// PlainServer is the server side of one SASL/PLAIN exchange (RFC 4616), as Kafka's
// PlainSaslServer: one message `[authzid] NUL authcid NUL passwd`, answered with an empty reply.
type PlainServer struct {
	users     PlainUsers
	principal string
	state     exchangeState
}

// NewPlainServer returns the server of one PLAIN exchange checking passwords with users.
func NewPlainServer(users PlainUsers) *PlainServer {
	return &PlainServer{users: users}
}

// Mechanism returns "PLAIN".
func (s *PlainServer) Mechanism() string { return MechanismPlain }

// Principal returns the authenticated user once the exchange is done, else "".
func (s *PlainServer) Principal() string { return s.principal }

// Step takes the client's one message. A malformed message, or an empty user or password, fails
// with Kafka's generic message; a wrong password with "Authentication failed: Invalid username or
// password"; an authorization id other than the user (checked after the password, as Kafka does)
// with Kafka's message for that.
func (s *PlainServer) Step(msg []byte) ([]byte, bool, error) {
	if s.state != stateStart {
		st := s.state
		s.state = stateFailed
		return nil, false, failf(MechanismPlain, "unexpected SASL/PLAIN message in state %s", st)
	}
	s.state = stateFailed
	authzid, user, pass, err := parsePlain(msg)
	if err != nil {
		return nil, false, err
	}
	if !s.users.CheckPassword(user, pass) {
		return nil, false, failMessage(MechanismPlain, plainInvalidCredentials, fmt.Errorf("wrong password for user %q, or no such user", user))
	}
	if authzid != "" && authzid != user {
		return nil, false, failMessage(MechanismPlain, plainAuthzidMismatch, fmt.Errorf("authorization id %q is not user %q", authzid, user))
	}
	s.principal = user
	s.state = stateDone
	return []byte{}, true, nil
}

// parsePlain splits a PLAIN message into its three fields as Kafka's PlainSaslServer does: up to
// four NUL-separated tokens are read and exactly three must be there, and the user and password
// must not be empty, each failure with Kafka's own message. Bytes that are not UTF-8 are kept
// (Java decodes them to replacement characters), and fail as wrong credentials.
func parsePlain(msg []byte) (authzid, user, pass string, err error) {
	parts := bytes.SplitN(msg, []byte{0}, 4)
	if len(parts) != 3 {
		m := fmt.Sprintf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts))
		return "", "", "", failMessage(MechanismPlain, m, errors.New(m))
	}
	if len(parts[1]) == 0 {
		return "", "", "", failMessage(MechanismPlain, "Authentication failed: username not specified", errors.New("empty username"))
	}
	if len(parts[2]) == 0 {
		return "", "", "", failMessage(MechanismPlain, "Authentication failed: password not specified", fmt.Errorf("empty password for user %q", parts[1]))
	}
	return string(parts[0]), string(parts[1]), string(parts[2]), nil
}
