package broker

// AlterConfigs (key 33), versions 0-2.
//
// Behavior: the older, non-incremental form of IncrementalAlterConfigs (sarama and kafka-python
// use it): each resource's configs replace all of its overrides, so a key not listed is
// deleted. Topic resources alter topic overrides, broker resources (a node id, or "" for the
// cluster-wide default) the dynamic broker configs, client metrics resources the KIP-714
// subscriptions, all validated and committed as IncrementalAlterConfigs does them (its SETs
// and DELETEs); validate_only checks without committing. A null value is INVALID_REQUEST;
// other resource types are refused. Authorization is IncrementalAlterConfigs': ALTER_CONFIGS
// on the topic or the cluster.
//
// Version notes: v1 is the same as v0; v2 is flexible.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

var alterConfigsAPI = &api{key: kmsg.AlterConfigs, minVersion: 0, maxVersion: 2, keepsRequest: true, handle: handleAlterConfigs}

func handleAlterConfigs(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.AlterConfigsRequest)
	resp := kmsg.NewPtrAlterConfigsResponse()
	for _, ir := range b.alterAll(len(req.Resources), func(i int) kmsg.IncrementalAlterConfigsRequestResource {
		return b.replaceConfigsOps(req.Resources[i])
	}, req.ValidateOnly, rc.authorizer(), false) {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = ir.ResourceType, ir.ResourceName, ir.ErrorCode, ir.ErrorMessage
		resp.Resources = append(resp.Resources, rr)
	}
	rc.respond(resp)
}

// replaceConfigsOps turns an AlterConfigs resource into the IncrementalAlterConfigs operations
// with the same outcome: a SET for each config listed and a DELETE for each current override
// (topic config, dynamic broker config or client metrics key of the resource) that is not.
func (b *Broker) replaceConfigsOps(res kmsg.AlterConfigsRequestResource) kmsg.IncrementalAlterConfigsRequestResource {
	out := kmsg.NewIncrementalAlterConfigsRequestResource()
	out.ResourceType, out.ResourceName = res.ResourceType, res.ResourceName
	listed := map[string]bool{}
	for _, c := range res.Configs {
		listed[c.Name] = true
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Op, op.Value = c.Name, opSet, c.Value
		out.Configs = append(out.Configs, op)
	}
	im := b.meta.Image()
	var cur map[string]string
	switch res.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if t := im.Topics[res.ResourceName]; t != nil {
			cur = t.Configs
		}
	case kmsg.ConfigResourceTypeBroker:
		cur = im.BrokerConfigs[res.ResourceName]
	case kmsg.ConfigResourceTypeClientMetrics:
		cur = im.ClientMetrics[res.ResourceName]
	}
	for k := range cur {
		if !listed[k] {
			op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			op.Name, op.Op = k, opDelete
			out.Configs = append(out.Configs, op)
		}
	}
	return out
}
