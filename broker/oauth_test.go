package broker

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// jwtPart is the base64url (unpadded) JSON of v.
func jwtPart(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestOAuthBearer: OAUTHBEARER clients authenticate with unsecured tokens (Kafka's default
// validator) and with RS256 tokens checked against a JWKS file; the token's subject is the
// principal (a super user may describe ACLs), and an expired or wrongly signed token is
// refused with SASL_AUTHENTICATION_FAILED.
func TestOAuthBearer(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, backend string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		jwks := filepath.Join(t.TempDir(), "jwks.json")
		doc := map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
			"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
			"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
		}}}
		data, _ := json.Marshal(doc)
		if err := os.WriteFile(jwks, data, 0o600); err != nil {
			t.Fatal(err)
		}
		b := startBroker(t, backend, t.TempDir(),
			"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SIGNED://127.0.0.1:0",
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SIGNED:SASL_PLAINTEXT",
			"sasl.enabled.mechanisms=OAUTHBEARER",
			"listener.name.signed.sasl.oauthbearer.jwks.endpoint.url=file://"+jwks,
			"authorizer.class.name="+standardAuthorizer, "super.users=User:carol;User:ANONYMOUS",
		)
		now := time.Now()
		unsecured := func(sub string, exp time.Time) string {
			return jwtPart(t, map[string]string{"alg": "none"}) + "." + jwtPart(t, map[string]any{"sub": sub, "iat": now.Unix(), "exp": exp.Unix()}) + "."
		}
		signed := func(sub string, exp time.Time, k *rsa.PrivateKey) string {
			input := jwtPart(t, map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"}) + "." + jwtPart(t, map[string]any{"sub": sub, "iat": now.Unix(), "exp": exp.Unix()})
			sum := sha256.Sum256([]byte(input))
			sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
			if err != nil {
				t.Fatal(err)
			}
			return input + "." + base64.RawURLEncoding.EncodeToString(sig)
		}
		other, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		describe := func(listener, token string) (int16, error) {
			cl := saslClientOn(t, b, listener, oauth.Auth{Token: token}.AsMechanism())
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return 0, err
			}
			return resp.ErrorCode, nil
		}
		for _, c := range []struct {
			name, listener, token string
			wantCode              int16
			wantErr               error
		}{
			{"unsecured super user", "SASL_PLAINTEXT", unsecured("carol", now.Add(time.Hour)), 0, nil},
			{"unsecured other user", "SASL_PLAINTEXT", unsecured("dave", now.Add(time.Hour)), kerr.ClusterAuthorizationFailed.Code, nil},
			{"unsecured expired", "SASL_PLAINTEXT", unsecured("carol", now.Add(-time.Hour)), 0, kerr.SaslAuthenticationFailed},
			{"signed super user", "SIGNED", signed("carol", now.Add(time.Hour), key), 0, nil},
			{"signed by another key", "SIGNED", signed("carol", now.Add(time.Hour), other), 0, kerr.SaslAuthenticationFailed},
			{"unsecured on the signed listener", "SIGNED", unsecured("carol", now.Add(time.Hour)), 0, kerr.SaslAuthenticationFailed},
		} {
			code, err := describe(c.listener, c.token)
			switch {
			case c.wantErr != nil && !errors.Is(err, c.wantErr):
				t.Fatalf("%s: %v; want %v", c.name, err, c.wantErr)
			case c.wantErr == nil && (err != nil || code != c.wantCode):
				t.Fatalf("%s: error %d, %v; want %d", c.name, code, err, c.wantCode)
			}
		}
	})
}
