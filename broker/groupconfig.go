package broker

// Group config resources (ConfigResource type GROUP, KIP-848): per-group overrides of the
// group coordinator's settings, as Kafka 4.1's GroupConfig defines them. They are set and
// deleted with IncrementalAlterConfigs, kept as GroupConfig metadata records, described with
// DescribeConfigs and listed with ListConfigResources. consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms apply to the group's KIP-848 members at their next
// heartbeat; the share.* and streams.* keys are kept, validated and described as Kafka does,
// but ringbroker has no share groups (KIP-932) or streams groups (KIP-1071) they could act on.

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

// The group config keys ringbroker acts on.
const (
	groupConsumerSessionTimeout    = "consumer.session.timeout.ms"
	groupConsumerHeartbeatInterval = "consumer.heartbeat.interval.ms"
)

// groupConfigKey is one key of Kafka's GroupConfig: its type, its default (the broker's
// group coordinator setting, or Kafka's constant where ringbroker has none) and what a value
// must satisfy.
type groupConfigKey struct {
	name string
	typ  kmsg.ConfigType
	dflt func(c *Config) int64 // INT keys
	// least is the INT value's ConfigDef lower bound.
	least int64
	// minOf and maxOf are the broker's bounds, named minKey (none when empty) and maxKey in
	// Kafka's messages: the broker config's where ringbroker has the keys, else Kafka's
	// defaults.
	minOf, maxOf   func(c *Config) int64
	minKey, maxKey string
	// str is a STRING key's default and valid its check.
	str   string
	valid func(string) bool
	// validity is Kafka's description of the valid STRING values, for its messages.
	validity string
}

// msOf reads a duration field of Config in milliseconds.
func msOf(f func(c *Config) time.Duration) func(c *Config) int64 {
	return func(c *Config) int64 { return f(c).Milliseconds() }
}

// constant is a default or bound ringbroker has no broker key for: Kafka's default value.
func constant(v int64) func(*Config) int64 { return func(*Config) int64 { return v } }

// groupConfigKeys are Kafka 4.1.1's group configs, in its ConfigDef's order.
var groupConfigKeys = []groupConfigKey{
	{name: groupConsumerSessionTimeout, typ: kmsg.ConfigTypeInt, least: 1,
		dflt:   msOf(func(c *Config) time.Duration { return c.ConsumerSessionTimeout }),
		minOf:  msOf(func(c *Config) time.Duration { return c.ConsumerMinSessionTimeout }),
		maxOf:  msOf(func(c *Config) time.Duration { return c.ConsumerMaxSessionTimeout }),
		minKey: "group.consumer.min.session.timeout.ms", maxKey: "group.consumer.max.session.timeout.ms"},
	{name: groupConsumerHeartbeatInterval, typ: kmsg.ConfigTypeInt, least: 1,
		dflt:   msOf(func(c *Config) time.Duration { return c.ConsumerHeartbeatInterval }),
		minOf:  msOf(func(c *Config) time.Duration { return c.ConsumerMinHeartbeatInterval }),
		maxOf:  msOf(func(c *Config) time.Duration { return c.ConsumerMaxHeartbeatInterval }),
		minKey: "group.consumer.min.heartbeat.interval.ms", maxKey: "group.consumer.max.heartbeat.interval.ms"},
	{name: "share.session.timeout.ms", typ: kmsg.ConfigTypeInt, least: 1, dflt: constant(45000),
		minOf: constant(45000), maxOf: constant(60000),
		minKey: "group.share.min.session.timeout.ms", maxKey: "group.share.max.session.timeout.ms"},
	{name: "share.heartbeat.interval.ms", typ: kmsg.ConfigTypeInt, least: 1, dflt: constant(5000),
		minOf: constant(5000), maxOf: constant(15000),
		minKey: "group.share.min.heartbeat.interval.ms", maxKey: "group.share.max.heartbeat.interval.ms"},
	{name: "share.record.lock.duration.ms", typ: kmsg.ConfigTypeInt, least: 1000, dflt: constant(30000),
		minOf: constant(15000), maxOf: constant(60000),
		minKey: "group.share.min.record.lock.duration.ms", maxKey: "group.share.max.record.lock.duration.ms"},
	{name: "share.auto.offset.reset", typ: kmsg.ConfigTypeString, str: "latest", valid: validShareOffsetReset,
		validity: "[latest, earliest, by_duration:PnDTnHnMn.nS]"},
	{name: "share.isolation.level", typ: kmsg.ConfigTypeString, str: "read_uncommitted",
		valid:    func(v string) bool { return v == "read_committed" || v == "read_uncommitted" },
		validity: "String must be one of: read_committed, read_uncommitted"},
	{name: "streams.session.timeout.ms", typ: kmsg.ConfigTypeInt, least: 1, dflt: constant(45000),
		minOf: constant(45000), maxOf: constant(60000),
		minKey: "group.streams.min.session.timeout.ms", maxKey: "group.streams.max.session.timeout.ms"},
	{name: "streams.heartbeat.interval.ms", typ: kmsg.ConfigTypeInt, least: 1, dflt: constant(5000),
		minOf: constant(5000), maxOf: constant(15000),
		minKey: "group.streams.min.heartbeat.interval.ms", maxKey: "group.streams.max.heartbeat.interval.ms"},
	{name: "streams.num.standby.replicas", typ: kmsg.ConfigTypeInt, least: 0, dflt: constant(0),
		minOf: constant(0), maxOf: constant(2), maxKey: "group.streams.max.standby.replicas"},
}

