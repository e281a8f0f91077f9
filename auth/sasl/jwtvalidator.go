package sasl

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// JWTConfig is how a JWTValidator checks tokens, the broker configs of Kafka's BrokerJwtValidator.
type JWTConfig struct {
	// ExpectedAudiences is sasl.oauthbearer.expected.audience: when set, the token's aud claim
	// must hold one of them; when empty, a token with an aud claim is refused (jose4j's default
	// under Kafka).
	ExpectedAudiences []string
	// ExpectedIssuer is sasl.oauthbearer.expected.issuer: when set, the token's iss claim must
	// equal it.
	ExpectedIssuer string
	// SubClaimName is sasl.oauthbearer.sub.claim.name, the claim naming the principal; "sub".
	SubClaimName string
	// ScopeClaimName is sasl.oauthbearer.scope.claim.name, the claim holding the scope; "scope".
	ScopeClaimName string
	// ClockSkew is sasl.oauthbearer.clock.skew.seconds, the difference allowed between the
	// provider's clock and the broker's when checking exp and nbf; 30 s. It counts in whole
	// seconds, as jose4j's does.
	ClockSkew time.Duration
}

// DefaultJWTConfig returns Kafka's defaults.
func DefaultJWTConfig() JWTConfig {
	return JWTConfig{SubClaimName: "sub", ScopeClaimName: "scope", ClockSkew: 30 * time.Second}
}

