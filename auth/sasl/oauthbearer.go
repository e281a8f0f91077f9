package sasl

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Token is a validated OAuth bearer token.
type Token struct {
	// Value is the token as the client sent it.
	Value string
	// Principal is the authenticated user: the token's principal (sub) claim.
	Principal string
	// Scope is the token's scope, sorted.
	Scope []string
	// Expiry is when the token expires; the broker ends a session then (KIP-368).
	Expiry time.Time
	// IssuedAt is the token's iat claim, or the zero time without one.
	IssuedAt time.Time
	// Claims are the token's claims as decoded JSON: strings, json.Number, []any, map[string]any,
	// bool and nil.
	Claims map[string]any
}

// TokenValidator validates OAuth bearer tokens; UnsecuredValidator and JWTValidator are the two
// Kafka has. Implementations must be safe for concurrent use.
type TokenValidator interface {
	// ValidateToken returns the validated token, or a *TokenError when the token is not
	// acceptable. Any other error is the server's own failure, not the token's.
	ValidateToken(token string) (*Token, error)
}

// Token error statuses of RFC 6750, as Kafka's validators use them.
const (
	StatusInvalidToken      = "invalid_token"
	StatusInsufficientScope = "insufficient_scope"
)

// TokenError is a token refused by a TokenValidator. Status, Scope and OpenIDConfiguration make
// the error challenge sent to the client (RFC 7628 section 3.2.2); Reason is for the broker's log.
type TokenError struct {
	// Status is StatusInvalidToken or StatusInsufficientScope.
	Status string
	// Scope is the required scope when Status is StatusInsufficientScope, else "".
	Scope string
	// OpenIDConfiguration is the URL of the OpenID configuration to send the client, or "".
	OpenIDConfiguration string
	// Reason says what was wrong, with the values.
	Reason string
}

// Error returns the status and the reason.
func (e *TokenError) Error() string { return e.Status + ": " + e.Reason }

// challenge returns the error challenge as Kafka's OAuthBearerSaslServer formats it, e.g.
// {"status":"invalid_token"}.
func (e *TokenError) challenge() string {
	s := `{"status":"` + e.Status + `"`
	if e.Scope != "" {
		s += `, "scope":"` + e.Scope + `"`
	}
	if e.OpenIDConfiguration != "" {
		s += `, "openid-configuration":"` + e.OpenIDConfiguration + `"`
	}
	return s + "}"
}

// invalidToken returns a TokenError of status invalid_token.
func invalidToken(format string, args ...any) *TokenError {
	return &TokenError{Status: StatusInvalidToken, Reason: fmt.Sprintf(format, args...)}
}

// OAuthBearerServer is the server side of one SASL/OAUTHBEARER exchange (RFC 7628) as Kafka's
// OAuthBearerSaslServer. The client's initial response carries the token; a valid token ends the
// exchange with an empty reply. An invalid one is answered with an error challenge such as
// {"status":"invalid_token"}, to which the client replies with a single 0x01, and the exchange
// fails with the challenge as the client message. Extensions are all accepted, as Kafka's
// validator callback handlers accept them.
type OAuthBearerServer struct {
	validator  TokenValidator
	state      exchangeState
	challenge  string // the error challenge sent, awaiting the client's 0x01
	token      *Token
	extensions map[string]string
}

// NewOAuthBearerServer returns the server of one OAUTHBEARER exchange validating with v.
func NewOAuthBearerServer(v TokenValidator) *OAuthBearerServer {
	return &OAuthBearerServer{validator: v}
}

// Mechanism returns "OAUTHBEARER".
func (s *OAuthBearerServer) Mechanism() string { return MechanismOAuthBearer }

// Principal returns the token's principal once the exchange is done, else "".
func (s *OAuthBearerServer) Principal() string {
	if s.token == nil {
		return ""
	}
	return s.token.Principal
}

// Token returns the validated token once the exchange is done, else nil.
func (s *OAuthBearerServer) Token() *Token { return s.token }

// Extensions returns the SASL extensions of the client's initial response (KIP-342) once the
// exchange is done, else nil.
func (s *OAuthBearerServer) Extensions() map[string]string { return s.extensions }

