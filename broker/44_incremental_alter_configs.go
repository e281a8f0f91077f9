package broker

// IncrementalAlterConfigs (key 44), versions 0-1.
//
// Behavior: topic configs: SET, DELETE, APPEND and SUBTRACT (the last two for list configs such as
// cleanup.policy), validated like CreateTopics, committed as Config records in the metadata log.
// validate_only checks without committing. Once committed, the new configuration is applied to
// the topic's open logs (retention, segment, flush and group-commit settings take effect live).
// Dynamic broker configs are not supported yet: setting one is refused with INVALID_REQUEST;
// deleting one succeeds and changes nothing, as none is ever set (kafka-reassign-partitions
// clears the replication throttles this way after every reassignment).
//
// Version notes: v1 is flexible.

import (
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

var incrementalAlterConfigsAPI = &api{key: kmsg.IncrementalAlterConfigs, minVersion: 0, maxVersion: 1, keepsRequest: true, handle: handleIncrementalAlterConfigs}

// The IncrementalAlterConfigs operations.
const (
	opSet      = kmsg.IncrementalAlterConfigOpSet
	opDelete   = kmsg.IncrementalAlterConfigOpDelete
	opAppend   = kmsg.IncrementalAlterConfigOpAppend
	opSubtract = kmsg.IncrementalAlterConfigOpSubtract
)

func handleIncrementalAlterConfigs(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.IncrementalAlterConfigsRequest)
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	b.controllerMu.Lock()
	for _, res := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType = res.ResourceType
		rr.ResourceName = res.ResourceName
		code, msg := b.alterTopicConfigs(res, req.ValidateOnly)
		if code != nil {
			rr.ErrorCode = code.Code
			rr.ErrorMessage = kmsg.StringPtr(msg)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	b.controllerMu.Unlock()
	rc.respond(resp)
}

// alterTopicConfigs applies one resource's operations; the caller holds controllerMu.
func (b *Broker) alterTopicConfigs(res kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (*kerr.Error, string) {
	switch kmsg.ConfigResourceType(res.ResourceType) {
	case kmsg.ConfigResourceTypeTopic:
	case kmsg.ConfigResourceTypeBroker:
		return deleteBrokerConfigs(res)
	case kmsg.ConfigResourceTypeBrokerLogger:
		return kerr.InvalidRequest, "dynamic broker configs are not supported by ringbroker yet; set them in server.properties or with --override"
	default:
		return kerr.InvalidRequest, "unsupported resource type"
	}
	im := b.meta.Image()
	t := im.Topics[res.ResourceName]
	if t == nil {
		return kerr.UnknownTopicOrPartition, "Topic " + res.ResourceName + " does not exist"
	}
	next := map[string]string{}
	for k, v := range t.Configs {
		next[k] = v
	}
	seen := map[string]bool{}
	for _, c := range res.Configs {
		if seen[c.Name] {
			return kerr.InvalidRequest, "Error due to duplicate config keys: " + c.Name
		}
		seen[c.Name] = true
		d, ok := lookupTopicConfig(c.Name)
		if !ok {
			return kerr.InvalidConfig, "Unknown topic config name: " + c.Name
		}
		switch c.Op {
		case opSet:
			if c.Value == nil {
				return kerr.InvalidRequest, "Null value not supported for: " + c.Name
			}
			next[c.Name] = *c.Value
		case opDelete:
			delete(next, c.Name)
		case opAppend, opSubtract:
			if d.kind != kindList {
				return kerr.InvalidConfig, "Config value append/subtract is not allowed for config key " + c.Name + " which is not a list"
			}
			cur, _ := b.cfg.effectiveTopicConfig(next, c.Name)
			items := splitList(cur)
			for _, v := range splitList(deref(c.Value)) {
				if c.Op == opAppend && !contains(items, v) {
					items = append(items, v)
				}
				if c.Op == opSubtract {
					items = remove(items, v)
				}
			}
			next[c.Name] = strings.Join(items, ",")
		default:
			return kerr.InvalidRequest, "Unknown config operation"
		}
		if v, ok := next[c.Name]; ok {
			if err := b.validateTopicConfigValue(c.Name, v); err != nil {
				return kerr.InvalidConfig, err.Error()
			}
		}
	}
	if validateOnly {
		return nil, ""
	}
	var recs []meta.Record
	for k, v := range next {
		if old, ok := t.Configs[k]; !ok || old != v {
			val := v
			recs = append(recs, meta.Record{Type: meta.TypeConfig, TopicID: t.ID, ConfigKey: k, ConfigValue: &val})
		}
	}
	for k := range t.Configs {
		if _, ok := next[k]; !ok {
			recs = append(recs, meta.Record{Type: meta.TypeConfig, TopicID: t.ID, ConfigKey: k})
		}
	}
	if len(recs) == 0 {
		return nil, ""
	}
	if _, err := b.meta.Commit(recs); err != nil {
		return kerr.UnknownServerError, err.Error()
	}
	b.applyTopicLogConfig(t.Name)
	return nil, ""
}

// replicationThrottleKeys are Kafka's dynamic broker configs of replication quotas, which
// ringbroker does not have (see deleteBrokerConfigs).
var replicationThrottleKeys = []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate",
	"replica.alter.log.dirs.io.max.bytes.per.second"}

// deleteBrokerConfigs answers a broker resource's operations. With no dynamic broker config
// ever set, deleting a known key is done already; any other operation is refused.
func deleteBrokerConfigs(res kmsg.IncrementalAlterConfigsRequestResource) (*kerr.Error, string) {
	if res.ResourceName != "" {
		if _, err := strconv.ParseInt(res.ResourceName, 10, 32); err != nil {
			return kerr.InvalidRequest, "Invalid broker id " + res.ResourceName
		}
	}
	for _, c := range res.Configs {
		if c.Op != opDelete {
			return kerr.InvalidRequest, "dynamic broker configs are not supported by ringbroker yet; set them in server.properties or with --override"
		}
		if _, ok := lookupBrokerConfig(c.Name); !ok && !contains(replicationThrottleKeys, c.Name) {
			return kerr.InvalidConfig, "Unknown broker config name: " + c.Name
		}
	}
	return nil, ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func remove(list []string, s string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
