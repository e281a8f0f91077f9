package acl

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// ID identifies one ACL, as the 16-byte id of KRaft's AccessControlEntryRecord and
// RemoveAccessControlEntryRecord does.
type ID [16]byte

// String returns the id as Kafka prints a Uuid: URL-safe base64 without padding.
func (id ID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// Binding is one ACL (Kafka's AclBinding, or StandardAcl): a resource pattern and an entry
// saying which principal from which host may or may not perform which operation on it.
// Principal is kept as the text it was created with ("User:alice"), as Kafka stores it.
type Binding struct {
	ResourceType ResourceType
	Name         string
	PatternType  PatternType
	Principal    string
	Host         string
	Operation    Operation
	Permission   Permission
}

// String prints the binding as Kafka's AclBinding.toString does, for logs and messages.
func (b Binding) String() string {
	return fmt.Sprintf("(pattern=ResourcePattern(resourceType=%s, name=%s, patternType=%s), "+
		"entry=(principal=%s, host=%s, operation=%s, permissionType=%s))",
		b.ResourceType, b.Name, b.PatternType, b.Principal, b.Host, b.Operation, b.Permission)
}

// Entry is a binding with the id it is stored under.
type Entry struct {
	ID      ID
	Binding Binding
}

// Filter selects bindings (Kafka's AclBindingFilter) for DescribeAcls and DeleteAcls. A nil
// string field and an ANY enumeration match anything. PatternType MATCH with a Name selects
// the bindings that would apply to a resource of that name: the LITERAL one of that name,
// the LITERAL wildcard "*" and every PREFIXED one that is a prefix of it.
type Filter struct {
	ResourceType ResourceType
	Name         *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Matches reports whether b passes f, as Kafka's AclBindingFilter.matches.
func (f Filter) Matches(b Binding) bool {
	return f.matchesPattern(b) && f.matchesEntry(b)
}

// matchesPattern is ResourcePatternFilter.matches.
func (f Filter) matchesPattern(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.Name == nil {
		return true
	}
	name := *f.Name
	if f.PatternType == PatternAny || f.PatternType == b.PatternType {
		return name == b.Name
	}
	// f.PatternType is MATCH.
	switch b.PatternType {
	case PatternLiteral:
		return name == b.Name || b.Name == Wildcard
	case PatternPrefixed:
		return strings.HasPrefix(name, b.Name)
	}
	// Kafka throws on a stored pattern type MATCH cannot compare; such a binding cannot be
	// created, and here it simply does not match.
	return false
}

// matchesEntry is AccessControlEntryFilter.matches.
func (f Filter) matchesEntry(b Binding) bool {
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == b.Permission
}

// String prints the filter as Kafka's AclBindingFilter.toString does.
func (f Filter) String() string {
	return fmt.Sprintf("(patternFilter=ResourcePattern(resourceType=%s, name=%s, patternType=%s), "+
		"entryFilter=(principal=%s, host=%s, operation=%s, permissionType=%s))",
		f.ResourceType, orAny(f.Name), f.PatternType, orAny(f.Principal), orAny(f.Host),
		f.Operation, f.Permission)
}

func orAny(s *string) string {
	if s == nil {
		return "<any>"
	}
	return *s
}
