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
// marked dynamic in brokerConfigDefs (live, onlyDynamic) may be set and take effect; Kafka's
// other dynamic keys (kafkaBrokerKeys) are refused with a message saying ringbroker does not
// change them, read-only ones as Kafka refuses them, and keys neither knows are stored as
// Kafka stores them, without effect.

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
	b.quotas.setRates(next.cfg.LeaderReplicationThrottledRate, next.cfg.FollowerReplicationThrottledRate, next.cfg.AlterLogDirsRate)
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
	if code, msg := b.validateBrokerConfigs(cur, next); code != nil {
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

// validateBrokerConfigs checks the keys an alteration sets or changes, from cur to next, as
// Kafka's DynamicBrokerConfig.validateConfigs does, whose errors Kafka answers with
// INVALID_REQUEST: a key Kafka cannot change dynamically is refused with Kafka's message; one
// Kafka changes dynamically but ringbroker does not (it does not act on it, or only at start)
// with a message that says so; keys neither knows are stored without effect, as Kafka stores
// them.
func (b *Broker) validateBrokerConfigs(cur, next map[string]string) (*kerr.Error, string) {
	var readOnlyKeys []string
	for _, k := range slices.Sorted(maps.Keys(next)) {
		if old, ok := cur[k]; ok && old == next[k] {
			continue
		}
		if reason, ok := notLive[k]; ok {
			return kerr.InvalidRequest, "Cannot update " + k + " dynamically on ringbroker: " + reason
		}
		d, ours := lookupBrokerConfig(k)
		kk, kafka := lookupKafkaBrokerKey(k)
		switch {
		case ours && d.dynamic:
			scratch := b.cfg
			if err := scratch.set(k, next[k]); err != nil {
				return kerr.InvalidRequest, fmt.Sprintf("Invalid value %s for configuration %s: %v", next[k], k, err)
			}
		case kafka && kk.mode != readOnly && ours:
			return kerr.InvalidRequest, "ringbroker does not support changing " + k + " dynamically (Kafka's update mode is " + kk.mode.String() +
				"): set it in server.properties and restart"
		case kafka && kk.mode != readOnly:
			return kerr.InvalidRequest, "ringbroker does not support changing " + k + ": it lists the key with Kafka's default and does not act on it"
		case ours || kafka:
			readOnlyKeys = append(readOnlyKeys, k)
		}
	}
	if len(readOnlyKeys) > 0 {
		return kerr.InvalidRequest, "Cannot update these configs dynamically: Set(" + strings.Join(readOnlyKeys, ", ") + ")"
	}
	return nil, ""
}