// Step takes the client's initial response, or its 0x01 after an error challenge. As in Kafka, a
// new initial response after an error challenge starts over. Malformed messages fail with Kafka's
// generic message; an authorization id other than the token's principal with Kafka's message
// naming both.
func (s *OAuthBearerServer) Step(msg []byte) ([]byte, bool, error) {
	if s.state != stateStart {
		st := s.state
		s.state = stateFailed
		return nil, false, failf(MechanismOAuthBearer, "unexpected SASL/OAUTHBEARER message in state %s", st)
	}
	if len(msg) == 1 && msg[0] == 0x01 && s.challenge != "" {
		s.state = stateFailed
		return nil, false, failMessage(MechanismOAuthBearer, s.challenge, errors.New("client acknowledged the error challenge"))
	}
	s.challenge = ""
	ir, err := parseOAuthBearerInitial(msg)
	if err != nil {
		s.state = stateFailed
		return nil, false, failf(MechanismOAuthBearer, "%w", err)
	}
	tok, err := s.validator.ValidateToken(ir.token)
	var te *TokenError
	if errors.As(err, &te) {
		s.challenge = te.challenge()
		return []byte(s.challenge), false, nil
	}
	if err != nil {
		s.state = stateFailed
		return nil, false, failf(MechanismOAuthBearer, "authentication could not be performed due to an internal error on the server: %w", err)
	}
	if ir.authzid != "" && ir.authzid != tok.Principal {
		s.state = stateFailed
		return nil, false, failMessage(MechanismOAuthBearer, fmt.Sprintf(
			"Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)",
			ir.authzid, tok.Principal), nil)
	}
	s.token = tok
	s.extensions = ir.extensions
	s.state = stateDone
	return []byte{}, true, nil
}

// oauthInitial is a parsed OAUTHBEARER client initial response.
type oauthInitial struct {
	authzid    string
	token      string
	extensions map[string]string
}

// parseOAuthBearerInitial parses a client initial response with Kafka's grammar
// (OAuthBearerClientInitialResponse):
//
//	"n," ["a=" saslname] "," 0x01 *(key "=" value 0x01) 0x01
//
// keys of ASCII letters, values of 0x21..0x7E, space, tab, CR and LF, a required auth key of
// `<scheme> <token>` with scheme "Bearer" in any case and a token of [-_.a-zA-Z0-9], and the other
// keys the extensions, of which a key given twice keeps its last value.
func parseOAuthBearerInitial(msg []byte) (oauthInitial, error) {
	s := string(msg)
	var ir oauthInitial
	rest, ok := strings.CutPrefix(s, "n,")
	if !ok {
		return ir, fmt.Errorf("invalid OAUTHBEARER client first message: gs2 header of %q is not \"n,\"", prefix(s, 8))
	}
	if a, ok := strings.CutPrefix(rest, "a="); ok {
		i := strings.IndexByte(a, ',')
		if i < 0 {
			return ir, fmt.Errorf("invalid OAUTHBEARER client first message: unterminated authorization id in %q", prefix(s, 64))
		}
		z, err := decodeSASLName(a[:i])
		if err != nil {
			return ir, fmt.Errorf("invalid OAUTHBEARER client first message: authorization id: %w", err)
		}
		ir.authzid = z
		rest = a[i:]
	}
	kv, ok := strings.CutPrefix(rest, ",\x01")
	if !ok {
		return ir, fmt.Errorf("invalid OAUTHBEARER client first message: gs2 header of %q not followed by 0x01", prefix(s, 64))
	}
	kv, ok = strings.CutSuffix(kv, "\x01")
	if !ok {
		return ir, fmt.Errorf("invalid OAUTHBEARER client first message: not ended by 0x01")
	}
	pairs := map[string]string{}
	if kv != "" {
		body, ok := strings.CutSuffix(kv, "\x01")
		if !ok {
			return ir, fmt.Errorf("invalid OAUTHBEARER client first message: key-value pairs not ended by 0x01")
		}
		for _, p := range strings.Split(body, "\x01") {
			k, v, ok := strings.Cut(p, "=")
			if !ok || !isAlpha(k) || !isOAuthValue(v) {
				return ir, fmt.Errorf("invalid OAUTHBEARER client first message: key-value pair %q", prefix(p, 64))
			}
			pairs[k] = v
		}
	}
	auth, ok := pairs["auth"]
	if !ok {
		return ir, errors.New("invalid OAUTHBEARER client first message: 'auth' not specified")
	}
	delete(pairs, "auth")
	scheme, token, ok := strings.Cut(auth, " ")
	token = strings.TrimLeft(token, " ")
	if !ok || !isWord(scheme) || !isTokenValue(token) {
		return ir, fmt.Errorf("invalid OAUTHBEARER client first message: invalid 'auth' format %q", prefix(auth, 64))
	}
	if !strings.EqualFold(scheme, "bearer") {
		return ir, fmt.Errorf("invalid scheme in OAUTHBEARER client first message: %q", prefix(scheme, 64))
	}
	ir.token = token
	ir.extensions = pairs
	return ir, nil
}

// isOAuthValue reports whether s is a non-empty value of 0x21..0x7E, space, tab, CR and LF.
func isOAuthValue(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 0x21 || c > 0x7E) && c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// isWord reports whether s is non-empty and of Java regex \w: ASCII letters, digits and '_'.
func isWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

// isTokenValue reports whether s is a non-empty token of ASCII letters, digits, '-', '_' and '.'.
func isTokenValue(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
