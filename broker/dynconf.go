package broker

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

// Dynamic broker configs, as Kafka's DynamicBrokerConfig: IncrementalAlterConfigs and
// AlterConfigs of resource type BROKER commit BrokerConfig records to the metadata log, per
// broker (resource name "1") or as the cluster-wide default (resource name ""). Every node
// applies them on the image that holds them, over server.properties, in Kafka's order of
// precedence: per-broker, then default, then static, then the built-in default. Only keys
// marked dynamic in brokerConfigDefs (live, onlyDynamic) may be set and take effect; Kafka's other dynamic keys that ringbroker has
// (notLive) are refused, read-only ones are refused as Kafka refuses them, and keys ringbroker
// does not know are stored as Kafka stores them, without effect.

// dynamicConfig is the configuration in force: the static one with the image's dynamic broker
// configs applied.
type dynamicConfig struct {
	cfg Config
	// from is the image's BrokerConfigs cfg was built from.
	from map[string]map[string]string
}

// notLive lists the keys Kafka changes while running that ringbroker has but cannot change
// without a restart, with the reason given to the client.
var notLive = map[string]string{
	"num.io.threads":      "ringbroker cannot resize its handler workers while running (Kafka can): set num.io.threads in server.properties and restart",
	"num.network.threads": "ringbroker has no network threads to resize (one event loop per core, io.rings): num.network.threads has no effect",
}

// live is the configuration in force: server.properties with the dynamic broker configs of
// the latest image this node applied. Handlers read it without locks.
func (b *Broker) live() *Config {
	if d := b.dyn.Load(); d != nil {
		return &d.cfg
	}
	return &b.cfg
}

// brokerResource is this node's resource name in dynamic broker configs.
func (b *Broker) brokerResource() string { return strconv.Itoa(int(b.cfg.NodeID)) }

// applyDynamicConfig builds the configuration in force from im when its dynamic broker configs
// changed, and then gives every open log its topic's configuration again and the replication
// quotas their rates.
func (b *Broker) applyDynamicConfig(im *meta.Image) {
	b.dynMu.Lock()
	defer b.dynMu.Unlock()
	if cur := b.dyn.Load(); cur != nil && maps.EqualFunc(cur.from, im.BrokerConfigs, maps.Equal) {
		return
	}
	next := &dynamicConfig{cfg: b.cfg, from: im.BrokerConfigs}
	for _, res := range []string{"", b.brokerResource()} {
		keys := slices.Sorted(maps.Keys(im.BrokerConfigs[res]))
		// Synonyms first (log.retention.hours), so that the key they stand for wins when both
		// are set, as in Kafka.
		slices.SortStableFunc(keys, func(x, y string) int {
			dx, _ := lookupBrokerConfig(x)
			dy, _ := lookupBrokerConfig(y)
			return strings.Compare(dy.synonymOf, dx.synonymOf)
		})
		for _, k := range keys {
			d, ok := lookupBrokerConfig(k)
			if !ok || !d.dynamic || d.ignored {
				continue
			}
			if err := next.cfg.set(k, im.BrokerConfigs[res][k]); err != nil {
				b.logger.Warn("dynamic broker config not applied", "resource", res, "key", k, "err", err)
			}
		}
	}
	b.dyn.Store(next)
	b.quotas.setRates(next.cfg.LeaderReplicationThrottledRate, next.cfg.FollowerReplicationThrottledRate)
	for _, name := range im.SortedTopicNames() {
		b.applyTopicLogConfig(name)
	}
}

