package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"ringbroker/internal/testutil"
)

const (
	consoleRecords    = 1000
	perfRecords       = 200_000
	consolePartitions = 3
)

// TestKafkaTools drives the broker with Apache Kafka's own command-line tools, which
// use the Java client: TopicCommand, the console producer (idempotent by default), the
// console consumer with a consumer group and without one, and the performance tools users
// compare brokers with (kafka-producer-perf-test, kafka-consumer-perf-test, kafka-e2e-latency).
func TestKafkaTools(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		// As the reference Kafka of these tests runs: groups form without waiting for members.
		b := tg.start(t, "group.initial.rebalance.delay.ms=0")
		t.Run("TopicCommand", func(t *testing.T) { testTopicCommand(t, b) })
		t.Run("Console", func(t *testing.T) { testConsole(t, b) })
		t.Run("ProducerPerformance", func(t *testing.T) { testProducerPerformance(t, b) })
		t.Run("ConsumerPerformance", func(t *testing.T) { testConsumerPerformance(t, b) })
		t.Run("EndToEndLatency", func(t *testing.T) { testEndToEndLatency(t, b) })
	})
}

func testTopicCommand(t *testing.T, b *Broker) {
	const topic = "tools-topic"
	topicCmd := func(args ...string) string {
		t.Helper()
		args = append([]string{"--bootstrap-server", b.Addr()}, args...)
		return runJava(t, "org.apache.kafka.tools.TopicCommand", args...).stdout
	}

	out := topicCmd("--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1")
	if !strings.Contains(out, "Created topic "+topic) {
		t.Fatalf("create: unexpected output:\n%s", out)
	}
	if names := strings.Fields(topicCmd("--list")); !slices.Contains(names, topic) {
		t.Fatalf("list: %q missing from %q", topic, names)
	}
	// Describe once every partition has a leader, as a client would see it.
	b.WaitTopic(t, topic, 3)
	out = topicCmd("--describe", "--topic", topic)
	if !regexp.MustCompile(`Topic: ` + topic + `\s+TopicId: \S+\s+PartitionCount: 3\s+ReplicationFactor: 1`).MatchString(out) {
		t.Fatalf("describe: topic line missing or wrong:\n%s", out)
	}
	for p := range 3 {
		re := regexp.MustCompile(fmt.Sprintf(`Partition: %d\s+Leader: \d+\s+Replicas: \d+\s+Isr: \d+`, p))
		if !re.MatchString(out) {
			t.Fatalf("describe: partition %d line missing or without a leader:\n%s", p, out)
		}
	}

	topicCmd("--delete", "--topic", topic)
	adm := b.Admin(t)
	testutil.WaitFor(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return err
		}
		if topics.Has(topic) {
			return fmt.Errorf("topic %q still listed after delete", topic)
		}
		return nil
	})
	if names := strings.Fields(topicCmd("--list")); slices.Contains(names, topic) {
		t.Fatalf("list after delete: %q still in %q", topic, names)
	}
}

func testConsole(t *testing.T, b *Broker) {
	const topic = "tools-console"
	b.CreateTopic(t, topic, consolePartitions)

	var input []string
	for i := range consoleRecords {
		input = append(input, fmt.Sprintf("key-%d:value-%d-%s", i, i, strings.Repeat("x", i%37)))
	}
	runJavaStdin(t, []byte(strings.Join(input, "\n")+"\n"), "org.apache.kafka.tools.ConsoleProducer",
		"--bootstrap-server", b.Addr(), "--topic", topic,
		"--property", "parse.key=true", "--property", "key.separator=:")

	ends := b.EndOffsets(t, topic)
	var total int64
	for _, o := range ends {
		total += o
	}
	if total != consoleRecords {
		t.Fatalf("end offsets %v sum to %d after the console producer; want %d", ends, total, consoleRecords)
	}

	// consume runs the console consumer and returns the lines it printed, and its log.
	consume := func(extra ...string) (lines []string, log string) {
		t.Helper()
		args := append([]string{"--bootstrap-server", b.Addr(), "--topic", topic,
			"--timeout-ms", "60000", "--property", "print.key=true", "--property", "key.separator=:"}, extra...)
		res := runJava(t, "org.apache.kafka.tools.consumer.ConsoleConsumer", args...)
		if out := strings.TrimSuffix(res.stdout, "\n"); out != "" {
			lines = strings.Split(out, "\n")
		}
		return lines, tail(res.stderr, 8<<10)
	}

	t.Run("group", func(t *testing.T) {
		got, log := consume("--from-beginning", "--max-messages", fmt.Sprint(consoleRecords))
		want := slices.Clone(input)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("group consumer got %d lines, want the %d produced (first got %q); its log:\n%s",
				len(got), len(want), got[:min(len(got), 3)], log)
		}
		// The consumer joined a generated group and committed its offsets on exit.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		groups, err := b.Admin(t).ListGroups(ctx)
		if err != nil {
			t.Fatalf("list groups: %v", err)
		}
		if !slices.ContainsFunc(groups.Groups(), func(g string) bool { return strings.HasPrefix(g, "console-consumer-") }) {
			t.Fatalf("no console-consumer-* group among %v", groups.Groups())
		}
	})

	t.Run("partition", func(t *testing.T) {
		n := ends[0]
		if n == 0 {
			t.Fatalf("partition 0 is empty; end offsets %v", ends)
		}
		got, log := consume("--partition", "0", "--offset", "earliest", "--max-messages", fmt.Sprint(n))
		if int64(len(got)) != n {
			t.Fatalf("partition consumer got %d lines, want %d; its log:\n%s", len(got), n, log)
		}
		// Partition 0 holds a subsequence of the input, in produce order.
		next := 0
		for _, line := range got {
			i := slices.Index(input[next:], line)
			if i < 0 {
				t.Fatalf("partition 0 line %q is not in the input after position %d", line, next)
			}
			next += i + 1
		}
	})
}

