package coord

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkConsumerGroupRebalance measures one full KIP-848 rebalance of a
// 100-member group on a 1000-partition topic: a member leaves and joins
// again, then every member heartbeats (reporting what it owns, as clients
// do) until all are at the new assignment epoch and own their targets.
func BenchmarkConsumerGroupRebalance(b *testing.B) {
	const n = 100
	topics := newFakeTopics()
	topics.set("t", 1000)
	cfg := testConfig()
	cfg.Topics = topics.snapshot
	c, err := New(cfg, discardStore{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	for p := range cfg.OffsetsPartitions {
		done := make(chan error, 1)
		if err := c.LoadPartition(int32(p), func(err error) { done <- err }); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	members := make([]*benchMember, n)
	for i := range members {
		members[i] = &benchMember{id: fmt.Sprintf("member-%03d", i)}
	}
	settle := func() int {
		heartbeats := 0
		for round := 0; ; round++ {
			if round > 20 {
				b.Fatal("group did not settle in 20 heartbeat rounds")
			}
			stable := true
			for _, m := range members {
				resp := callSync(b, c, m.request()).(*kmsg.ConsumerGroupHeartbeatResponse)
				heartbeats++
				if resp.ErrorCode != 0 {
					b.Fatalf("heartbeat of %s: error %d", m.id, resp.ErrorCode)
				}
				if m.apply(resp) {
					stable = false
				}
			}
			if stable {
				return heartbeats
			}
		}
	}
	settle()
	b.ResetTimer()
	total := 0
	for i := range b.N {
		m := members[i%n]
		leave := m.request()
		leave.MemberEpoch = epochLeave
		callSync(b, c, leave)
		m.joined, m.owned = false, nil
		total += settle()
	}
	b.ReportMetric(float64(total)/float64(b.N), "heartbeats/op")
}

// benchMember is a minimal KIP-848 client for the benchmark.
type benchMember struct {
	id     string
	epoch  int32
	joined bool
	owned  []kmsg.ConsumerGroupHeartbeatRequestTopic
}

func (m *benchMember) request() *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "bench", m.id, m.epoch
	req.Topics = m.owned
	if req.Topics == nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	if !m.joined {
		req.MemberEpoch, req.RebalanceTimeoutMillis = 0, 60000
		req.SubscribedTopicNames = []string{"t"}
	}
	return req
}

// apply adopts the response and reports whether anything changed.
func (m *benchMember) apply(resp *kmsg.ConsumerGroupHeartbeatResponse) bool {
	changed := !m.joined || resp.MemberEpoch != m.epoch
	m.joined, m.epoch = true, resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = m.owned[:0]
		for _, t := range resp.Assignment.Topics {
			m.owned = append(m.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
		changed = true
	}
	return changed
}
