package broker

import (
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

// DescribeConfigs of a broker, shaped as Kafka's ConfigHelper shapes it: every key Kafka
// describes (kafkaBrokerKeys), plus the other keys this node was given in server.properties or
// holds as dynamic configs, as Kafka lists every key of its originals. A key's value, source and
// synonyms come from its layers (brokerLayers); keys ringbroker does not act on are read-only,
// with Kafka's default, and say so in their documentation.

// configLayer is one place a config's value may come from, in DescribeConfigs' terms.
type configLayer struct {
	name   string
	value  *string
	source kmsg.ConfigSource
}

// brokerSynonyms lists the keys whose values stand for name's, name's own group first: the
// other units of a time (log.retention.ms, log.retention.minutes, log.retention.hours), the
// fallback of log.flush.interval.ms, or the key a listener override overrides.
func brokerSynonyms(name string) []string {
	for _, g := range kafkaSynonymGroups {
		if slices.Contains(g, name) {
			return g
		}
	}
	if name == "log.flush.interval.ms" {
		return []string{name, "log.flush.scheduler.interval.ms"}
	}
	if base, ok := listenerOverrideBase(name); ok {
		return []string{name, base}
	}
	return []string{name}
}

// listenerOverrideBase returns the key that the listener override name
// (listener.name.<listener>.<key>, or .<mechanism>.<key>) sets for one listener.
func listenerOverrideBase(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, listenerPropPrefix)
	if !ok {
		return "", false
	}
	_, key, ok := strings.Cut(rest, ".")
	if !ok || key == "" {
		return "", false
	}
	for _, m := range listenerMechanismKeys {
		if strings.HasSuffix(key, "."+m) {
			return m, true
		}
	}
	return key, true
}

// brokerDefault is key's default: ringbroker's for the keys it acts on, Kafka's for the others;
// nil when the key has none (Kafka's null).
func brokerDefault(key string) *string {
	d, ours := lookupBrokerConfig(key)
	if ours && d.synonymOf != "" && d.scale == 0 {
		return brokerDefault(d.synonymOf)
	}
	k, kafka := lookupKafkaBrokerKey(key)
	switch {
	case ours && d.dynamicOnly:
		return nil // no static default: only kafka-configs sets it
	case ours && d.get != nil || ours && d.synonymOf != "":
		if d.dflt != "" || kafka && k.dflt == "" {
			v := d.dflt
			return &v
		}
		return nil
	case kafka:
		return k.defaultValue()
	}
	return nil
}

// brokerLayers lists where broker config key gets its value on this node, most important
// first, as Kafka's ConfigHelper.configSynonyms: for each source in turn (this broker's dynamic
// configs, the cluster-wide default ones, server.properties, the defaults), the value of key
// and of each of its synonyms that the source has; then everything before the first layer of
// key itself is dropped, so that a key unset everywhere has none. The first layer is in force.
func (b *Broker) brokerLayers(im *meta.Image, key string) []configLayer {
	mapLookup := func(m map[string]string) func(string) *string {
		return func(n string) *string {
			if v, ok := m[n]; ok {
				return &v
			}
			return nil
		}
	}
	sources := []struct {
		source kmsg.ConfigSource
		value  func(string) *string
	}{
		{kmsg.ConfigSourceDynamicBrokerConfig, mapLookup(im.BrokerConfigs[b.brokerResource()])},
		{kmsg.ConfigSourceDynamicDefaultBrokerConfig, mapLookup(im.BrokerConfigs[""])},
		{sourceStaticBroker, mapLookup(b.cfg.static)},
		{sourceDefault, brokerDefault},
	}
	var out []configLayer
	for _, s := range sources {
		for _, n := range brokerSynonyms(key) {
			if v := s.value(n); v != nil {
				out = append(out, configLayer{n, v, s.source})
			}
		}
	}
	for i, l := range out {
		if l.name == key {
			return out[i:]
		}
	}
	return nil
}

// describedBrokerKeys lists the keys DescribeConfigs lists for this broker, sorted: Kafka's,
// and every other key set in server.properties or as a dynamic config of this broker or of the
// cluster-wide default.
func (b *Broker) describedBrokerKeys(im *meta.Image) []string {
	names := map[string]bool{}
	for _, k := range kafkaBrokerKeys {
		names[k.name] = true
	}
	for n := range b.cfg.static {
		names[n] = true
	}
	for _, res := range []string{b.brokerResource(), ""} {
		for n := range im.BrokerConfigs[res] {
			names[n] = true
		}
	}
	return slices.Sorted(maps.Keys(names))
}

// brokerKeyKind is the type of broker config key, false for a key neither ringbroker nor Kafka
// knows.
func brokerKeyKind(key string) (configKind, bool) {
	if base, ok := listenerOverrideBase(key); ok {
		key = base
	}
	if d, ok := lookupBrokerConfig(key); ok {
		return d.kind, true
	}
	if k, ok := lookupKafkaBrokerKey(key); ok {
		return k.kind, true
	}
	return 0, false
}

// notActedOnDoc ends the documentation of the keys ringbroker lists as Kafka does without
// acting on them.
const notActedOnDoc = ". ringbroker lists this key with Kafka's default and does not act on it"

// describeBrokerEntry is the DescribeConfigs entry of broker config key, as Kafka's
// ConfigHelper.createBrokerConfigEntry makes it: the value and source of its first layer, the
// layers as synonyms when asked, read-only unless ringbroker changes it live, and every value
// null for a sensitive key: a password, or a key of unknown type, as Kafka does.
func (b *Broker) describeBrokerEntry(im *meta.Image, key string, synonyms, docs bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = key
	d, ours := lookupBrokerConfig(key)
	var layers []configLayer
	if ours && d.synonymOf != "" && d.scale == 0 {
		// An alias (broker.id) is described as the key it names, under its own name.
		layers = b.brokerLayers(im, d.synonymOf)
		for i := range layers {
			layers[i].name = key
		}
	} else {
		layers = b.brokerLayers(im, key)
	}
	c.Source = sourceDefault
	if len(layers) > 0 {
		c.Value, c.Source = layers[0].value, layers[0].source
	}
	c.ReadOnly = !ours || !d.dynamic
	kind, known := brokerKeyKind(key)
	c.ConfigType = kmsg.ConfigTypeUnknown
	if known {
		c.ConfigType = kind.configType()
	}
	c.IsSensitive = !known || kind == kindPassword
	if synonyms {
		c.ConfigSynonyms = synonymsOf(layers)
	}
	if c.IsSensitive {
		c.Value = nil
		for i := range c.ConfigSynonyms {
			c.ConfigSynonyms[i].Value = nil
		}
	}
	if docs {
		if ours {
			c.Documentation = kmsg.StringPtr(d.doc)
		} else if k, ok := lookupKafkaBrokerKey(key); ok {
			c.Documentation = kmsg.StringPtr(k.doc + notActedOnDoc)
		} else if base, ok := listenerOverrideBase(key); ok {
			c.Documentation = kmsg.StringPtr(base + " for one listener")
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
