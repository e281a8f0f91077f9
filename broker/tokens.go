package broker

// Delegation tokens (KIP-48), as Kafka 4.1's DelegationTokenManager (brokers) and
// DelegationTokenControlManager (controller): tokens are metadata records (meta.DelegationToken)
// without their HMAC, which every node computes from the token id with
// delegation.token.secret.key; a client authenticates with a token over SCRAM with the
// tokenauth extension, the token id as user and the HMAC in base64 as password, and runs as
// the token's owner. The APIs are 38_create_delegation_token.go to
// 41_describe_delegation_token.go.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/auth/acl"
	"ringbroker/auth/sasl"
	"ringbroker/broker/meta"
)

// tokenConfigDefs are the delegation token keys of Kafka's DelegationTokenManagerConfigs. They
// have no listener.name.<listener> form: every listener serves the same tokens.
var tokenConfigDefs = []brokerConfigDef{
	stringDef("delegation.token.secret.key", "", func(c *Config) *string { return &c.Security.TokenSecret }, nil,
		"the key delegation tokens' HMACs are computed with, the same on every node; unset: delegation tokens are disabled").secret(),
	msDef("delegation.token.max.lifetime.ms", kindLong, "604800000", func(c *Config) *time.Duration { return &c.Security.TokenMaxLifetime }, atLeast(1),
		"the longest a delegation token lives, however often it is renewed"),
	msDef("delegation.token.expiry.time.ms", kindLong, "86400000", func(c *Config) *time.Duration { return &c.Security.TokenExpiryTime }, atLeast(1),
		"how long a delegation token lives after it is created or renewed, unless the request asks for less"),
	msDef("delegation.token.expiry.check.interval.ms", kindLong, "3600000", func(c *Config) *time.Duration { return &c.Security.TokenCheckInterval }, atLeast(1),
		"how often the active controller removes expired delegation tokens"),
}

// tokensEnabled reports whether delegation tokens are served: delegation.token.secret.key is
// set, as Kafka's tokenAuthEnabled.
func (c *Config) tokensEnabled() bool { return c.Security.TokenSecret != "" }

// tokenHMAC is the HMAC of a token: HMAC-SHA512 of the token id keyed with the secret, as
// Kafka computes it.
func tokenHMAC(secret, tokenID string) []byte {
	m := hmac.New(sha512.New, []byte(secret))
	m.Write([]byte(tokenID))
	return m.Sum(nil)
}

// tokenByHMAC returns the token of im whose HMAC under secret is mac, as Kafka's
// DelegationTokenCache.tokenForHmac.
func tokenByHMAC(im *meta.Image, secret string, mac []byte) (meta.DelegationToken, bool) {
	for _, t := range im.DelegationTokens {
		if hmac.Equal(tokenHMAC(secret, t.TokenID), mac) {
			return t, true
		}
	}
	return meta.DelegationToken{}, false
}

// mayRenewToken reports whether principal may renew or expire t: its owner or one of its
// renewers.
func mayRenewToken(t meta.DelegationToken, principal string) bool {
	return t.Owner == principal || slices.Contains(t.Renewers, principal)
}

// tokenRequestsAllowed reports whether the connection may use the delegation token APIs, as
// Kafka's allowTokenRequests: not on PLAINTEXT, not on SSL without a client certificate, and
// not when the connection authenticated with a token.
func (rc *reqCtx) tokenRequestsAllowed() bool {
	proto := protoPlaintext
	if l := rc.cs.listener; l != nil {
		proto = l.protocol
	}
	a := rc.cs.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.byToken, proto == protoPlaintext:
		return false
	case proto == protoSSL && a.principal == anonymous:
		return false
	}
	return true
}

// splitPrincipal splits "Type:name" into its type and name, as the token APIs send them.
func splitPrincipal(p string) (typ, name string) {
	if ap, err := acl.ParsePrincipal(p); err == nil {
		return ap.Type, ap.Name
	}
	return "", p
}

// nowMillis is the time as the token records hold it.
func nowMillis() int64 { return time.Now().UnixMilli() }

// tokenCredKey names a derived SCRAM credential: a token and a mechanism.
type tokenCredKey struct{ tokenID, mechanism string }

// tokenCreds derives the SCRAM credentials of delegation tokens, whose password is the HMAC
// in base64, and keeps them: a derivation costs 4096 PBKDF2 rounds, and a client may connect
// often. As in Kafka, each node salts a token's credential itself, at random.
type tokenCreds struct {
	secret string

	mu    sync.Mutex
	creds map[tokenCredKey]sasl.Credential
}

// credential is the SCRAM credential of token id for mechanism, derived once; the cache drops
// the credentials of tokens no longer in tokens once it holds many more than there are.
func (c *tokenCreds) credential(tokens map[string]meta.DelegationToken, id, mechanism string) (sasl.Credential, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := tokenCredKey{id, mechanism}
	if cred, ok := c.creds[k]; ok {
		return cred, nil
	}
	if len(c.creds) > 2*len(tokens)+16 {
		for k := range c.creds {
			if _, ok := tokens[k.tokenID]; !ok {
				delete(c.creds, k)
			}
		}
	}
	salt, err := sasl.NewScramSalt(rand.Reader)
	if err != nil {
		return sasl.Credential{}, fmt.Errorf("salt of delegation token %s: %w", id, err)
	}
	password := base64.StdEncoding.EncodeToString(tokenHMAC(c.secret, id))
	cred, err := sasl.CredentialFromPassword(mechanism, password, salt, sasl.ScramMinIterations)
	if err != nil {
		return sasl.Credential{}, fmt.Errorf("%s credential of delegation token %s: %w", mechanism, id, err)
	}
	if c.creds == nil {
		c.creds = map[tokenCredKey]sasl.Credential{}
	}
	c.creds[k] = cred
	return cred, nil
}

