package acl

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

func bind(rt ResourceType, name string, pt PatternType, principal, host string, op Operation, perm Permission) Binding {
	return Binding{rt, name, pt, principal, host, op, perm}
}

func idOf(i int) ID {
	var id ID
	id[0], id[1], id[15] = byte(i>>8), byte(i), 0xAC
	return id
}

func newWith(t testing.TB, cfg Config, acls ...Binding) *Authorizer {
	t.Helper()
	a := New(cfg)
	for i, b := range acls {
		if err := a.Add(idOf(i), b); err != nil {
			t.Fatalf("Add %s: %v", b, err)
		}
	}
	return a
}

func user(name string) Principal { return Principal{UserType, name} }

// check is one Authorize call and its expected answer.
type check struct {
	who  Principal
	host string
	op   Operation
	rt   ResourceType
	name string
	want bool
}

func runChecks(t *testing.T, a *Authorizer, checks []check) {
	t.Helper()
	for _, c := range checks {
		host := c.host
		if host == "" {
			host = "127.0.0.1"
		}
		if got := a.Authorize(c.who, host, c.op, c.rt, c.name); got != c.want {
			t.Errorf("Authorize(%s, %s, %s, %s %q) = %v, want %v", c.who, host, c.op, c.rt, c.name, got, c.want)
		}
	}
}

// fooACL is StandardAuthorizerTest's newFooAcl: TOPIC "foo_" PREFIXED for User:bob.
func fooACL(op Operation, perm Permission) Binding {
	return bind(ResourceTopic, "foo_", PatternPrefixed, "User:bob", Wildcard, op, perm)
}

// TestAuthorizeImplication follows StandardAuthorizerTest.testFindResultImplication and
// AuthorizerTest.testAclInheritance: READ, WRITE, DELETE and ALTER imply DESCRIBE and
// ALTER_CONFIGS implies DESCRIBE_CONFIGS for ALLOW only; ALL covers everything either way.
func TestAuthorizeImplication(t *testing.T) {
	bob := user("bob")
	for _, op := range []Operation{OpDescribe, OpRead, OpWrite, OpDelete, OpAlter} {
		runChecks(t, newWith(t, Config{}, fooACL(op, PermissionAllow)), []check{
			{who: bob, op: OpDescribe, rt: ResourceTopic, name: "foo_bar", want: true},
		})
	}
	for _, op := range []Operation{OpCreate, OpAlterConfigs, OpDescribeConfigs, OpClusterAction, OpIdempotentWrite} {
		runChecks(t, newWith(t, Config{}, fooACL(op, PermissionAllow)), []check{
			{who: bob, op: OpDescribe, rt: ResourceTopic, name: "foo_bar", want: false},
		})
	}
	// A DENY implies nothing: an ALLOW DESCRIBE still allows DESCRIBE beside a DENY READ.
	for _, op := range []Operation{OpRead, OpWrite, OpDelete, OpAlter} {
		runChecks(t, newWith(t, Config{}, fooACL(op, PermissionDeny), fooACL(OpDescribe, PermissionAllow)), []check{
			{who: bob, op: OpDescribe, rt: ResourceTopic, name: "foo_bar", want: true},
			{who: bob, op: op, rt: ResourceTopic, name: "foo_bar", want: false},
		})
	}
	runChecks(t, newWith(t, Config{}, fooACL(OpDescribe, PermissionDeny), fooACL(OpRead, PermissionAllow)), []check{
		{who: bob, op: OpDescribe, rt: ResourceTopic, name: "foo_bar", want: false},
		{who: bob, op: OpRead, rt: ResourceTopic, name: "foo_bar", want: true},
	})
	for _, op := range []Operation{OpDescribeConfigs, OpAlterConfigs} {
		runChecks(t, newWith(t, Config{}, fooACL(op, PermissionAllow)), []check{
			{who: bob, op: OpDescribeConfigs, rt: ResourceTopic, name: "foo_bar", want: true},
		})
	}
	runChecks(t, newWith(t, Config{}, fooACL(OpAlterConfigs, PermissionDeny), fooACL(OpDescribeConfigs, PermissionAllow)), []check{
		{who: bob, op: OpDescribeConfigs, rt: ResourceTopic, name: "foo_bar", want: true},
		{who: bob, op: OpAlterConfigs, rt: ResourceTopic, name: "foo_bar", want: false},
	})
	// ALLOW DESCRIBE implies no READ; ALLOW ALTER_CONFIGS no DESCRIBE.
	runChecks(t, newWith(t, Config{}, fooACL(OpDescribe, PermissionAllow), fooACL(OpAlterConfigs, PermissionAllow)), []check{
		{who: bob, op: OpRead, rt: ResourceTopic, name: "foo_bar", want: false},
		{who: bob, op: OpDescribeConfigs, rt: ResourceTopic, name: "foo_bar", want: true},
	})

	all := []Operation{OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpClusterAction,
		OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpCreateTokens, OpDescribeTokens, OpTwoPhaseCommit}
	cluster := func(op Operation, perm Permission) Binding {
		return bind(ResourceCluster, ClusterName, PatternLiteral, "User:alice", Wildcard, op, perm)
	}
	allowAll := newWith(t, Config{}, cluster(OpAll, PermissionAllow))
	denyAll := newWith(t, Config{}, cluster(OpAll, PermissionDeny), cluster(OpAll, PermissionAllow))
	for _, op := range all {
		runChecks(t, allowAll, []check{{who: user("alice"), op: op, rt: ResourceCluster, name: ClusterName, want: true}})
		runChecks(t, denyAll, []check{{who: user("alice"), op: op, rt: ResourceCluster, name: ClusterName, want: false}})
	}
}

