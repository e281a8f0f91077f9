package broker

import (
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's config sources (DescribeConfigsResponse.ConfigSource).
const (
	sourceDynamicTopic = kmsg.ConfigSourceDynamicTopicConfig
	sourceStaticBroker = kmsg.ConfigSourceStaticBrokerConfig
	sourceDefault      = kmsg.ConfigSourceDefaultConfig
)

// Kafka's resource types.
const (
	resourceTopic        int8 = 2
	resourceBroker       int8 = 4
	resourceBrokerLogger int8 = 8
)

// configSource is the source of a topic config: a topic override or the default.
func configSource(override bool) kmsg.ConfigSource {
	if override {
		return sourceDynamicTopic
	}
	return sourceDefault
}

// configType maps our kinds to Kafka's DescribeConfigs config types.
func (k topicConfigKind) configType() kmsg.ConfigType {
	switch k {
	case kindBool:
		return kmsg.ConfigTypeBoolean
	case kindString:
		return kmsg.ConfigTypeString
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

// brokerConfigEntries lists the broker configs DescribeConfigs shows for this node, with their
// current values and whether each differs from the default.
func (b *Broker) brokerConfigEntries() []kmsg.DescribeConfigsResponseResourceConfig {
	d := DefaultConfig()
	listeners := func(ls []Listener) string {
		s := make([]string, len(ls))
		for i, l := range ls {
			s[i] = l.String()
		}
		return strings.Join(s, ",")
	}
	type kv struct{ k, v, dflt string }
	c := &b.cfg
	entries := []kv{
		{"node.id", strconv.Itoa(int(c.NodeID)), strconv.Itoa(int(d.NodeID))},
		{"listeners", listeners(c.Listeners), listeners(d.Listeners)},
		{"advertised.listeners", listeners(c.AdvertisedListeners), listeners(c.Listeners)},
		{"log.dirs", strings.Join(c.LogDirs, ","), strings.Join(d.LogDirs, ",")},
		{"num.partitions", strconv.Itoa(int(c.NumPartitions)), strconv.Itoa(int(d.NumPartitions))},
		{"default.replication.factor", strconv.Itoa(int(c.DefaultReplication)), strconv.Itoa(int(d.DefaultReplication))},
		{"auto.create.topics.enable", strconv.FormatBool(c.AutoCreateTopics), strconv.FormatBool(d.AutoCreateTopics)},
		{"delete.topic.enable", strconv.FormatBool(c.DeleteTopicEnable), strconv.FormatBool(d.DeleteTopicEnable)},
		{"socket.request.max.bytes", strconv.Itoa(c.SocketRequestMax), strconv.Itoa(d.SocketRequestMax)},
		{"message.max.bytes", strconv.Itoa(int(c.MessageMaxBytes)), strconv.Itoa(int(d.MessageMaxBytes))},
		{"log.segment.bytes", strconv.FormatInt(c.SegmentBytes, 10), strconv.FormatInt(d.SegmentBytes, 10)},
		{"log.roll.ms", strconv.FormatInt(c.SegmentMs.Milliseconds(), 10), strconv.FormatInt(d.SegmentMs.Milliseconds(), 10)},
		{"log.index.interval.bytes", strconv.Itoa(c.IndexIntervalBytes), strconv.Itoa(d.IndexIntervalBytes)},
		{"log.flush.interval.messages", strconv.FormatInt(c.FlushMessages, 10), strconv.FormatInt(d.FlushMessages, 10)},
		{"log.retention.ms", strconv.FormatInt(c.RetentionMs, 10), strconv.FormatInt(d.RetentionMs, 10)},
		{"log.retention.bytes", strconv.FormatInt(c.RetentionBytes, 10), strconv.FormatInt(d.RetentionBytes, 10)},
		{"log.cleanup.policy", c.CleanupPolicy, d.CleanupPolicy},
		{"compression.type", c.CompressionType, d.CompressionType},
	}
	out := make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(entries))
	for _, e := range entries {
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name = e.k
		rc.Value = kmsg.StringPtr(e.v)
		rc.ReadOnly = true
		rc.Source = sourceDefault
		if e.v != e.dflt {
			rc.Source = sourceStaticBroker
		}
		rc.ConfigType = kmsg.ConfigTypeString
		out = append(out, rc)
	}
	return out
}
