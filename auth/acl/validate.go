package acl

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Scope says how much of a request Kafka fails for a refusal, which follows from where in
// Kafka the check sits.
type Scope int8

const (
	// ScopeEntry fails one creation or filter: its result carries the error; the others go on.
	ScopeEntry Scope = iota
	// ScopeRequest fails every creation of the request with the error: Kafka's handler throws
	// while it turns the creations into bindings, before it looks at any of them.
	ScopeRequest
	// ScopeConnection means Kafka cannot parse the request at all: it sends no response and
	// closes the connection.
	ScopeConnection
)

// Error is a refusal of a creation or filter with the Kafka error the broker answers.
// errors.Is(err, kerr.InvalidRequest) and friends work through Unwrap.
type Error struct {
	// Code is the Kafka error of the result.
	Code *kerr.Error
	// Message is the message of the exception Kafka raises; see WireMessage for what it
	// sends.
	Message string
	// Scope is how much of the request the refusal fails.
	Scope Scope
}

// Error returns the error name and Kafka's message.
func (e *Error) Error() string { return e.Code.Message + ": " + e.Message }

// Unwrap returns the Kafka error so errors.Is/As reach it.
func (e *Error) Unwrap() error { return e.Code }

// WireMessage returns the error message Kafka puts in the response: none (nil) for
// UNKNOWN_SERVER_ERROR, which Kafka's ApiError.fromThrowable never explains to clients, and
// Message otherwise.
func (e *Error) WireMessage() *string {
	if e.Code == kerr.UnknownServerError {
		return nil
	}
	m := e.Message
	return &m
}

func refuse(code *kerr.Error, scope Scope, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Scope: scope}
}

// ValidateCreation checks one creation of a CreateAcls request as Kafka 4.1 does on its
// way from the wire to the metadata log, and returns nil or an *Error whose Scope says what
// it fails. In Kafka's order:
//
//   - a field with the wire code of UNKNOWN (0) fails the parse of the request
//     (CreateAclsRequest.validate): ScopeConnection;
//   - resource type ANY, pattern type ANY or MATCH, operation ANY or permission ANY cannot
//     form a binding (ResourcePattern and AccessControlEntry constructors):
//     UNKNOWN_SERVER_ERROR for the whole request, ScopeRequest;
//   - a CLUSTER resource not named "kafka-cluster", or an empty name (AclApis):
//     INVALID_REQUEST;
//   - any other undefined code, then a principal without a colon
//     (AclControlManager.validateNewAcl): INVALID_REQUEST.
//
// A PREFIXED "*" is accepted, as Kafka accepts it: it covers names starting with "*". The
// host is not checked. When several creations of a request fail, a ScopeConnection error
// wins over ScopeRequest, which wins over ScopeEntry.
func ValidateCreation(b Binding) error {
	if b.ResourceType == ResourceUnknown || b.PatternType == PatternUnknown ||
		b.Operation == OpUnknown || b.Permission == PermissionUnknown {
		return refuse(kerr.InvalidRequest, ScopeConnection, "CreatableAcls contain unknown elements: %s", b)
	}
	switch {
	case b.ResourceType == ResourceAny:
		return refuse(kerr.UnknownServerError, ScopeRequest, "resourceType must not be ANY")
	case b.PatternType == PatternMatch || b.PatternType == PatternAny:
		return refuse(kerr.UnknownServerError, ScopeRequest, "patternType must not be %s", b.PatternType)
	case b.Operation == OpAny:
		return refuse(kerr.UnknownServerError, ScopeRequest, "operation must not be ANY")
	case b.Permission == PermissionAny:
		return refuse(kerr.UnknownServerError, ScopeRequest, "permissionType must not be ANY")
	case b.ResourceType == ResourceCluster && b.Name != ClusterName:
		return refuse(kerr.InvalidRequest, ScopeEntry, "The only valid name for the CLUSTER resource is %s", ClusterName)
	case b.Name == "":
		return refuse(kerr.InvalidRequest, ScopeEntry, "Invalid empty resource name")
	case !b.ResourceType.known():
		return refuse(kerr.InvalidRequest, ScopeEntry, "Invalid resourceType %s", b.ResourceType)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return refuse(kerr.InvalidRequest, ScopeEntry, "Invalid patternType %s", b.PatternType)
	case !b.Operation.known():
		return refuse(kerr.InvalidRequest, ScopeEntry, "Invalid operation %s", b.Operation)
	case b.Permission != PermissionDeny && b.Permission != PermissionAllow:
		return refuse(kerr.InvalidRequest, ScopeEntry, "Invalid permissionType %s", b.Permission)
	}
	if _, err := ParsePrincipal(b.Principal); err != nil {
		return refuse(kerr.InvalidRequest, ScopeEntry, "Could not parse principal from `%s` "+
			"(no colon is present separating the principal type from the principal name)", b.Principal)
	}
	return nil
}

// ValidateDescribeFilter checks the filter of a DescribeAcls request as Kafka's
// DescribeAclsRequest does: a field with the wire code of UNKNOWN (0) fails the parse,
// ScopeConnection. Any other filter is answered, if only with nothing.
func ValidateDescribeFilter(f Filter) error {
	if f.hasUnknownCode() {
		return refuse(kerr.InvalidRequest, ScopeConnection, "DescribeAclsRequest contains UNKNOWN elements: %s", f)
	}
	return nil
}

// ValidateDeleteFilter checks one filter of a DeleteAcls request as Kafka does: a field
// with the wire code of UNKNOWN (0) fails the parse of the request (DeleteAclsRequest),
// ScopeConnection; a resource type, pattern type, operation or permission code Kafka does not
// define fails that filter with INVALID_REQUEST (AclControlManager.validateFilter).
func ValidateDeleteFilter(f Filter) error {
	if f.hasUnknownCode() {
		return refuse(kerr.InvalidRequest, ScopeConnection, "Filters contain UNKNOWN elements, filters: %s", f)
	}
	if !f.ResourceType.known() || !f.PatternType.known() {
		return refuse(kerr.InvalidRequest, ScopeEntry, "Unknown patternFilter.")
	}
	if !f.Operation.known() || !f.Permission.known() {
		return refuse(kerr.InvalidRequest, ScopeEntry, "Unknown entryFilter.")
	}
	return nil
}

func (f Filter) hasUnknownCode() bool {
	return f.ResourceType == ResourceUnknown || f.PatternType == PatternUnknown ||
		f.Operation == OpUnknown || f.Permission == PermissionUnknown
}
