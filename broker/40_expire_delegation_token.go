package broker

// ExpireDelegationToken (key 40), versions 1-2.
//
// Behavior: a negative expiry_time_period_ms removes the token whose HMAC the request carries
// at once (a RemoveDelegationToken record), answered with that period as the expiry, as
// Kafka; otherwise its expiry becomes now plus the period, never past its maximum lifetime (a
// DelegationToken record), and the token is removed by the next expiry check after that.
// Errors as RenewDelegationToken: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
// DELEGATION_TOKEN_AUTH_DISABLED, DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_EXPIRED,
// DELEGATION_TOKEN_OWNER_MISMATCH.
//
// Version notes: v0 is not served (Kafka 4 removed it); v2 is flexible.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

var expireDelegationTokenAPI = &api{key: kmsg.ExpireDelegationToken, minVersion: 1, maxVersion: 2, handle: handleExpireDelegationToken}

func handleExpireDelegationToken(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.ExpireDelegationTokenRequest)
	resp := kmsg.NewPtrExpireDelegationTokenResponse()
	resp.ExpiryTimestamp = -1
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	t, now, code := b.tokenToChange(rc, req.HMAC)
	switch {
	case code != nil:
	case req.ExpiryPeriodMillis < 0:
		if code = b.commitTokenChange(meta.Record{Type: meta.TypeRemoveDelegationToken, TokenID: t.TokenID}); code == nil {
			b.logger.Info("delegation token expired by request", "token", t.TokenID, "owner", t.Owner)
			resp.ExpiryTimestamp = req.ExpiryPeriodMillis
		}
	default:
		t.ExpiryMs = min(t.MaxMs, now+req.ExpiryPeriodMillis)
		if code = b.commitTokenChange(meta.Record{Type: meta.TypeDelegationToken, Token: &t}); code == nil {
			resp.ExpiryTimestamp = t.ExpiryMs
		}
	}
	if code != nil {
		resp.ErrorCode = code.Code
	}
	rc.respond(resp)
}
