package broker

import (
	"sort"

	"ringbroker/broker/meta"
)

// sortedBrokers returns the registered brokers by node id.
func sortedBrokers(im *meta.Image) []meta.Broker {
	out := make([]meta.Broker, 0, len(im.Brokers))
	for _, br := range im.Brokers {
		out = append(out, br)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}
