package meta

import (
	"errors"
	"reflect"
	"testing"
)

// TestDelegationTokens: DelegationToken records add and replace tokens, RemoveDelegationToken
// records remove them (a token already gone is no change), records without a token id or
// owner are refused, and the tokens come back after a restart from a snapshot and the log
// after it.
func TestDelegationTokens(t *testing.T) {
	tok := func(id string, expiry int64) *DelegationToken {
		return &DelegationToken{TokenID: id, Owner: "User:alice", Requester: "User:admin", Renewers: []string{"User:bob"},
			IssueMs: 1000, ExpiryMs: expiry, MaxMs: 5000}
	}
	for _, bad := range []Record{
		{Type: TypeDelegationToken},
		{Type: TypeDelegationToken, Token: &DelegationToken{Owner: "User:alice"}},
		{Type: TypeDelegationToken, Token: &DelegationToken{TokenID: "t"}},
		{Type: TypeRemoveDelegationToken},
	} {
		if _, err := EmptyImage("cid").Apply(0, []Record{bad}); err == nil {
			t.Fatalf("record %+v applied; want it refused", bad)
		}
	}
	if _, err := EmptyImage("cid").Apply(0, []Record{{Type: TypeRemoveDelegationToken}}); !errors.Is(err, errNoTokenID) {
		t.Fatalf("remove without a token id: %v; want %v", err, errNoTokenID)
	}
	want := map[string]DelegationToken{"t1": *tok("t1", 3000)}
	checkSnapshotReplay(t, [][]Record{
		{{Type: TypeDelegationToken, Token: tok("t1", 2000)}},
		{{Type: TypeDelegationToken, Token: tok("t2", 2000)}},
		{{Type: TypeDelegationToken, Token: tok("t1", 3000)}},
		{{Type: TypeRemoveDelegationToken, TokenID: "t2"}},
		{{Type: TypeRemoveDelegationToken, TokenID: "t2"}},
	}, func(when string, im *Image) {
		if !reflect.DeepEqual(im.DelegationTokens, want) {
			t.Fatalf("%s: tokens %+v; want %+v", when, im.DelegationTokens, want)
		}
	})
}

// TestDelegationTokenExpiredAt: a token is expired once past its expiry or its maximum, not
// at them.
func TestDelegationTokenExpiredAt(t *testing.T) {
	tok := DelegationToken{ExpiryMs: 100, MaxMs: 200}
	for _, c := range []struct {
		now  int64
		want bool
	}{{99, false}, {100, false}, {101, true}} {
		if got := tok.ExpiredAt(c.now); got != c.want {
			t.Errorf("expiry 100, max 200, at %d: expired %v; want %v", c.now, got, c.want)
		}
	}
	if !(DelegationToken{ExpiryMs: 300, MaxMs: 200}).ExpiredAt(201) {
		t.Error("a token past its maximum is not expired")
	}
}
