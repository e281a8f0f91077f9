package acl

// The four enumerations below carry Kafka's wire codes (org.apache.kafka.common.resource
// and org.apache.kafka.common.acl), so a value converts to and from the int8 fields of kmsg's
// CreateACLs, DescribeACLs and DeleteACLs messages without a table. A code Kafka does not
// define behaves as UNKNOWN, as Kafka's fromCode maps it there.

// ResourceType is the kind of resource an ACL guards (Kafka's ResourceType).
type ResourceType int8

// Kafka's resource types. ResourceAny is only meaningful in a Filter.
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// numResourceTypes bounds the codes the authorizer indexes: 0..7.
const numResourceTypes = 8

// ClusterName is the only name a CLUSTER resource has (Kafka's Resource.CLUSTER_NAME);
// CreateAcls refuses any other.
const ClusterName = "kafka-cluster"

// Wildcard is the resource name of a LITERAL pattern that matches every resource of its
// type, and the host of an ACL that matches every host.
const Wildcard = "*"

// String returns the name as Kafka prints it ("TOPIC", "TRANSACTIONAL_ID").
func (t ResourceType) String() string {
	switch t {
	case ResourceAny:
		return "ANY"
	case ResourceTopic:
		return "TOPIC"
	case ResourceGroup:
		return "GROUP"
	case ResourceCluster:
		return "CLUSTER"
	case ResourceTransactionalID:
		return "TRANSACTIONAL_ID"
	case ResourceDelegationToken:
		return "DELEGATION_TOKEN"
	case ResourceUser:
		return "USER"
	}
	return "UNKNOWN"
}

// known reports whether t is a code Kafka defines other than UNKNOWN.
func (t ResourceType) known() bool { return t > ResourceUnknown && t <= ResourceUser }

// PatternType says how an ACL's resource name matches resource names (Kafka's PatternType).
type PatternType int8

// Kafka's pattern types. Bindings are LITERAL or PREFIXED; ANY and MATCH are only
// meaningful in a Filter.
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// String returns the name as Kafka prints it ("LITERAL").
func (p PatternType) String() string {
	switch p {
	case PatternAny:
		return "ANY"
	case PatternMatch:
		return "MATCH"
	case PatternLiteral:
		return "LITERAL"
	case PatternPrefixed:
		return "PREFIXED"
	}
	return "UNKNOWN"
}

func (p PatternType) known() bool { return p > PatternUnknown && p <= PatternPrefixed }

// Operation is what an ACL allows or denies (Kafka's AclOperation).
type Operation int8

// Kafka's operations. OpAny is only meaningful in a Filter; an ACL for OpAll covers every
// operation.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
	OpTwoPhaseCommit  Operation = 15
)

// String returns the name as Kafka prints it ("DESCRIBE_CONFIGS").
func (o Operation) String() string {
	switch o {
	case OpAny:
		return "ANY"
	case OpAll:
		return "ALL"
	case OpRead:
		return "READ"
	case OpWrite:
		return "WRITE"
	case OpCreate:
		return "CREATE"
	case OpDelete:
		return "DELETE"
	case OpAlter:
		return "ALTER"
	case OpDescribe:
		return "DESCRIBE"
	case OpClusterAction:
		return "CLUSTER_ACTION"
	case OpDescribeConfigs:
		return "DESCRIBE_CONFIGS"
	case OpAlterConfigs:
		return "ALTER_CONFIGS"
	case OpIdempotentWrite:
		return "IDEMPOTENT_WRITE"
	case OpCreateTokens:
		return "CREATE_TOKENS"
	case OpDescribeTokens:
		return "DESCRIBE_TOKENS"
	case OpTwoPhaseCommit:
		return "TWO_PHASE_COMMIT"
	}
	return "UNKNOWN"
}

func (o Operation) known() bool { return o > OpUnknown && o <= OpTwoPhaseCommit }

// Permission says whether a matching ACL allows or denies (Kafka's AclPermissionType).
type Permission int8

// Kafka's permission types. PermissionAny is only meaningful in a Filter.
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// String returns the name as Kafka prints it ("ALLOW").
func (p Permission) String() string {
	switch p {
	case PermissionAny:
		return "ANY"
	case PermissionDeny:
		return "DENY"
	case PermissionAllow:
		return "ALLOW"
	}
	return "UNKNOWN"
}

func (p Permission) known() bool { return p > PermissionUnknown && p <= PermissionAllow }
