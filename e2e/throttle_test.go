package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/internal/testutil"
)

// TestReassignThrottle moves a partition holding 3 MiB from broker 1 to brokers 1 and 2 with
// Apache Kafka's kafka-reassign-partitions --execute --throttle 262144 on a 2-node cluster
// (Apache Kafka with E2E_BROKER=kafka): the tool sets the broker throttle rates and the topic's
// throttled replicas, kafka-configs shows them, the new replica catches up at about the rate
// (a loose bound: not in the moment an unthrottled copy takes), and --verify, once the move is
// complete, removes every throttle again. ringbroker runs it on both I/O backends.
func TestReassignThrottle(t *testing.T) {
	if brokerKind() == "kafka" {
		testReassignThrottle(t)
		return
	}
	for _, io := range []string{"uring", "netpoll"} {
		t.Run(io, func(t *testing.T) { testReassignThrottle(t, "io.backend="+io) })
	}
}

func testReassignThrottle(t *testing.T, extra ...string) {
	const rate, size, topic = 256 << 10, 3 << 20, "throttled"
	nodes := startCluster(t, 2, extra...)
	bootstrap := nodes[0].Addr() + "," + nodes[1].Addr()
	out := runJava(t, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--create", "--topic", topic,
		"--replica-assignment", "1").stdout
	if !strings.Contains(out, "Created topic "+topic) {
		t.Fatalf("create: unexpected output:\n%s", out)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[0].Addr(), nodes[1].Addr()), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	value := make([]byte, 64<<10)
	for range size / len(value) {
		rand.Read(value)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	configs := func(args ...string) string {
		t.Helper()
		return runJava(t, "kafka.admin.ConfigCommand", append([]string{"--bootstrap-server", bootstrap}, args...)...).stdout
	}
	reassign := func(args ...string) string {
		t.Helper()
		return runJava(t, "org.apache.kafka.tools.reassign.ReassignPartitionsCommand", append([]string{"--bootstrap-server", bootstrap}, args...)...).stdout
	}
	plan := filepath.Join(t.TempDir(), "reassign.json")
	writeFile(t, plan, fmt.Sprintf(`{"version":1,"partitions":[{"topic":%q,"partition":0,"replicas":[1,2]}]}`, topic))
	start := time.Now()
	out = reassign("--reassignment-json-file", plan, "--execute", "--throttle", fmt.Sprint(rate))
	if !strings.Contains(out, fmt.Sprintf("The inter-broker throttle limit was set to %d B/s", rate)) ||
		!strings.Contains(out, "Successfully started partition reassignment for "+topic+"-0") {
		t.Fatalf("--execute --throttle: unexpected output:\n%s", out)
	}
	for _, id := range []string{"1", "2"} {
		out := configs("--entity-type", "brokers", "--entity-name", id, "--describe")
		for _, k := range []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate"} {
			if !strings.Contains(out, fmt.Sprintf("%s=%d sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:%s=%d}", k, rate, k, rate)) {
				t.Fatalf("broker %s after --execute --throttle: no %s:\n%s", id, k, out)
			}
		}
	}
	out = configs("--entity-type", "topics", "--entity-name", topic, "--describe")
	if !strings.Contains(out, "leader.replication.throttled.replicas=0:1") || !strings.Contains(out, "follower.replication.throttled.replicas=0:2") {
		t.Fatalf("topic after --execute --throttle: no throttled replicas:\n%s", out)
	}
	var verified string
	testutil.WaitFor(t, 2*time.Minute, func() error {
		verified = reassign("--reassignment-json-file", plan, "--verify")
		if !strings.Contains(verified, "Reassignment of partition "+topic+"-0 is completed.") {
			return fmt.Errorf("--verify:\n%s", verified)
		}
		return nil
	})
	took := time.Since(start)
	t.Logf("%d bytes moved under a %d B/s throttle in %v", size, rate, took.Round(100*time.Millisecond))
	// About size/rate (12 s); unthrottled, a few hundred milliseconds.
	if took < 5*time.Second || took > 100*time.Second {
		t.Fatalf("the throttled move took %v; want about %v", took, time.Duration(size/rate)*time.Second)
	}
	if !strings.Contains(verified, "Clearing broker-level throttles") || !strings.Contains(verified, "Clearing topic-level throttles on topic "+topic) {
		t.Fatalf("--verify of the completed move did not clear the throttles:\n%s", verified)
	}
	for _, id := range []string{"1", "2"} {
		if out := configs("--entity-type", "brokers", "--entity-name", id, "--describe"); strings.Contains(out, "throttled.rate") {
			t.Fatalf("broker %s after --verify: throttle left:\n%s", id, out)
		}
	}
	if out := configs("--entity-type", "topics", "--entity-name", topic, "--describe"); strings.Contains(out, "throttled.replicas") {
		t.Fatalf("topic after --verify: throttled replicas left:\n%s", out)
	}
}
