package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/internal/testutil"
)

// TestConsumerGroupRegexInternalTopic subscribes a KIP-848 franz-go consumer to an exact, quoted
// regex for __consumer_offsets beside a regex for user topics. Kafka resolves subscriptions
// against every topic of the metadata image, internal ones included, so the member is assigned
// the partitions of both.
func TestConsumerGroupRegexInternalTopic(t *testing.T) {
	b := startBroker(t, "netpoll", t.TempDir(), "group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=2",
		"group.consumer.heartbeat.interval.ms=500", "group.consumer.min.heartbeat.interval.ms=500")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "regex-orders"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	assigned := map[string]map[int32]bool{}
	consumer := newClient(t, b, kgo.ConsumerGroup("regex-internal"), kgo.ConsumeRegex(),
		kgo.ConsumeTopics(`\Q`+offsetsTopic+`\E`, `regex-.*`),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for topic, ps := range a {
				if assigned[topic] == nil {
					assigned[topic] = map[int32]bool{}
				}
				for _, p := range ps {
					assigned[topic][p] = true
				}
			}
		}))
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			consumer.PollFetches(ctx)
		}
	}()
	testutil.WaitFor(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(assigned[offsetsTopic]) != 2 || len(assigned["regex-orders"]) != 2 {
			return fmt.Errorf("assigned %v; want both partitions of %s and of regex-orders", describeAssigned(assigned), offsetsTopic)
		}
		return nil
	})
	cancel()
	<-polled
}

func describeAssigned(a map[string]map[int32]bool) map[string][]int32 {
	out := make(map[string][]int32, len(a))
	for topic, ps := range a {
		out[topic] = slices.Sorted(maps.Keys(ps))
	}
	return out
}