// groupIntervalPairs are the heartbeat intervals that must stay below their session
// timeouts, as Kafka's GroupConfig.validateValues checks.
var groupIntervalPairs = [][2]string{
	{groupConsumerHeartbeatInterval, groupConsumerSessionTimeout},
	{"share.heartbeat.interval.ms", "share.session.timeout.ms"},
	{"streams.heartbeat.interval.ms", "streams.session.timeout.ms"},
}

// validShareOffsetReset accepts latest, earliest and by_duration:<ISO-8601 duration>, as
// Kafka's ShareGroupAutoOffsetResetStrategy validator (the duration checked for its shape:
// P, then days and a time part of hours, minutes and seconds).
func validShareOffsetReset(v string) bool {
	if v == "latest" || v == "earliest" {
		return true
	}
	d, ok := strings.CutPrefix(v, "by_duration:")
	if !ok {
		return false
	}
	return isoDuration.MatchString(d) && strings.ContainsAny(d, "0123456789") && !strings.HasSuffix(strings.ToUpper(d), "T")
}

// isoDuration matches what Java's Duration.parse accepts without a negative part: PnDTnHnMn.nS,
// case-insensitive, at least one part, no T without a time part after it.
var isoDuration = regexp.MustCompile(`^(?i)\+?P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:[.,]\d{0,9})?S)?)?$`)

// groupConfigKeyNamed returns the key called name.
func groupConfigKeyNamed(name string) (groupConfigKey, bool) {
	i := slices.IndexFunc(groupConfigKeys, func(k groupConfigKey) bool { return k.name == name })
	if i < 0 {
		return groupConfigKey{}, false
	}
	return groupConfigKeys[i], true
}

// defaultValue is k's value for a group that does not set it.
func (k groupConfigKey) defaultValue(c *Config) string {
	if k.typ == kmsg.ConfigTypeString {
		return k.str
	}
	return strconv.FormatInt(k.dflt(c), 10)
}

// validateGroupConfigs checks a group's configs whole (set keys over the defaults) as
// Kafka's GroupConfig.validate: unknown keys, values of the wrong type or out of the broker's
// bounds, and heartbeat intervals not below their session timeouts are INVALID_CONFIG, with
// Kafka's messages; an empty group id is INVALID_REQUEST.
func validateGroupConfigs(c *Config, group string, cfg map[string]string) (*kerr.Error, string) {
	if group == "" {
		return kerr.InvalidRequest, "Group name must not be empty"
	}
	for _, name := range slices.Sorted(maps.Keys(cfg)) {
		if _, ok := groupConfigKeyNamed(name); !ok {
			return kerr.InvalidConfig, "Unknown group config name: " + name
		}
	}
	ints := map[string]int64{}
	for _, k := range groupConfigKeys {
		v, set := cfg[k.name]
		if !set {
			v = k.defaultValue(c)
		}
		if k.typ == kmsg.ConfigTypeString {
			if !k.valid(strings.TrimSpace(v)) {
				return kerr.InvalidConfig, "Invalid value " + v + " for configuration " + k.name + ": " + k.validity
			}
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return kerr.InvalidConfig, "Invalid value " + v + " for configuration " + k.name + ": Not a number of type INT"
		}
		if n < k.least {
			return kerr.InvalidConfig, "Invalid value " + v + " for configuration " + k.name + ": Value must be at least " + strconv.FormatInt(k.least, 10)
		}
		if k.minKey != "" && n < k.minOf(c) {
			return kerr.InvalidConfig, k.name + " must be greater than or equal to " + k.minKey
		}
		if n > k.maxOf(c) {
			return kerr.InvalidConfig, k.name + " must be less than or equal to " + k.maxKey
		}
		ints[k.name] = n
	}
	for _, p := range groupIntervalPairs {
		if ints[p[0]] >= ints[p[1]] {
			return kerr.InvalidConfig, p[0] + " must be less than " + p[1]
		}
	}
	return nil, ""
}

