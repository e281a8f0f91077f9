package broker

import (
	"fmt"
	"strconv"
	"strings"
)

// topicConfigDef is one topic-level config: its Kafka name, the broker key that sets its default,
// its type, and the allowed values where Kafka restricts them.
type topicConfigDef struct {
	name      string
	brokerKey string
	kind      configKind
	min       int64
	allowed   []string
	// dflt gives the default; nil means the current value of brokerKey (brokerConfigDefs), or
	// Kafka's default of it where ringbroker does not act on it (kafkaBrokerKeys).
	dflt func(c *Config) string
	// check, when set, validates a value beyond its kind.
	check func(val string) error
	// own marks ringbroker's keys, which Kafka does not have: DescribeConfigs and CreateTopics
	// list them only for a topic that overrides them, so that the rest is Kafka's list.
	own bool
	// doc says what a key without a broker key does; the others are that key for one topic.
	doc string
}

// documentation is d's DescribeConfigs documentation.
func (d topicConfigDef) documentation() string {
	if d.doc != "" {
		return d.doc
	}
	return "the broker config " + d.brokerKey + " for this topic"
}

// defaultValue is the value of the config for a topic without an override.
func (d topicConfigDef) defaultValue(c *Config) string {
	if d.dflt != nil {
		return d.dflt(c)
	}
	if bd, ok := lookupBrokerConfig(d.brokerKey); ok && bd.get != nil {
		return bd.get(c)
	}
	k, _ := lookupKafkaBrokerKey(d.brokerKey)
	return k.dflt
}

func constDefault(v string) func(*Config) string { return func(*Config) string { return v } }

// topicConfigDefs lists the topic configs Kafka 4.1 describes, with Kafka's defaults, and
// ringbroker's own flush.group.commit.
var topicConfigDefs = []topicConfigDef{
	{name: "cleanup.policy", brokerKey: "log.cleanup.policy", kind: kindList, allowed: []string{"delete", "compact"}},
	{name: "compression.type", brokerKey: "compression.type", kind: kindString, allowed: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}},
	{name: "compression.gzip.level", brokerKey: "compression.gzip.level", kind: kindInt, min: -1},
	{name: "compression.lz4.level", brokerKey: "compression.lz4.level", kind: kindInt, min: 1},
	{name: "compression.zstd.level", brokerKey: "compression.zstd.level", kind: kindInt, min: -131072},
	{name: "delete.retention.ms", brokerKey: "log.cleaner.delete.retention.ms", kind: kindLong},
	{name: "file.delete.delay.ms", brokerKey: "log.segment.delete.delay.ms", kind: kindLong},
	{name: "flush.messages", brokerKey: "log.flush.interval.messages", kind: kindLong, min: 1},
	{name: "flush.ms", brokerKey: "log.flush.interval.ms", kind: kindLong, dflt: func(c *Config) string {
		if c.FlushInterval == 0 {
			return "9223372036854775807"
		}
		return strconv.FormatInt(c.FlushInterval.Milliseconds(), 10)
	}},
	{name: "flush.group.commit", brokerKey: "log.flush.group.commit", kind: kindBool, own: true},
	{name: "follower.replication.throttled.replicas", kind: kindList, dflt: constDefault(""), check: checkThrottledReplicas,
		doc: "partition:broker pairs (or *) of the replicas whose catch-up fetches follower.replication.throttled.rate bounds on their followers"},
	{name: "index.interval.bytes", brokerKey: "log.index.interval.bytes", kind: kindInt},
	{name: "leader.replication.throttled.replicas", kind: kindList, dflt: constDefault(""), check: checkThrottledReplicas,
		doc: "partition:broker pairs (or *) of the replicas whose catch-up fetches leader.replication.throttled.rate bounds on their leaders"},
	{name: "local.retention.bytes", brokerKey: "log.local.retention.bytes", kind: kindLong, min: -2},
	{name: "local.retention.ms", brokerKey: "log.local.retention.ms", kind: kindLong, min: -2},
	{name: "max.compaction.lag.ms", brokerKey: "log.cleaner.max.compaction.lag.ms", kind: kindLong, min: 1},
	{name: "max.message.bytes", brokerKey: "message.max.bytes", kind: kindInt},
	{name: "message.timestamp.after.max.ms", brokerKey: "log.message.timestamp.after.max.ms", kind: kindLong},
	{name: "message.timestamp.before.max.ms", brokerKey: "log.message.timestamp.before.max.ms", kind: kindLong},
	{name: "message.timestamp.type", brokerKey: "log.message.timestamp.type", kind: kindString, allowed: []string{"CreateTime", "LogAppendTime"}},
	{name: "min.cleanable.dirty.ratio", brokerKey: "log.cleaner.min.cleanable.ratio", kind: kindDouble},
	{name: "min.compaction.lag.ms", brokerKey: "log.cleaner.min.compaction.lag.ms", kind: kindLong},
	{name: "min.insync.replicas", brokerKey: "min.insync.replicas", kind: kindInt, min: 1},
	{name: "preallocate", brokerKey: "log.preallocate", kind: kindBool},
	{name: "remote.log.copy.disable", kind: kindBool, dflt: constDefault("false"),
		doc: "stop copying a tiered topic's segments to remote storage; ringbroker has no remote storage, so this has no effect"},
	{name: "remote.log.delete.on.disable", kind: kindBool, dflt: constDefault("false"),
		doc: "delete a topic's remote segments when remote.storage.enable is turned off; ringbroker has no remote storage, so this has no effect"},
	{name: "remote.storage.enable", kind: kindBool, dflt: constDefault("false"), check: refuseRemoteStorage,
		doc: "keep the topic's older segments in remote storage (tiered storage, KIP-405); ringbroker does not support remote storage and refuses true"},
	{name: "retention.bytes", brokerKey: "log.retention.bytes", kind: kindLong, min: -1},
	{name: "retention.ms", brokerKey: "log.retention.ms", kind: kindLong, min: -1},
	{name: "segment.bytes", brokerKey: "log.segment.bytes", kind: kindInt, min: 14},
	{name: "segment.index.bytes", brokerKey: "log.index.size.max.bytes", kind: kindInt, min: 4},
	{name: "segment.jitter.ms", brokerKey: "log.roll.jitter.ms", kind: kindLong, dflt: constDefault("0")},
	{name: "segment.ms", brokerKey: "log.roll.ms", kind: kindLong, min: 1},
	{name: "unclean.leader.election.enable", brokerKey: "unclean.leader.election.enable", kind: kindBool},
}

