package acl

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func validACL() Binding {
	return Binding{ResourceTopic, "foo", PatternLiteral, "User:alice", Wildcard, OpRead, PermissionAllow}
}

// TestValidateCreation lists what Kafka 4.1 refuses in CreateAcls, where, and with which
// code and message (CreateAclsRequest.validate, the ResourcePattern and AccessControlEntry
// constructors, AclApis.handleCreateAcls, AclControlManager.validateNewAcl).
func TestValidateCreation(t *testing.T) {
	tests := []struct {
		name   string
		adjust func(*Binding)
		wcode  *kerr.Error
		wscope Scope
		wmsg   string
	}{
		{name: "valid literal", adjust: func(*Binding) {}},
		{name: "valid prefixed", adjust: func(b *Binding) { b.PatternType = PatternPrefixed }},
		{name: "prefixed * accepted", adjust: func(b *Binding) { b.Name, b.PatternType = "*", PatternPrefixed }},
		{name: "literal * accepted", adjust: func(b *Binding) { b.Name = "*" }},
		{name: "cluster", adjust: func(b *Binding) { b.ResourceType, b.Name = ResourceCluster, ClusterName }},
		{name: "principal with empty name", adjust: func(b *Binding) { b.Principal = "User:" }},
		{name: "any host text", adjust: func(b *Binding) { b.Host = "not a host" }},

		{"unknown resource type", func(b *Binding) { b.ResourceType = ResourceUnknown }, kerr.InvalidRequest, ScopeConnection, ""},
		{"unknown pattern type", func(b *Binding) { b.PatternType = PatternUnknown }, kerr.InvalidRequest, ScopeConnection, ""},
		{"unknown operation", func(b *Binding) { b.Operation = OpUnknown }, kerr.InvalidRequest, ScopeConnection, ""},
		{"unknown permission", func(b *Binding) { b.Permission = PermissionUnknown }, kerr.InvalidRequest, ScopeConnection, ""},
		{"unknown beats any", func(b *Binding) { b.ResourceType, b.Operation = ResourceAny, OpUnknown }, kerr.InvalidRequest, ScopeConnection, ""},

		{"resource type ANY", func(b *Binding) { b.ResourceType = ResourceAny }, kerr.UnknownServerError, ScopeRequest, "resourceType must not be ANY"},
		{"pattern type ANY", func(b *Binding) { b.PatternType = PatternAny }, kerr.UnknownServerError, ScopeRequest, "patternType must not be ANY"},
		{"pattern type MATCH", func(b *Binding) { b.PatternType = PatternMatch }, kerr.UnknownServerError, ScopeRequest, "patternType must not be MATCH"},
		{"operation ANY", func(b *Binding) { b.Operation = OpAny }, kerr.UnknownServerError, ScopeRequest, "operation must not be ANY"},
		{"permission ANY", func(b *Binding) { b.Permission = PermissionAny }, kerr.UnknownServerError, ScopeRequest, "permissionType must not be ANY"},
		{"ANY beats bad name", func(b *Binding) { b.Name, b.Operation = "", OpAny }, kerr.UnknownServerError, ScopeRequest, "operation must not be ANY"},

		{"cluster other name", func(b *Binding) { b.ResourceType, b.Name = ResourceCluster, "foo" }, kerr.InvalidRequest, ScopeEntry, "The only valid name for the CLUSTER resource is kafka-cluster"},
		{"cluster empty name", func(b *Binding) { b.ResourceType, b.Name = ResourceCluster, "" }, kerr.InvalidRequest, ScopeEntry, "The only valid name for the CLUSTER resource is kafka-cluster"},
		{"cluster wildcard", func(b *Binding) { b.ResourceType, b.Name = ResourceCluster, "*" }, kerr.InvalidRequest, ScopeEntry, "The only valid name for the CLUSTER resource is kafka-cluster"},
		{"empty name", func(b *Binding) { b.Name = "" }, kerr.InvalidRequest, ScopeEntry, "Invalid empty resource name"},
		{"undefined resource type code", func(b *Binding) { b.ResourceType = 9 }, kerr.InvalidRequest, ScopeEntry, "Invalid resourceType UNKNOWN"},
		{"undefined pattern type code", func(b *Binding) { b.PatternType = 7 }, kerr.InvalidRequest, ScopeEntry, "Invalid patternType UNKNOWN"},
		{"undefined operation code", func(b *Binding) { b.Operation = 16 }, kerr.InvalidRequest, ScopeEntry, "Invalid operation UNKNOWN"},
		{"undefined permission code", func(b *Binding) { b.Permission = -3 }, kerr.InvalidRequest, ScopeEntry, "Invalid permissionType UNKNOWN"},
		{"principal without colon", func(b *Binding) { b.Principal = "alice" }, kerr.InvalidRequest, ScopeEntry,
			"Could not parse principal from `alice` (no colon is present separating the principal type from the principal name)"},
		{"empty principal", func(b *Binding) { b.Principal = "" }, kerr.InvalidRequest, ScopeEntry,
			"Could not parse principal from `` (no colon is present separating the principal type from the principal name)"},
	}
	for _, tt := range tests {
		b := validACL()
		tt.adjust(&b)
		err := ValidateCreation(b)
		if tt.wcode == nil {
			if err != nil {
				t.Errorf("%s: ValidateCreation(%s) = %v, want nil", tt.name, b, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: ValidateCreation(%s) = %v, want *Error", tt.name, b, err)
			continue
		}
		if !errors.Is(err, tt.wcode) || e.Scope != tt.wscope || (tt.wmsg != "" && e.Message != tt.wmsg) {
			t.Errorf("%s: got %s scope %d message %q, want %s scope %d message %q",
				tt.name, e.Code.Message, e.Scope, e.Message, tt.wcode.Message, tt.wscope, tt.wmsg)
		}
	}
}

// TestWireMessage holds the response message to Kafka's ApiError.fromThrowable: none for
// UNKNOWN_SERVER_ERROR, the exception's message otherwise.
func TestWireMessage(t *testing.T) {
	b := validACL()
	b.Operation = OpAny
	var e *Error
	if !errors.As(ValidateCreation(b), &e) || e.WireMessage() != nil {
		t.Fatalf("operation ANY: WireMessage should be nil, got error %v", e)
	}
	b = validACL()
	b.Name = ""
	if !errors.As(ValidateCreation(b), &e) || e.WireMessage() == nil || *e.WireMessage() != "Invalid empty resource name" {
		t.Fatalf("empty name: WireMessage should be the message, got error %v", e)
	}
}

func TestValidateFilters(t *testing.T) {
	tests := []struct {
		name     string
		adjust   func(*Filter)
		wdescr   Scope // -1: accepted
		wdelete  Scope // -1: accepted
		wdelMsg  string
		wdelCode *kerr.Error
	}{
		{"any", func(*Filter) {}, -1, -1, "", nil},
		{"concrete", func(f *Filter) {
			f.ResourceType, f.Name, f.PatternType = ResourceTopic, str("x"), PatternLiteral
			f.Principal, f.Host, f.Operation, f.Permission = str("User:a"), str("*"), OpRead, PermissionAllow
		}, -1, -1, "", nil},
		{"match", func(f *Filter) { f.PatternType = PatternMatch }, -1, -1, "", nil},
		{"unknown resource type", func(f *Filter) { f.ResourceType = ResourceUnknown }, ScopeConnection, ScopeConnection, "", kerr.InvalidRequest},
		{"unknown pattern type", func(f *Filter) { f.PatternType = PatternUnknown }, ScopeConnection, ScopeConnection, "", kerr.InvalidRequest},
		{"unknown operation", func(f *Filter) { f.Operation = OpUnknown }, ScopeConnection, ScopeConnection, "", kerr.InvalidRequest},
		{"unknown permission", func(f *Filter) { f.Permission = PermissionUnknown }, ScopeConnection, ScopeConnection, "", kerr.InvalidRequest},
		{"undefined resource type code", func(f *Filter) { f.ResourceType = 8 }, -1, ScopeEntry, "Unknown patternFilter.", kerr.InvalidRequest},
		{"undefined pattern type code", func(f *Filter) { f.PatternType = 5 }, -1, ScopeEntry, "Unknown patternFilter.", kerr.InvalidRequest},
		{"undefined operation code", func(f *Filter) { f.Operation = 99 }, -1, ScopeEntry, "Unknown entryFilter.", kerr.InvalidRequest},
		{"undefined permission code", func(f *Filter) { f.Permission = 4 }, -1, ScopeEntry, "Unknown entryFilter.", kerr.InvalidRequest},
	}
	for _, tt := range tests {
		f := anyFilter
		tt.adjust(&f)
		checkScope(t, tt.name+" describe", ValidateDescribeFilter(f), tt.wdescr, kerr.InvalidRequest, "")
		checkScope(t, tt.name+" delete", ValidateDeleteFilter(f), tt.wdelete, tt.wdelCode, tt.wdelMsg)
	}
}

func checkScope(t *testing.T, name string, err error, want Scope, wcode *kerr.Error, wmsg string) {
	t.Helper()
	if want < 0 {
		if err != nil {
			t.Errorf("%s: %v, want nil", name, err)
		}
		return
	}
	var e *Error
	if !errors.As(err, &e) || e.Scope != want || !errors.Is(err, wcode) || (wmsg != "" && e.Message != wmsg) {
		t.Errorf("%s: %v, want %s scope %d message %q", name, err, wcode.Message, want, wmsg)
	}
}
