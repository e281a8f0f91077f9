package broker

// DescribeClientQuotas (key 48), versions 0-1.
//
// Behavior: lists the client quotas whose entities match the filter components (a name, the
// default, or any name of an entity type; strict keeps entities without other types), as
// Kafka's ClientQuotasImage (quota.Store.Describe), with INVALID_REQUEST or
// UNSUPPORTED_VERSION for a malformed filter. Needs DESCRIBE_CONFIGS on the cluster.
//
// Version notes: v1 is flexible.

import (
	"errors"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/quota"
)

var describeClientQuotasAPI = &api{key: kmsg.DescribeClientQuotas, minVersion: 0, maxVersion: 1, handle: handleDescribeClientQuotas}

func handleDescribeClientQuotas(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DescribeClientQuotasRequest)
	resp := kmsg.NewPtrDescribeClientQuotasResponse()
	if !rc.allowedCluster(acl.OpDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		rc.respond(resp)
		return
	}
	f := quota.Filter{Strict: req.Strict}
	for _, c := range req.Components {
		f.Components = append(f.Components, quota.FilterComponent{EntityType: c.EntityType, MatchType: quota.MatchType(c.MatchType), Match: c.Match})
	}
	b.clientQuotas.sync(b.meta.Image())
	entries, err := b.clientQuotas.store.Describe(f)
	if err != nil {
		var qe *quota.Error
		if errors.As(err, &qe) {
			resp.ErrorCode, resp.ErrorMessage = qe.Code.Code, kmsg.StringPtr(qe.Message)
		} else {
			resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
		}
		rc.respond(resp)
		return
	}
	// Entries is nullable (null means an error): an empty answer is an empty array.
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	for _, e := range entries {
		re := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range e.Entity.Parts() {
			re.Entity = append(re.Entity, kmsg.DescribeClientQuotasResponseEntryEntity{Type: p.Type, Name: p.Name})
		}
		for _, k := range slices.Sorted(maps.Keys(e.Values)) {
			re.Values = append(re.Values, kmsg.DescribeClientQuotasResponseEntryValue{Key: k, Value: e.Values[k]})
		}
		resp.Entries = append(resp.Entries, re)
	}
	rc.respond(resp)
}
