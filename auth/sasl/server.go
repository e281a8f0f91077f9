package sasl

import (
	"crypto/rand"
	"fmt"
	"io"
)

// Server is the server side of one SASL exchange, for one connection; it is not safe for
// concurrent use.
type Server interface {
	// Mechanism returns the mechanism's name as Kafka spells it.
	Mechanism() string
	// Step takes the client's next message, the auth_bytes of a SaslAuthenticate request or a
	// raw token, and returns the reply to send back (possibly empty) and whether the exchange
	// is done. An error ends the exchange as failed: an *AuthenticationError whose Error is the
	// client message Kafka sends. Step after done or a failure fails.
	Step(clientMsg []byte) (reply []byte, done bool, err error)
	// Principal returns the authenticated user, the authorization id, once Step reported done;
	// "" before.
	Principal() string
}

// Options configure an Authenticator. A mechanism without what it needs is not offered.
type Options struct {
	// PlainUsers enables PLAIN.
	PlainUsers PlainUsers
	// ScramCredentials enables SCRAM-SHA-256 and SCRAM-SHA-512.
	ScramCredentials ScramCredentials
	// TokenCredentials enables delegation tokens over SCRAM (the tokenauth extension); nil
	// refuses them.
	TokenCredentials TokenCredentials
	// TokenValidator enables OAUTHBEARER.
	TokenValidator TokenValidator
	// Rand is the randomness of SCRAM nonces and of the unknown-user key, read from concurrent
	// exchanges; nil is crypto/rand.
	Rand io.Reader
}

// Authenticator makes the servers of one listener's exchanges. It is safe for concurrent use.
type Authenticator struct {
	opts           Options
	unknownUserKey []byte
}

// NewAuthenticator returns an Authenticator serving the mechanisms opts enables.
func NewAuthenticator(opts Options) (*Authenticator, error) {
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	key := make([]byte, 32)
	if _, err := io.ReadFull(opts.Rand, key); err != nil {
		return nil, fmt.Errorf("SCRAM unknown-user key: %w", err)
	}
	return &Authenticator{opts: opts, unknownUserKey: key}, nil
}

// Mechanisms returns the names of the mechanisms served, for SaslHandshake's list; the broker
// keeps those of sasl.enabled.mechanisms.
func (a *Authenticator) Mechanisms() []string {
	var m []string
	if a.opts.PlainUsers != nil {
		m = append(m, MechanismPlain)
	}
	if a.opts.ScramCredentials != nil {
		m = append(m, MechanismScramSHA256, MechanismScramSHA512)
	}
	if a.opts.TokenValidator != nil {
		m = append(m, MechanismOAuthBearer)
	}
	return m
}

// NewServer returns the server of a new exchange of mechanism, named as Kafka spells it. A
// mechanism not served is an error wrapping ErrUnsupportedMechanism.
func (a *Authenticator) NewServer(mechanism string) (Server, error) {
	switch {
	case mechanism == MechanismPlain && a.opts.PlainUsers != nil:
		return NewPlainServer(a.opts.PlainUsers), nil
	case (mechanism == MechanismScramSHA256 || mechanism == MechanismScramSHA512) && a.opts.ScramCredentials != nil:
		s, err := NewScramServer(mechanism, ScramConfig{Credentials: a.opts.ScramCredentials, Tokens: a.opts.TokenCredentials, Rand: a.opts.Rand, UnknownUserKey: a.unknownUserKey})
		if err != nil {
			return nil, err
		}
		return s, nil
	case mechanism == MechanismOAuthBearer && a.opts.TokenValidator != nil:
		return NewOAuthBearerServer(a.opts.TokenValidator), nil
	}
	return nil, fmt.Errorf("%w %s", ErrUnsupportedMechanism, mechanism)
}

// exchangeState is where an exchange stands.
type exchangeState int

const (
	stateStart exchangeState = iota
	stateWaitFinal
	stateDone
	stateFailed
)

// String names the state for errors.
func (s exchangeState) String() string {
	switch s {
	case stateStart:
		return "start"
	case stateWaitFinal:
		return "waiting for the final client message"
	case stateDone:
		return "complete"
	}
	return "failed"
}
