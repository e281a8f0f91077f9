package acl

import "testing"

func str(s string) *string { return &s }

// topicACL is an ALLOW READ for User:alice from any host on a TOPIC pattern.
func topicACL(name string, pt PatternType) Binding {
	return Binding{ResourceTopic, name, pt, "User:alice", Wildcard, OpRead, PermissionAllow}
}

// anyFilter matches every binding.
var anyFilter = Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}

func withPattern(rt ResourceType, name *string, pt PatternType) Filter {
	f := anyFilter
	f.ResourceType, f.Name, f.PatternType = rt, name, pt
	return f
}

// TestFilterMatchesPattern follows Kafka's ResourcePatternFilter.matches: ANY and a named
// pattern type compare names exactly, MATCH selects what would apply to the name.
func TestFilterMatchesPattern(t *testing.T) {
	tests := []struct {
		name   string
		filter Filter
		b      Binding
		want   bool
	}{
		{"any matches all", anyFilter, topicACL("foo", PatternPrefixed), true},
		{"resource type differs", withPattern(ResourceGroup, nil, PatternAny), topicACL("foo", PatternLiteral), false},
		{"resource type equal", withPattern(ResourceTopic, nil, PatternAny), topicACL("foo", PatternLiteral), true},
		{"pattern type differs", withPattern(ResourceAny, nil, PatternPrefixed), topicACL("foo", PatternLiteral), false},
		{"nil name any name", withPattern(ResourceTopic, nil, PatternLiteral), topicACL("bar", PatternLiteral), true},
		{"ANY compares names exactly", withPattern(ResourceTopic, str("foo"), PatternAny), topicACL("foo", PatternPrefixed), true},
		{"ANY does not prefix-match", withPattern(ResourceTopic, str("foobar"), PatternAny), topicACL("foo", PatternPrefixed), false},
		{"ANY * is only the name *", withPattern(ResourceTopic, str("*"), PatternAny), topicACL("foo", PatternLiteral), false},
		{"ANY * matches literal *", withPattern(ResourceTopic, str("*"), PatternAny), topicACL("*", PatternLiteral), true},
		{"LITERAL * is not a wildcard filter", withPattern(ResourceTopic, str("*"), PatternLiteral), topicACL("foo", PatternLiteral), false},
		{"LITERAL exact", withPattern(ResourceTopic, str("foo"), PatternLiteral), topicACL("foo", PatternLiteral), true},
		{"PREFIXED exact", withPattern(ResourceTopic, str("fo"), PatternPrefixed), topicACL("foo", PatternPrefixed), false},
		{"MATCH literal of the name", withPattern(ResourceTopic, str("foo"), PatternMatch), topicACL("foo", PatternLiteral), true},
		{"MATCH literal of another name", withPattern(ResourceTopic, str("foo"), PatternMatch), topicACL("fo", PatternLiteral), false},
		{"MATCH literal wildcard", withPattern(ResourceTopic, str("foo"), PatternMatch), topicACL("*", PatternLiteral), true},
		{"MATCH prefix of the name", withPattern(ResourceTopic, str("foo"), PatternMatch), topicACL("fo", PatternPrefixed), true},
		{"MATCH prefix equal to the name", withPattern(ResourceTopic, str("foo"), PatternMatch), topicACL("foo", PatternPrefixed), true},
		{"MATCH longer prefix", withPattern(ResourceTopic, str("foo"), PatternMatch), topicACL("foo2", PatternPrefixed), false},
		{"MATCH prefixed * is not a wildcard", withPattern(ResourceTopic, str("foo"), PatternMatch), topicACL("*", PatternPrefixed), false},
		{"MATCH name * and prefixed *", withPattern(ResourceTopic, str("*"), PatternMatch), topicACL("*", PatternPrefixed), true},
		{"MATCH without name", withPattern(ResourceTopic, nil, PatternMatch), topicACL("x", PatternPrefixed), true},
		{"MATCH other resource type", withPattern(ResourceGroup, str("foo"), PatternMatch), topicACL("foo", PatternLiteral), false},
		{"MATCH any resource type", withPattern(ResourceAny, str("foo"), PatternMatch), topicACL("*", PatternLiteral), true},
		{"MATCH stored unknown pattern", withPattern(ResourceTopic, str("foo"), PatternMatch), topicACL("foo", PatternUnknown), false},
	}
	for _, tt := range tests {
		if got := tt.filter.Matches(tt.b); got != tt.want {
			t.Errorf("%s: %s matches %s = %v, want %v", tt.name, tt.filter, tt.b, got, tt.want)
		}
	}
}

// TestFilterMatchesEntry follows Kafka's AccessControlEntryFilter.matches: nil and ANY match
// anything, other values exactly; "User:*" in a filter is only the wildcard ACL's principal.
func TestFilterMatchesEntry(t *testing.T) {
	b := Binding{ResourceTopic, "foo", PatternLiteral, "User:alice", "10.0.0.1", OpWrite, PermissionDeny}
	tests := []struct {
		name   string
		adjust func(*Filter)
		want   bool
	}{
		{"any", func(*Filter) {}, true},
		{"principal equal", func(f *Filter) { f.Principal = str("User:alice") }, true},
		{"principal differs", func(f *Filter) { f.Principal = str("User:bob") }, false},
		{"wildcard principal filter is literal", func(f *Filter) { f.Principal = str(WildcardPrincipal) }, false},
		{"host equal", func(f *Filter) { f.Host = str("10.0.0.1") }, true},
		{"wildcard host filter is literal", func(f *Filter) { f.Host = str(Wildcard) }, false},
		{"operation equal", func(f *Filter) { f.Operation = OpWrite }, true},
		{"operation ALL is literal", func(f *Filter) { f.Operation = OpAll }, false},
		{"permission equal", func(f *Filter) { f.Permission = PermissionDeny }, true},
		{"permission differs", func(f *Filter) { f.Permission = PermissionAllow }, false},
	}
	for _, tt := range tests {
		f := anyFilter
		tt.adjust(&f)
		if got := f.Matches(b); got != tt.want {
			t.Errorf("%s: %s matches %s = %v, want %v", tt.name, f, b, got, tt.want)
		}
	}
}

// TestStrings holds the printed forms to Kafka's toString of AclBinding, AclBindingFilter and
// Uuid.
func TestStrings(t *testing.T) {
	b := Binding{ResourceTopic, "foo", PatternPrefixed, "User:bob", "*", OpRead, PermissionAllow}
	want := "(pattern=ResourcePattern(resourceType=TOPIC, name=foo, patternType=PREFIXED), " +
		"entry=(principal=User:bob, host=*, operation=READ, permissionType=ALLOW))"
	if got := b.String(); got != want {
		t.Errorf("Binding.String() = %s\nwant %s", got, want)
	}
	want = "(patternFilter=ResourcePattern(resourceType=ANY, name=<any>, patternType=ANY), " +
		"entryFilter=(principal=<any>, host=<any>, operation=ANY, permissionType=ANY))"
	if got := anyFilter.String(); got != want {
		t.Errorf("Filter.String() = %s\nwant %s", got, want)
	}
	// Kafka prints Uuid 0x0000000000000001_0000000000000002 as AAAAAAAAAAEAAAAAAAAAAg.
	id := ID{7: 1, 15: 2}
	if got := id.String(); got != "AAAAAAAAAAEAAAAAAAAAAg" {
		t.Errorf("ID.String() = %s, want AAAAAAAAAAEAAAAAAAAAAg", got)
	}
}
