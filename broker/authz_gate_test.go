package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

// gateAuthz is alice's requestAuthz over an authorizer holding bindings (all for any host).
func gateAuthz(t *testing.T, bindings ...acl.Binding) requestAuthz {
	t.Helper()
	a := acl.New(acl.Config{})
	for i, b := range bindings {
		b.Host = acl.Wildcard
		if err := a.Add(acl.ID{byte(i + 1)}, b); err != nil {
			t.Fatal(err)
		}
	}
	return requestAuthz{a: a, p: acl.Principal{Type: "User", Name: "alice"}, host: "127.0.0.1"}
}

// aliceMay is an ALLOW of op on the literal resource for User:alice.
func aliceMay(rt acl.ResourceType, name string, op acl.Operation) acl.Binding {
	return acl.Binding{ResourceType: rt, Name: name, PatternType: acl.PatternLiteral, Principal: "User:alice", Operation: op, Permission: acl.PermissionAllow}
}

// gateImage is an image with topics t (one partition) and __consumer_offsets.
func gateImage() *meta.Image {
	im := &meta.Image{Topics: map[string]*meta.Topic{}, TopicsByID: map[meta.UUID]*meta.Topic{}}
	for i, name := range []string{"t", "u", offsetsTopic} {
		tp := &meta.Topic{Name: name, ID: meta.UUID{byte(i + 1)}, Partitions: []meta.Partition{{Index: 0}}}
		im.Topics[name], im.TopicsByID[tp.ID] = tp, tp
	}
	return im
}

// TestGateOffsetFetchBeforeV8: a group the principal may not describe is the top-level error
// from v2 and every partition's before; a named topic it may not describe is
// TOPIC_AUTHORIZATION_FAILED with offset -1 beside the coordinator's answer, which is not
// touched when the coordinator failed the group.
func TestGateOffsetFetchBeforeV8(t *testing.T) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "g"
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}, {Topic: "u", Partitions: []int32{0, 1}}}
	for _, version := range []int16{1, 7} {
		req.Version = version
		resp := gateGroupRequest(gateAuthz(t), gateImage(), req).answer.(*kmsg.OffsetFetchResponse)
		switch version {
		case 1:
			if len(resp.Topics) != 2 || resp.Topics[1].Partitions[1].ErrorCode != kerr.GroupAuthorizationFailed.Code || resp.Topics[1].Partitions[1].Offset != -1 {
				t.Fatalf("v1 without DESCRIBE on the group: %+v", resp)
			}
		default:
			if resp.ErrorCode != kerr.GroupAuthorizationFailed.Code || len(resp.Topics) != 0 {
				t.Fatalf("v%d without DESCRIBE on the group: %+v", version, resp)
			}
		}
	}
	z := gateAuthz(t, aliceMay(acl.ResourceGroup, "g", acl.OpDescribe), aliceMay(acl.ResourceTopic, "t", acl.OpRead))
	gate := gateGroupRequest(z, gateImage(), req)
	fwd := gate.req.(*kmsg.OffsetFetchRequest)
	if gate.answer != nil || len(fwd.Topics) != 1 || fwd.Topics[0].Topic != "t" {
		t.Fatalf("the coordinator is asked %+v; want topic t alone", gate)
	}
	asked := kmsg.NewPtrOffsetFetchResponse()
	asked.Topics = []kmsg.OffsetFetchResponseTopic{{Topic: "t"}}
	gate.finish(asked)
	if len(asked.Topics) != 2 || asked.Topics[1].Topic != "u" || len(asked.Topics[1].Partitions) != 2 ||
		asked.Topics[1].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || asked.Topics[1].Partitions[0].Offset != -1 {
		t.Fatalf("answer with a topic not described: %+v", asked.Topics)
	}
	failed := kmsg.NewPtrOffsetFetchResponse()
	failed.ErrorCode = kerr.CoordinatorLoadInProgress.Code
	gate.finish(failed)
	if len(failed.Topics) != 0 {
		t.Fatalf("a group error gets topics added: %+v", failed.Topics)
	}
}

