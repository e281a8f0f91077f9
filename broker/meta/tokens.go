package meta

import (
	"errors"
	"fmt"
	"maps"
)

// The delegation token record types (KIP-48), as KRaft's DelegationTokenRecord and
// RemoveDelegationTokenRecord.
const (
	// TypeDelegationToken adds the delegation token Token, or replaces the token of its id
	// (a renewal or a new expiry).
	TypeDelegationToken RecordType = "delegation_token"
	// TypeRemoveDelegationToken removes the token TokenID (expired, or expired at once by
	// ExpireDelegationToken); removing a token that is gone is no change, as in KRaft.
	TypeRemoveDelegationToken RecordType = "remove_delegation_token"
)

// errNoTokenID says a delegation token record names no token.
var errNoTokenID = errors.New("delegation token record without a token id")

// DelegationToken is what the metadata keeps of a delegation token: who it is for and until
// when. Its HMAC is not kept: every node computes it from the token id with
// delegation.token.secret.key, as Kafka's brokers do.
type DelegationToken struct {
	// TokenID is the token's id, the SCRAM user name a client authenticates with.
	TokenID string `json:"token_id"`
	// Owner is the principal ("User:alice") the token authenticates as.
	Owner string `json:"owner"`
	// Requester is the principal that created the token (KIP-373: not the owner when one
	// user creates tokens for another).
	Requester string `json:"requester"`
	// Renewers are the principals besides the owner that may renew and expire the token.
	Renewers []string `json:"renewers,omitempty"`
	// IssueMs, ExpiryMs and MaxMs are Unix milliseconds: when the token was created, when it
	// expires unless renewed, and past when no renewal takes it (ExpiryMs <= MaxMs).
	IssueMs  int64 `json:"issue_ms"`
	ExpiryMs int64 `json:"expiry_ms"`
	MaxMs    int64 `json:"max_ms"`
}

// ExpiredAt reports whether the token is expired at nowMs (Unix milliseconds), as Kafka's
// controller decides it: once past its expiry or its maximum.
func (t DelegationToken) ExpiredAt(nowMs int64) bool {
	return t.ExpiryMs < nowMs || t.MaxMs < nowMs
}

// applyDelegationToken applies one delegation token record to im, which Apply is building;
// the token map is copied, as a published one is never modified.
func (im *Image) applyDelegationToken(r Record) error {
	switch r.Type {
	case TypeDelegationToken:
		if r.Token == nil || r.Token.TokenID == "" {
			return errNoTokenID
		}
		if r.Token.Owner == "" {
			return fmt.Errorf("delegation token %s without an owner", r.Token.TokenID)
		}
		next := maps.Clone(im.DelegationTokens)
		if next == nil {
			next = map[string]DelegationToken{}
		}
		next[r.Token.TokenID] = *r.Token
		im.DelegationTokens = next
	case TypeRemoveDelegationToken:
		if r.TokenID == "" {
			return errNoTokenID
		}
		if _, ok := im.DelegationTokens[r.TokenID]; !ok {
			return nil
		}
		next := maps.Clone(im.DelegationTokens)
		delete(next, r.TokenID)
		if len(next) == 0 {
			next = nil
		}
		im.DelegationTokens = next
	}
	return nil
}
