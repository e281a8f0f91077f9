package sasl

import (
	"errors"
	"fmt"
)

// Mechanism names as Kafka spells them in SaslHandshake and sasl.enabled.mechanisms.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// ErrUnsupportedMechanism is returned, wrapped with the mechanism's name, for a mechanism this
// package does not serve or the Authenticator was not configured for; its text with the name is
// Kafka's UnsupportedSaslMechanismException message, and the broker answers
// UNSUPPORTED_SASL_MECHANISM (33).
var ErrUnsupportedMechanism = errors.New("Unsupported SASL mechanism")

// AuthenticationError is a failed SASL exchange. Error returns the text the broker sends the
// client as SaslAuthenticate's error_message with SASL_AUTHENTICATION_FAILED, exactly as Kafka
// words it: a specific message where Kafka's server throws SaslAuthenticationException (wrong
// PLAIN password, an authorization id other than the user, an OAUTHBEARER error challenge), and
// Kafka's generic one otherwise (malformed messages, unknown users, wrong SCRAM proofs), which
// reveals nothing about the credentials. Err is the cause, with the values that were wrong, for
// the broker's log only.
type AuthenticationError struct {
	// Mechanism is the mechanism of the exchange, as Kafka spells it.
	Mechanism string
	// Message is Kafka's specific client message, or empty for the generic one.
	Message string
	// Err is the cause; never sent to the client.
	Err error
}

// Error returns the message for the client of a first authentication.
func (e *AuthenticationError) Error() string { return e.ClientMessage(false) }

// Unwrap returns the cause.
func (e *AuthenticationError) Unwrap() error { return e.Err }

// ClientMessage returns SaslAuthenticate's error_message for this failure. Kafka's generic message
// names the exchange, "authentication" or, for a client re-authenticating on a live connection
// (KIP-368), "re-authentication".
func (e *AuthenticationError) ClientMessage(reauthenticating bool) string {
	if e.Message != "" {
		return e.Message
	}
	what := "authentication"
	if reauthenticating {
		what = "re-authentication"
	}
	return "Authentication failed during " + what + " due to invalid credentials with SASL mechanism " + e.Mechanism
}

// Detail returns the client message and the cause, for the broker's log.
func (e *AuthenticationError) Detail() string {
	if e.Err == nil {
		return e.Error()
	}
	return e.Error() + ": " + e.Err.Error()
}

// failf is a failure with Kafka's generic client message and a cause built from format and args.
func failf(mechanism, format string, args ...any) *AuthenticationError {
	return &AuthenticationError{Mechanism: mechanism, Err: fmt.Errorf(format, args...)}
}

// failMessage is a failure whose client message is Kafka's specific message msg.
func failMessage(mechanism, msg string, cause error) *AuthenticationError {
	return &AuthenticationError{Mechanism: mechanism, Message: msg, Err: cause}
}
