package sasl

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"time"
)

// ScramCredentials looks up SCRAM credentials; the broker implements it over the credentials of
// its metadata (UserScramCredentialRecord).
type ScramCredentials interface {
	// ScramCredential returns user's credential for mechanism ("SCRAM-SHA-256" or
	// "SCRAM-SHA-512"), and false when the user has none for it.
	ScramCredential(user, mechanism string) (Credential, bool)
}

// TokenCredentials looks delegation tokens (KIP-48) up for SCRAM's tokenauth extension; the
// broker implements it over the tokens of its metadata.
type TokenCredentials interface {
	// TokenCredential returns the SCRAM credential for mechanism of the token tokenID, whose
	// password is the token's HMAC in base64, and false when there is no such token or it
	// expired.
	TokenCredential(tokenID, mechanism string) (TokenCredential, bool)
}

// TokenCredential is a delegation token's SCRAM credential with whom it authenticates.
type TokenCredential struct {
	Credential
	// Owner is the name of the user the token authenticates as.
	Owner string
	// Expiry is when the token expires; a session authenticated with it ends then
	// (KIP-368).
	Expiry time.Time
}

// ScramConfig is what a SCRAM exchange needs besides the mechanism.
type ScramConfig struct {
	// Credentials are the users' credentials.
	Credentials ScramCredentials
	// Tokens are the delegation tokens; nil refuses token authentication.
	Tokens TokenCredentials
	// Rand makes the server nonces; nil is crypto/rand.
	Rand io.Reader
	// UnknownUserKey keys the salt invented for a user without a credential, so that it is the
	// same at every attempt and a client cannot tell unknown users by their changing salt. It
	// must be secret and the same for every exchange of a broker; Authenticator makes one.
	UnknownUserKey []byte
}

// scramTokenAuth is the client-first extension of delegation-token authentication (KIP-48).
const scramTokenAuth = "tokenauth"

// ScramServer is the server side of one SCRAM-SHA-256 or SCRAM-SHA-512 exchange (RFC 5802, RFC
// 7677) as Kafka's ScramSaslServer: client-first, server-first, client-final, server-final.
//
// An unknown user differs from Kafka: Kafka fails it at the client-first message, after which a
// client knows the user does not exist. ScramServer answers it with a server-first message with
// an invented salt and fails it at the client-final message, with the same generic message as a
// wrong password, as RFC 5802 section 9 advises. With the tokenauth=true extension (KIP-48) the
// user is a delegation token's id and the password its HMAC, and the exchange authenticates the
// token's owner; an unknown or expired token fails at the first message, as Kafka fails an
// unknown one. Other extensions are ignored, as in Kafka.
type ScramServer struct {
	mechanism string
	hash      func() hash.Hash
	cfg       ScramConfig

	state     exchangeState
	first     scramClientFirst
	cred      Credential
	known     bool   // whether cred is the user's, not invented
	nonce     string // client nonce + server nonce
	served    string // the server-first-message sent
	principal string
	// token is set when the exchange authenticates a delegation token: its owner is the
	// principal.
	token *TokenCredential
}

// NewScramServer returns the server of one exchange of mechanism, "SCRAM-SHA-256" or
// "SCRAM-SHA-512".
func NewScramServer(mechanism string, cfg ScramConfig) (*ScramServer, error) {
	h, err := scramHash(mechanism)
	if err != nil {
		return nil, err
	}
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("%s server without credentials", mechanism)
	}
	if len(cfg.UnknownUserKey) == 0 {
		return nil, fmt.Errorf("%s server without an unknown-user key", mechanism)
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	return &ScramServer{mechanism: mechanism, hash: h, cfg: cfg}, nil
}

// Mechanism returns the mechanism's name.
func (s *ScramServer) Mechanism() string { return s.mechanism }

// Principal returns the authenticated user once the exchange is done, else "": the token's
// owner for a delegation token.
func (s *ScramServer) Principal() string { return s.principal }

// TokenAuthenticated reports whether the exchange is done and authenticated with a
// delegation token.
func (s *ScramServer) TokenAuthenticated() bool { return s.token != nil && s.principal != "" }

// TokenExpiry is when the delegation token the exchange authenticated with expires; zero for
// a user's password.
func (s *ScramServer) TokenExpiry() time.Time {
	if s.token == nil {
		return time.Time{}
	}
	return s.token.Expiry
}

// Step takes the client-first message, answered with the server-first message, then the
// client-final message, answered with the server-final message and done. Every failure has
// Kafka's generic message but one: an authorization id other than the user fails with Kafka's
// "Authentication failed: Client requested an authorization id that is different from username".
func (s *ScramServer) Step(msg []byte) ([]byte, bool, error) {
	st := s.state
	s.state = stateFailed
	switch st {
	case stateStart:
		reply, err := s.clientFirst(msg)
		if err != nil {
			return nil, false, err
		}
		s.state = stateWaitFinal
		return reply, false, nil
	case stateWaitFinal:
		reply, err := s.clientFinal(msg)
		s.cred = Credential{}
		if err != nil {
			s.token = nil
			return nil, false, err
		}
		s.state = stateDone
		return reply, true, nil
	}
	return nil, false, failf(s.mechanism, "unexpected SASL/%s message in state %s", s.mechanism, st)
}

