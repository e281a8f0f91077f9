package broker

// DeleteAcls (key 31), versions 1-3.
//
// Behavior: removes every ACL binding matching each filter (auth/acl.Filter semantics, MATCH
// included) with RemoveACL records committed in one batch, and lists what each filter
// matched. A filter with an undefined code fails alone with INVALID_REQUEST; one with an
// UNKNOWN code closes the connection, as Kafka cannot parse it. Needs ALTER on the cluster;
// without an authorizer, SECURITY_DISABLED.
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

var deleteACLsAPI = &api{key: kmsg.DeleteACLs, minVersion: 1, maxVersion: 3, handle: handleDeleteACLs}

func handleDeleteACLs(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DeleteACLsRequest)
	resp := kmsg.NewPtrDeleteACLsResponse()
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	filters := make([]acl.Filter, len(req.Filters))
	errs := make([]error, len(req.Filters))
	for i, f := range req.Filters {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		filters[i] = acl.Filter{ResourceType: acl.ResourceType(f.ResourceType), Name: f.ResourceName, PatternType: acl.PatternType(f.ResourcePatternType),
			Principal: f.Principal, Host: f.Host, Operation: acl.Operation(f.Operation), Permission: acl.Permission(f.PermissionType)}
		errs[i] = acl.ValidateDeleteFilter(filters[i])
	}
	if ae := aclRefusal(errs, acl.ScopeConnection); ae != nil {
		rc.reject(ae)
		return
	}
	if code, msg := rc.aclAPIRefusal(acl.OpAlter); code != nil {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code.Code, msg
		}
		rc.respond(resp)
		return
	}
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	authz := b.authz.of(b.meta.Image())
	var recs []meta.Record
	removed := map[acl.ID]bool{}
	var touched []int
	for i, f := range filters {
		var ae *acl.Error
		if errors.As(errs[i], &ae) {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = ae.Code.Code, ae.WireMessage()
			continue
		}
		for _, e := range authz.Match(f) {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			bd := e.Binding
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(bd.ResourceType), bd.Name, kmsg.ACLResourcePatternType(bd.PatternType)
			m.Principal, m.Host, m.Operation, m.PermissionType = bd.Principal, bd.Host, kmsg.ACLOperation(bd.Operation), kmsg.ACLPermissionType(bd.Permission)
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			if !removed[e.ID] {
				removed[e.ID] = true
				recs = append(recs, meta.Record{Type: meta.TypeRemoveACL, ACLID: meta.UUID(e.ID)})
			}
		}
		touched = append(touched, i)
	}
	if len(recs) > 0 {
		if _, err := b.meta.Commit(recs); err != nil {
			msg := kmsg.StringPtr(fmt.Sprintf("commit %d ACL removals: %v", len(recs), err))
			for _, i := range touched {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage, resp.Results[i].MatchingACLs = kerr.UnknownServerError.Code, msg, nil
			}
		}
	}
	rc.respond(resp)
}
