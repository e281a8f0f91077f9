package broker

// IncrementalAlterConfigs (key 44), versions 0-1.
//
// Behavior: topic configs: SET, DELETE, APPEND and SUBTRACT (the last two for list configs such as
// cleanup.policy), validated like CreateTopics, committed as Config records in the metadata log.
// validate_only checks without committing. Once committed, the new configuration is applied to
// the topic's open logs (retention, segment, flush and group-commit settings take effect live).
// Broker resources (a node id, or "" for the cluster-wide default) alter the dynamic broker
// configs (dynconf.go): committed as BrokerConfig records, applied live by every node; read-only
// keys are INVALID_REQUEST ("Cannot update these configs dynamically"), as Kafka answers.
// Broker loggers change the root logger's level live (loggers.go). Client metrics resources
// (KIP-714 subscriptions: metrics, interval.ms, match) are validated whole as Kafka's
// controller validates them and committed as ClientMetricsConfig records; deleting every key
// removes the subscription (clientmetricsconfig.go). Authorization, as Kafka's: ALTER_CONFIGS on
// the topic (TOPIC_AUTHORIZATION_FAILED), on the cluster for brokers, broker loggers and client
// metrics (CLUSTER_AUTHORIZATION_FAILED), with Kafka's message, before anything else of the
// resource.
//
// Version notes: v1 is flexible.

import (
	"maps"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
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
	resp.Resources = b.alterAll(len(req.Resources), func(i int) kmsg.IncrementalAlterConfigsRequestResource { return req.Resources[i] }, req.ValidateOnly,
		rc.authorizer(), true)
	rc.respond(resp)
}

// alterAll applies n resources, the ith given by resource, one after the other under
// controllerMu (so that each is built from and checked against the image the previous one
// left), and answers each. It first catches up with the active controller, which is what
// Kafka checks these requests against: this node's image may not have a topic just created
// through another broker yet. A resource the principal may not ALTER_CONFIGS is refused first,
// as Kafka's ControllerApis.authorizeAlterResource (broker loggers only when loggers is set:
// the legacy AlterConfigs refuses them as an unknown type before any authorization).
func (b *Broker) alterAll(n int, resource func(i int) kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool,
	z requestAuthz, loggers bool) []kmsg.IncrementalAlterConfigsResponseResource {
	out := make([]kmsg.IncrementalAlterConfigsResponseResource, 0, n)
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	_, syncErr := b.meta.CatchUp()
	for i := range n {
		res := resource(i)
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType = res.ResourceType
		rr.ResourceName = res.ResourceName
		if loggers || res.ResourceType != kmsg.ConfigResourceTypeBrokerLogger {
			if code := z.configRefusal(acl.OpAlterConfigs, res.ResourceType, res.ResourceName); code != nil {
				rr.ErrorCode, rr.ErrorMessage = code.Code, kmsg.StringPtr(authzMessage(code))
				out = append(out, rr)
				continue
			}
		}
		var code *kerr.Error
		var msg string
		if syncErr != nil {
			code, msg = kerr.UnknownServerError, syncErr.Error()
		} else {
			code, msg = b.alterConfigs(res, validateOnly)
		}
		if code != nil {
			rr.ErrorCode = code.Code
			rr.ErrorMessage = kmsg.StringPtr(msg)
		}
		out = append(out, rr)
	}
	return out
}

// alterConfigs applies one resource's operations; the caller holds controllerMu.
func (b *Broker) alterConfigs(res kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (*kerr.Error, string) {
	switch kmsg.ConfigResourceType(res.ResourceType) {
	case kmsg.ConfigResourceTypeTopic:
	case kmsg.ConfigResourceTypeBroker:
		return b.alterBrokerConfigs(res, validateOnly)
	case kmsg.ConfigResourceTypeBrokerLogger:
		return b.alterLoggers(res, validateOnly)
	case kmsg.ConfigResourceTypeClientMetrics:
		return b.alterClientMetrics(res, validateOnly)
	case kmsg.ConfigResourceTypeGroupConfig:
		return b.alterGroupConfigs(res, validateOnly)
	default:
		return kerr.InvalidRequest, "unsupported resource type"
	}
	im := b.meta.Image()
	t := im.Topics[res.ResourceName]
	if t == nil {
		return kerr.UnknownTopicOrPartition, "Topic " + res.ResourceName + " does not exist"
	}
	for _, c := range res.Configs {
		if _, ok := lookupTopicConfig(c.Name); !ok {
			return kerr.InvalidConfig, "Unknown topic config name: " + c.Name
		}
	}
	next, code, msg := applyConfigOps(t.Configs, res.Configs, func(next map[string]string, name string) (string, bool) {
		d, _ := lookupTopicConfig(name)
		cur, _ := b.live().effectiveTopicConfig(next, name)
		return cur, d.kind == kindList
	})
	if code != nil {
		return code, msg
	}
	for _, c := range res.Configs {
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

// applyConfigOps applies IncrementalAlterConfigs operations to a copy of cur and returns it,
// or the error code and message of the first operation Kafka refuses. listValue gives a key's
// value before an APPEND or SUBTRACT (its default when unset in next), and whether the key is
// a list config, the only kind those operations take.
func applyConfigOps(cur map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig,
	listValue func(next map[string]string, name string) (string, bool)) (map[string]string, *kerr.Error, string) {
	next := maps.Clone(cur)
	if next == nil {
		next = map[string]string{}
	}
	seen := map[string]bool{}
	for _, c := range ops {
		if seen[c.Name] {
			return nil, kerr.InvalidRequest, "Error due to duplicate config keys: " + c.Name
		}
		seen[c.Name] = true
		switch c.Op {
		case opSet:
			if c.Value == nil {
				return nil, kerr.InvalidRequest, "Null value not supported for: " + c.Name
			}
			next[c.Name] = *c.Value
		case opDelete:
			delete(next, c.Name)
		case opAppend, opSubtract:
			v, isList := listValue(next, c.Name)
			if !isList {
				return nil, kerr.InvalidConfig, "Config value append/subtract is not allowed for config key " + c.Name + " which is not a list"
			}
			next[c.Name] = strings.Join(applyListOp(splitList(v), c.Op, deref(c.Value)), ",")
		default:
			return nil, kerr.InvalidRequest, "Unknown config operation"
		}
	}
	return next, nil, ""
}

// applyListOp appends the items of val to items, or subtracts them, as IncrementalAlterConfigs'
// APPEND and SUBTRACT of list configs.
func applyListOp(items []string, op kmsg.IncrementalAlterConfigOp, val string) []string {
	for _, v := range splitList(val) {
		if op == opAppend && !contains(items, v) {
			items = append(items, v)
		}
		if op == opSubtract {
			items = remove(items, v)
		}
	}
	return items
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
