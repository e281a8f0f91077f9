package sasl

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestUnsecuredValidator(t *testing.T) {
	sec := func(d time.Duration) float64 { return float64(testNow.Add(d).UnixMilli()) / 1000 }
	for _, tc := range []struct {
		name       string
		options    map[string]string
		header     map[string]any // nil: {"alg":"none"}
		claims     map[string]any
		signature  string
		wPrincipal string
		wScope     []string
		wStatus    string // "" for success
		wScopeErr  string
	}{
		{name: "valid", claims: map[string]any{"sub": "alice", "exp": sec(time.Hour)}, wPrincipal: "alice"},
		{name: "principal kept untrimmed, as in Kafka", claims: map[string]any{"sub": " alice ", "exp": sec(time.Hour)}, wPrincipal: " alice "},
		{name: "custom principal claim", options: map[string]string{UnsecuredPrincipalClaimNameOption: " email "},
			claims: map[string]any{"email": "a@b", "sub": "x", "exp": sec(time.Hour)}, wPrincipal: "a@b"},
		{name: "no exp", claims: map[string]any{"sub": "alice"}, wStatus: StatusInvalidToken},
		{name: "exp a string", claims: map[string]any{"sub": "alice", "exp": "tomorrow"}, wStatus: StatusInvalidToken},
		{name: "expired", claims: map[string]any{"sub": "alice", "exp": sec(-time.Millisecond)}, wStatus: StatusInvalidToken},
		{name: "expires now", claims: map[string]any{"sub": "alice", "exp": sec(0)}, wStatus: StatusInvalidToken},
		{name: "expired within the skew", options: map[string]string{UnsecuredAllowableClockSkewMsOption: "3000"},
			claims: map[string]any{"sub": "alice", "exp": sec(-2 * time.Second)}, wPrincipal: "alice"},
		{name: "expired beyond the skew", options: map[string]string{UnsecuredAllowableClockSkewMsOption: "3000"},
			claims: map[string]any{"sub": "alice", "exp": sec(-3 * time.Second)}, wStatus: StatusInvalidToken},
		{name: "issued in the future", claims: map[string]any{"sub": "alice", "exp": sec(time.Hour), "iat": sec(time.Millisecond)}, wStatus: StatusInvalidToken},
		{name: "issued now", claims: map[string]any{"sub": "alice", "exp": sec(time.Hour), "iat": sec(0)}, wPrincipal: "alice"},
		{name: "issued in the future within the skew", options: map[string]string{UnsecuredAllowableClockSkewMsOption: "1000"},
			claims: map[string]any{"sub": "alice", "exp": sec(time.Hour), "iat": sec(time.Second)}, wPrincipal: "alice"},
		{name: "exp not after iat", options: map[string]string{UnsecuredAllowableClockSkewMsOption: "10000"},
			claims: map[string]any{"sub": "alice", "exp": sec(time.Second), "iat": sec(time.Second)}, wStatus: StatusInvalidToken},
		{name: "nbf ignored", claims: map[string]any{"sub": "alice", "exp": sec(time.Hour), "nbf": sec(time.Minute)}, wPrincipal: "alice"},
		{name: "no sub", claims: map[string]any{"exp": sec(time.Hour)}, wStatus: StatusInvalidToken},
		{name: "blank sub", claims: map[string]any{"sub": "  ", "exp": sec(time.Hour)}, wStatus: StatusInvalidToken},
		{name: "sub a number", claims: map[string]any{"sub": 7, "exp": sec(time.Hour)}, wStatus: StatusInvalidToken},
		{name: "sub a boolean reads as its text, as in Kafka", claims: map[string]any{"sub": true, "exp": sec(time.Hour)}, wPrincipal: "true"},
		{name: "alg not none", header: map[string]any{"alg": "RS256"}, claims: map[string]any{"sub": "alice", "exp": sec(time.Hour)}, wStatus: StatusInvalidToken},
		{name: "no alg", header: map[string]any{"typ": "JWT"}, claims: map[string]any{"sub": "alice", "exp": sec(time.Hour)}, wStatus: StatusInvalidToken},
		{name: "signed", claims: map[string]any{"sub": "alice", "exp": sec(time.Hour)}, signature: "c2ln", wStatus: StatusInvalidToken},
		{name: "scope string is one value", claims: map[string]any{"sub": "a", "exp": sec(time.Hour), "scope": " x y "}, wPrincipal: "a", wScope: []string{"x y"}},
		{name: "scope list", claims: map[string]any{"sub": "a", "exp": sec(time.Hour), "scope": []any{"b", " a ", "", "b", 1}}, wPrincipal: "a", wScope: []string{"1", "a", "b"}},
		{name: "scope a number", claims: map[string]any{"sub": "a", "exp": sec(time.Hour), "scope": 3}, wStatus: StatusInvalidToken},
		{name: "custom scope claim", options: map[string]string{UnsecuredScopeClaimNameOption: "scp"},
			claims: map[string]any{"sub": "a", "exp": sec(time.Hour), "scp": []any{"k"}, "scope": "other"}, wPrincipal: "a", wScope: []string{"k"}},
		{name: "required scope present", options: map[string]string{UnsecuredRequiredScopeOption: " a  b "},
			claims: map[string]any{"sub": "a", "exp": sec(time.Hour), "scope": []any{"b", "a", "c"}}, wPrincipal: "a", wScope: []string{"a", "b", "c"}},
		{name: "required scope missing", options: map[string]string{UnsecuredRequiredScopeOption: "a b"},
			claims: map[string]any{"sub": "a", "exp": sec(time.Hour), "scope": []any{"b"}}, wStatus: StatusInsufficientScope, wScopeErr: "[a, b]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newUnsecured(t, tc.options)
			header := tc.header
			if header == nil {
				header = map[string]any{"alg": "none"}
			}
			token := jsonB64(t, header) + "." + jsonB64(t, tc.claims) + "." + tc.signature
			tok, err := v.ValidateToken(token)
			if tc.wStatus == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tok.Principal != tc.wPrincipal || !reflect.DeepEqual(tok.Scope, tc.wScope) || tok.Value != token {
					t.Fatalf("token %+v; want principal %q, scope %q", tok, tc.wPrincipal, tc.wScope)
				}
				if exp, ok := tc.claims["exp"].(float64); ok && !tok.Expiry.Equal(secondsToTime(exp)) {
					t.Fatalf("expiry %v, want %v", tok.Expiry, secondsToTime(exp))
				}
				return
			}
			var te *TokenError
			if !errors.As(err, &te) || te.Status != tc.wStatus || te.Scope != tc.wScopeErr || te.Reason == "" {
				t.Fatalf("ValidateToken: %v; want status %q scope %q", err, tc.wStatus, tc.wScopeErr)
			}
		})
	}
}

