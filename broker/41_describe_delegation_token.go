package broker

// DescribeDelegationToken (key 41), versions 1-3.
//
// Behavior: lists the tokens of the metadata image, HMAC included, that the principal may see
// (Kafka's DelegationTokenManager.filterToken): those it owns or renews, those it has DESCRIBE
// on as DELEGATION_TOKEN resources (by token id), and those of owners it has DESCRIBE_TOKENS
// on as USER resources. A null owners list asks for every token, an empty one for none, and
// otherwise only tokens owned or renewed by one of the owners are listed. Expired tokens are
// listed until the controller removes them, as in Kafka. Errors:
// DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (PLAINTEXT, SSL without a client certificate, a
// connection authenticated with a token), then DELEGATION_TOKEN_AUTH_DISABLED.
//
// Version notes: v0 is not served (Kafka 4 removed it); v2 is flexible; v3 adds the token
// requester (KIP-373).

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

var describeDelegationTokenAPI = &api{key: kmsg.DescribeDelegationToken, minVersion: 1, maxVersion: 3, handle: handleDescribeDelegationToken}

func handleDescribeDelegationToken(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DescribeDelegationTokenRequest)
	resp := kmsg.NewPtrDescribeDelegationTokenResponse()
	switch {
	case !rc.tokenRequestsAllowed():
		resp.ErrorCode = kerr.DelegationTokenRequestNotAllowed.Code
	case !b.cfg.tokensEnabled():
		resp.ErrorCode = kerr.DelegationTokenAuthDisabled.Code
	case req.Owners != nil && len(req.Owners) == 0:
	default:
		resp.TokenDetails = describeTokens(b.meta.Image(), b.cfg.Security.TokenSecret, req.Owners, rc.cs.auth.who(), rc.authorizer())
	}
	rc.respond(resp)
}

// describeTokens are the tokens of im that principal may see, of the owners listed (nil: of
// every owner), in token id order.
func describeTokens(im *meta.Image, secret string, owners []kmsg.DescribeDelegationTokenRequestOwner, principal string, z requestAuthz) []kmsg.DescribeDelegationTokenResponseTokenDetail {
	var out []kmsg.DescribeDelegationTokenResponseTokenDetail
	for _, id := range slices.Sorted(maps.Keys(im.DelegationTokens)) {
		t := im.DelegationTokens[id]
		if owners != nil && !slices.ContainsFunc(owners, func(o kmsg.DescribeDelegationTokenRequestOwner) bool {
			return mayRenewToken(t, o.PrincipalType+":"+o.PrincipalName)
		}) {
			continue
		}
		if !mayRenewToken(t, principal) && !z.may(acl.OpDescribe, acl.ResourceDelegationToken, t.TokenID) &&
			!z.may(acl.OpDescribeTokens, acl.ResourceUser, t.Owner) {
			continue
		}
		d := kmsg.NewDescribeDelegationTokenResponseTokenDetail()
		d.PrincipalType, d.PrincipalName = splitPrincipal(t.Owner)
		d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName = splitPrincipal(t.Requester)
		d.IssueTimestamp, d.ExpiryTimestamp, d.MaxTimestamp = t.IssueMs, t.ExpiryMs, t.MaxMs
		d.TokenID, d.HMAC = t.TokenID, tokenHMAC(secret, t.TokenID)
		for _, rn := range t.Renewers {
			w := kmsg.NewDescribeDelegationTokenResponseTokenDetailRenewer()
			w.PrincipalType, w.PrincipalName = splitPrincipal(rn)
			d.Renewers = append(d.Renewers, w)
		}
		out = append(out, d)
	}
	return out
}
