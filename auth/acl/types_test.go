package acl

import "testing"

// TestEnumCodesAndNames holds every enumeration to Kafka's wire code and printed name, and an
// undefined code to UNKNOWN, as Kafka's fromCode maps it.
func TestEnumCodesAndNames(t *testing.T) {
	tests := []struct {
		got   interface{ String() string }
		code  int8
		wcode int8
		wname string
	}{
		{ResourceUnknown, int8(ResourceUnknown), 0, "UNKNOWN"},
		{ResourceAny, int8(ResourceAny), 1, "ANY"},
		{ResourceTopic, int8(ResourceTopic), 2, "TOPIC"},
		{ResourceGroup, int8(ResourceGroup), 3, "GROUP"},
		{ResourceCluster, int8(ResourceCluster), 4, "CLUSTER"},
		{ResourceTransactionalID, int8(ResourceTransactionalID), 5, "TRANSACTIONAL_ID"},
		{ResourceDelegationToken, int8(ResourceDelegationToken), 6, "DELEGATION_TOKEN"},
		{ResourceUser, int8(ResourceUser), 7, "USER"},
		{ResourceType(8), 8, 8, "UNKNOWN"},
		{ResourceType(-1), -1, -1, "UNKNOWN"},

		{PatternUnknown, int8(PatternUnknown), 0, "UNKNOWN"},
		{PatternAny, int8(PatternAny), 1, "ANY"},
		{PatternMatch, int8(PatternMatch), 2, "MATCH"},
		{PatternLiteral, int8(PatternLiteral), 3, "LITERAL"},
		{PatternPrefixed, int8(PatternPrefixed), 4, "PREFIXED"},
		{PatternType(5), 5, 5, "UNKNOWN"},

		{OpUnknown, int8(OpUnknown), 0, "UNKNOWN"},
		{OpAny, int8(OpAny), 1, "ANY"},
		{OpAll, int8(OpAll), 2, "ALL"},
		{OpRead, int8(OpRead), 3, "READ"},
		{OpWrite, int8(OpWrite), 4, "WRITE"},
		{OpCreate, int8(OpCreate), 5, "CREATE"},
		{OpDelete, int8(OpDelete), 6, "DELETE"},
		{OpAlter, int8(OpAlter), 7, "ALTER"},
		{OpDescribe, int8(OpDescribe), 8, "DESCRIBE"},
		{OpClusterAction, int8(OpClusterAction), 9, "CLUSTER_ACTION"},
		{OpDescribeConfigs, int8(OpDescribeConfigs), 10, "DESCRIBE_CONFIGS"},
		{OpAlterConfigs, int8(OpAlterConfigs), 11, "ALTER_CONFIGS"},
		{OpIdempotentWrite, int8(OpIdempotentWrite), 12, "IDEMPOTENT_WRITE"},
		{OpCreateTokens, int8(OpCreateTokens), 13, "CREATE_TOKENS"},
		{OpDescribeTokens, int8(OpDescribeTokens), 14, "DESCRIBE_TOKENS"},
		{OpTwoPhaseCommit, int8(OpTwoPhaseCommit), 15, "TWO_PHASE_COMMIT"},
		{Operation(16), 16, 16, "UNKNOWN"},

		{PermissionUnknown, int8(PermissionUnknown), 0, "UNKNOWN"},
		{PermissionAny, int8(PermissionAny), 1, "ANY"},
		{PermissionDeny, int8(PermissionDeny), 2, "DENY"},
		{PermissionAllow, int8(PermissionAllow), 3, "ALLOW"},
		{Permission(4), 4, 4, "UNKNOWN"},
	}
	for _, tt := range tests {
		if tt.code != tt.wcode {
			t.Errorf("%s: code %d, want %d", tt.wname, tt.code, tt.wcode)
		}
		if s := tt.got.String(); s != tt.wname {
			t.Errorf("code %d: String() = %q, want %q", tt.code, s, tt.wname)
		}
	}
}
