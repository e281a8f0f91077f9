package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/brokertest"
)

// TestBrokerConfigsCommand runs Apache Kafka's kafka-configs (ConfigCommand) on broker and
// topic configs: --describe --all lists the keys Kafka 4.1.1 lists (broker/testdata), with
// Kafka's sources and synonym chains; a per-broker and a cluster-wide default value are
// described with their sources and synonyms, seen through a topic's configs, kept across a
// restart, and deleted again; a read-only key is refused as Kafka refuses it, and one Kafka
// changes live that ringbroker does not act on with ringbroker's own message; a topic may not
// enable remote storage on either.
// With RINGBROKER_UPDATE_KAFKA_CONFIGS=1 and E2E_BROKER=kafka it rewrites the testdata from
// Kafka's answers instead.
func TestBrokerConfigsCommand(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t)
		if os.Getenv(updateKafkaConfigsEnv) == "1" {
			if b.Kind() != "kafka" {
				t.Fatalf("%s=1 needs %s=kafka", updateKafkaConfigsEnv, envBroker)
			}
			writeKafkaConfigsTestdata(t, b)
			return
		}
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
		// Kafka's harness sets only Kafka's keys; ringbroker's also its own metrics.listen and,
		// with --io, io.backend.
		started := []string{}
		if b.Kind() == "ringbroker" {
			started = append(started, "metrics.listen", "io.backend")
		}
		brokerKeys := kafkaConfigKeys(t, "kafka-4.1.1-broker-configs.tsv")
		out := configs("--entity-type", "brokers", "--entity-name", "1", "--describe", "--all")
		sameKeys(t, "broker", out, brokerKeys, started)
		expect(out,
			"  log.retention.ms=null sensitive=false synonyms={}\n",
			"  log.retention.hours=168 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.hours=168}\n",
			"  log.retention.minutes=null sensitive=false synonyms={}\n",
			"  log.roll.ms=null sensitive=false synonyms={}\n",
			"  log.cleaner.threads=1 sensitive=false synonyms={DEFAULT_CONFIG:log.cleaner.threads=1}\n",
			"  remote.log.storage.system.enable=false sensitive=false synonyms={DEFAULT_CONFIG:remote.log.storage.system.enable=false}\n",
			"  ssl.keystore.password=null sensitive=true synonyms={}\n",
			// Both harnesses set log.dirs; Kafka's has no default, ringbroker's ./data.
			"  log.dirs="+filepath.Join(b.dir, "data")+" sensitive=false synonyms={STATIC_BROKER_CONFIG:log.dirs="+filepath.Join(b.dir, "data"))

		expect(configs("--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "log.retention.bytes=4000000,leader.replication.throttled.rate=1000000,log.retention.ms=7200000"),
			"Completed updating config for broker 1.")
		expect(configs("--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "log.retention.bytes=3000000"),
			"Completed updating default config for brokers in the cluster.")
		topicCmd := func(args ...string) string {
			t.Helper()
			return runJava(t, "org.apache.kafka.tools.TopicCommand", append([]string{"--bootstrap-server", b.Addr()}, args...)...).stdout
		}
		expect(topicCmd("--create", "--topic", "dyn", "--partitions", "1", "--replication-factor", "1"), "Created topic dyn")

		topicKeys := kafkaConfigKeys(t, "kafka-4.1.1-topic-configs.tsv")
		check := func(when string) {
			t.Helper()
			t.Log(when)
			expect(configs("--entity-type", "brokers", "--entity-name", "1", "--describe"),
				"Dynamic configs for broker 1 are:",
				"log.retention.bytes=4000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes=4000000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=3000000, DEFAULT_CONFIG:log.retention.bytes=-1}",
				"leader.replication.throttled.rate=1000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=1000000}",
				"log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000, DEFAULT_CONFIG:log.retention.hours=168}")
			expect(configs("--entity-type", "brokers", "--entity-default", "--describe"),
				"Default configs for brokers in the cluster are:",
				"log.retention.bytes=3000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=3000000}")
			all := configs("--entity-type", "brokers", "--entity-name", "1", "--describe", "--all")
			sameKeys(t, "broker", all, brokerKeys, append(started, "leader.replication.throttled.rate"))
			expect(all,
				"All configs for broker 1 are:",
				"log.retention.bytes=4000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes=4000000,",
				"log.segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}",
				"  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000, DEFAULT_CONFIG:log.retention.hours=168}\n")
			topic := configs("--entity-type", "topics", "--entity-name", "dyn", "--describe", "--all")
			sameKeys(t, "topic", topic, topicKeys, nil)
			expect(topic,
				"retention.bytes=4000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes=4000000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=3000000, DEFAULT_CONFIG:log.retention.bytes=-1}",
				"  retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000, DEFAULT_CONFIG:log.retention.hours=168}\n",
				"  segment.ms=604800000 sensitive=false synonyms={}\n",
				"  delete.retention.ms=86400000 sensitive=false synonyms={DEFAULT_CONFIG:log.cleaner.delete.retention.ms=86400000}\n",
				"  remote.storage.enable=false sensitive=false synonyms={}\n")
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
		alterResource := func(typ kmsg.ConfigResourceType, resource string, op kmsg.IncrementalAlterConfigOp, name, value string) (int16, string) {
			t.Helper()
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			res := kmsg.NewIncrementalAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = typ, resource
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
		alter := func(op kmsg.IncrementalAlterConfigOp, name, value string) (int16, string) {
			t.Helper()
			return alterResource(kmsg.ConfigResourceTypeBroker, "1", op, name, value)
		}
		// Neither broker has remote storage: a topic may not enable it.
		if code, msg := alterResource(kmsg.ConfigResourceTypeTopic, "dyn", kmsg.IncrementalAlterConfigOpSet, "remote.storage.enable", "true"); code != kerr.InvalidConfig.Code ||
			!strings.Contains(msg, "Tiered Storage functionality is disabled in the broker") {
			t.Fatalf("set remote.storage.enable on a topic: error %v %q; want INVALID_CONFIG, Tiered Storage functionality is disabled", kerr.ErrorForCode(code), msg)
		}
		for _, k := range []string{"node.id", "log.retention.hours"} {
			if code, msg := alter(kmsg.IncrementalAlterConfigOpSet, k, "2"); code != kerr.InvalidRequest.Code || !strings.Contains(msg, "Cannot update these configs dynamically: Set("+k+")") {
				t.Fatalf("set %s dynamically: error %v %q; want INVALID_REQUEST, Cannot update these configs dynamically", k, kerr.ErrorForCode(code), msg)
			}
		}
		// Kafka changes log.cleaner.threads live; ringbroker, which does not act on it, refuses it.
		code, msg := alter(kmsg.IncrementalAlterConfigOpSet, "log.cleaner.threads", "2")
		switch {
		case b.Kind() == "kafka" && code != 0:
			t.Fatalf("Kafka: set log.cleaner.threads: error %v %q", kerr.ErrorForCode(code), msg)
		case b.Kind() == "kafka":
			if code, msg := alter(kmsg.IncrementalAlterConfigOpDelete, "log.cleaner.threads", ""); code != 0 {
				t.Fatalf("Kafka: delete log.cleaner.threads: error %v %q", kerr.ErrorForCode(code), msg)
			}
		case code != kerr.InvalidRequest.Code || !strings.Contains(msg, "ringbroker does not support changing log.cleaner.threads"):
			t.Fatalf("set log.cleaner.threads: error %v %q; want INVALID_REQUEST, ringbroker does not support changing it", kerr.ErrorForCode(code), msg)
		}
		// A key Kafka does not know is stored, without effect, and can be deleted again.
		for _, op := range []kmsg.IncrementalAlterConfigOp{kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete} {
			if code, msg := alter(op, "no.such.key", "1"); code != 0 {
				t.Fatalf("%v of an unknown key: error %v %q; want none", op, kerr.ErrorForCode(code), msg)
			}
		}

		expect(configs("--entity-type", "brokers", "--entity-name", "1", "--alter", "--delete-config", "log.retention.bytes,leader.replication.throttled.rate,log.retention.ms"),
			"Completed updating config for broker 1.")
		expect(configs("--entity-type", "brokers", "--entity-default", "--alter", "--delete-config", "log.retention.bytes"),
			"Completed updating default config for brokers in the cluster.")
		out = configs("--entity-type", "brokers", "--entity-name", "1", "--describe", "--all")
		expect(out, "log.retention.bytes=-1 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.bytes=-1}")
		sameKeys(t, "broker", out, brokerKeys, started)
		// (Kafka keeps the min.insync.replicas default its storage format step wrote.)
		if strings.Contains(out, "DYNAMIC_BROKER_CONFIG") || strings.Contains(out, "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes") {
			t.Fatalf("dynamic configs left after --delete-config:\n%s", out)
		}
		expect(configs("--entity-type", "topics", "--entity-name", "dyn", "--describe", "--all"),
			"retention.bytes=-1 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.bytes=-1}")
	})
}

// updateKafkaConfigsEnv, set to 1 with E2E_BROKER=kafka, makes TestBrokerConfigsCommand write
// the testdata of Kafka's config keys from Kafka's answers.
const updateKafkaConfigsEnv = "RINGBROKER_UPDATE_KAFKA_CONFIGS"

// kafkaConfigsTestdata is where the lists of Kafka's config keys are, shared with broker's
// unit tests.
func kafkaConfigsTestdata(name string) string {
	return filepath.Join(repoRoot(), "broker", "testdata", name)
}

// kafkaConfigKeys reads the key names of a testdata list of Kafka's config keys.
func kafkaConfigKeys(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(kafkaConfigsTestdata(name))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			k, _, _ := strings.Cut(line, "\t")
			keys = append(keys, k)
		}
	}
	return keys
}