// TestAuthorizeScenarios replays the scenarios of Kafka's StandardAuthorizerTest and
// AuthorizerTest on fresh authorizers.
func TestAuthorizeScenarios(t *testing.T) {
	alice, bob := user("alice"), user("bob")
	tests := []struct {
		name   string
		cfg    Config
		acls   []Binding
		checks []check
	}{
		{
			name: "principal matching (testFindResultPrincipalMatching)",
			acls: []Binding{
				fooACL(OpRead, PermissionAllow),
				bind(ResourceGroup, "bar", PatternLiteral, WildcardPrincipal, Wildcard, OpRead, PermissionDeny),
			},
			checks: []check{
				{who: bob, op: OpRead, rt: ResourceTopic, name: "foo_bar", want: true},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "foo_bar", want: false},
				{who: alice, op: OpRead, rt: ResourceGroup, name: "bar", want: false},
			},
		},
		{
			name: "simple (testSimpleAuthorizations)",
			acls: []Binding{
				fooACL(OpRead, PermissionAllow), fooACL(OpWrite, PermissionAllow),
				bind(ResourceGroup, "bar", PatternLiteral, WildcardPrincipal, Wildcard, OpDescribeConfigs, PermissionAllow),
				bind(ResourceGroup, "bar", PatternLiteral, WildcardPrincipal, Wildcard, OpAlterConfigs, PermissionAllow),
			},
			checks: []check{
				{who: bob, op: OpRead, rt: ResourceTopic, name: "foo_", want: true},
				{who: user("fred"), op: OpAlterConfigs, rt: ResourceGroup, name: "bar", want: true},
			},
		},
		{
			name: "deny precedence with ALL (testDenyPrecedenceWithOperationAll)",
			acls: []Binding{
				bind(ResourceTopic, "foo", PatternLiteral, "User:alice", "*", OpAll, PermissionDeny),
				bind(ResourceTopic, "foo", PatternPrefixed, "User:alice", "*", OpRead, PermissionAllow),
				bind(ResourceTopic, "foo", PatternLiteral, "User:*", "*", OpAll, PermissionDeny),
				bind(ResourceTopic, "foo", PatternPrefixed, "User:*", "*", OpDescribe, PermissionAllow),
			},
			checks: []check{
				{who: alice, op: OpWrite, rt: ResourceTopic, name: "foo", want: false},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "foo", want: false},
				{who: alice, op: OpDescribe, rt: ResourceTopic, name: "foo", want: false},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "foobar", want: true},
				{who: bob, op: OpDescribe, rt: ResourceTopic, name: "foo", want: false},
				{who: bob, op: OpRead, rt: ResourceTopic, name: "foo", want: false},
				{who: bob, op: OpWrite, rt: ResourceTopic, name: "foo", want: false},
				{who: bob, op: OpDescribe, rt: ResourceTopic, name: "foobaz", want: true},
				{who: bob, op: OpRead, rt: ResourceTopic, name: "foobaz", want: false},
			},
		},
		{
			name: "operation ALL (testTopicAclWithOperationAll)",
			acls: []Binding{
				bind(ResourceTopic, "foo", PatternLiteral, "User:*", "*", OpAll, PermissionAllow),
				bind(ResourceTopic, "bar", PatternPrefixed, "User:alice", "*", OpAll, PermissionAllow),
				bind(ResourceTopic, "baz", PatternLiteral, "User:bob", "*", OpAll, PermissionAllow),
			},
			checks: []check{
				{who: alice, op: OpWrite, rt: ResourceTopic, name: "foo", want: true},
				{who: alice, op: OpDescribeConfigs, rt: ResourceTopic, name: "bar", want: true},
				{who: alice, op: OpDescribe, rt: ResourceTopic, name: "baz", want: false},
				{who: bob, op: OpWrite, rt: ResourceTopic, name: "foo", want: true},
				{who: bob, op: OpRead, rt: ResourceTopic, name: "bar", want: false},
				{who: bob, op: OpDescribe, rt: ResourceTopic, name: "baz", want: true},
				{who: user("malory"), op: OpDescribe, rt: ResourceTopic, name: "foo", want: true},
				{who: user("malory"), op: OpWrite, rt: ResourceTopic, name: "bar", want: false},
				{who: user("malory"), op: OpRead, rt: ResourceTopic, name: "baz", want: false},
			},
		},
		{
			name: "hosts (testHostAddressAclValidation)",
			acls: []Binding{
				bind(ResourceTopic, "foo", PatternLiteral, "User:alice", "192.168.1.1", OpRead, PermissionDeny),
				bind(ResourceTopic, "foo", PatternLiteral, "User:alice", "*", OpRead, PermissionAllow),
				bind(ResourceTopic, "bar", PatternLiteral, "User:bob", "192.168.1.2", OpRead, PermissionAllow),
				bind(ResourceTopic, "bar", PatternLiteral, "User:*", "127.0.0.1", OpDescribe, PermissionAllow),
			},
			checks: []check{
				{who: alice, host: "127.0.0.1", op: OpRead, rt: ResourceTopic, name: "foo", want: true},
				{who: alice, host: "127.0.0.1", op: OpRead, rt: ResourceTopic, name: "bar", want: false},
				{who: alice, host: "127.0.0.1", op: OpDescribe, rt: ResourceTopic, name: "bar", want: true},
				{who: alice, host: "192.168.1.1", op: OpRead, rt: ResourceTopic, name: "foo", want: false},
				{who: alice, host: "192.168.1.1", op: OpDescribe, rt: ResourceTopic, name: "bar", want: false},
				{who: alice, host: "192.168.1.2", op: OpRead, rt: ResourceTopic, name: "foo", want: true},
				{who: bob, host: "127.0.0.1", op: OpRead, rt: ResourceTopic, name: "foo", want: false},
				{who: bob, host: "127.0.0.1", op: OpDescribe, rt: ResourceTopic, name: "bar", want: true},
				{who: bob, host: "192.168.1.1", op: OpDescribe, rt: ResourceTopic, name: "bar", want: false},
				{who: bob, host: "192.168.1.2", op: OpRead, rt: ResourceTopic, name: "bar", want: true},
				{who: bob, host: "192.168.1.2", op: OpDescribe, rt: ResourceTopic, name: "bar", want: true},
			},
		},
		{
			name: "many ACLs (testAuthorizationWithManyAcls)",
			acls: manyACLs(),
			checks: []check{
				{who: bob, op: OpRead, rt: ResourceTopic, name: "green1", want: true},
				{who: bob, op: OpWrite, rt: ResourceGroup, name: "wheel", want: false},
				{who: bob, op: OpRead, rt: ResourceTopic, name: "alpha", want: false},
				{who: bob, op: OpWrite, rt: ResourceGroup, name: "arbitrary", want: true},
				{who: bob, op: OpRead, rt: ResourceTopic, name: "ala", want: false},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "alpha2", want: true},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "betamax", want: true},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "green2", want: true},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "green3", want: false},
			},
		},
		{
			name: "prefixes (testPrefixAcls)",
			acls: []Binding{
				bind(ResourceTopic, "fooa", PatternPrefixed, "User:alice", "*", OpAll, PermissionAllow),
				bind(ResourceTopic, "foobar", PatternLiteral, "User:bob", "*", OpAll, PermissionAllow),
				bind(ResourceTopic, "f", PatternPrefixed, "User:bob", "*", OpAll, PermissionAllow),
			},
			checks: []check{
				{who: bob, op: OpWrite, rt: ResourceTopic, name: "foobarr", want: true},
				{who: bob, op: OpRead, rt: ResourceTopic, name: "goobar", want: false},
				{who: bob, op: OpRead, rt: ResourceTopic, name: "fooa", want: true},
				{who: alice, op: OpDescribe, rt: ResourceTopic, name: "fooa", want: true},
				{who: alice, op: OpWrite, rt: ResourceTopic, name: "bar", want: false},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "baz", want: false},
			},
		},
		{
			name: "single characters (testSingleCharacterResourceAcls)",
			acls: []Binding{
				bind(ResourceTopic, "f", PatternLiteral, "User:*", "*", OpRead, PermissionAllow),
				bind(ResourceTopic, "_", PatternPrefixed, "User:*", "*", OpRead, PermissionAllow),
			},
			checks: []check{
				{who: alice, op: OpRead, rt: ResourceTopic, name: "f", want: true},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "foo", want: false},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "_foo", want: true},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "_", want: true},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "foo_", want: false},
			},
		},
		{
			name: "wildcard resource and empty name (testWildCardAcls, testAuthorizeWithEmptyResourceName)",
			acls: []Binding{
				bind(ResourceTopic, "*", PatternLiteral, "User:alice", "192.168.3.1", OpRead, PermissionAllow),
				bind(ResourceTopic, "t", PatternLiteral, "User:alice", "192.168.3.1", OpWrite, PermissionAllow),
				bind(ResourceTopic, "*", PatternLiteral, "User:alice", "192.168.3.1", OpWrite, PermissionDeny),
				bind(ResourceGroup, "*", PatternLiteral, "User:*", "*", OpRead, PermissionAllow),
			},
			checks: []check{
				{who: alice, host: "192.168.3.1", op: OpRead, rt: ResourceTopic, name: "t", want: true},
				{who: alice, host: "192.168.3.1", op: OpWrite, rt: ResourceTopic, name: "t", want: false},
				{who: alice, host: "192.168.3.1", op: OpRead, rt: ResourceTopic, name: "*", want: true},
				{who: alice, op: OpRead, rt: ResourceGroup, name: "", want: true},
			},
		},
		{
			name: "a prefixed * only covers names starting with *",
			acls: []Binding{bind(ResourceTopic, "*", PatternPrefixed, "User:*", "*", OpRead, PermissionAllow)},
			checks: []check{
				{who: alice, op: OpRead, rt: ResourceTopic, name: "*x", want: true},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "x", want: false},
			},
		},
		{
			name: "only User:* is a wildcard principal; principals are case sensitive",
			acls: []Binding{
				bind(ResourceTopic, "t", PatternLiteral, "Group:*", "*", OpRead, PermissionAllow),
				bind(ResourceTopic, "u", PatternLiteral, "User:Alice", "*", OpRead, PermissionAllow),
			},
			checks: []check{
				{who: alice, op: OpRead, rt: ResourceTopic, name: "t", want: false},
				{who: Principal{"Group", "*"}, op: OpRead, rt: ResourceTopic, name: "t", want: true},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "u", want: false},
				{who: user("Alice"), op: OpRead, rt: ResourceTopic, name: "u", want: true},
				{who: Principal{"Service", "Alice"}, op: OpRead, rt: ResourceTopic, name: "u", want: false},
			},
		},
		{
			name: "ACLs of another resource type do not apply",
			acls: []Binding{bind(ResourceGroup, "*", PatternLiteral, "User:*", "*", OpAll, PermissionAllow)},
			checks: []check{
				{who: alice, op: OpRead, rt: ResourceTopic, name: "t", want: false},
				{who: alice, op: OpRead, rt: ResourceGroup, name: "t", want: true},
			},
		},
		{
			name: "deny takes precedence (testDenyTakesPrecedence)",
			acls: []Binding{
				bind(ResourceTopic, "t", PatternLiteral, WildcardPrincipal, "*", OpAll, PermissionAllow),
				bind(ResourceTopic, "t", PatternLiteral, "User:alice", "192.168.2.1", OpAll, PermissionDeny),
			},
			checks: []check{
				{who: alice, host: "192.168.2.1", op: OpRead, rt: ResourceTopic, name: "t", want: false},
				{who: alice, host: "192.168.2.2", op: OpRead, rt: ResourceTopic, name: "t", want: true},
			},
		},
		{
			name: "super users (testSuperUserHasAccess)",
			cfg:  Config{SuperUsers: []Principal{user("superuser1"), user("superuser2"), user("x:y")}},
			acls: []Binding{bind(ResourceTopic, "*", PatternLiteral, WildcardPrincipal, "*", OpAll, PermissionDeny)},
			checks: []check{
				{who: user("superuser1"), op: OpRead, rt: ResourceTopic, name: "t", want: true},
				{who: user("superuser2"), op: OpAlter, rt: ResourceCluster, name: ClusterName, want: true},
				{who: user("Superuser1"), op: OpRead, rt: ResourceTopic, name: "t", want: false},
				{who: Principal{"Group", "superuser1"}, op: OpRead, rt: ResourceTopic, name: "t", want: false},
				// Kafka compares super users as "Type:Name" text.
				{who: Principal{"User:x", "y"}, op: OpRead, rt: ResourceTopic, name: "t", want: true},
				{who: Principal{"User:x", "z"}, op: OpRead, rt: ResourceTopic, name: "t", want: false},
			},
		},
		{
			name: "no ACL found, default deny (testNoAclFound)",
			checks: []check{
				{who: alice, op: OpRead, rt: ResourceTopic, name: "t", want: false},
			},
		},
		{
			name: "allow everyone if no ACL found (testAllowEveryoneIfNoAclFoundConfigEnabled)",
			cfg:  Config{AllowEveryoneIfNoACLFound: true},
			acls: []Binding{
				bind(ResourceTopic, "topic1", PatternLiteral, "User:Alice", "*", OpRead, PermissionAllow),
				bind(ResourceTopic, "pre", PatternPrefixed, "User:Alice", "10.0.0.1", OpWrite, PermissionAllow),
				bind(ResourceTopic, "lit", PatternLiteral, "User:Alice", "*", OpRead, PermissionAllow),
			},
			checks: []check{
				// An ACL for someone else on the resource is an ACL found.
				{who: user("Bob"), op: OpRead, rt: ResourceTopic, name: "topic1", want: false},
				{who: user("Bob"), op: OpRead, rt: ResourceTopic, name: "topic2", want: true},
				{who: user("Bob"), op: OpRead, rt: ResourceTopic, name: "prefix", want: false},
				// A LITERAL name that is only a prefix of the resource does not apply to it.
				{who: user("Bob"), op: OpRead, rt: ResourceTopic, name: "literal", want: true},
			},
		},
		{
			name: "a stored principal without colon applies to no one but is an ACL found",
			cfg:  Config{AllowEveryoneIfNoACLFound: true},
			acls: []Binding{bind(ResourceTopic, "t", PatternLiteral, "alice", "*", OpRead, PermissionAllow)},
			checks: []check{
				{who: Principal{"alice", ""}, op: OpRead, rt: ResourceTopic, name: "t", want: false},
				{who: alice, op: OpRead, rt: ResourceTopic, name: "t", want: false},
			},
		},
		{
			name: "a stored UNKNOWN permission denies, as in Kafka",
			acls: []Binding{
				bind(ResourceTopic, "t", PatternLiteral, "User:*", "*", OpRead, PermissionUnknown),
				bind(ResourceTopic, "t", PatternLiteral, "User:*", "*", OpAll, PermissionAllow),
			},
			checks: []check{
				{who: alice, op: OpRead, rt: ResourceTopic, name: "t", want: false},
				{who: alice, op: OpWrite, rt: ResourceTopic, name: "t", want: true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runChecks(t, newWith(t, tt.cfg, tt.acls...), tt.checks)
		})
	}
}