func TestUnsecuredValidatorMalformed(t *testing.T) {
	v := newUnsecured(t, nil)
	claims := jsonB64(t, map[string]any{"sub": "a", "exp": 1e12})
	header := jsonB64(t, map[string]any{"alg": "none"})
	for _, tok := range []string{
		"", ".", "..", header + "." + claims, header + "." + claims + ".x.y", header + "..",
		"!!." + claims + ".", header + ".%%.", b64([]byte("[1]")) + "." + claims + ".",
		b64([]byte("{} x")) + "." + claims + ".", header + "." + b64([]byte("null")) + ".",
	} {
		var te *TokenError
		if _, err := v.ValidateToken(tok); !errors.As(err, &te) || te.Status != StatusInvalidToken {
			t.Errorf("ValidateToken(%q): %v; want invalid_token", tok, err)
		}
	}
}

func TestNewUnsecuredValidatorOptions(t *testing.T) {
	for _, tc := range []struct {
		options map[string]string
		wErr    string
	}{
		{map[string]string{UnsecuredAllowableClockSkewMsOption: "abc"}, UnsecuredAllowableClockSkewMsOption},
		{map[string]string{UnsecuredAllowableClockSkewMsOption: "-1"}, "Allowable clock skew millis must not be negative: -1"},
		{map[string]string{UnsecuredAllowableClockSkewMsOption: "99999999999"}, UnsecuredAllowableClockSkewMsOption},
		{map[string]string{UnsecuredRequiredScopeOption: `a "b"`}, `Invalid scope value: "b"`},
	} {
		if _, err := NewUnsecuredValidator(tc.options); err == nil || !strings.Contains(err.Error(), tc.wErr) {
			t.Errorf("NewUnsecuredValidator(%v) = %v, want an error with %q", tc.options, err, tc.wErr)
		}
	}
	v, err := NewUnsecuredValidator(map[string]string{UnsecuredAllowableClockSkewMsOption: " 250 ", UnsecuredPrincipalClaimNameOption: "  "})
	if err != nil || v.clockSkew != 250*time.Millisecond || v.principalClaim != "sub" || v.scopeClaim != "scope" {
		t.Fatalf("NewUnsecuredValidator = %+v, %v", v, err)
	}
}
