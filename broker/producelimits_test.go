package broker

import (
	"testing"

	"ringbroker/broker/meta"
)

// BenchmarkProduceLimitsOf is the per-topic cost Produce pays on every request to read its
// topic configs (timestamps, cleanup policy, compression), for a topic without overrides.
func BenchmarkProduceLimitsOf(b *testing.B) {
	br := &Broker{cfg: DefaultConfig()}
	topic := &meta.Topic{Name: "t", Configs: map[string]string{}}
	for b.Loop() {
		_ = br.produceLimitsOf(topic)
	}
}