// TestGateAddPartitionsToTxn: a client's AddPartitionsToTxn needs WRITE on the id and on each
// topic; an internal topic is refused even without an authorizer, as Kafka's; one refused
// partition makes the others OPERATION_NOT_ATTEMPTED, an unknown one
// UNKNOWN_TOPIC_OR_PARTITION, and the coordinator is not asked.
func TestGateAddPartitionsToTxn(t *testing.T) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version, req.TransactionalID = 3, "tx"
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0, 7}}, {Topic: offsetsTopic, Partitions: []int32{0}}}
	codes := func(g coordGate) []int16 {
		t.Helper()
		if g.answer == nil {
			t.Fatal("the coordinator is asked; want an answer at once")
		}
		var out []int16
		for _, st := range g.answer.(*kmsg.AddPartitionsToTxnResponse).Topics {
			for _, sp := range st.Partitions {
				out = append(out, sp.ErrorCode)
			}
		}
		return out
	}
	got := codes(gateTxnRequest(requestAuthz{}, gateImage(), req))
	want := []int16{kerr.OperationNotAttempted.Code, kerr.UnknownTopicOrPartition.Code, kerr.TopicAuthorizationFailed.Code}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("without an authorizer, with an internal topic: codes %v; want %v", got, want)
	}
	got = codes(gateTxnRequest(gateAuthz(t), gateImage(), req))
	for _, c := range got {
		if c != kerr.TransactionalIDAuthorizationFailed.Code {
			t.Fatalf("without WRITE on the id: codes %v", got)
		}
	}
	req.Topics = req.Topics[:1]
	req.Topics[0].Partitions = []int32{0}
	if g := gateTxnRequest(gateAuthz(t, aliceMay(acl.ResourceTransactionalID, "tx", acl.OpWrite), aliceMay(acl.ResourceTopic, "t", acl.OpWrite)), gateImage(), req); g.answer != nil {
		t.Fatalf("with WRITE on the id and the topic: answered %+v", g.answer)
	}
}

// TestGateAddOffsetsToTxn: WRITE on the transactional id comes first, then READ on the group.
func TestGateAddOffsetsToTxn(t *testing.T) {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.Group = "tx", "g"
	for _, c := range []struct {
		z    requestAuthz
		want *kerr.Error
	}{
		{gateAuthz(t, aliceMay(acl.ResourceGroup, "g", acl.OpRead)), kerr.TransactionalIDAuthorizationFailed},
		{gateAuthz(t, aliceMay(acl.ResourceTransactionalID, "tx", acl.OpWrite)), kerr.GroupAuthorizationFailed},
		{gateAuthz(t, aliceMay(acl.ResourceTransactionalID, "tx", acl.OpWrite), aliceMay(acl.ResourceGroup, "g", acl.OpRead)), nil},
	} {
		g := gateTxnRequest(c.z, gateImage(), req)
		switch {
		case c.want == nil && g.answer != nil:
			t.Fatalf("with both ACLs: answered %+v", g.answer)
		case c.want != nil && (g.answer == nil || g.answer.(*kmsg.AddOffsetsToTxnResponse).ErrorCode != c.want.Code):
			t.Fatalf("want %v, got %+v", c.want, g.answer)
		}
	}
}

// TestAuthorizedOperations: without an authorizer every supported operation of the type; with
// one the ACLs' operations and those they imply (READ implies DESCRIBE).
func TestAuthorizedOperations(t *testing.T) {
	var none requestAuthz
	if got := none.operations(acl.ResourceGroup, "g"); got != 1<<acl.OpRead|1<<acl.OpDescribe|1<<acl.OpDelete|1<<acl.OpDescribeConfigs|1<<acl.OpAlterConfigs {
		t.Fatalf("a group's operations without an authorizer: %b", got)
	}
	z := gateAuthz(t, aliceMay(acl.ResourceTopic, "t", acl.OpRead))
	if got := z.operations(acl.ResourceTopic, "t"); got != 1<<acl.OpRead|1<<acl.OpDescribe {
		t.Fatalf("alice's operations on t with READ: %b", got)
	}
	if got := z.operations(acl.ResourceTopic, "u"); got != 0 {
		t.Fatalf("alice's operations on u without an ACL: %b", got)
	}
}
