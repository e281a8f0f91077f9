package broker

// DescribeAcls (key 29), versions 1-3.
//
// Behavior: lists the ACL bindings matching the filter (ResourcePatternFilter and
// AccessControlEntryFilter semantics, MATCH included; auth/acl), grouped by resource pattern
// in Kafka's order. Needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED); without an
// authorizer, SECURITY_DISABLED. A filter with an UNKNOWN code is a request Kafka cannot parse:
// the connection is closed.
//
// Version notes: v0 (no pattern type) is gone from Kafka 4; v2 is flexible.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
)

var describeACLsAPI = &api{key: kmsg.DescribeACLs, minVersion: 1, maxVersion: 3, handle: handleDescribeACLs}

func handleDescribeACLs(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DescribeACLsRequest)
	resp := kmsg.NewPtrDescribeACLsResponse()
	f := acl.Filter{ResourceType: acl.ResourceType(req.ResourceType), Name: req.ResourceName, PatternType: acl.PatternType(req.ResourcePatternType),
		Principal: req.Principal, Host: req.Host, Operation: acl.Operation(req.Operation), Permission: acl.Permission(req.PermissionType)}
	if err := acl.ValidateDescribeFilter(f); err != nil {
		rc.reject(err)
		return
	}
	if code, msg := rc.aclAPIRefusal(acl.OpDescribe); code != nil {
		resp.ErrorCode, resp.ErrorMessage = code.Code, msg
	} else {
		var cur *kmsg.DescribeACLsResponseResource
		for _, bd := range b.authz.of(b.meta.Image()).Describe(f) {
			if cur == nil || cur.ResourceType != kmsg.ACLResourceType(bd.ResourceType) || cur.ResourceName != bd.Name || cur.ResourcePatternType != kmsg.ACLResourcePatternType(bd.PatternType) {
				res := kmsg.NewDescribeACLsResponseResource()
				res.ResourceType, res.ResourceName, res.ResourcePatternType = kmsg.ACLResourceType(bd.ResourceType), bd.Name, kmsg.ACLResourcePatternType(bd.PatternType)
				resp.Resources = append(resp.Resources, res)
				cur = &resp.Resources[len(resp.Resources)-1]
			}
			a := kmsg.NewDescribeACLsResponseResourceACL()
			a.Principal, a.Host, a.Operation, a.PermissionType = bd.Principal, bd.Host, kmsg.ACLOperation(bd.Operation), kmsg.ACLPermissionType(bd.Permission)
			cur.ACLs = append(cur.ACLs, a)
		}
	}
	rc.respond(resp)
}
