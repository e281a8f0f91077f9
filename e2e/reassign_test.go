package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/internal/testutil"
)

// TestReassignPartitions moves a partition with Apache Kafka's kafka-reassign-partitions on a
// 4-node cluster (Apache Kafka with E2E_BROKER=kafka) while an idempotent acks=all producer writes to it. A move to a
// killed broker stays in progress (--list and --verify show it) until --cancel reverts it.
// Then, with every broker up, the partition moves from brokers 1,2,3 to 1,2,4 (the new
// replica catches up, then the old one is removed and its copy deleted), and on to 4,2,3 (the
// leader, broker 1, leaves and leadership moves). --verify reports each move complete,
// --list shows none left, kafka-topics describes the new replicas and ISR, and every
// acknowledged record is read back once, in order.
func TestReassignPartitions(t *testing.T) {
	nodes := startCluster(t, 4)
	var addrs []string
	for _, b := range nodes {
		addrs = append(addrs, b.Addr())
	}
	bootstrap := strings.Join(addrs, ",")
	const topic = "moving"
	out := runJava(t, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--create", "--topic", topic,
		"--replica-assignment", "1:2:3", "--config", "min.insync.replicas=2").stdout
	if !strings.Contains(out, "Created topic "+topic) {
		t.Fatalf("create: unexpected output:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	describe := func() (leader int, replicas, isr []int, text string) {
		t.Helper()
		text = runJava(t, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--describe", "--topic", topic).stdout
		m := regexp.MustCompile(`Partition: 0\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]*)`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("kafka-topics --describe: no line for partition 0:\n%s", text)
		}
		leader, _ = strconv.Atoi(m[1])
		return leader, ints(m[2]), ints(m[3]), text
	}
	testutil.WaitFor(t, clusterTimeout, func() error {
		if leader, replicas, isr, text := describe(); leader != 1 || !slices.Equal(replicas, []int{1, 2, 3}) || len(isr) != 3 {
			return fmt.Errorf("want leader 1, replicas 1,2,3 all in sync:\n%s", text)
		}
		return nil
	})

	prod := startAckedProducer(ctx, t, addrs, topic)
	prod.waitAcks(t, "before the first move", 500)

	reassign := func(args ...string) string {
		t.Helper()
		return runJava(t, "org.apache.kafka.tools.reassign.ReassignPartitionsCommand", append([]string{"--bootstrap-server", bootstrap}, args...)...).stdout
	}
	move := func(target []int) {
		t.Helper()
		var ids []string
		for _, r := range target {
			ids = append(ids, strconv.Itoa(r))
		}
		plan := filepath.Join(t.TempDir(), "reassign.json")
		writeFile(t, plan, fmt.Sprintf(`{"version":1,"partitions":[{"topic":%q,"partition":0,"replicas":[%s]}]}`, topic, strings.Join(ids, ",")))
		out := reassign("--reassignment-json-file", plan, "--execute")
		if !strings.Contains(out, "Successfully started partition reassignment for "+topic+"-0") {
			t.Fatalf("--execute to %v: unexpected output:\n%s", target, out)
		}
		testutil.WaitFor(t, clusterTimeout, func() error {
			out := reassign("--reassignment-json-file", plan, "--verify")
			if !strings.Contains(out, "Reassignment of partition "+topic+"-0 is completed.") {
				return fmt.Errorf("--verify to %v:\n%s", target, out)
			}
			return nil
		})
		if out := reassign("--list"); !strings.Contains(out, "No partition reassignments found.") {
			t.Fatalf("--list after the move to %v:\n%s", target, out)
		}
		testutil.WaitFor(t, clusterTimeout, func() error {
			leader, replicas, isr, text := describe()
			slices.Sort(isr)
			want := slices.Sorted(slices.Values(target))
			if !slices.Equal(replicas, target) || !slices.Equal(isr, want) || !slices.Contains(target, leader) {
				return fmt.Errorf("after the move to %v: want those replicas, all in sync, one of them leading:\n%s", target, text)
			}
			return nil
		})
		prod.waitAcks(t, fmt.Sprintf("after the move to %v", target), 500)
	}

	// A move to a broker that is down waits for it, and can be cancelled. Kafka's tool refuses
	// to start a move to a broker missing from the cluster, so franz-go starts it; Kafka's
	// controller, like ringbroker's, takes any registered broker.
	nodes[3].Kill()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs[:3]...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, []int32{1, 2, 4})
	res, err := kadm.NewClient(cl).AlterPartitionAssignments(ctx, req)
	if err != nil || res[topic][0].Err != nil {
		t.Fatalf("start a move to the killed broker 4: %v %v", err, res)
	}
	plan := filepath.Join(t.TempDir(), "stuck.json")
	writeFile(t, plan, fmt.Sprintf(`{"version":1,"partitions":[{"topic":%q,"partition":0,"replicas":[1,2,4]}]}`, topic))
	if out := reassign("--list"); !strings.Contains(out, topic+"-0: replicas: 1,2,4,3. adding: 4. removing: 3.") {
		t.Fatalf("--list with a move in progress:\n%s", out)
	}
	if out := reassign("--reassignment-json-file", plan, "--verify"); !strings.Contains(out, "Reassignment of partition "+topic+"-0 is still in progress.") {
		t.Fatalf("--verify with a move in progress:\n%s", out)
	}
	// Clearing the throttles would ask the killed broker too, which Kafka's tool cannot reach
	// on Apache Kafka either.
	if out := reassign("--reassignment-json-file", plan, "--cancel", "--preserve-throttles"); !strings.Contains(out, "Successfully cancelled partition reassignment for: "+topic+"-0") {
		t.Fatalf("--cancel: unexpected output:\n%s", out)
	}
	if leader, replicas, isr, text := describe(); leader != 1 || !slices.Equal(replicas, []int{1, 2, 3}) || len(isr) != 3 {
		t.Fatalf("after --cancel: want leader 1, replicas 1,2,3 all in sync:\n%s", text)
	}
	prod.waitAcks(t, "after the cancelled move", 500)
	nodes[3].Restart()

	move([]int{1, 2, 4})
	// The removed replica's copy is deleted from broker 3.
	testutil.WaitFor(t, clusterTimeout, func() error {
		matches, _ := filepath.Glob(filepath.Join(nodes[2].dir, "data", topic+"-0"))
		if len(matches) > 0 {
			return fmt.Errorf("broker 3 still holds %v", matches)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(nodes[3].dir, "data", topic+"-0")); err != nil {
		t.Fatalf("broker 4 holds no copy of %s-0 after the move: %v", topic, err)
	}
	move([]int{4, 2, 3})

	n := len(prod.finish(t))
	t.Logf("%d records acknowledged across a cancelled move and two moves", n)
	checkReadBackInOrder(ctx, t, addrs, topic, n)
}