func lookupTopicConfig(name string) (topicConfigDef, bool) {
	i, ok := topicConfigIndex[name]
	if !ok {
		return topicConfigDef{}, false
	}
	return topicConfigDefs[i], true
}

// topicConfigIndex is the position of each config in topicConfigDefs.
var topicConfigIndex = indexByName(topicConfigDefs, func(d topicConfigDef) string { return d.name })

// validateTopicConfig checks one topic config as Kafka's LogConfig.validate does; the error text
// goes to the client in the response's error message.
func validateTopicConfig(name, val string) error {
	d, ok := lookupTopicConfig(name)
	if !ok {
		return fmt.Errorf("unknown topic config name: %s", name)
	}
	switch d.kind {
	case kindLong, kindInt:
		bits := 64
		if d.kind == kindInt {
			bits = 32
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, bits)
		if err != nil {
			return fmt.Errorf("invalid value %s for configuration %s: not a number", val, name)
		}
		if d.min != 0 && n < d.min {
			return fmt.Errorf("invalid value %s for configuration %s: value must be at least %d", val, name, d.min)
		}
	case kindBool:
		if v := strings.ToLower(strings.TrimSpace(val)); v != "true" && v != "false" {
			return fmt.Errorf("invalid value %s for configuration %s: expected value to be either true or false", val, name)
		}
	case kindDouble:
		if _, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err != nil {
			return fmt.Errorf("invalid value %s for configuration %s: not a number", val, name)
		}
	case kindString, kindList:
		items := []string{val}
		if d.kind == kindList {
			items = splitList(val)
		}
		for _, it := range items {
			if len(d.allowed) > 0 && !contains(d.allowed, strings.TrimSpace(it)) {
				return fmt.Errorf("invalid value %s for configuration %s: string must be one of: %s", val, name, strings.Join(d.allowed, ", "))
			}
		}
	}
	if d.check != nil {
		if err := d.check(val); err != nil {
			return fmt.Errorf("invalid value %s for configuration %s: %w", val, name, err)
		}
	}
	return nil
}

// refuseRemoteStorage refuses remote.storage.enable=true, as Kafka refuses it on a broker
// without remote.log.storage.system.enable: ringbroker has no remote storage.
func refuseRemoteStorage(val string) error {
	if strings.EqualFold(strings.TrimSpace(val), "true") {
		return fmt.Errorf("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage: ringbroker does not support remote storage")
	}
	return nil
}

// checkThrottledReplicas validates a {leader,follower}.replication.throttled.replicas value as
// Kafka's ThrottledReplicaListValidator: empty, "*", or partition:broker pairs. They take
// effect with the broker's replication throttle rates (quota.go), unbounded unless set.
func checkThrottledReplicas(val string) error {
	items := splitList(val)
	if len(items) == 1 && items[0] == "*" {
		return nil
	}
	for _, it := range items {
		p, b, ok := strings.Cut(it, ":")
		_, perr := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		_, berr := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
		if !ok || perr != nil || berr != nil {
			return fmt.Errorf("must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// effectiveTopicConfig returns a topic config's value: the topic override when set, else the
// broker default.
func (c *Config) effectiveTopicConfig(overrides map[string]string, name string) (string, bool) {
	if v, ok := overrides[name]; ok {
		return v, true
	}
	d, ok := lookupTopicConfig(name)
	if !ok {
		return "", false
	}
	return d.defaultValue(c), false
}
