package acl

import (
	"fmt"
	"testing"
)

// benchACLs returns 1,000 ACLs shaped like a busy cluster's: per-user LITERAL topic ACLs,
// team PREFIXED topic and group ACLs of varied prefix lengths, a few wildcard and DENY ones.
func benchACLs() []Binding {
	var out []Binding
	for i := range 600 {
		out = append(out, bind(ResourceTopic, fmt.Sprintf("orders-%04d", i), PatternLiteral,
			fmt.Sprintf("User:svc-%03d", i%150), Wildcard, Operation(OpRead+Operation(i%2)), PermissionAllow))
	}
	for i := range 250 {
		out = append(out, bind(ResourceTopic, fmt.Sprintf("team%d.%s", i, string(rune('a'+i%26))), PatternPrefixed,
			fmt.Sprintf("User:team-%03d", i), Wildcard, OpAll, PermissionAllow))
	}
	for i := range 140 {
		out = append(out, bind(ResourceGroup, fmt.Sprintf("cg-%d-", i), PatternPrefixed,
			fmt.Sprintf("User:svc-%03d", i), Wildcard, OpRead, PermissionAllow))
	}
	out = append(out,
		bind(ResourceTopic, Wildcard, PatternLiteral, "User:monitor", Wildcard, OpDescribe, PermissionAllow),
		bind(ResourceGroup, Wildcard, PatternLiteral, "User:monitor", Wildcard, OpDescribe, PermissionAllow),
		bind(ResourceTopic, "orders-0001", PatternLiteral, WildcardPrincipal, "10.9.9.9", OpAll, PermissionDeny),
		bind(ResourceCluster, ClusterName, PatternLiteral, "User:admin-tool", Wildcard, OpDescribe, PermissionAllow),
	)
	for i := range 6 {
		out = append(out, bind(ResourceTransactionalID, fmt.Sprintf("tx-%d", i), PatternPrefixed,
			fmt.Sprintf("User:svc-%03d", i), Wildcard, OpWrite, PermissionAllow))
	}
	return out
}

func benchAuthorizer(b *testing.B) *Authorizer {
	acls := benchACLs()
	if len(acls) != 1000 {
		b.Fatalf("%d ACLs, want 1000", len(acls))
	}
	a := New(Config{SuperUsers: []Principal{user("admin")}})
	entries := make([]Entry, len(acls))
	for i, x := range acls {
		entries[i] = Entry{idOf(i), x}
	}
	if err := a.Load(entries); err != nil {
		b.Fatal(err)
	}
	return a
}

// BenchmarkAuthorize measures one decision against 1,000 ACLs for the common shapes: an
// allowed literal topic, an allowed prefixed topic, a denied one (ACLs apply, none match),
// a resource no ACL applies to, and a super user.
func BenchmarkAuthorize(b *testing.B) {
	a := benchAuthorizer(b)
	cases := []struct {
		name string
		who  Principal
		op   Operation
		rt   ResourceType
		res  string
		want bool
	}{
		{"literal-allowed", user("svc-006"), OpRead, ResourceTopic, "orders-0006", true},
		{"prefixed-allowed", user("team-042"), OpWrite, ResourceTopic, "team42.q-events", true},
		{"implied-describe", user("svc-006"), OpDescribe, ResourceTopic, "orders-0006", true},
		{"denied", user("svc-008"), OpWrite, ResourceTopic, "orders-0006", false},
		{"no-acl", user("svc-006"), OpRead, ResourceTopic, "unrelated-topic-name", false},
		{"group-prefixed", user("svc-012"), OpRead, ResourceGroup, "cg-12-consumers", true},
		{"super-user", user("admin"), OpAlter, ResourceCluster, ClusterName, true},
	}
	for _, c := range cases {
		if got := a.Authorize(c.who, "10.0.0.1", c.op, c.rt, c.res); got != c.want {
			b.Fatalf("%s: Authorize = %v, want %v", c.name, got, c.want)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a.Authorize(c.who, "10.0.0.1", c.op, c.rt, c.res)
			}
		})
	}
	b.Run("parallel-mix", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				c := cases[i%len(cases)]
				a.Authorize(c.who, "10.0.0.1", c.op, c.rt, c.res)
				i++
			}
		})
	})
}

// BenchmarkAddRemove measures one ACL change with 1,000 ACLs present: the copy of the sorted
// list and of one resource type's maps.
func BenchmarkAddRemove(b *testing.B) {
	a := benchAuthorizer(b)
	x := bind(ResourceTopic, "new-topic", PatternLiteral, "User:new", Wildcard, OpRead, PermissionAllow)
	b.ReportAllocs()
	for b.Loop() {
		if err := a.Add(idOf(9999), x); err != nil {
			b.Fatal(err)
		}
		if _, err := a.Remove(idOf(9999)); err != nil {
			b.Fatal(err)
		}
	}
}
