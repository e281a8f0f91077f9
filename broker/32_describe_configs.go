package broker

// DescribeConfigs (key 32), versions 1-4.
//
// Behavior: topic resources list every topic config Kafka 4.1 describes (topicConfigDefs; a
// ringbroker key such as flush.group.commit only when the topic overrides it), with the
// topic's override (DYNAMIC_TOPIC_CONFIG) or the broker default in force, whose source is that
// of the broker key's first layer, and as synonyms, when asked, the override and the broker
// key's layers as Kafka lists them (describebroker.go). Broker resources by this node's id list
// every broker key Kafka 4.1.1 lists (kafkabrokerkeys.go), those ringbroker does not act on
// with Kafka's default and read-only, plus any other key set in server.properties or as a
// dynamic config, as Kafka lists its originals; each with its source (DYNAMIC_BROKER_CONFIG,
// DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG), Kafka's synonym chain
// (log.retention.ms, then log.retention.minutes and log.retention.hours), read-only unless
// ringbroker changes it live, and passwords and keys of unknown type sensitive (null); another
// node's id is INVALID_REQUEST, as Kafka. The empty broker name (the cluster-wide default)
// lists the dynamic default broker configs only. Broker loggers list the one logger, root,
// with its level (loggers.go). Client metrics resources (KIP-714 subscriptions) list their
// three keys, each with its configured value or default (clientmetricsconfig.go); an empty
// name is INVALID_REQUEST. Group resources list Kafka's ten group configs, each with the
// group's value or the default (groupconfig.go). Authorization, as Kafka's ConfigHelper:
// DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED), on the group
// (GROUP_AUTHORIZATION_FAILED), on the cluster for brokers, broker loggers and client
// metrics (CLUSTER_AUTHORIZATION_FAILED), with Kafka's message and no configs.
//
// Version notes: v3 adds config types and documentation (topic and broker keys); v4 is
// flexible.

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
				if _, set := t.Configs[d.name]; !want(d.name) || d.own && !set {
					continue
				}
				rr.Configs = append(rr.Configs, b.describeTopicEntry(im, t, d, req.IncludeSynonyms, req.IncludeDocumentation))
			}
		case kmsg.ConfigResourceTypeBroker:
			if res.ResourceName == "" {
				// The cluster-wide default resource lists only the dynamic defaults, as Kafka.
				for _, k := range slices.Sorted(maps.Keys(im.BrokerConfigs[""])) {
					if want(k) {
						rr.Configs = append(rr.Configs, b.describeDefaultEntry(im, k, req.IncludeSynonyms, req.IncludeDocumentation))
					}
				}
				break
			}
			if res.ResourceName != b.brokerResource() {
				rr.ErrorCode = kerr.InvalidRequest.Code
				rr.ErrorMessage = kmsg.StringPtr("Unexpected broker id, expected " + b.brokerResource() + " or empty string, but received " + res.ResourceName)
				break
			}
			for _, k := range b.describedBrokerKeys(im) {
				if want(k) {
					rr.Configs = append(rr.Configs, b.describeBrokerEntry(im, k, req.IncludeSynonyms, req.IncludeDocumentation))
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
	case kindClass:
		return kmsg.ConfigTypeClass
	case kindPassword:
		return kmsg.ConfigTypePassword
	}
	return kmsg.ConfigTypeUnknown
}

// describeTopicEntry is the DescribeConfigs entry of topic config d of t, as Kafka's
// ConfigHelper.createTopicConfigEntry makes it: the topic's override or the broker default in
// force, and as synonyms the override and the layers of the broker key that sets the default
// (brokerLayers); its source is that of the first synonym.
func (b *Broker) describeTopicEntry(im *meta.Image, t *meta.Topic, d topicConfigDef, synonyms, docs bool) kmsg.DescribeConfigsResponseResourceConfig {
	var layers []configLayer
	if v, ok := t.Configs[d.name]; ok {
		layers = append(layers, configLayer{d.name, kmsg.StringPtr(v), sourceDynamicTopic})
	}
	if d.brokerKey != "" {
		layers = append(layers, b.brokerLayers(im, d.brokerKey)...)
	}
	v, _ := b.live().effectiveTopicConfig(t.Configs, d.name)
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = d.name
	c.Value = kmsg.StringPtr(v)
	c.Source = sourceDefault
	if len(layers) > 0 {
		c.Source = layers[0].source
	}
	c.ConfigType = d.kind.configType()
	if synonyms {
		c.ConfigSynonyms = synonymsOf(layers)
	}
	if docs {
		c.Documentation = kmsg.StringPtr(d.documentation())
	}
	return c
}

// describeDefaultEntry is the DescribeConfigs entry of key in the cluster-wide default
// resource: its dynamic default, the only synonym Kafka lists there.
func (b *Broker) describeDefaultEntry(im *meta.Image, key string, synonyms, docs bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := b.describeBrokerEntry(im, key, false, docs)
	if !c.IsSensitive {
		c.Value = kmsg.StringPtr(im.BrokerConfigs[""][key])
	}
	c.Source = kmsg.ConfigSourceDynamicDefaultBrokerConfig
	if synonyms {
		c.ConfigSynonyms = synonymsOf([]configLayer{{key, c.Value, c.Source}})
	}
	return c
}