// manyACLs is StandardAuthorizerTest's addManyAcls.
func manyACLs() []Binding {
	return []Binding{
		bind(ResourceTopic, "green2", PatternLiteral, "User:*", "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "green", PatternPrefixed, "User:bob", "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "betamax4", PatternLiteral, "User:bob", "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "betamax", PatternLiteral, "User:bob", "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "beta", PatternPrefixed, "User:*", "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "alpha", PatternPrefixed, "User:*", "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "alp", PatternPrefixed, "User:bob", "*", OpRead, PermissionDeny),
		bind(ResourceGroup, "*", PatternLiteral, "User:bob", "*", OpWrite, PermissionAllow),
		bind(ResourceGroup, "wheel", PatternLiteral, "User:*", "*", OpWrite, PermissionDeny),
	}
}

// TestAddRemoveLoad covers the record-replay side: ids, duplicates, removal, and Load
// replacing everything, with Authorize following each change.
func TestAddRemoveLoad(t *testing.T) {
	a := New(Config{})
	b1 := bind(ResourceTopic, "t", PatternLiteral, "User:alice", "*", OpRead, PermissionAllow)
	b2 := bind(ResourceTopic, "t", PatternPrefixed, "User:alice", "*", OpRead, PermissionDeny)
	alice := user("alice")
	if err := a.Add(idOf(1), b1); err != nil {
		t.Fatal(err)
	}
	if err := a.Add(idOf(1), b2); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("Add with a used id: %v, want ErrDuplicate", err)
	}
	if err := a.Add(idOf(2), b1); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("Add of a present binding: %v, want ErrDuplicate", err)
	}
	if id, ok := a.Find(b1); !ok || id != idOf(1) {
		t.Fatalf("Find(b1) = %v, %v; want id 1", id, ok)
	}
	if !a.Authorize(alice, "h", OpRead, ResourceTopic, "t") {
		t.Fatal("READ t should be allowed after Add")
	}
	if err := a.Add(idOf(2), b2); err != nil {
		t.Fatal(err)
	}
	if a.Authorize(alice, "h", OpRead, ResourceTopic, "t") || a.Count() != 2 {
		t.Fatalf("READ t should be denied with %d ACLs", a.Count())
	}
	got, err := a.Remove(idOf(2))
	if err != nil || got != b2 {
		t.Fatalf("Remove(2) = %s, %v; want %s", got, err, b2)
	}
	if _, err := a.Remove(idOf(2)); !errors.Is(err, ErrUnknownID) {
		t.Fatalf("second Remove(2): %v, want ErrUnknownID", err)
	}
	if !a.Authorize(alice, "h", OpRead, ResourceTopic, "t") {
		t.Fatal("READ t should be allowed again after Remove")
	}
	if _, ok := a.Find(b2); ok {
		t.Fatal("Find(b2) after Remove should fail")
	}
	// Re-adding the removed binding under its old id works.
	if err := a.Add(idOf(2), b2); err != nil {
		t.Fatal(err)
	}

	if err := a.Load([]Entry{{idOf(7), b2}, {idOf(8), b2}}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("Load with a repeated binding: %v, want ErrDuplicate", err)
	}
	if err := a.Load([]Entry{{idOf(7), b1}, {idOf(7), b2}}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("Load with a repeated id: %v, want ErrDuplicate", err)
	}
	if a.Count() != 2 {
		t.Fatalf("a failed Load changed the ACLs: %d", a.Count())
	}
	if err := a.Load([]Entry{{idOf(9), b1}}); err != nil {
		t.Fatal(err)
	}
	if a.Count() != 1 || !a.Authorize(alice, "h", OpRead, ResourceTopic, "t") {
		t.Fatalf("after Load: %d ACLs, READ allowed %v", a.Count(), a.Authorize(alice, "h", OpRead, ResourceTopic, "t"))
	}
	if _, err := a.Remove(idOf(1)); !errors.Is(err, ErrUnknownID) {
		t.Fatalf("Remove of an id Load dropped: %v, want ErrUnknownID", err)
	}
	if _, err := a.Remove(idOf(9)); err != nil {
		t.Fatal(err)
	}
}

