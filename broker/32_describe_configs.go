package broker

// DescribeConfigs (key 32), versions 1-4.
//
// Behavior: topic resources list every topic config Kafka describes (topicConfigDefs), with the
// topic's override (DYNAMIC_TOPIC_CONFIG) or the broker default in force, whose source is that
// of the broker key: DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG
// or DEFAULT_CONFIG; synonyms, when asked, list every layer in that order. Broker resources by
// this node's id list the broker configs this node runs with (brokerConfigDefs, but synonyms
// and ignored keys), read-only unless dynamic, each with its source and, when asked, synonyms
// (dynconf.go); another node's id is INVALID_REQUEST, as Kafka. The empty broker name (the
// cluster-wide default) lists the dynamic default broker configs only. Broker loggers list the
// one logger, root, with its level (loggers.go). Client metrics resources (KIP-714
// subscriptions) list their three keys, each with its configured value or default
// (clientmetricsconfig.go); an empty name is INVALID_REQUEST. Group resources list Kafka's ten
// group configs, each with the group's value or the default (groupconfig.go). Authorization,
// as Kafka's ConfigHelper: DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED), on the
// group (GROUP_AUTHORIZATION_FAILED), on the cluster for brokers, broker loggers and client
// metrics (CLUSTER_AUTHORIZATION_FAILED), with Kafka's message and no configs.
//
// Version notes: v3 adds config types (documentation is not sent); v4 is flexible.

import (
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
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
	z := rc.authorizer()
	for _, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType = res.ResourceType
		rr.ResourceName = res.ResourceName
		if code := z.configRefusal(acl.OpDescribeConfigs, res.ResourceType, res.ResourceName); code != nil {
			rr.ErrorCode, rr.ErrorMessage = code.Code, kmsg.StringPtr(authzMessage(code))
			resp.Resources = append(resp.Resources, rr)
			continue
		}
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
				rr.Configs = append(rr.Configs, b.describeTopicEntry(im, t, d, req.IncludeSynonyms))
			}
		case kmsg.ConfigResourceTypeBroker:
			if res.ResourceName == "" {
				// The cluster-wide default resource lists only the dynamic defaults, as Kafka.
				for _, k := range slices.Sorted(maps.Keys(im.BrokerConfigs[""])) {
					if want(k) {
						rr.Configs = append(rr.Configs, b.describeDefaultEntry(im, k, req.IncludeSynonyms))
					}
				}
				break
			}
			if res.ResourceName != b.brokerResource() {
				rr.ErrorCode = kerr.InvalidRequest.Code
				rr.ErrorMessage = kmsg.StringPtr("Unexpected broker id, expected " + b.brokerResource() + " or empty string, but received " + res.ResourceName)
				break
			}
			for _, d := range brokerConfigDefs {
				if d.get != nil && want(d.name) && (!d.dynamicOnly || len(b.brokerConfigLayers(im, d)) > 0) {
					rr.Configs = append(rr.Configs, b.describeBrokerEntry(im, d, req.IncludeSynonyms))
				}
			}
		case kmsg.ConfigResourceTypeBrokerLogger:
			if res.ResourceName != b.brokerResource() {
				rr.ErrorCode = kerr.InvalidRequest.Code
				rr.ErrorMessage = kmsg.StringPtr("Unexpected broker id, expected " + b.brokerResource() + " but received " + res.ResourceName)
				break
			}
			rr.Configs = b.describeLoggers(want)
		case kmsg.ConfigResourceTypeClientMetrics:
			cfgs, code, msg := describeClientMetrics(im, res.ResourceName, want, req.IncludeSynonyms)
			if code != nil {
				rr.ErrorCode, rr.ErrorMessage = code.Code, kmsg.StringPtr(msg)
				break
			}
			rr.Configs = cfgs
		case kmsg.ConfigResourceTypeGroupConfig:
			cfgs, code, msg := b.describeGroupConfigs(im, res.ResourceName, want, req.IncludeSynonyms)
			if code != nil {
				rr.ErrorCode, rr.ErrorMessage = code.Code, kmsg.StringPtr(msg)
				break
			}
			rr.Configs = cfgs
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			rr.ErrorMessage = kmsg.StringPtr("ringbroker does not describe configs of resource type " + strconv.Itoa(int(res.ResourceType)))
		}
		resp.Resources = append(resp.Resources, rr)
	}
	rc.respond(resp)
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

// describeTopicEntry is the DescribeConfigs entry of topic config d of t: the topic's
// override or the broker default in force, with its source, and as synonyms the override and
// the layers of the broker key that sets the default.
func (b *Broker) describeTopicEntry(im *meta.Image, t *meta.Topic, d topicConfigDef, synonyms bool) kmsg.DescribeConfigsResponseResourceConfig {
	var layers []configLayer
	if v, ok := t.Configs[d.name]; ok {
		layers = append(layers, configLayer{d.name, kmsg.StringPtr(v), sourceDynamicTopic})
	}
	if bd, ok := lookupBrokerConfig(d.brokerKey); ok && bd.get != nil {
		layers = append(layers, b.brokerConfigLayers(im, bd)...)
	} else if d.brokerKey != "" {
		layers = append(layers, configLayer{d.brokerKey, kmsg.StringPtr(d.defaultValue(&b.cfg)), sourceDefault})
	}
	v, _ := b.live().effectiveTopicConfig(t.Configs, d.name)
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = d.name
	c.Value = kmsg.StringPtr(v)
	c.Source = sourceDefault
	if len(layers) > 0 {
		c.Source = layers[0].source // as Kafka: the source of the first synonym
	}
	c.ConfigType = d.kind.configType()
	if synonyms {
		c.ConfigSynonyms = synonymsOf(layers)
	}
	return c
}

// describeDefaultEntry is the DescribeConfigs entry of key in the cluster-wide default
// resource: its dynamic default, the only synonym Kafka lists there.
func (b *Broker) describeDefaultEntry(im *meta.Image, key string, synonyms bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = key
	c.Value = kmsg.StringPtr(im.BrokerConfigs[""][key])
	c.Source = kmsg.ConfigSourceDynamicDefaultBrokerConfig
	if d, ok := lookupBrokerConfig(key); ok {
		c.ConfigType = d.kind.configType()
	}
	if synonyms {
		c.ConfigSynonyms = synonymsOf([]configLayer{{key, c.Value, c.Source}})
	}
	return c
}
