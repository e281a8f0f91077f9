package broker

// CreateDelegationToken (key 38), versions 1-3.
//
// Behavior: creates a delegation token (KIP-48) owned by the requester, or by the owner v3
// names, committed as a DelegationToken record: a random token id in Kafka's uuid form, the
// HMAC-SHA512 of the id keyed with delegation.token.secret.key, and an expiry of
// delegation.token.expiry.time.ms capped by the maximum lifetime (max_lifetime_ms when it is
// positive and below delegation.token.max.lifetime.ms). Errors in Kafka's order:
// DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on PLAINTEXT, on SSL without a client certificate and
// on a connection authenticated with a token; DELEGATION_TOKEN_AUTHORIZATION_FAILED for a
// token for another owner without CREATE_TOKENS on that owner's USER resource;
// DELEGATION_TOKEN_AUTH_DISABLED without delegation.token.secret.key; INVALID_PRINCIPAL_TYPE
// for a renewer that is not a User (or an owner without a principal type).
//
// Version notes: v0 is not served (Kafka 4 removed it); v2 is flexible; v3 adds the owner
// and the token requester (KIP-373).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

var createDelegationTokenAPI = &api{key: kmsg.CreateDelegationToken, minVersion: 1, maxVersion: 3, handle: handleCreateDelegationToken}

func handleCreateDelegationToken(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.CreateDelegationTokenRequest)
	resp := kmsg.NewPtrCreateDelegationTokenResponse()
	requester := rc.cs.auth.who()
	owner := requester
	resp.PrincipalType, resp.PrincipalName = splitPrincipal(requester)
	if name := req.OwnerPrincipalName; name != nil && *name != "" {
		resp.PrincipalType, resp.PrincipalName = "", *name
		if req.OwnerPrincipalType != nil {
			resp.PrincipalType = *req.OwnerPrincipalType
		}
		owner = resp.PrincipalType + ":" + *name
	}
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = splitPrincipal(requester)
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp, resp.HMAC = -1, -1, -1, []byte{}
	fail := func(code *kerr.Error) {
		resp.ErrorCode = code.Code
		rc.respond(resp)
	}
	if !rc.tokenRequestsAllowed() {
		fail(kerr.DelegationTokenRequestNotAllowed)
		return
	}
	if owner != requester && !rc.allowed(acl.OpCreateTokens, acl.ResourceUser, owner) {
		fail(kerr.DelegationTokenAuthorizationFailed)
		return
	}
	if !b.cfg.tokensEnabled() {
		fail(kerr.DelegationTokenAuthDisabled)
		return
	}
	if resp.PrincipalType == "" {
		fail(kerr.InvalidPrincipalType)
		return
	}
	renewers := make([]string, 0, len(req.Renewers))
	for _, rn := range req.Renewers {
		if rn.PrincipalType != acl.UserType {
			fail(kerr.InvalidPrincipalType)
			return
		}
		renewers = append(renewers, rn.PrincipalType+":"+rn.PrincipalName)
	}
	now := nowMillis()
	lifetime := b.cfg.Security.TokenMaxLifetime.Milliseconds()
	if req.MaxLifetimeMillis > 0 {
		lifetime = min(lifetime, req.MaxLifetimeMillis)
	}
	t := meta.DelegationToken{TokenID: meta.NewUUID().String(), Owner: owner, Requester: requester, Renewers: renewers,
		IssueMs: now, MaxMs: now + lifetime}
	t.ExpiryMs = min(t.MaxMs, now+b.cfg.Security.TokenExpiryTime.Milliseconds())
	if code := b.commitTokenChange(meta.Record{Type: meta.TypeDelegationToken, Token: &t}); code != nil {
		fail(code)
		return
	}
	b.logger.Info("delegation token created", "token", t.TokenID, "owner", owner, "requester", requester)
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = t.IssueMs, t.ExpiryMs, t.MaxMs
	resp.TokenID, resp.HMAC = t.TokenID, tokenHMAC(b.cfg.Security.TokenSecret, t.TokenID)
	rc.respond(resp)
}
