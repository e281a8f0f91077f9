package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"ringbroker/internal/testutil"
)

// TestTopicCommandShowsISR runs Apache Kafka's kafka-topics against a 3-node cluster
// (Apache Kafka with E2E_BROKER=kafka): an RF 3 topic is described with its leader, three replicas and three in-sync
// replicas; --under-replicated-partitions lists nothing. With one broker killed the ISR shrinks
// to the other two and the tool lists the partition as under-replicated; restarted, the broker
// catches up and the ISR grows back to three.
func TestTopicCommandShowsISR(t *testing.T) {
	nodes := startCluster(t, 3)
	bootstrap := nodes[0].Addr() + "," + nodes[1].Addr() + "," + nodes[2].Addr()
	const topic = "isr-topic"
	topicCmd := func(args ...string) string {
		t.Helper()
		return runJava(t, "org.apache.kafka.tools.TopicCommand", append([]string{"--bootstrap-server", bootstrap}, args...)...).stdout
	}
	out := topicCmd("--create", "--topic", topic, "--partitions", "2", "--replication-factor", "3", "--config", "min.insync.replicas=2")
	if !strings.Contains(out, "Created topic "+topic) {
		t.Fatalf("create: unexpected output:\n%s", out)
	}
	line := regexp.MustCompile(`Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]*)`)
	// describe waits until kafka-topics shows every partition with want in-sync replicas and
	// returns each partition's replicas and ISR.
	describe := func(want int) (replicas, isr map[int][]int) {
		t.Helper()
		testutil.WaitFor(t, clusterTimeout, func() error {
			out := topicCmd("--describe", "--topic", topic)
			if !regexp.MustCompile(`Topic: ` + topic + `\s+TopicId: \S+\s+PartitionCount: 2\s+ReplicationFactor: 3\s+Configs: .*min.insync.replicas=2`).MatchString(out) {
				return fmt.Errorf("topic line missing or wrong:\n%s", out)
			}
			ms := line.FindAllStringSubmatch(out, -1)
			if len(ms) != 2 {
				return fmt.Errorf("want 2 partition lines:\n%s", out)
			}
			replicas, isr = map[int][]int{}, map[int][]int{}
			for _, m := range ms {
				p, _ := strconv.Atoi(m[1])
				replicas[p], isr[p] = ints(m[3]), ints(m[4])
				if leader, _ := strconv.Atoi(m[2]); len(isr[p]) != want || !slices.Contains(isr[p], leader) {
					return fmt.Errorf("partition %d: leader %d, ISR %v; want %d in sync with the leader among them:\n%s", p, leader, isr[p], want, out)
				}
				if len(replicas[p]) != 3 {
					return fmt.Errorf("partition %d: replicas %v; want 3", p, replicas[p])
				}
			}
			return nil
		})
		return replicas, isr
	}
	underReplicated := func() string {
		t.Helper()
		return strings.TrimSpace(topicCmd("--describe", "--topic", topic, "--under-replicated-partitions"))
	}

	replicas, _ := describe(3)
	if out := underReplicated(); out != "" {
		t.Fatalf("under-replicated partitions with every broker up:\n%s", out)
	}
	victim := nodes[2]
	victim.Kill()
	_, isr := describe(2)
	for p, members := range isr {
		if slices.Contains(members, 3) {
			t.Fatalf("partition %d: ISR %v still holds the killed node 3", p, members)
		}
	}
	if out := underReplicated(); strings.Count(out, "Partition:") != 2 {
		t.Fatalf("under-replicated partitions with node 3 down: want both partitions:\n%s", out)
	}
	victim.Restart()
	after, isr := describe(3)
	for p := range 2 {
		if !slices.Equal(after[p], replicas[p]) || !slices.Contains(isr[p], 3) {
			t.Fatalf("partition %d after the restart: replicas %v (were %v), ISR %v; want node 3 back in sync", p, after[p], replicas[p], isr[p])
		}
	}
	if out := underReplicated(); out != "" {
		t.Fatalf("under-replicated partitions after node 3 caught up:\n%s", out)
	}
}

// ints parses a comma-separated list of node ids as kafka-topics prints them.
func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out = append(out, n)
		}
	}
	return out
}
