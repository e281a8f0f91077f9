package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkCreate10kPartitions times creating 100 topics of 100 partitions each through the
// Kafka API, on a single node and in a 3-node cluster (through a node that may not lead the
// quorum), until every node's image has them all. Each partition holds one descriptor (its
// .log; the indexes are mapped without one), so 10,000 fit a 20,000 open-file limit.
func BenchmarkCreate10kPartitions(b *testing.B) {
	for _, n := range []int{0, 3} {
		name := "single"
		if n > 0 {
			name = fmt.Sprintf("cluster%d", n)
		}
		b.Run(name, func(b *testing.B) {
			nodes := startInProcessCluster(b, n)
			cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[len(nodes)-1].Addr().String()))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			b.ResetTimer()
			for it := range b.N {
				for i := range 100 {
					resp, err := adm.CreateTopic(context.Background(), 100, 1, nil, fmt.Sprintf("b%d-t%d", it, i))
					if err == nil {
						err = resp.Err
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				want := (it + 1) * 100
				for _, nd := range nodes {
					for deadline := time.Now().Add(time.Minute); len(nd.meta.Image().Topics) < want; {
						if time.Now().After(deadline) {
							b.Fatalf("node %d has %d topics, want %d", nd.cfg.NodeID, len(nd.meta.Image().Topics), want)
						}
						time.Sleep(time.Millisecond)
					}
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/10k-partitions")
		})
	}
}
