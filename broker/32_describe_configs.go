package broker

// DescribeConfigs (key 32), versions 1-4.
//
// Behavior: topic resources list every topic config Kafka describes (topicConfigDefs), with the
// topic's override (DYNAMIC_TOPIC_CONFIG) or the broker default (DEFAULT_CONFIG), and synonyms
// when asked. Broker resources (by node id) list the broker configs this node runs with
// (brokerConfigDefs, but synonyms and ignored keys), read-only: STATIC_BROKER_CONFIG for keys
// set in server.properties or by an override, DEFAULT_CONFIG for the rest. Dynamic broker
// configs and broker loggers are not supported and say so.
//
// Version notes: v3 adds config types (documentation is not sent); v4 is flexible.

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's config sources (DescribeConfigsResponse.ConfigSource).
const (
	sourceDynamicTopic = kmsg.ConfigSourceDynamicTopicConfig
	sourceStaticBroker = kmsg.ConfigSourceStaticBrokerConfig
	sourceDefault      = kmsg.ConfigSourceDefaultConfig
)

var describeConfigsAPI = &api{key: kmsg.DescribeConfigs, minVersion: 1, maxVersion: 4, handle: handleDescribeConfigs}

func handleDescribeConfigs(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DescribeConfigsRequest)
	resp := kmsg.NewPtrDescribeConfigsResponse()
	im := b.meta.Image()
	for _, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType = res.ResourceType
		rr.ResourceName = res.ResourceName
		want := func(name string) bool {
			return res.ConfigNames == nil || contains(res.ConfigNames, name)
		}
		switch kmsg.ConfigResourceType(res.ResourceType) {
		case kmsg.ConfigResourceTypeTopic:
			t := im.Topics[res.ResourceName]
			if t == nil {
				rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rr.ErrorMessage = kmsg.StringPtr("Topic " + res.ResourceName + " does not exist")
				break
			}
			for _, d := range topicConfigDefs {
				if !want(d.name) {
					continue
				}
				v, override := b.cfg.effectiveTopicConfig(t.Configs, d.name)
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name = d.name
				c.Value = kmsg.StringPtr(v)
				c.Source = configSource(override)
				c.ConfigType = d.kind.configType()
				if req.IncludeSynonyms {
					if override {
						s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
						s.Name, s.Value, s.Source = d.name, kmsg.StringPtr(v), sourceDynamicTopic
						c.ConfigSynonyms = append(c.ConfigSynonyms, s)
					}
					if d.brokerKey != "" {
						s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
						s.Name, s.Value, s.Source = d.brokerKey, kmsg.StringPtr(d.defaultValue(&b.cfg)), sourceDefault
						c.ConfigSynonyms = append(c.ConfigSynonyms, s)
					}
				}
				rr.Configs = append(rr.Configs, c)
			}
		case kmsg.ConfigResourceTypeBroker:
			if res.ResourceName != "" && res.ResourceName != strconv.Itoa(int(b.cfg.NodeID)) {
				rr.ErrorCode = kerr.InvalidRequest.Code
				rr.ErrorMessage = kmsg.StringPtr("Unexpected broker id, expected " + strconv.Itoa(int(b.cfg.NodeID)) + " or empty string, but received " + res.ResourceName)
				break
			}
			for _, c := range b.brokerConfigEntries() {
				if want(c.Name) {
					rr.Configs = append(rr.Configs, c)
				}
			}
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			rr.ErrorMessage = kmsg.StringPtr("ringbroker does not describe configs of resource type " + strconv.Itoa(int(res.ResourceType)))
		}
		resp.Resources = append(resp.Resources, rr)
	}
	rc.respond(resp)
}

// configSource is the source of a topic config: a topic override or the default.
func configSource(override bool) kmsg.ConfigSource {
	if override {
		return sourceDynamicTopic
	}
	return sourceDefault
}

// configType maps our kinds to Kafka's DescribeConfigs config types.
func (k configKind) configType() kmsg.ConfigType {
	switch k {
	case kindBool:
		return kmsg.ConfigTypeBoolean
	case kindString:
		return kmsg.ConfigTypeString
	case kindShort:
		return kmsg.ConfigTypeShort
	case kindInt:
		return kmsg.ConfigTypeInt
	case kindLong:
		return kmsg.ConfigTypeLong
	case kindDouble:
		return kmsg.ConfigTypeDouble
	case kindList:
		return kmsg.ConfigTypeList
	}
	return kmsg.ConfigTypeUnknown
}

// brokerConfigEntries lists the broker configs DescribeConfigs shows for this node: every key
// of brokerConfigDefs but synonyms and ignored ones, with its current value (null when unset).
func (b *Broker) brokerConfigEntries() []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range brokerConfigDefs {
		if d.get == nil {
			continue
		}
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name = d.name
		if v := d.get(&b.cfg); v != "" {
			rc.Value = kmsg.StringPtr(v)
		}
		rc.ReadOnly = true
		rc.Source = sourceDefault
		if b.cfg.isExplicit(d.name) {
			rc.Source = sourceStaticBroker
		}
		rc.ConfigType = d.kind.configType()
		out = append(out, rc)
	}
	return out
}