// clientFirst checks the client-first message and returns the server-first message.
func (s *ScramServer) clientFirst(msg []byte) ([]byte, error) {
	cf, err := parseScramClientFirst(msg)
	if err != nil {
		return nil, failf(s.mechanism, "%w", err)
	}
	var token *TokenCredential
	if strings.EqualFold(cf.ext[scramTokenAuth], "true") {
		if s.cfg.Tokens == nil {
			return nil, failf(s.mechanism, "token authentication failed: delegation tokens are disabled (no delegation.token.secret.key)")
		}
		tc, ok := s.cfg.Tokens.TokenCredential(cf.user, s.mechanism)
		if !ok {
			return nil, failf(s.mechanism, "token authentication failed: no unexpired delegation token %q", cf.user)
		}
		token = &tc
	}
	if cf.authzid != "" && cf.authzid != cf.user {
		return nil, failMessage(s.mechanism, "Authentication failed: Client requested an authorization id that is different from username",
			fmt.Errorf("authorization id %q is not user %q", cf.authzid, cf.user))
	}
	var cred Credential
	var known bool
	if token != nil {
		cred, known = token.Credential, true
	} else {
		cred, known = s.cfg.Credentials.ScramCredential(cf.user, s.mechanism)
	}
	if known {
		size := s.hash().Size()
		switch {
		case cred.Iterations < ScramMinIterations:
			return nil, failf(s.mechanism, "iterations %d of user %q is less than the minimum %d for %s", cred.Iterations, cf.user, ScramMinIterations, s.mechanism)
		case len(cred.StoredKey) != size || len(cred.ServerKey) != size || len(cred.Salt) == 0:
			return nil, failf(s.mechanism, "malformed credential of user %q: salt %d, stored key %d, server key %d bytes, want keys of %d",
				cf.user, len(cred.Salt), len(cred.StoredKey), len(cred.ServerKey), size)
		}
	} else {
		cred = s.inventCredential(cf.user)
	}
	serverNonce, err := randomBase36(s.cfg.Rand)
	if err != nil {
		return nil, failf(s.mechanism, "server nonce: %w", err)
	}
	s.first = cf
	s.cred = cred
	s.known = known
	s.token = token
	s.nonce = cf.nonce + serverNonce
	s.served = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	return []byte(s.served), nil
}

// clientFinal checks the client-final message's channel binding, nonce and proof, and returns the
// server-final message.
func (s *ScramServer) clientFinal(msg []byte) ([]byte, error) {
	cf, err := parseScramClientFinal(msg)
	if err != nil {
		return nil, failf(s.mechanism, "%w", err)
	}
	if string(cf.channelBinding) != s.first.gs2Header {
		return nil, failf(s.mechanism, "channel binding %q is not the gs2 header %q", cf.channelBinding, s.first.gs2Header)
	}
	if cf.nonce != s.nonce {
		return nil, failf(s.mechanism, "invalid client nonce in the final client message: %q, want %q", prefix(cf.nonce, 64), s.nonce)
	}
	authMessage := []byte(s.first.bare + "," + s.served + "," + cf.withoutProof)
	clientSignature := hmacSum(s.hash, s.cred.StoredKey, authMessage)
	if len(cf.proof) != len(clientSignature) {
		return nil, failf(s.mechanism, "client proof of %d bytes, want %d", len(cf.proof), len(clientSignature))
	}
	clientKey := make([]byte, len(clientSignature))
	subtle.XORBytes(clientKey, cf.proof, clientSignature)
	h := s.hash()
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), s.cred.StoredKey) != 1 || !s.known {
		if !s.known {
			return nil, failf(s.mechanism, "no %s credential for user %q", s.mechanism, s.first.user)
		}
		return nil, failf(s.mechanism, "invalid client credentials of user %q", s.first.user)
	}
	s.principal = s.first.user
	if s.token != nil {
		s.principal = s.token.Owner
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacSum(s.hash, s.cred.ServerKey, authMessage))), nil
}

// inventCredential returns the stand-in credential of a user without one: a salt that looks like
// Kafka's and is the same at every attempt, the minimum iterations, and keys no proof can match.
func (s *ScramServer) inventCredential(user string) Credential {
	m := hmac.New(sha256.New, s.cfg.UnknownUserKey)
	m.Write([]byte(s.mechanism + "\x00" + user))
	var b [17]byte
	copy(b[:], m.Sum(nil))
	size := s.hash().Size()
	return Credential{
		Salt:       []byte(base36(b)),
		Iterations: ScramMinIterations,
		StoredKey:  make([]byte, size),
		ServerKey:  make([]byte, size),
	}
}
