package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclCreation is a CreateAcls creation of op on a literal topic for principal.
func aclCreation(topic, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, perm
	return c
}

// describeTopicACLs lists the ACLs that apply to topic (pattern MATCH).
func describeTopicACLs(t *testing.T, ctx context.Context, b *Broker, topic string) *kmsg.DescribeACLsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr(topic), kmsg.ACLResourcePatternTypeMatch
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, newClient(t, b))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestACLAPIs creates, describes and deletes ACLs through the wire, with Kafka's answers for
// a broker without an authorizer, a principal that may not alter the cluster, invalid
// creations and duplicates; the ACLs outlive a restart.
func TestACLAPIs(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if resp := describeTopicACLs(t, ctx, startBroker(t, io, t.TempDir()), "t"); resp.ErrorCode != kerr.SecurityDisabled.Code {
			t.Fatalf("DescribeAcls without an authorizer: error %d; want SECURITY_DISABLED", resp.ErrorCode)
		}
		locked := startBroker(t, io, t.TempDir(), "authorizer.class.name="+standardAuthorizer)
		if resp := describeTopicACLs(t, ctx, locked, "t"); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("DescribeAcls by a principal without DESCRIBE on the cluster: error %d; want CLUSTER_AUTHORIZATION_FAILED", resp.ErrorCode)
		}

		dir := t.TempDir()
		overrides := []string{"authorizer.class.name=" + standardAuthorizer, "super.users=User:ANONYMOUS"}
		b := startBroker(t, io, dir, overrides...)
		create := kmsg.NewPtrCreateACLsRequest()
		read := aclCreation("orders", "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
		deny := aclCreation("orders", "User:bob", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny)
		empty := aclCreation("", "User:carol", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
		create.Creations = []kmsg.CreateACLsRequestCreation{read, deny, read, empty}
		cresp, err := create.RequestWith(ctx, newClient(t, b))
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []int16{0, 0, 0, kerr.InvalidRequest.Code} {
			if got := cresp.Results[i].ErrorCode; got != want {
				t.Fatalf("creation %d: error %d; want %d", i, got, want)
			}
		}
		if resp := describeTopicACLs(t, ctx, b, "orders"); resp.ErrorCode != 0 || len(resp.Resources) != 1 || len(resp.Resources[0].ACLs) != 2 {
			t.Fatalf("DescribeAcls after creating 2 bindings (one twice): %+v", resp)
		}

		if err := b.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		b = startBroker(t, io, dir, overrides...)
		if resp := describeTopicACLs(t, ctx, b, "orders"); len(resp.Resources) != 1 || len(resp.Resources[0].ACLs) != 2 {
			t.Fatalf("DescribeAcls after a restart: %+v; want the 2 bindings", resp)
		}

		del := kmsg.NewPtrDeleteACLsRequest()
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("orders"), kmsg.ACLResourcePatternTypeLiteral
		f.Principal, f.Operation, f.PermissionType = kmsg.StringPtr("User:alice"), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		del.Filters = []kmsg.DeleteACLsRequestFilter{f}
		dresp, err := del.RequestWith(ctx, newClient(t, b))
		if err != nil {
			t.Fatal(err)
		}
		if r := dresp.Results[0]; r.ErrorCode != 0 || len(r.MatchingACLs) != 1 || r.MatchingACLs[0].Principal != "User:alice" {
			t.Fatalf("DeleteAcls of alice's binding: %+v", r)
		}
		resp := describeTopicACLs(t, ctx, b, "orders")
		if len(resp.Resources) != 1 || len(resp.Resources[0].ACLs) != 1 || resp.Resources[0].ACLs[0].Principal != "User:bob" {
			t.Fatalf("DescribeAcls after deleting alice's binding: %+v; want bob's alone", resp)
		}
	})
}