func testProducerPerformance(t *testing.T, b *Broker) {
	const topic = "tools-perf"
	b.CreateTopic(t, topic, 3)
	res := runJava(t, "org.apache.kafka.tools.ProducerPerformance",
		"--topic", topic, "--num-records", fmt.Sprint(perfRecords), "--record-size", "100",
		"--throughput", "-1", "--producer-props", "bootstrap.servers="+b.Addr(), "acks=all")
	summary := regexp.MustCompile(fmt.Sprintf(`(?m)^%d records sent, [\d.]+ records/sec`, perfRecords))
	if !summary.MatchString(res.stdout) {
		t.Fatalf("ProducerPerformance printed no summary for %d records:\n%s\n%s", perfRecords, tail(res.stdout, 4<<10), tail(res.stderr, 4<<10))
	}
	if strings.Contains(res.stderr, "ERROR") {
		t.Fatalf("ProducerPerformance logged errors:\n%s", tail(res.stderr, 8<<10))
	}
	t.Logf("ProducerPerformance: %s", lastLine(res.stdout))
	var total int64
	for _, o := range b.EndOffsets(t, topic) {
		total += o
	}
	if total != perfRecords {
		t.Fatalf("end offsets sum to %d after ProducerPerformance; want %d", total, perfRecords)
	}
}

// testConsumerPerformance reads back, with kafka-consumer-perf-test in a consumer group, the
// records ProducerPerformance wrote.
func testConsumerPerformance(t *testing.T, b *Broker) {
	const topic = "tools-perf"
	res := runJava(t, "org.apache.kafka.tools.ConsumerPerformance",
		"--bootstrap-server", b.Addr(), "--topic", topic, "--messages", fmt.Sprint(perfRecords),
		"--timeout", "30000", "--group", "tools-perf-group")
	// The header, then one line: start.time, end.time, data.consumed.in.MB, MB.sec,
	// data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, ...
	fields := strings.Split(lastLine(res.stdout), ", ")
	if len(fields) < 6 || fields[4] != fmt.Sprint(perfRecords) {
		t.Fatalf("ConsumerPerformance did not read %d records:\n%s\n%s", perfRecords, tail(res.stdout, 4<<10), tail(res.stderr, 4<<10))
	}
	if strings.Contains(res.stderr, "ERROR") {
		t.Fatalf("ConsumerPerformance logged errors:\n%s", tail(res.stderr, 8<<10))
	}
	t.Logf("ConsumerPerformance: %s", lastLine(res.stdout))
}

// testEndToEndLatency runs kafka-e2e-latency: it creates its topic, then sends each record
// with acks=all and waits to consume it before sending the next.
func testEndToEndLatency(t *testing.T, b *Broker) {
	res := runJava(t, "org.apache.kafka.tools.EndToEndLatency", b.Addr(), "tools-e2e-latency", "500", "all", "100")
	avg := regexp.MustCompile(`(?m)^Avg latency: [\d.]+ ms$`)
	pct := regexp.MustCompile(`(?m)^Percentiles: 50th = \d+, 99th = \d+, 99.9th = \d+$`)
	if !avg.MatchString(res.stdout) || !pct.MatchString(res.stdout) {
		t.Fatalf("EndToEndLatency printed no latencies:\n%s\n%s", tail(res.stdout, 4<<10), tail(res.stderr, 4<<10))
	}
	if strings.Contains(res.stderr, "ERROR") {
		t.Fatalf("EndToEndLatency logged errors:\n%s", tail(res.stderr, 8<<10))
	}
	t.Logf("EndToEndLatency: %s", lastLine(res.stdout))
	var total int64
	for _, o := range b.EndOffsets(t, "tools-e2e-latency") {
		total += o
	}
	if total != 500 {
		t.Fatalf("end offsets sum to %d after EndToEndLatency; want 500", total)
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}
