package sasl

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The JAAS options of OAuthBearerLoginModule that configure the unsecured validator.
const (
	UnsecuredPrincipalClaimNameOption   = "unsecuredValidatorPrincipalClaimName"
	UnsecuredScopeClaimNameOption       = "unsecuredValidatorScopeClaimName"
	UnsecuredRequiredScopeOption        = "unsecuredValidatorRequiredScope"
	UnsecuredAllowableClockSkewMsOption = "unsecuredValidatorAllowableClockSkewMs"
)

// UnsecuredValidator validates unsecured JWS tokens (alg "none", no signature) as Kafka's
// OAuthBearerUnsecuredValidatorCallbackHandler, the OAUTHBEARER default, fit for development
// only: anyone can make such a token. The token must have an exp claim not passed, a principal
// claim (sub unless configured), an iat claim if any not in the future and before exp, and the
// required scope if configured; nbf is ignored, as Kafka ignores it. A missing scope fails with
// status insufficient_scope, anything else with invalid_token.
type UnsecuredValidator struct {
	principalClaim string
	scopeClaim     string
	requiredScope  []string
	clockSkew      time.Duration

	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// NewUnsecuredValidator configures a validator from the JAAS options of the listener's
// OAuthBearerLoginModule entry: unsecuredValidatorPrincipalClaimName (default "sub"),
// unsecuredValidatorScopeClaimName (default "scope"), unsecuredValidatorRequiredScope (scope
// values separated by spaces, default none) and unsecuredValidatorAllowableClockSkewMs (a
// non-negative integer, default 0). Kafka reads the options at each validation; a bad value fails
// here instead.
func NewUnsecuredValidator(options map[string]string) (*UnsecuredValidator, error) {
	v := &UnsecuredValidator{principalClaim: "sub", scopeClaim: "scope"}
	if s := strings.TrimSpace(options[UnsecuredPrincipalClaimNameOption]); s != "" {
		v.principalClaim = s
	}
	if s := strings.TrimSpace(options[UnsecuredScopeClaimNameOption]); s != "" {
		v.scopeClaim = s
	}
	for _, item := range strings.Split(strings.TrimSpace(options[UnsecuredRequiredScopeOption]), " ") {
		if item == "" {
			continue
		}
		if !isScopeItem(item) {
			return nil, fmt.Errorf("%s: Invalid scope value: %s", UnsecuredRequiredScopeOption, item)
		}
		v.requiredScope = append(v.requiredScope, item)
	}
	if s := strings.TrimSpace(options[UnsecuredAllowableClockSkewMsOption]); s != "" {
		ms, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", UnsecuredAllowableClockSkewMsOption, err)
		}
		if ms < 0 {
			return nil, fmt.Errorf("Allowable clock skew millis must not be negative: %s", s)
		}
		v.clockSkew = time.Duration(ms) * time.Millisecond
	}
	return v, nil
}

// isScopeItem reports whether s is a scope token of RFC 6749 section 3.3: 0x21, 0x23..0x5B and
// 0x5D..0x7E.
func isScopeItem(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != 0x21 && (c < 0x23 || c > 0x7E || c == 0x5C) {
			return false
		}
	}
	return s != ""
}

