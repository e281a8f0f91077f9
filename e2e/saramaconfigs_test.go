package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"ringbroker/internal/testutil"
)

// TestSaramaAlterConfigs alters broker configs with sarama's ClusterAdmin.AlterConfig, which
// sends the older, non-incremental AlterConfigs (v1 for Kafka 2.1, v2 for 2.8): each call
// replaces the broker's whole set of dynamic configs. DescribeConfig shows each step, and a
// read-only key is refused with Kafka's message.
func TestSaramaAlterConfigs(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t)
		for _, v := range []sarama.KafkaVersion{sarama.V2_1_0_0, sarama.V2_8_0_0} {
			t.Run(v.String(), func(t *testing.T) {
				cfg := sarama.NewConfig()
				cfg.Version = v
				admin, err := sarama.NewClusterAdmin([]string{b.Addr()}, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer admin.Close()
				str := func(s string) *string { return &s }
				describe := func() map[string]sarama.ConfigEntry {
					t.Helper()
					entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: "1",
						ConfigNames: []string{"log.retention.bytes", "log.segment.bytes"}})
					if err != nil {
						t.Fatal(err)
					}
					out := map[string]sarama.ConfigEntry{}
					for _, e := range entries {
						out[e.Name] = e
					}
					return out
				}
				// Kafka's brokers apply a change a moment after the controller commits it.
				want := func(step string, key, value string, source sarama.ConfigSource) {
					t.Helper()
					testutil.WaitFor(t, 10*time.Second, func() error {
						if e := describe()[key]; e.Value != value || e.Source != source {
							return fmt.Errorf("%s: %s described as %q (%v), want %q (%v)", step, key, e.Value, e.Source, value, source)
						}
						return nil
					})
				}
				if err := admin.AlterConfig(sarama.BrokerResource, "1", map[string]*string{"log.retention.bytes": str("4000000"), "log.segment.bytes": str("536870912")}, false); err != nil {
					t.Fatal(err)
				}
				want("both set", "log.retention.bytes", "4000000", sarama.SourceDynamicBroker)
				want("both set", "log.segment.bytes", "536870912", sarama.SourceDynamicBroker)
				if err := admin.AlterConfig(sarama.BrokerResource, "1", map[string]*string{"log.segment.bytes": str("536870912")}, false); err != nil {
					t.Fatal(err)
				}
				want("one left out", "log.retention.bytes", "-1", sarama.SourceDefault)
				want("one left out", "log.segment.bytes", "536870912", sarama.SourceDynamicBroker)
				err = admin.AlterConfig(sarama.BrokerResource, "1", map[string]*string{"node.id": str("2")}, false)
				if err == nil || !strings.Contains(err.Error(), "Cannot update these configs dynamically") {
					t.Fatalf("set node.id: %v, want Kafka's refusal", err)
				}
				want("node.id refused", "log.segment.bytes", "536870912", sarama.SourceDynamicBroker)
				if err := admin.AlterConfig(sarama.BrokerResource, "1", map[string]*string{}, false); err != nil {
					t.Fatal(err)
				}
				want("none", "log.segment.bytes", "1073741824", sarama.SourceDefault)
			})
		}
	})
}
