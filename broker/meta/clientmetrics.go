package meta

import (
	"errors"
	"maps"
)

// errNoSubscriptionName says a ClientMetricsConfig record names no subscription; Kafka refuses
// such a resource before it writes a record ("Subscription name can't be empty").
var errNoSubscriptionName = errors.New("client metrics config record without a subscription name")

// errNoGroupName says a GroupConfig record names no group; Kafka refuses such a resource
// before it writes a record ("Group name must not be empty").
var errNoGroupName = errors.New("group config record without a group id")

// applyClientMetricsConfig applies one ClientMetricsConfig record to im, which Apply is
// building.
func (im *Image) applyClientMetricsConfig(r Record) error {
	if r.ConfigResource == "" {
		return errNoSubscriptionName
	}
	im.ClientMetrics, im.ClientMetricsEpoch = withResourceConfig(im.ClientMetrics, r), im.ClientMetricsEpoch+1
	return nil
}

// applyGroupConfig applies one GroupConfig record to im, which Apply is building.
func (im *Image) applyGroupConfig(r Record) error {
	if r.ConfigResource == "" {
		return errNoGroupName
	}
	im.GroupConfigs = withResourceConfig(im.GroupConfigs, r)
	return nil
}

// withResourceConfig returns configs (keys by resource name) with r's key set or removed,
// copying the maps it changes, as published maps are never modified (these configs change
// rarely, so a copy per record costs nothing that matters). A resource left without keys is
// removed, and an empty result is nil.
func withResourceConfig(configs map[string]map[string]string, r Record) map[string]map[string]string {
	next := maps.Clone(configs)
	if next == nil {
		next = map[string]map[string]string{}
	}
	cfg := maps.Clone(next[r.ConfigResource])
	if cfg == nil {
		cfg = map[string]string{}
	}
	if r.ConfigValue == nil {
		delete(cfg, r.ConfigKey)
	} else {
		cfg[r.ConfigKey] = *r.ConfigValue
	}
	if len(cfg) == 0 {
		delete(next, r.ConfigResource)
	} else {
		next[r.ConfigResource] = cfg
	}
	if len(next) == 0 {
		return nil
	}
	return next
}
