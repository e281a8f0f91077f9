package broker

// RenewDelegationToken (key 39), versions 1-2.
//
// Behavior: moves the expiry of the token whose HMAC the request carries to now plus
// delegation.token.expiry.time.ms, or plus renew_period_ms when that is positive and shorter,
// never past the token's maximum lifetime; committed as a DelegationToken record. Errors in
// Kafka's order: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (PLAINTEXT, SSL without a client
// certificate, a connection authenticated with a token), DELEGATION_TOKEN_AUTH_DISABLED,
// DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_EXPIRED, DELEGATION_TOKEN_OWNER_MISMATCH for a
// principal that neither owns nor renews the token.
//
// Version notes: v0 is not served (Kafka 4 removed it); v2 is flexible.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

var renewDelegationTokenAPI = &api{key: kmsg.RenewDelegationToken, minVersion: 1, maxVersion: 2, handle: handleRenewDelegationToken}

func handleRenewDelegationToken(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.RenewDelegationTokenRequest)
	resp := kmsg.NewPtrRenewDelegationTokenResponse()
	resp.ExpiryTimestamp = -1
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	t, now, code := b.tokenToChange(rc, req.HMAC)
	if code == nil {
		period := b.cfg.Security.TokenExpiryTime.Milliseconds()
		if req.RenewTimeMillis > 0 {
			period = min(period, req.RenewTimeMillis)
		}
		t.ExpiryMs = min(t.MaxMs, now+period)
		code = b.commitTokenChange(meta.Record{Type: meta.TypeDelegationToken, Token: &t})
	}
	if code != nil {
		resp.ErrorCode = code.Code
	} else {
		resp.ExpiryTimestamp = t.ExpiryMs
	}
	rc.respond(resp)
}
