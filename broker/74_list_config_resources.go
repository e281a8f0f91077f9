package broker

// ListConfigResources (key 74), versions 0-1.
//
// Behavior: lists the config resources of the types asked for, as Kafka 4.1's
// handleListConfigResources: v0 (ListClientMetricsResources before KIP-1142) lists the client
// metrics subscriptions; v1 takes resource types (none: every type it supports, TOPIC, BROKER,
// BROKER_LOGGER, CLIENT_METRICS and GROUP) and lists the groups that have configs, client
// metrics subscriptions, a broker and a broker
// logger resource per unfenced broker, and every topic, in that order. A type it does not
// support is UNSUPPORTED_VERSION with nothing listed. Authorization: DESCRIBE_CONFIGS on the
// cluster, else CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes: v1 adds the resource types of the request and of each resource.

import (
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
)

var listConfigResourcesAPI = &api{key: kmsg.ListConfigResources, minVersion: 0, maxVersion: 1, handle: handleListConfigResources}

// listableConfigTypes are the resource types ListConfigResources v1 lists, Kafka's
// ListConfigResourcesRequest.supportedResourceTypes; v0 lists client metrics only.
var listableConfigTypes = []kmsg.ConfigResourceType{
	kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger,
	kmsg.ConfigResourceTypeClientMetrics, kmsg.ConfigResourceTypeGroupConfig,
}

func handleListConfigResources(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.ListConfigResourcesRequest)
	resp := kmsg.NewPtrListConfigResourcesResponse()
	if !rc.allowedCluster(acl.OpDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		rc.respond(resp)
		return
	}
	supported := listableConfigTypes
	if req.Version == 0 {
		supported = []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeClientMetrics}
	}
	asked := map[kmsg.ConfigResourceType]bool{}
	for _, t := range req.ResourceTypes {
		if !slices.Contains(supported, kmsg.ConfigResourceType(t)) {
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			rc.respond(resp)
			return
		}
		asked[kmsg.ConfigResourceType(t)] = true
	}
	if len(asked) == 0 {
		for _, t := range supported {
			asked[t] = true
		}
	}
	im := b.meta.Image()
	add := func(t kmsg.ConfigResourceType, names ...string) {
		if !asked[t] {
			return
		}
		for _, n := range names {
			c := kmsg.NewListConfigResourcesResponseConfigResource()
			c.Name, c.Type = n, int8(t)
			resp.ConfigResources = append(resp.ConfigResources, c)
		}
	}
	var brokers []string
	for _, id := range slices.Sorted(maps.Keys(im.Brokers)) {
		if !im.Brokers[id].Fenced {
			brokers = append(brokers, strconv.Itoa(int(id)))
		}
	}
	add(kmsg.ConfigResourceTypeGroupConfig, slices.Sorted(maps.Keys(im.GroupConfigs))...)
	add(kmsg.ConfigResourceTypeClientMetrics, slices.Sorted(maps.Keys(im.ClientMetrics))...)
	add(kmsg.ConfigResourceTypeBrokerLogger, brokers...)
	add(kmsg.ConfigResourceTypeBroker, brokers...)
	add(kmsg.ConfigResourceTypeTopic, im.SortedTopicNames()...)
	rc.respond(resp)
}