// JWTValidator validates signed JWTs against the keys of a JWKS, as Kafka's BrokerJwtValidator
// (on jose4j) does for sasl.oauthbearer.jwks.endpoint.url: the signature (RS256, RS384, RS512,
// PS256, PS384, PS512 with RSA keys of at least 2048 bits, ES256, ES384, ES512, EdDSA; never
// "none"), made by a key of the set whose kid is the header's kid when it has one; exp and iat
// present; exp not passed and nbf reached, within the clock skew; exp not before iat or nbf; aud
// and iss as configured; the principal claim a non-blank string; the scope claim, if any, a
// string or a list of non-blank, distinct strings. Every failure is status invalid_token.
type JWTValidator struct {
	cfg  JWTConfig
	keys KeySource

	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// NewJWTValidator returns a validator checking tokens as cfg says with the keys of keys.
func NewJWTValidator(cfg JWTConfig, keys KeySource) (*JWTValidator, error) {
	cfg.SubClaimName = strings.TrimSpace(cfg.SubClaimName)
	cfg.ScopeClaimName = strings.TrimSpace(cfg.ScopeClaimName)
	switch {
	case keys == nil:
		return nil, errors.New("JWT validator without a key source")
	case cfg.SubClaimName == "":
		return nil, errors.New("sasl.oauthbearer.sub.claim.name value must be non-null, non-empty, and non-whitespace")
	case cfg.ScopeClaimName == "":
		return nil, errors.New("sasl.oauthbearer.scope.claim.name value must be non-null, non-empty, and non-whitespace")
	case cfg.ClockSkew < 0:
		return nil, fmt.Errorf("sasl.oauthbearer.clock.skew.seconds %v is negative", cfg.ClockSkew)
	}
	cfg.ExpectedAudiences = slices.Clone(cfg.ExpectedAudiences)
	return &JWTValidator{cfg: cfg, keys: keys}, nil
}

// ValidateToken checks a signed JWT.
func (v *JWTValidator) ValidateToken(token string) (*Token, error) {
	jws, err := ParseJWS(strings.TrimSpace(token))
	if err != nil {
		return nil, invalidToken("malformed JWT: %v", err)
	}
	if err := v.verifySignature(jws); err != nil {
		return nil, err
	}
	now := v.now().Unix()
	if err := v.checkTimes(jws.Claims, now); err != nil {
		return nil, err
	}
	if err := v.checkAudience(jws.Claims); err != nil {
		return nil, err
	}
	if err := v.checkIssuer(jws.Claims); err != nil {
		return nil, err
	}
	scope, err := jwtScope(jws.Claims, v.cfg.ScopeClaimName)
	if err != nil {
		return nil, err
	}
	sub, present, err := claimString(jws.Claims, v.cfg.SubClaimName)
	if err != nil {
		return nil, invalidToken("Could not extract the '%s' claim from the access token: %v", v.cfg.SubClaimName, err)
	}
	if !present || strings.TrimSpace(sub) == "" {
		return nil, invalidToken("%s value must be non-null, non-empty, and non-whitespace", v.cfg.SubClaimName)
	}
	exp, _, _ := jwtNumericDate(jws.Claims, "exp")
	iat, _, _ := jwtNumericDate(jws.Claims, "iat")
	if exp < 0 || iat < 0 {
		return nil, invalidToken("exp %d and iat %d must be non-negative", exp, iat)
	}
	return &Token{
		Value:     token,
		Principal: strings.TrimSpace(sub),
		Scope:     scope,
		Expiry:    time.Unix(exp, 0),
		IssuedAt:  time.Unix(iat, 0),
		Claims:    jws.Claims,
	}, nil
}

// verifySignature checks the header's algorithm and that a key of the set made the signature.
func (v *JWTValidator) verifySignature(jws *JWS) error {
	algName, _, err := claimString(jws.Header, "alg")
	if err != nil {
		return invalidToken("JWS header: %v", err)
	}
	alg, ok := jwsAlgorithms[algName]
	if !ok {
		return invalidToken("JWS algorithm %q is not allowed", algName)
	}
	if _, ok := jws.Header["crit"]; ok {
		return invalidToken("JWS header has critical extensions %v, none of which are understood", jws.Header["crit"])
	}
	kid, hasKid, err := claimString(jws.Header, "kid")
	if err != nil {
		return invalidToken("JWS header: %v", err)
	}
	set := v.keys.Keys()
	if set == nil {
		return invalidToken("no JWKS keys to verify the token with")
	}
	tried := 0
	for _, k := range set.keys {
		if hasKid && k.KeyID != kid || k.Use != "" && k.Use != "sig" || k.Algorithm != "" && k.Algorithm != algName || !alg.fits(k.Key) {
			continue
		}
		tried++
		if alg.verify(k.Key, jws.SigningInput, jws.Signature) {
			return nil
		}
	}
	if tried == 0 {
		return invalidToken("unable to find a suitable verification key for JWS with alg %q, kid %q among %d keys", algName, kid, len(set.keys))
	}
	return invalidToken("JWS signature (alg %q, kid %q) verified by none of %d candidate keys", algName, kid, tried)
}

// checkTimes checks exp, iat and nbf as jose4j's NumericDateValidator does under Kafka, in whole
// seconds.
func (v *JWTValidator) checkTimes(claims map[string]any, now int64) error {
	skew := int64(v.cfg.ClockSkew / time.Second)
	exp, hasExp, err := jwtNumericDate(claims, "exp")
	if err != nil {
		return invalidToken("%v", err)
	}
	iat, hasIat, err := jwtNumericDate(claims, "iat")
	if err != nil {
		return invalidToken("%v", err)
	}
	nbf, hasNbf, err := jwtNumericDate(claims, "nbf")
	if err != nil {
		return invalidToken("%v", err)
	}
	switch {
	case !hasExp:
		return invalidToken("No Expiration Time (exp) claim present.")
	case !hasIat:
		return invalidToken("No Issued At (iat) claim present.")
	case now-skew >= exp:
		return invalidToken("The JWT is no longer valid - the evaluation time %d is on or after the Expiration Time (exp=%d) claim value (even when providing %d seconds of leeway to account for clock skew).", now, exp, skew)
	case exp < iat:
		return invalidToken("The Expiration Time (exp=%d) claim value cannot be before the Issued At (iat=%d) claim value.", exp, iat)
	case hasNbf && exp < nbf:
		return invalidToken("The Expiration Time (exp=%d) claim value cannot be before the Not Before (nbf=%d) claim value.", exp, nbf)
	case hasNbf && now+skew < nbf:
		return invalidToken("The JWT is not yet valid as the evaluation time %d is before the Not Before (nbf=%d) claim time (even when providing %d seconds of leeway to account for clock skew).", now, nbf, skew)
	}
	return nil
}

// checkAudience checks the aud claim against the expected audiences.
func (v *JWTValidator) checkAudience(claims map[string]any) error {
	raw, present := claims["aud"]
	if !present || raw == nil {
		if len(v.cfg.ExpectedAudiences) > 0 {
			return invalidToken("No Audience (aud) claim present.")
		}
		return nil
	}
	var auds []string
	switch a := raw.(type) {
	case string:
		auds = []string{a}
	case []any:
		for _, e := range a {
			s, ok := e.(string)
			if !ok {
				return invalidToken("the 'aud' claim holds %s, not only strings", jsonType(e))
			}
			auds = append(auds, s)
		}
	default:
		return invalidToken("the 'aud' claim is %s, not a string or an array of strings", jsonType(raw))
	}
	for _, a := range auds {
		if slices.Contains(v.cfg.ExpectedAudiences, a) {
			return nil
		}
	}
	if len(v.cfg.ExpectedAudiences) == 0 {
		return invalidToken("Audience (aud) claim %s present in the JWT but no expected audience value(s) were provided to the JWT Consumer.", javaList(auds))
	}
	return invalidToken("Audience (aud) claim %s doesn't contain an acceptable identifier. Expected one of %s as an aud value.", javaList(auds), javaList(v.cfg.ExpectedAudiences))
}

// checkIssuer checks the iss claim against the expected issuer.
func (v *JWTValidator) checkIssuer(claims map[string]any) error {
	iss, present, err := claimString(claims, "iss")
	if err != nil {
		return invalidToken("%v", err)
	}
	if v.cfg.ExpectedIssuer == "" {
		return nil
	}
	if !present {
		return invalidToken("No Issuer (iss) claim present.")
	}
	if iss != v.cfg.ExpectedIssuer {
		return invalidToken("Issuer (iss) claim value (%s) doesn't match expected value of %s", iss, v.cfg.ExpectedIssuer)
	}
	return nil
}

// now returns the validator's time.
func (v *JWTValidator) now() time.Time {
	if v.Now == nil {
		return time.Now()
	}
	return v.Now()
}

// jwtNumericDate returns a NumericDate claim in whole seconds, fractions dropped and the value
// clamped to int64 as jose4j's long conversion does: ok is false when absent, err set when not a
// number.
func jwtNumericDate(claims map[string]any, name string) (sec int64, ok bool, err error) {
	f, ok, err := claimNumber(claims, name)
	if !ok || err != nil {
		return 0, ok, err
	}
	switch {
	case math.IsNaN(f):
		return 0, true, nil
	case f >= math.MaxInt64:
		return math.MaxInt64, true, nil
	case f <= math.MinInt64:
		return math.MinInt64, true, nil
	}
	if n, isNum := claims[name].(json.Number); isNum {
		if i, err := n.Int64(); err == nil {
			return i, true, nil
		}
	}
	return int64(f), true, nil
}

// jwtScope returns the scope claim as Kafka's BrokerJwtValidator reads it: a string is one scope
// value (not split at spaces), an array of strings its values; other types, or no claim, no
// scope. Values are trimmed and must be non-blank and distinct. The result is sorted.
func jwtScope(claims map[string]any, name string) ([]string, error) {
	var raw []string
	switch c := claims[name].(type) {
	case string:
		raw = []string{c}
	case []any:
		for _, e := range c {
			s, ok := e.(string)
			if !ok {
				return nil, invalidToken("%s value holds %s, not only strings", name, jsonType(e))
			}
			raw = append(raw, s)
		}
	}
	scope := make([]string, 0, len(raw))
	for _, s := range raw {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, invalidToken("%s value must be non-null, non-empty, and non-whitespace", name)
		}
		if slices.Contains(scope, s) {
			return nil, invalidToken("%s value must not contain duplicates - %s already present", name, s)
		}
		scope = append(scope, s)
	}
	slices.Sort(scope)
	return scope, nil
}
