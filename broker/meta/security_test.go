package meta

import (
	"reflect"
	"testing"
)

// TestSecuritySurvivesSnapshotAndReplay reopens a sole voter whose ACLs, SCRAM credentials
// and client quotas are partly in a snapshot and partly in the log after it, and checks that
// removals and overwrites land as applied.
func TestSecuritySurvivesSnapshotAndReplay(t *testing.T) {
	alice, bob := "alice", "bob"
	acl1, acl2 := NewUUID(), NewUUID()
	read := &ACL{ResourceType: 2, ResourceName: "orders", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 3, Permission: 3}
	deny := &ACL{ResourceType: 3, ResourceName: "g", PatternType: 4, Principal: "User:*", Host: "10.0.0.1", Operation: 2, Permission: 2}
	cred := &ScramCredential{Salt: []byte("salt"), StoredKey: []byte("stored"), ServerKey: []byte("server"), Iterations: 4096}
	rate := func(v float64) *float64 { return &v }
	userAlice := []QuotaEntityPart{{Type: "user", Name: &alice}}
	defaultClient := []QuotaEntityPart{{Type: "client-id"}, {Type: "user", Name: &bob}}
	want := &Security{
		ACLs:   map[UUID]ACL{acl2: *deny},
		Scram:  map[string]map[string]ScramCredential{"alice": {"SCRAM-SHA-512": *cred}},
		Quotas: map[string]ClientQuota{QuotaEntityKey(defaultClient): {Entity: defaultClient, Values: map[string]float64{"consumer_byte_rate": 2048}}},
	}
	checkSnapshotReplay(t, [][]Record{
		{{Type: TypeACL, ACLID: acl1, ACL: read}, {Type: TypeACL, ACLID: acl2, ACL: deny}},
		{{Type: TypeScramCredential, ScramUser: "alice", ScramMechanism: "SCRAM-SHA-256", Scram: cred}},
		{{Type: TypeScramCredential, ScramUser: "alice", ScramMechanism: "SCRAM-SHA-512", Scram: cred}},
		{{Type: TypeClientQuota, QuotaEntity: userAlice, QuotaKey: "producer_byte_rate", QuotaValue: rate(1024)}},
		{{Type: TypeClientQuota, QuotaEntity: defaultClient, QuotaKey: "consumer_byte_rate", QuotaValue: rate(2048)}},
		{{Type: TypeRemoveACL, ACLID: acl1}},
		{{Type: TypeScramCredential, ScramUser: "alice", ScramMechanism: "SCRAM-SHA-256"}},
		{{Type: TypeClientQuota, QuotaEntity: userAlice, QuotaKey: "producer_byte_rate"}},
	}, func(when string, im *Image) {
		if !reflect.DeepEqual(im.Security, want) {
			t.Fatalf("%s: %+v, want %+v", when, im.Security, want)
		}
		if _, err := im.Apply(im.Offset+1, []Record{{Type: TypeRemoveACL, ACLID: acl1}}); err == nil {
			t.Fatalf("%s: removing an ACL that is gone applied", when)
		}
	})
}

// TestQuotaEntityKey: the key does not depend on the order of the parts, and tells a default
// from a name.
func TestQuotaEntityKey(t *testing.T) {
	a, def := "a", "<default>"
	k1 := QuotaEntityKey([]QuotaEntityPart{{Type: "user", Name: &a}, {Type: "client-id"}})
	k2 := QuotaEntityKey([]QuotaEntityPart{{Type: "client-id"}, {Type: "user", Name: &a}})
	if k1 != k2 || k1 != "client-id=<default>,user='a'" {
		t.Fatalf("keys %q and %q; want both client-id=<default>,user='a'", k1, k2)
	}
	if QuotaEntityKey([]QuotaEntityPart{{Type: "user", Name: &def}}) == QuotaEntityKey([]QuotaEntityPart{{Type: "user"}}) {
		t.Fatal("a user named <default> has the default user's key")
	}
}
