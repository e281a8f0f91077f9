package broker

// Client metrics config resources (KIP-714, ConfigResource type CLIENT_METRICS): named
// subscriptions that tell matching clients which metrics to push and how often, as Kafka's
// ClientMetricsConfigs defines them. They are set and deleted with IncrementalAlterConfigs
// and AlterConfigs, kept as ClientMetricsConfig metadata records, described with
// DescribeConfigs and listed with ListConfigResources; telemetry.go serves them to clients.

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

// The keys of a subscription, Kafka's ClientMetricsConfigs.
const (
	// cmMetrics lists metric name prefixes; "*" is every metric, empty none.
	cmMetrics = "metrics"
	// cmInterval is the push interval in milliseconds.
	cmInterval = "interval.ms"
	// cmMatch lists selector=regex pairs a client must all match; empty matches every client.
	cmMatch = "match"
)

// The push interval's default and bounds, Kafka's.
const (
	cmIntervalDefault = 5 * 60 * 1000
	cmIntervalMin     = 100
	cmIntervalMax     = 3600000
)

// cmAllMetrics in a subscription's metrics subscribes to every metric.
const cmAllMetrics = "*"

// The client attributes a subscription's match selects on, Kafka's ALLOWED_MATCH_PARAMS.
const (
	selInstanceID      = "client_instance_id"
	selClientID        = "client_id"
	selSoftwareName    = "client_software_name"
	selSoftwareVersion = "client_software_version"
	selSourceAddress   = "client_source_address"
	selSourcePort      = "client_source_port"
)

var matchSelectors = []string{selInstanceID, selClientID, selSoftwareName, selSoftwareVersion, selSourceAddress, selSourcePort}

// cmKey is one key of a subscription: its config type and default as DescribeConfigs shows
// them.
type cmKey struct {
	name string
	typ  kmsg.ConfigType
	dflt string
}

// cmKeys are a subscription's keys in the order Kafka's ConfigDef defines them.
var cmKeys = []cmKey{
	{cmMetrics, kmsg.ConfigTypeList, ""},
	{cmInterval, kmsg.ConfigTypeInt, strconv.Itoa(cmIntervalDefault)},
	{cmMatch, kmsg.ConfigTypeList, ""},
}

func isClientMetricsKey(name string) bool {
	return slices.ContainsFunc(cmKeys, func(k cmKey) bool { return k.name == name })
}

// subscription is a parsed client metrics subscription.
type subscription struct {
	name     string
	metrics  []string
	interval int32 // milliseconds
	// match holds the regular expression of each selector named, anchored at both ends as
	// Java's Matcher.matches is.
	match map[string]*regexp.Regexp
}

// matches reports whether a client with attrs (by selector) matches every selector of s; a
// subscription without selectors matches every client.
func (s subscription) matches(attrs map[string]string) bool {
	for sel, re := range s.match {
		v, ok := attrs[sel]
		if !ok || !re.MatchString(v) {
			return false
		}
	}
	return true
}

// parseSubscription validates and parses the configs of subscription name as Kafka's
// ClientMetricsConfigs.validate does, returning Kafka's error code and message on failure:
// INVALID_REQUEST for an empty name, an unknown key or an interval out of bounds,
// INVALID_CONFIG for an interval that is no int or a malformed match pattern.
func parseSubscription(name string, cfg map[string]string) (subscription, *kerr.Error, string) {
	if name == "" {
		return subscription{}, kerr.InvalidRequest, "Subscription name can't be empty"
	}
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		if !isClientMetricsKey(k) {
			return subscription{}, kerr.InvalidRequest, "Unknown client metrics configuration: " + k
		}
	}
	s := subscription{name: name, metrics: parseList(cfg[cmMetrics]), interval: cmIntervalDefault}
	if v, ok := cfg[cmInterval]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return subscription{}, kerr.InvalidConfig, "Invalid value " + v + " for configuration " + cmInterval + ": Not a number of type INT"
		}
		if n < cmIntervalMin || n > cmIntervalMax {
			return subscription{}, kerr.InvalidRequest, "Invalid value " + strconv.FormatInt(n, 10) + " for " + cmInterval +
				", interval must be between 100 and 3600000 (1 hour)"
		}
		s.interval = int32(n)
	}
	for _, p := range parseList(cfg[cmMatch]) {
		parts := javaSplit(p, "=")
		var sel string
		if len(parts) == 2 {
			sel = strings.TrimSpace(parts[0])
		}
		if !slices.Contains(matchSelectors, sel) {
			return subscription{}, kerr.InvalidConfig, "Illegal client matching pattern: " + p
		}
		re, err := regexp.Compile(`^(?:` + strings.TrimSpace(parts[1]) + `)$`)
		if err != nil {
			return subscription{}, kerr.InvalidConfig, "Illegal client matching pattern: " + p
		}
		if s.match == nil {
			s.match = map[string]*regexp.Regexp{}
		}
		s.match[sel] = re
	}
	return s, nil, ""
}

