package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBrokerConfigsCommand runs Apache Kafka's kafka-configs (ConfigCommand) on dynamic broker
// configs: a per-broker and a cluster-wide default value, described with their sources and
// synonyms, seen through a topic's configs, kept across a restart, refused for a read-only key
// as Kafka refuses it, and deleted again.
func TestBrokerConfigsCommand(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t)
		configs := func(args ...string) string {
			t.Helper()
			return runJava(t, "kafka.admin.ConfigCommand", append([]string{"--bootstrap-server", b.Addr()}, args...)...).stdout
		}
		expect := func(out string, want ...string) {
			t.Helper()
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Fatalf("kafka-configs output lacks %q:\n%s", w, out)
				}
			}
		}
		expect(configs("--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "log.retention.bytes=4000000,leader.replication.throttled.rate=1000000"),
			"Completed updating config for broker 1.")
		expect(configs("--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "log.retention.bytes=3000000"),
			"Completed updating default config for brokers in the cluster.")
		topicCmd := func(args ...string) string {
			t.Helper()
			return runJava(t, "org.apache.kafka.tools.TopicCommand", append([]string{"--bootstrap-server", b.Addr()}, args...)...).stdout
		}
		expect(topicCmd("--create", "--topic", "dyn", "--partitions", "1", "--replication-factor", "1"), "Created topic dyn")

		check := func(when string) {
			t.Helper()
			t.Log(when)
			expect(configs("--entity-type", "brokers", "--entity-name", "1", "--describe"),
				"Dynamic configs for broker 1 are:",
				"log.retention.bytes=4000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes=4000000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=3000000, DEFAULT_CONFIG:log.retention.bytes=-1}",
				"leader.replication.throttled.rate=1000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=1000000}")
			expect(configs("--entity-type", "brokers", "--entity-default", "--describe"),
				"Default configs for brokers in the cluster are:",
				"log.retention.bytes=3000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=3000000}")
			expect(configs("--entity-type", "brokers", "--entity-name", "1", "--describe", "--all"),
				"All configs for broker 1 are:",
				"log.retention.bytes=4000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes=4000000,",
				"log.segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}")
			expect(configs("--entity-type", "topics", "--entity-name", "dyn", "--describe", "--all"),
				"retention.bytes=4000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes=4000000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=3000000, DEFAULT_CONFIG:log.retention.bytes=-1}")
		}
		check("after alter")
		b.Stop()
		b.Restart()
		check("after restart")

		// A read-only key is INVALID_REQUEST with Kafka's message.
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		alter := func(op kmsg.IncrementalAlterConfigOp, name, value string) (int16, string) {
			t.Helper()
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			res := kmsg.NewIncrementalAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Op, c.Name, c.Value = op, name, kmsg.StringPtr(value)
			res.Configs = append(res.Configs, c)
			req.Resources = append(req.Resources, res)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			r := resp.Resources[0]
			if r.ErrorMessage != nil {
				return r.ErrorCode, *r.ErrorMessage
			}
			return r.ErrorCode, ""
		}
		if code, msg := alter(kmsg.IncrementalAlterConfigOpSet, "node.id", "2"); code != kerr.InvalidRequest.Code || !strings.Contains(msg, "Cannot update these configs dynamically: Set(node.id)") {
			t.Fatalf("set node.id dynamically: error %v %q; want INVALID_REQUEST, Cannot update these configs dynamically", kerr.ErrorForCode(code), msg)
		}
		// A key Kafka does not know is stored, without effect, and can be deleted again.
		for _, op := range []kmsg.IncrementalAlterConfigOp{kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete} {
			if code, msg := alter(op, "no.such.key", "1"); code != 0 {
				t.Fatalf("%v of an unknown key: error %v %q; want none", op, kerr.ErrorForCode(code), msg)
			}
		}

		expect(configs("--entity-type", "brokers", "--entity-name", "1", "--alter", "--delete-config", "log.retention.bytes,leader.replication.throttled.rate"),
			"Completed updating config for broker 1.")
		expect(configs("--entity-type", "brokers", "--entity-default", "--alter", "--delete-config", "log.retention.bytes"),
			"Completed updating default config for brokers in the cluster.")
		out := configs("--entity-type", "brokers", "--entity-name", "1", "--describe", "--all")
		expect(out, "log.retention.bytes=-1 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.bytes=-1}")
		// (Kafka keeps the min.insync.replicas default its storage format step wrote.)
		if strings.Contains(out, "DYNAMIC_BROKER_CONFIG") || strings.Contains(out, "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes") {
			t.Fatalf("dynamic configs left after --delete-config:\n%s", out)
		}
		expect(configs("--entity-type", "topics", "--entity-name", "dyn", "--describe", "--all"),
			"retention.bytes=-1 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.bytes=-1}")
	})
}