// sameKeys fails unless the keys kafka-configs --describe --all printed in out are want, plus
// those of extra that the broker lists beyond Kafka's (keys the test set that Kafka has not).
func sameKeys(t *testing.T, what, out string, want, extra []string) {
	t.Helper()
	var got []string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "  "); ok {
			k, _, _ := strings.Cut(line, "=")
			got = append(got, k)
		}
	}
	var missing, unexpected []string
	for _, k := range want {
		if !slices.Contains(got, k) {
			missing = append(missing, k)
		}
	}
	for _, k := range got {
		if !slices.Contains(want, k) && !slices.Contains(extra, k) {
			unexpected = append(unexpected, k)
		}
	}
	if len(missing) > 0 || len(unexpected) > 0 {
		t.Fatalf("%s configs: %d keys listed; missing Kafka 4.1.1's %v, unexpected %v", what, len(got), missing, unexpected)
	}
}

// writeKafkaConfigsTestdata asks Kafka for a broker's and a new topic's configs with synonyms
// and writes the testdata lists: each key's type, its default (its DEFAULT_CONFIG value, null
// if it has none) and, for broker keys, its update mode: read-only, or per-broker when Kafka
// refuses a validate-only change of it at the cluster-wide default and cluster-wide otherwise.
func writeKafkaConfigsTestdata(t *testing.T, b *Broker) {
	t.Helper()
	cl := b.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b.CreateTopic(t, "defaults", 1)
	describe := func(typ kmsg.ConfigResourceType, name string) []kmsg.DescribeConfigsResponseResourceConfig {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeSynonyms = true
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = typ, name
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("describe %v %s: %v", typ, name, err)
		}
		cfgs := resp.Resources[0].Configs
		slices.SortFunc(cfgs, func(x, y kmsg.DescribeConfigsResponseResourceConfig) int { return strings.Compare(x.Name, y.Name) })
		return cfgs
	}
	dflt := func(c kmsg.DescribeConfigsResponseResourceConfig) string {
		if c.Source == kmsg.ConfigSourceDefaultConfig {
			return brokertest.ConfigValue(c.Value)
		}
		for _, s := range c.ConfigSynonyms {
			if s.Source == kmsg.ConfigSourceDefaultConfig {
				return brokertest.ConfigValue(s.Value)
			}
		}
		return "null"
	}
	mode := func(c kmsg.DescribeConfigsResponseResourceConfig) string {
		if c.ReadOnly {
			return "read-only"
		}
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = true
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType = kmsg.ConfigResourceTypeBroker
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Value = c.Name, kmsg.StringPtr("1")
		if c.Value != nil && *c.Value != "" {
			op.Value = c.Value
		}
		res.Configs = append(res.Configs, op)
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("validate %s at the cluster default: %v", c.Name, err)
		}
		if m := resp.Resources[0].ErrorMessage; m != nil && (strings.Contains(*m, "default cluster level") || strings.Contains(*m, "per-listener")) {
			return "per-broker"
		}
		return "cluster-wide"
	}
	var broker strings.Builder
	broker.WriteString("# Apache Kafka 4.1.1's broker config keys, as DescribeConfigs v4 lists them for node 1 of a\n" +
		"# single-node KRaft cluster (broker and controller): name, type, default (null: none), and update\n" +
		"# mode (read-only; per-broker or cluster-wide from a validate-only change at the cluster default).\n" +
		"# Regenerate with " + updateKafkaConfigsEnv + "=1 E2E_BROKER=kafka go test -run TestBrokerConfigsCommand ./e2e/\n")
	for _, c := range describe(kmsg.ConfigResourceTypeBroker, "1") {
		fmt.Fprintf(&broker, "%s\t%s\t%s\t%s\n", c.Name, c.ConfigType, dflt(c), mode(c))
	}
	var topic strings.Builder
	topic.WriteString("# Apache Kafka 4.1.1's topic config keys, as DescribeConfigs v4 lists them for a topic without\n" +
		"# overrides on a broker with Kafka's defaults: name, type, value.\n" +
		"# Regenerate with " + updateKafkaConfigsEnv + "=1 E2E_BROKER=kafka go test -run TestBrokerConfigsCommand ./e2e/\n")
	for _, c := range describe(kmsg.ConfigResourceTypeTopic, "defaults") {
		fmt.Fprintf(&topic, "%s\t%s\t%s\n", c.Name, c.ConfigType, brokertest.ConfigValue(c.Value))
	}
	writeFile(t, kafkaConfigsTestdata("kafka-4.1.1-broker-configs.tsv"), broker.String())
	writeFile(t, kafkaConfigsTestdata("kafka-4.1.1-topic-configs.tsv"), topic.String())
}
