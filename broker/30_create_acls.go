package broker

// CreateAcls (key 30), versions 1-3.
//
// Behavior: validates each creation as Kafka's AclControlManager (auth/acl.ValidateCreation:
// an entry error fails that creation, an ANY code every creation, an UNKNOWN code closes the
// connection) and commits the valid new bindings as ACL records in one batch; a binding that
// exists already succeeds without a second record. Needs ALTER on the cluster; without an
// authorizer, SECURITY_DISABLED.
//
// Version notes: v0 is gone from Kafka 4; v2 is flexible.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

var createACLsAPI = &api{key: kmsg.CreateACLs, minVersion: 1, maxVersion: 3, keepsRequest: true, handle: handleCreateACLs}

func handleCreateACLs(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.CreateACLsRequest)
	resp := kmsg.NewPtrCreateACLsResponse()
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	failAll := func(code *kerr.Error, msg *string) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code.Code, msg
		}
		rc.respond(resp)
	}
	bindings := make([]acl.Binding, len(req.Creations))
	errs := make([]error, len(req.Creations))
	for i, c := range req.Creations {
		bindings[i] = acl.Binding{ResourceType: acl.ResourceType(c.ResourceType), Name: c.ResourceName, PatternType: acl.PatternType(c.ResourcePatternType),
			Principal: c.Principal, Host: c.Host, Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType)}
		errs[i] = acl.ValidateCreation(bindings[i])
	}
	if ae := aclRefusal(errs, acl.ScopeConnection); ae != nil {
		rc.reject(ae)
		return
	}
	if ae := aclRefusal(errs, acl.ScopeRequest); ae != nil {
		failAll(ae.Code, ae.WireMessage())
		return
	}
	if code, msg := rc.aclAPIRefusal(acl.OpAlter); code != nil {
		failAll(code, msg)
		return
	}
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	authz := b.authz.of(b.meta.Image())
	var recs []meta.Record
	var committed []int
	seen := map[acl.Binding]bool{}
	for i, bd := range bindings {
		var ae *acl.Error
		if errors.As(errs[i], &ae) {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = ae.Code.Code, ae.WireMessage()
			continue
		}
		if _, exists := authz.Find(bd); exists || seen[bd] {
			continue
		}
		seen[bd] = true
		recs = append(recs, meta.Record{Type: meta.TypeACL, ACLID: meta.NewUUID(), ACL: aclOf(bd)})
		committed = append(committed, i)
	}
	if len(recs) > 0 {
		if _, err := b.meta.Commit(recs); err != nil {
			msg := kmsg.StringPtr(fmt.Sprintf("commit %d ACL records: %v", len(recs), err))
			for _, i := range committed {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.UnknownServerError.Code, msg
			}
		}
	}
	rc.respond(resp)
}