// ValidateToken checks an unsecured JWS. Its reasons are Kafka's.
func (v *UnsecuredValidator) ValidateToken(token string) (*Token, error) {
	jws, err := ParseJWS(token)
	if err != nil {
		return nil, invalidToken("%v", err)
	}
	if alg, ok := kafkaClaim(jws.Header["alg"]).(string); !ok || alg != "none" {
		return nil, invalidToken("Unsecured JWS must have 'none' for an algorithm, not %v", jws.Header["alg"])
	}
	if len(jws.Signature) != 0 {
		return nil, invalidToken("Unsecured JWS must not contain a digital signature")
	}
	claims := make(map[string]any, len(jws.Claims))
	for k, c := range jws.Claims {
		claims[k] = kafkaClaim(c)
	}
	scope, err := unsecuredScope(claims, v.scopeClaim)
	if err != nil {
		return nil, invalidToken("%v", err)
	}
	exp, err := unsecuredNumber(claims, "exp")
	if err != nil {
		return nil, invalidToken("%v", err)
	}
	if exp == nil {
		return nil, invalidToken("No expiration time in JWT")
	}
	principal, isString := claims[v.principalClaim].(string)
	if claims[v.principalClaim] != nil && !isString {
		return nil, invalidToken("The '%s' claim was not of type String: %T", v.principalClaim, claims[v.principalClaim])
	}
	if strings.TrimSpace(principal) == "" {
		return nil, invalidToken("No principal name in JWT claim: %s", v.principalClaim)
	}
	iat, err := unsecuredNumber(claims, "iat")
	if err != nil {
		return nil, invalidToken("%v", err)
	}
	now := v.now().UnixMilli()
	skew := v.clockSkew.Milliseconds()
	if iat != nil && 1000**iat > float64(now+skew) {
		return nil, invalidToken("The Issued At value (%f seconds) was after the indicated time (%d ms) plus allowable clock skew (%d ms)", *iat, now, skew)
	}
	if float64(now-skew) >= 1000**exp {
		return nil, invalidToken("The indicated time (%d ms) minus allowable clock skew (%d ms) was on or after the Expiration Time value (%f seconds)", now, skew, *exp)
	}
	if iat != nil && *exp <= *iat {
		return nil, invalidToken("The Expiration Time time (%f seconds) was not after the Issued At time (%f seconds)", *exp, *iat)
	}
	for _, want := range v.requiredScope {
		if !slices.Contains(scope, want) {
			return nil, &TokenError{
				Status: StatusInsufficientScope,
				Scope:  javaList(v.requiredScope),
				Reason: fmt.Sprintf("The provided scope (%s) was missing a required scope (%s).  All required scope elements: %s",
					javaList(scope), want, javaList(v.requiredScope)),
			}
		}
	}
	t := &Token{Value: token, Principal: principal, Scope: scope, Expiry: secondsToTime(*exp), Claims: jws.Claims}
	if iat != nil {
		t.IssuedAt = secondsToTime(*iat)
	}
	return t, nil
}

// now returns the validator's time.
func (v *UnsecuredValidator) now() time.Time {
	if v.Now == nil {
		return time.Now()
	}
	return v.Now()
}

// kafkaClaim converts a decoded JSON value as Kafka's OAuthBearerUnsecuredJws does with Jackson:
// numbers stay numbers, arrays become lists of their elements' text, anything else its text
// (true, false, null; "" for an object).
func kafkaClaim(v any) any {
	switch x := v.(type) {
	case json.Number:
		return x
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = jsonText(e)
		}
		return out
	}
	return jsonText(v)
}

// jsonText is Jackson's JsonNode.asText of a decoded value.
func jsonText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	return ""
}

// unsecuredNumber returns a converted claim that must be a number if present, nil if absent.
func unsecuredNumber(claims map[string]any, name string) (*float64, error) {
	c, ok := claims[name]
	if !ok {
		return nil, nil
	}
	f, err := numberValue(c)
	if err != nil {
		return nil, fmt.Errorf("The '%s' claim was not of type Number: %w", name, err)
	}
	return &f, nil
}

// unsecuredScope returns the scope of converted claims as Kafka computes it: a string claim is one
// scope value, trimmed (not split at spaces); a list claim its trimmed non-blank elements; sorted
// and without duplicates.
func unsecuredScope(claims map[string]any, name string) ([]string, error) {
	var scope []string
	switch c := claims[name].(type) {
	case nil:
	case string:
		if s := strings.TrimSpace(c); s != "" {
			scope = []string{s}
		}
	case []string:
		for _, e := range c {
			if s := strings.TrimSpace(e); s != "" {
				scope = append(scope, s)
			}
		}
	default:
		return nil, fmt.Errorf("The '%s' claim was not of type List: %T", name, c)
	}
	slices.Sort(scope)
	return slices.Compact(scope), nil
}

// javaList formats strings as Java's List.toString: "[a, b]".
func javaList(items []string) string {
	return "[" + strings.Join(items, ", ") + "]"
}