// describeGroupConfigs lists the keys of group's configs that want selects, as Kafka's
// ConfigHelper does for a GROUP resource: every key with its value, source GROUP_CONFIG when
// the group sets it and DEFAULT_CONFIG otherwise, the one synonym of that source when asked
// for. A group without configs (or that does not exist) shows the defaults. An empty name is
// INVALID_REQUEST.
func (b *Broker) describeGroupConfigs(im *meta.Image, group string, want func(string) bool, synonyms bool) ([]kmsg.DescribeConfigsResponseResourceConfig, *kerr.Error, string) {
	if group == "" {
		return nil, kerr.InvalidRequest, "Group name must not be empty"
	}
	cfg := im.GroupConfigs[group]
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range groupConfigKeys {
		if !want(k.name) {
			continue
		}
		v, set := cfg[k.name]
		source := kmsg.ConfigSourceGroupConfig
		if !set {
			v, source = k.defaultValue(&b.cfg), kmsg.ConfigSourceDefaultConfig
		}
		out = append(out, resourceConfigEntry(k.name, k.typ, strings.TrimSpace(v), source, synonyms))
	}
	return out, nil, ""
}

// alterGroupConfigs applies one resource's IncrementalAlterConfigs operations to group
// res.ResourceName and commits the changed keys as GroupConfig records, the group's configs
// validated whole first; no group config is a list, so APPEND and SUBTRACT are refused. The
// caller holds controllerMu.
func (b *Broker) alterGroupConfigs(res kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (*kerr.Error, string) {
	group := res.ResourceName
	cur := b.meta.Image().GroupConfigs[group]
	next, code, msg := applyConfigOps(cur, res.Configs, func(map[string]string, string) (string, bool) { return "", false })
	if code != nil {
		return code, msg
	}
	if code, msg := validateGroupConfigs(&b.cfg, group, next); code != nil {
		return code, msg
	}
	if validateOnly {
		return nil, ""
	}
	return b.commitResourceConfigs(meta.TypeGroupConfig, group, cur, next)
}

// commitResourceConfigs commits the records of typ that take resource name's configs from cur
// to next: one per key set or changed, one per key removed. The caller holds controllerMu.
func (b *Broker) commitResourceConfigs(typ meta.RecordType, name string, cur, next map[string]string) (*kerr.Error, string) {
	var recs []meta.Record
	for _, k := range slices.Sorted(maps.Keys(next)) {
		if old, ok := cur[k]; !ok || old != next[k] {
			recs = append(recs, meta.Record{Type: typ, ConfigResource: name, ConfigKey: k, ConfigValue: kmsg.StringPtr(next[k])})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		if _, ok := next[k]; !ok {
			recs = append(recs, meta.Record{Type: typ, ConfigResource: name, ConfigKey: k})
		}
	}
	if len(recs) == 0 {
		return nil, ""
	}
	if _, err := b.meta.Commit(recs); err != nil {
		return kerr.UnknownServerError, "commit " + strconv.Itoa(len(recs)) + " " + string(typ) + " records of " + name + ": " + err.Error()
	}
	return nil, ""
}

// groupTimeouts is the KIP-848 heartbeat interval and session timeout of group: its
// GroupConfig values where it sets them, zero otherwise (the coordinator's defaults).
func (b *Broker) groupTimeouts(group string) (heartbeat, session time.Duration) {
	cfg := b.meta.Image().GroupConfigs[group]
	if cfg == nil {
		return 0, 0
	}
	ms := func(key string) time.Duration {
		n, err := strconv.ParseInt(strings.TrimSpace(cfg[key]), 10, 32)
		if err != nil || n <= 0 {
			return 0
		}
		return time.Duration(n) * time.Millisecond
	}
	return ms(groupConsumerHeartbeatInterval), ms(groupConsumerSessionTimeout)
}
