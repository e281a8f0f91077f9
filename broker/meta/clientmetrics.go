package meta

import (
	"errors"
	"maps"
)

// errNoSubscriptionName says a ClientMetricsConfig record names no subscription; Kafka refuses
// such a resource before it writes a record ("Subscription name can't be empty").
var errNoSubscriptionName = errors.New("client metrics config record without a subscription name")

// applyClientMetricsConfig applies one ClientMetricsConfig record to im, which Apply is building, copying the maps it
// changes (subscriptions change rarely, so a copy per record costs nothing that matters).
func (im *Image) applyClientMetricsConfig(r Record) error {
	if r.ConfigResource == "" {
		return errNoSubscriptionName
	}
	subs := maps.Clone(im.ClientMetrics)
	if subs == nil {
		subs = map[string]map[string]string{}
	}
	cfg := maps.Clone(subs[r.ConfigResource])
	if cfg == nil {
		cfg = map[string]string{}
	}
	if r.ConfigValue == nil {
		delete(cfg, r.ConfigKey)
	} else {
		cfg[r.ConfigKey] = *r.ConfigValue
	}
	if len(cfg) == 0 {
		delete(subs, r.ConfigResource)
	} else {
		subs[r.ConfigResource] = cfg
	}
	if len(subs) == 0 {
		subs = nil
	}
	im.ClientMetrics, im.ClientMetricsEpoch = subs, im.ClientMetricsEpoch+1
	return nil
}