// alterBrokerConfigs applies one broker resource's operations (IncrementalAlterConfigs, or
// AlterConfigs as SETs and DELETEs) as Kafka's ConfigAdminManager and DynamicBrokerConfig
// validate them; the caller holds controllerMu.
func (b *Broker) alterBrokerConfigs(res kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (*kerr.Error, string) {
	if res.ResourceName != "" {
		if id, err := strconv.ParseInt(res.ResourceName, 10, 32); err != nil || id < 0 {
			return kerr.InvalidRequest, "Invalid broker id " + res.ResourceName
		}
	}
	im := b.meta.Image()
	cur := im.BrokerConfigs[res.ResourceName]
	next, code, msg := applyConfigOps(cur, res.Configs, func(next map[string]string, name string) (string, bool) {
		d, ok := lookupBrokerConfig(name)
		if !ok || d.kind != kindList {
			return "", false
		}
		if v, ok := next[name]; ok || d.get == nil {
			return v, true
		}
		return d.get(b.live()), true
	})
	if code != nil {
		return code, msg
	}
	if code, msg := b.validateBrokerConfigs(next); code != nil {
		return code, msg
	}
	if validateOnly {
		return nil, ""
	}
	var recs []meta.Record
	for _, k := range slices.Sorted(maps.Keys(next)) {
		if old, ok := cur[k]; !ok || old != next[k] {
			recs = append(recs, meta.Record{Type: meta.TypeBrokerConfig, ConfigResource: res.ResourceName, ConfigKey: k, ConfigValue: kmsg.StringPtr(next[k])})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		if _, ok := next[k]; !ok {
			recs = append(recs, meta.Record{Type: meta.TypeBrokerConfig, ConfigResource: res.ResourceName, ConfigKey: k})
		}
	}
	if len(recs) == 0 {
		return nil, ""
	}
	if _, err := b.meta.Commit(recs); err != nil {
		return kerr.UnknownServerError, fmt.Sprintf("commit %d dynamic broker config records: %v", len(recs), err)
	}
	b.applyDynamicConfig(b.meta.Image())
	return nil, ""
}

// validateBrokerConfigs checks the dynamic configs a broker resource would have, as Kafka's
// DynamicBrokerConfig.validateConfigs, whose errors Kafka answers with INVALID_REQUEST.
func (b *Broker) validateBrokerConfigs(cfgs map[string]string) (*kerr.Error, string) {
	var readOnly []string
	for _, k := range slices.Sorted(maps.Keys(cfgs)) {
		if reason, ok := notLive[k]; ok {
			return kerr.InvalidRequest, "Cannot update " + k + " dynamically on ringbroker: " + reason
		}
		d, ok := lookupBrokerConfig(k)
		if !ok {
			continue // unknown keys are stored without effect, as Kafka stores them
		}
		if !d.dynamic {
			readOnly = append(readOnly, k)
			continue
		}
		scratch := b.cfg
		if err := scratch.set(k, cfgs[k]); err != nil {
			return kerr.InvalidRequest, fmt.Sprintf("Invalid value %s for configuration %s: %v", cfgs[k], k, err)
		}
	}
	if len(readOnly) > 0 {
		return kerr.InvalidRequest, "Cannot update these configs dynamically: Set(" + strings.Join(readOnly, ", ") + ")"
	}
	return nil, ""
}

// configLayer is one place a config's value may come from, in DescribeConfigs' terms.
type configLayer struct {
	name   string
	value  *string
	source kmsg.ConfigSource
}

// brokerConfigLayers lists where broker config d gets its value on this node, most important
// first: the dynamic per-broker and default configs of im, each by d's name and then by its
// synonyms (log.retention.ms, then log.retention.minutes and log.retention.hours), as Kafka
// lists them; server.properties; and the built-in default. The first one is in force.
func (b *Broker) brokerConfigLayers(im *meta.Image, d brokerConfigDef) []configLayer {
	var out []configLayer
	if d.dynamic {
		names := []string{d.name}
		for _, s := range brokerConfigDefs {
			if s.synonymOf == d.name && s.dynamic {
				names = append(names, s.name)
			}
		}
		for _, res := range []struct {
			name   string
			source kmsg.ConfigSource
		}{{b.brokerResource(), kmsg.ConfigSourceDynamicBrokerConfig}, {"", kmsg.ConfigSourceDynamicDefaultBrokerConfig}} {
			for _, n := range names {
				if v, ok := im.BrokerConfigs[res.name][n]; ok {
					out = append(out, configLayer{n, kmsg.StringPtr(v), res.source})
				}
			}
		}
	}
	if d.dynamicOnly {
		return out
	}
	if b.cfg.isExplicit(d.name) && d.get != nil {
		out = append(out, configLayer{d.name, nullIfEmpty(d.get(&b.cfg)), sourceStaticBroker})
	}
	if d.get != nil {
		var dflt *string
		if d.dflt != "" {
			dflt = kmsg.StringPtr(d.dflt)
		}
		out = append(out, configLayer{d.name, dflt, sourceDefault})
	}
	return out
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// describeBrokerEntry is the DescribeConfigs entry of broker config d: the value in force and
// its source, read-only unless dynamic, with the layers below as synonyms when asked.
func (b *Broker) describeBrokerEntry(im *meta.Image, d brokerConfigDef, synonyms bool) kmsg.DescribeConfigsResponseResourceConfig {
	layers := b.brokerConfigLayers(im, d)
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = d.name
	c.ReadOnly = !d.dynamic
	c.ConfigType = d.kind.configType()
	c.Source = sourceDefault
	if len(layers) > 0 {
		c.Value, c.Source = layers[0].value, layers[0].source
	}
	if d.get != nil && (len(layers) == 0 || layers[0].name != d.name || layers[0].source == sourceStaticBroker || layers[0].source == sourceDefault) {
		// The value in force, in d's own unit: set by a synonym (log.retention.hours), or
		// computed at start for some keys (offsets RF).
		c.Value = nullIfEmpty(d.get(b.live()))
	}
	if synonyms {
		c.ConfigSynonyms = synonymsOf(layers)
	}
	if d.sensitive {
		c.IsSensitive = true
		c.Value = nil
		for i := range c.ConfigSynonyms {
			c.ConfigSynonyms[i].Value = nil
		}
	}
	return c
}

// synonymsOf lists layers as DescribeConfigs synonyms.
func synonymsOf(layers []configLayer) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	out := make([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, 0, len(layers))
	for _, l := range layers {
		s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		s.Name, s.Value, s.Source = l.name, l.value, l.source
		out = append(out, s)
	}
	return out
}