// TokenCredential implements sasl.TokenCredentials over the current metadata image: a token
// past its expiry is refused at once, before the controller removes it.
func (s *scramFromImage) TokenCredential(tokenID, mechanism string) (sasl.TokenCredential, bool) {
	im := s.current()
	if im == nil || s.tokens == nil {
		return sasl.TokenCredential{}, false
	}
	t, ok := im.DelegationTokens[tokenID]
	if !ok || t.ExpiredAt(nowMillis()) {
		return sasl.TokenCredential{}, false
	}
	cred, err := s.tokens.credential(im.DelegationTokens, tokenID, mechanism)
	if err != nil {
		return sasl.TokenCredential{}, false
	}
	_, owner := splitPrincipal(t.Owner)
	return sasl.TokenCredential{Credential: cred, Owner: owner, Expiry: time.UnixMilli(t.ExpiryMs)}, true
}

// expiredTokenRecords are the records that remove the tokens of im expired at nowMs, as
// Kafka's sweepExpiredDelegationTokens.
func expiredTokenRecords(im *meta.Image, nowMs int64) []meta.Record {
	var recs []meta.Record
	for _, id := range slices.Sorted(maps.Keys(im.DelegationTokens)) {
		if im.DelegationTokens[id].ExpiredAt(nowMs) {
			recs = append(recs, meta.Record{Type: meta.TypeRemoveDelegationToken, TokenID: id})
		}
	}
	return recs
}

// tokenExpiryLoop removes expired tokens every delegation.token.expiry.check.interval.ms
// while this node is the active controller and tokens are enabled, as Kafka's controller.
func (b *Broker) tokenExpiryLoop() {
	defer b.bg.Done()
	if !b.cfg.tokensEnabled() || !b.cfg.hasRole("controller") {
		return
	}
	b.everyWhileActive(b.cfg.Security.TokenCheckInterval, b.removeExpiredTokens)
}

// removeExpiredTokens commits the removal of the tokens expired now.
func (b *Broker) removeExpiredTokens() {
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	im := b.meta.Image()
	recs := expiredTokenRecords(im, nowMillis())
	if len(recs) == 0 {
		return
	}
	if _, err := b.meta.Commit(recs); err != nil {
		b.logger.Warn("commit the removal of expired delegation tokens", "tokens", len(recs), "err", err)
		return
	}
	for _, r := range recs {
		b.logger.Info("delegation token expired", "token", r.TokenID, "owner", im.DelegationTokens[r.TokenID].Owner)
	}
}

// tokenToChange is the token a Renew or Expire request names by its HMAC, after Kafka's checks
// in their order: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (tokenRequestsAllowed),
// DELEGATION_TOKEN_AUTH_DISABLED without a secret, DELEGATION_TOKEN_NOT_FOUND,
// DELEGATION_TOKEN_EXPIRED, then DELEGATION_TOKEN_OWNER_MISMATCH unless the requester owns the
// token or renews it; with the time the checks were made at. The caller holds
// b.controllerMu; the image is first caught up with the active controller, which may have a
// token created through another broker.
func (b *Broker) tokenToChange(rc *reqCtx, mac []byte) (meta.DelegationToken, int64, *kerr.Error) {
	now := nowMillis()
	switch {
	case !rc.tokenRequestsAllowed():
		return meta.DelegationToken{}, now, kerr.DelegationTokenRequestNotAllowed
	case !b.cfg.tokensEnabled():
		return meta.DelegationToken{}, now, kerr.DelegationTokenAuthDisabled
	}
	im, err := b.meta.CatchUp()
	if err != nil {
		b.logger.Debug("delegation token: catching up with the controller", "err", err)
		im = b.meta.Image()
	}
	t, ok := tokenByHMAC(im, b.cfg.Security.TokenSecret, mac)
	switch {
	case !ok:
		return t, now, kerr.DelegationTokenNotFound
	case t.ExpiredAt(now):
		return t, now, kerr.DelegationTokenExpired
	case !mayRenewToken(t, rc.cs.auth.who()):
		return t, now, kerr.DelegationTokenOwnerMismatch
	}
	return t, now, nil
}

// commitTokenChange commits rec, a token created, renewed, given a new expiry or removed,
// logging a failure and answering it with UNKNOWN_SERVER_ERROR.
func (b *Broker) commitTokenChange(rec meta.Record) *kerr.Error {
	if _, err := b.meta.Commit([]meta.Record{rec}); err != nil {
		id := rec.TokenID
		if rec.Token != nil {
			id = rec.Token.TokenID
		}
		b.logger.Warn("commit a delegation token change", "type", rec.Type, "token", id, "err", err)
		return kerr.UnknownServerError
	}
	return nil
}