// parseList parses a LIST config value as Kafka's ConfigDef does: empty (after trimming) is
// the empty list, otherwise the items between commas, trimmed, empty ones kept.
func parseList(v string) []string {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	items := strings.Split(v, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return items
}

// javaSplit splits s around sep as Java's String.split does with a literal separator: the
// trailing empty strings are removed (but the empty string splits into one empty string).
func javaSplit(s, sep string) []string {
	parts := strings.Split(s, sep)
	if s == "" {
		return parts
	}
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// describeClientMetrics lists the keys of subscription name that want selects, as Kafka's
// ConfigHelper does: every key, with its configured value (source CLIENT_METRICS_CONFIG, the
// one synonym) or its default (DEFAULT_CONFIG), values written as Kafka's ConfigDef renders
// them. A subscription that does not exist shows its defaults. An empty name is
// INVALID_REQUEST.
func describeClientMetrics(im *meta.Image, name string, want func(string) bool, synonyms bool) ([]kmsg.DescribeConfigsResponseResourceConfig, *kerr.Error, string) {
	if name == "" {
		return nil, kerr.InvalidRequest, "Client metrics subscription name must not be empty"
	}
	cfg := im.ClientMetrics[name]
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range cmKeys {
		if !want(k.name) {
			continue
		}
		v, set := cfg[k.name]
		if !set {
			v = k.dflt
		}
		if k.typ == kmsg.ConfigTypeInt {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32); err == nil {
				v = strconv.FormatInt(n, 10)
			}
		} else {
			v = strings.Join(parseList(v), ",")
		}
		source := kmsg.ConfigSourceDefaultConfig
		if set {
			source = kmsg.ConfigSourceClientMetricsConfig
		}
		// Kafka gives a client metrics key its one synonym only when it is set.
		out = append(out, resourceConfigEntry(k.name, k.typ, v, source, synonyms && set))
	}
	return out, nil, ""
}

// resourceConfigEntry is one DescribeConfigs entry of a resource whose keys have one layer
// (client metrics subscriptions, groups): the value from source, with that one synonym when
// synonym is set.
func resourceConfigEntry(name string, typ kmsg.ConfigType, value string, source kmsg.ConfigSource, synonym bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.ConfigType, c.Source, c.Value = name, typ, source, kmsg.StringPtr(value)
	if synonym {
		s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		s.Name, s.Value, s.Source = name, c.Value, source
		c.ConfigSynonyms = append(c.ConfigSynonyms, s)
	}
	return c
}

// alterClientMetrics applies one resource's IncrementalAlterConfigs operations to subscription
// res.ResourceName and commits the changed keys as ClientMetricsConfig records, refused as
// Kafka's controller refuses them: APPEND and SUBTRACT only on list keys, and the resulting
// subscription validated whole (parseSubscription). Deleting every key removes the
// subscription. The caller holds controllerMu.
func (b *Broker) alterClientMetrics(res kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (*kerr.Error, string) {
	for _, c := range res.Configs {
		if (c.Op == opAppend || c.Op == opSubtract) && c.Name != cmMetrics && c.Name != cmMatch {
			return kerr.InvalidConfig, "Can't " + c.Op.String() + " to key " + c.Name + " because its type is not LIST."
		}
	}
	name := res.ResourceName
	cur := b.meta.Image().ClientMetrics[name]
	next, code, msg := applyConfigOps(cur, res.Configs, func(next map[string]string, key string) (string, bool) {
		return next[key], true
	})
	if code != nil {
		return code, msg
	}
	if _, code, msg := parseSubscription(name, next); code != nil {
		return code, msg
	}
	if validateOnly {
		return nil, ""
	}
	return b.commitResourceConfigs(meta.TypeClientMetricsConfig, name, cur, next)
}