// TestDescribeAndMatch follows StandardAuthorizerTest.testListAcls and
// AuthorizerTest.testAclsFilter: Kafka's listing order and filter semantics.
func TestDescribeAndMatch(t *testing.T) {
	bar := func(op Operation, perm Permission) Binding {
		return bind(ResourceGroup, "bar", PatternLiteral, WildcardPrincipal, Wildcard, op, perm)
	}
	a := newWith(t, Config{},
		bar(OpAlterConfigs, PermissionDeny),
		fooACL(OpWrite, PermissionAllow),
		bar(OpDescribeConfigs, PermissionDeny),
		fooACL(OpRead, PermissionAllow),
	)
	want := []Binding{fooACL(OpRead, PermissionAllow), fooACL(OpWrite, PermissionAllow),
		bar(OpDescribeConfigs, PermissionDeny), bar(OpAlterConfigs, PermissionDeny)}
	if got := a.Describe(anyFilter); !slices.Equal(got, want) {
		t.Fatalf("Describe(ANY) =\n%v\nwant\n%v", got, want)
	}
	if _, err := a.Remove(idOf(1)); err != nil { // fooACL(WRITE)
		t.Fatal(err)
	}
	topics := withPattern(ResourceTopic, nil, PatternAny)
	if got := a.Describe(topics); !slices.Equal(got, want[:1]) {
		t.Fatalf("Describe(TOPIC) = %v, want %v", got, want[:1])
	}

	// Names sort in reverse, then pattern type, operation, principal, host, permission.
	b := newWith(t, Config{},
		bind(ResourceTopic, "a", PatternLiteral, "User:x", "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "b", PatternPrefixed, "User:x", "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "b", PatternLiteral, "User:y", "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "b", PatternLiteral, "User:x", "h", OpRead, PermissionAllow),
		bind(ResourceTopic, "b", PatternLiteral, "User:x", "*", OpRead, PermissionDeny),
		bind(ResourceTopic, "b", PatternLiteral, "User:x", "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "b", PatternLiteral, "User:x", "*", OpAll, PermissionAllow),
		bind(ResourceGroup, "z", PatternLiteral, "User:x", "*", OpRead, PermissionAllow),
	)
	var order []string
	for _, x := range b.Describe(anyFilter) {
		order = append(order, fmt.Sprintf("%s/%s/%s/%s/%s/%s/%s", x.ResourceType, x.Name, x.PatternType, x.Operation, x.Principal, x.Host, x.Permission))
	}
	wantOrder := []string{
		"TOPIC/b/LITERAL/ALL/User:x/*/ALLOW",
		"TOPIC/b/LITERAL/READ/User:x/*/DENY",
		"TOPIC/b/LITERAL/READ/User:x/*/ALLOW",
		"TOPIC/b/LITERAL/READ/User:x/h/ALLOW",
		"TOPIC/b/LITERAL/READ/User:y/*/ALLOW",
		"TOPIC/b/PREFIXED/READ/User:x/*/ALLOW",
		"TOPIC/a/LITERAL/READ/User:x/*/ALLOW",
		"GROUP/z/LITERAL/READ/User:x/*/ALLOW",
	}
	if !slices.Equal(order, wantOrder) {
		t.Fatalf("Describe order\n%v\nwant\n%v", order, wantOrder)
	}

	// testAclsFilter: MATCH on a name lists the literal and the covering prefixed ACLs.
	c := newWith(t, Config{},
		bind(ResourceTopic, "foo-1", PatternLiteral, "User:alice", "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "foo-1", PatternLiteral, "User:alice", "192.168.0.1", OpWrite, PermissionAllow),
		bind(ResourceTopic, "bar-1", PatternLiteral, "User:alice", "*", OpDescribe, PermissionAllow),
		bind(ResourceTopic, "bar-", PatternPrefixed, WildcardPrincipal, "*", OpRead, PermissionAllow),
	)
	got := c.Match(withPattern(ResourceAny, str("bar-1"), PatternMatch))
	if len(got) != 2 || got[0].ID != idOf(2) || got[1].ID != idOf(3) {
		t.Fatalf("Match(MATCH bar-1) = %v, want ids 2 and 3", got)
	}
	if got := c.Match(withPattern(ResourceTopic, str("foo-1"), PatternLiteral)); len(got) != 2 {
		t.Fatalf("Match(LITERAL foo-1) = %v, want 2", got)
	}
	if got := c.Match(withPattern(ResourceTopic, str("bar-"), PatternPrefixed)); len(got) != 1 || got[0].ID != idOf(3) {
		t.Fatalf("Match(PREFIXED bar-) = %v, want id 3", got)
	}
}

// abrtCase is one AuthorizeByResourceType expectation after adding acls.
type abrtCase struct {
	add  []Binding
	who  Principal
	host string
	op   Operation
	rt   ResourceType
	want bool
}

func runByResourceType(t *testing.T, name string, cfg Config, steps []abrtCase) {
	t.Helper()
	a := New(cfg)
	n := 0
	for i, s := range steps {
		for _, b := range s.add {
			if err := a.Add(idOf(1000+n), b); err != nil {
				t.Fatalf("%s step %d: %v", name, i, err)
			}
			n++
		}
		got, err := a.AuthorizeByResourceType(s.who, s.host, s.op, s.rt)
		if err != nil || got != s.want {
			t.Errorf("%s step %d: AuthorizeByResourceType(%s, %s, %s, %s) = %v, %v; want %v",
				name, i, s.who, s.host, s.op, s.rt, got, err, s.want)
		}
	}
}

// TestAuthorizeByResourceType replays Kafka's AuthorizerTest cases of authorizeByResourceType.
func TestAuthorizeByResourceType(t *testing.T) {
	u1, u2 := user("user1"), user("user2")
	const h1, h2 = "192.168.1.1", "192.168.1.2"
	ace := func(rt ResourceType, name string, pt PatternType, who, host string, op Operation, perm Permission) Binding {
		return bind(rt, name, pt, who, host, op, perm)
	}
	topic := func(name, who, host string, op Operation, perm Permission) Binding {
		return ace(ResourceTopic, name, PatternLiteral, who, host, op, perm)
	}
	group := func(name string, pt PatternType, perm Permission, op Operation) Binding {
		return ace(ResourceGroup, name, pt, "User:user1", h1, op, perm)
	}

	runByResourceType(t, "deny takes precedence", Config{}, []abrtCase{
		{add: []Binding{topic("sb1", "User:user1", h1, OpWrite, PermissionAllow)}, who: u1, host: h1, op: OpWrite, rt: ResourceTopic, want: true},
		{add: []Binding{topic("sb1", "User:user1", h1, OpWrite, PermissionDeny)}, who: u1, host: h1, op: OpWrite, rt: ResourceTopic, want: false},
	})
	runByResourceType(t, "unrelated deny does not dominate allow", Config{}, []abrtCase{
		{add: []Binding{
			topic("sb1", "User:user1", h1, OpRead, PermissionDeny),
			topic("sb1", "User:user2", h1, OpRead, PermissionDeny),
			topic("sb1", "User:user1", h2, OpWrite, PermissionDeny),
			topic("sb1", "User:user2", h2, OpRead, PermissionDeny),
			topic("sb1", "User:user1", h2, OpRead, PermissionAllow),
			topic("sb2", "User:user1", h2, OpRead, PermissionDeny),
			ace(ResourceGroup, "s", PatternPrefixed, "User:user1", h2, OpRead, PermissionDeny),
		}, who: u1, host: h1, op: OpRead, rt: ResourceTopic, want: false},
		{who: u1, host: h1, op: OpRead, rt: ResourceGroup, want: false},
		{who: u1, host: h1, op: OpRead, rt: ResourceTransactionalID, want: false},
		{who: u1, host: h1, op: OpRead, rt: ResourceCluster, want: false},
		{who: u1, host: h2, op: OpRead, rt: ResourceTopic, want: true},
	})
	runByResourceType(t, "prefixed deny dominates", Config{}, []abrtCase{
		{add: []Binding{group("abcde", PatternPrefixed, PermissionAllow, OpRead)}, who: u1, host: h1, op: OpRead, rt: ResourceGroup, want: true},
		{add: []Binding{group("abcd", PatternPrefixed, PermissionDeny, OpRead)}, who: u1, host: h1, op: OpRead, rt: ResourceGroup, want: false},
		{add: []Binding{group("abc", PatternPrefixed, PermissionAllow, OpRead)}, who: u1, host: h1, op: OpRead, rt: ResourceGroup, want: true},
		{add: []Binding{group("a", PatternPrefixed, PermissionDeny, OpRead)}, who: u1, host: h1, op: OpRead, rt: ResourceGroup, want: false},
		{add: []Binding{group("ab", PatternPrefixed, PermissionAllow, OpRead)}, who: u1, host: h1, op: OpRead, rt: ResourceGroup, want: false},
	})
	runByResourceType(t, "literal deny dominates only its own literal allow", Config{}, []abrtCase{
		{add: []Binding{group("x", PatternLiteral, PermissionAllow, OpRead), group("x", PatternLiteral, PermissionDeny, OpRead)}, who: u1, host: h1, op: OpRead, rt: ResourceGroup, want: false},
		{add: []Binding{group("xy", PatternPrefixed, PermissionAllow, OpRead)}, who: u1, host: h1, op: OpRead, rt: ResourceGroup, want: true},
	})
	runByResourceType(t, "wildcard deny dominates", Config{}, []abrtCase{
		{add: []Binding{group("hello", PatternPrefixed, PermissionAllow, OpWrite)}, who: u1, host: h1, op: OpWrite, rt: ResourceGroup, want: true},
		{add: []Binding{group("*", PatternLiteral, PermissionDeny, OpWrite)}, who: u1, host: h1, op: OpWrite, rt: ResourceGroup, want: false},
		{add: []Binding{group("*", PatternLiteral, PermissionAllow, OpWrite)}, who: u1, host: h1, op: OpWrite, rt: ResourceGroup, want: false},
		{add: []Binding{group("aloha", PatternLiteral, PermissionAllow, OpWrite)}, who: u1, host: h1, op: OpWrite, rt: ResourceGroup, want: false},
	})
	runByResourceType(t, "wildcard allow", Config{}, []abrtCase{
		{add: []Binding{group("*", PatternLiteral, PermissionAllow, OpWrite), group("p", PatternPrefixed, PermissionDeny, OpWrite)}, who: u1, host: h1, op: OpWrite, rt: ResourceGroup, want: true},
	})
	runByResourceType(t, "operation ALL, and no implied operations", Config{}, []abrtCase{
		{who: u1, host: h1, op: OpRead, rt: ResourceTopic, want: false},
		{add: []Binding{topic("sb1", "User:user1", h1, OpWrite, PermissionDeny), topic("sb1", "User:user1", h1, OpAll, PermissionAllow)}, who: u1, host: h1, op: OpRead, rt: ResourceTopic, want: true},
		{add: []Binding{topic("sb1", "User:user1", h1, OpAll, PermissionDeny)}, who: u1, host: h1, op: OpRead, rt: ResourceTopic, want: false},
		{add: []Binding{topic("sb2", "User:user2", "*", OpRead, PermissionAllow)}, who: u2, host: h1, op: OpDescribe, rt: ResourceTopic, want: false},
	})
	runByResourceType(t, "hosts", Config{}, []abrtCase{
		{who: u1, host: h1, op: OpRead, rt: ResourceTopic, want: false},
		{add: []Binding{topic("sb1", "User:user1", h1, OpRead, PermissionAllow)}, who: u1, host: h1, op: OpRead, rt: ResourceTopic, want: true},
		{add: []Binding{topic("sb1", "User:user1", "*", OpRead, PermissionDeny)}, who: u1, host: h1, op: OpRead, rt: ResourceTopic, want: false},
		{add: []Binding{topic("sb2", "User:user1", h1, OpRead, PermissionDeny)}, who: u1, host: h1, op: OpRead, rt: ResourceTopic, want: false},
		{who: u1, host: h2, op: OpRead, rt: ResourceTopic, want: false},
		{add: []Binding{topic("sb2", "User:user1", "*", OpRead, PermissionAllow)}, who: u1, host: h2, op: OpRead, rt: ResourceTopic, want: true},
		{add: []Binding{topic("sb2", "User:user1", "*", OpRead, PermissionDeny)}, who: u1, host: h2, op: OpRead, rt: ResourceTopic, want: false},
	})
	runByResourceType(t, "principals", Config{}, []abrtCase{
		{add: []Binding{topic("sb1", "User:user1", h1, OpRead, PermissionAllow)}, who: u1, host: h1, op: OpRead, rt: ResourceTopic, want: true},
		{add: []Binding{topic("sb1", WildcardPrincipal, h1, OpRead, PermissionDeny)}, who: u1, host: h1, op: OpRead, rt: ResourceTopic, want: false},
		{add: []Binding{topic("sb2", "User:user1", h1, OpRead, PermissionDeny)}, who: u2, host: h1, op: OpRead, rt: ResourceTopic, want: false},
		{add: []Binding{topic("sb2", WildcardPrincipal, h1, OpRead, PermissionAllow)}, who: u2, host: h1, op: OpRead, rt: ResourceTopic, want: true},
		{add: []Binding{topic("sb2", WildcardPrincipal, h1, OpRead, PermissionDeny)}, who: u2, host: h1, op: OpRead, rt: ResourceTopic, want: false},
	})
	denyAll := func(rt ResourceType) Binding {
		return ace(rt, "*", PatternLiteral, WildcardPrincipal, "*", OpAll, PermissionDeny)
	}
	su := Config{SuperUsers: []Principal{user("superuser1")}}
	runByResourceType(t, "super user", su, []abrtCase{
		{add: []Binding{denyAll(ResourceTopic), denyAll(ResourceCluster), denyAll(ResourceGroup), denyAll(ResourceTransactionalID)},
			who: user("superuser1"), host: "192.0.4.4", op: OpRead, rt: ResourceTopic, want: true},
		{who: user("superuser1"), host: "192.0.4.4", op: OpRead, rt: ResourceCluster, want: true},
		{who: user("superuser1"), host: "192.0.4.4", op: OpIdempotentWrite, rt: ResourceTransactionalID, want: true},
	})
	everyone := Config{AllowEveryoneIfNoACLFound: true}
	runByResourceType(t, "allow everyone if no ACL found", everyone, []abrtCase{
		{who: user("alice"), host: h1, op: OpRead, rt: ResourceTopic, want: true},
		{add: []Binding{topic("foo", WildcardPrincipal, "*", OpRead, PermissionDeny)}, who: user("alice"), host: h1, op: OpRead, rt: ResourceTopic, want: true},
		{add: []Binding{topic("*", WildcardPrincipal, "*", OpRead, PermissionDeny)}, who: user("alice"), host: h1, op: OpRead, rt: ResourceTopic, want: false},
	})
	// The "hardcode" probe goes through Authorize, implications included.
	runByResourceType(t, "probe name", Config{}, []abrtCase{
		{add: []Binding{topic("hard", "User:user1", "*", OpRead, PermissionAllow)}, who: u1, host: h1, op: OpRead, rt: ResourceTopic, want: true},
		{add: []Binding{ace(ResourceTopic, "hard", PatternPrefixed, "User:user2", "*", OpWrite, PermissionAllow)}, who: u2, host: h1, op: OpDescribe, rt: ResourceTopic, want: true},
	})
}

func TestAuthorizeByResourceTypeArguments(t *testing.T) {
	a := New(Config{})
	for _, tt := range []struct {
		op Operation
		rt ResourceType
	}{
		{OpRead, ResourceAny}, {OpRead, ResourceUnknown}, {OpRead, 8},
		{OpAny, ResourceTopic}, {OpUnknown, ResourceTopic}, {16, ResourceTopic},
	} {
		if _, err := a.AuthorizeByResourceType(user("a"), "h", tt.op, tt.rt); !errors.Is(err, ErrBadArgument) {
			t.Errorf("AuthorizeByResourceType(%s, %s): %v, want ErrBadArgument", tt.op, tt.rt, err)
		}
	}
}

// TestAuthorizeConcurrent reads while the ACLs change; run with -race it proves readers need
// no lock, and each answer is one of the two states the writer flips between.
func TestAuthorizeConcurrent(t *testing.T) {
	a := newWith(t, Config{}, manyACLs()...)
	deny := bind(ResourceTopic, "green", PatternPrefixed, "User:*", "*", OpRead, PermissionDeny)
	bob := user("bob")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// READ beta is allowed in both states; READ green1 flips.
				if !a.Authorize(bob, "h", OpRead, ResourceTopic, "beta1") {
					t.Error("READ beta1 denied")
					return
				}
				a.Authorize(bob, "h", OpRead, ResourceTopic, "green1")
			}
		}()
	}
	for i := range 300 {
		if err := a.Add(idOf(5000), deny); err != nil {
			t.Fatal(err)
		}
		if a.Authorize(bob, "h", OpRead, ResourceTopic, "green1") {
			t.Fatalf("iteration %d: READ green1 allowed after Add of the DENY", i)
		}
		if _, err := a.Remove(idOf(5000)); err != nil {
			t.Fatal(err)
		}
		if !a.Authorize(bob, "h", OpRead, ResourceTopic, "green1") {
			t.Fatalf("iteration %d: READ green1 denied after Remove of the DENY", i)
		}
	}
	close(stop)
	wg.Wait()
}

// TestAuthorizeDoesNotAllocate holds Authorize to no allocations on the hot path.
func TestAuthorizeDoesNotAllocate(t *testing.T) {
	a := newWith(t, Config{SuperUsers: []Principal{user("admin")}}, manyACLs()...)
	bob := user("bob")
	allocs := testing.AllocsPerRun(100, func() {
		a.Authorize(bob, "10.0.0.1", OpRead, ResourceTopic, "green1")
		a.Authorize(bob, "10.0.0.1", OpWrite, ResourceGroup, "wheel")
		a.Authorize(user("admin"), "10.0.0.1", OpWrite, ResourceGroup, "wheel")
	})
	if allocs != 0 {
		t.Fatalf("Authorize allocates %.1f times per run", allocs)
	}
}
