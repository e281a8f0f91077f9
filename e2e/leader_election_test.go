package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/internal/testutil"
)

// electionPartitions is the partition count of the leader election tests' topic: two preferred
// leaderships per broker of three.
const electionPartitions = 6

// TestLeaderElectionTool runs Apache Kafka's kafka-leader-election (LeaderElectionCommand)
// against a 3-node cluster (ringbroker, or Kafka with E2E_BROKER=kafka) with
// auto.leader.rebalance.enable=false. The preferred leader of partition 0 is SIGKILLed: its
// partitions fail over to other replicas, and once it is back in every ISR leadership stays
// away for several check intervals. The tool's preferred election for all partitions moves
// exactly those partitions back, as it prints, and Metadata then shows every partition led by
// its first replica; run again, it lists nothing for all partitions (Kafka leaves out the
// partitions that need no election) and says the valid replica is already elected for named
// ones. A producer writes with acks=all throughout, and every acknowledged record is read back
// once, in order.
func TestLeaderElectionTool(t *testing.T) {
	nodes := startCluster(t, 3, "auto.leader.rebalance.enable=false", "leader.imbalance.check.interval.seconds=1")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic = "elect"
	addrs, adm := replicatedTopic(ctx, t, nodes, topic, electionPartitions)
	bootstrap := strings.Join(addrs, ",")
	prod := startAckedProducer(ctx, t, addrs, topic, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))

	victim := failOverPreferredLeader(ctx, t, nodes, adm, prod, topic)
	moved := notPreferred(ctx, t, adm, topic)
	if want := preferredOn(ctx, t, adm, topic, victim); !slices.Equal(moved, want) {
		t.Fatalf("after node %d came back, partitions %v are not led by their preferred replica; want those it prefers, %v", victim, moved, want)
	}
	// Nothing moves them back by itself: the check interval passes three times.
	alwaysFor(t, 3*time.Second, func() error {
		if now := notPreferred(ctx, t, adm, topic); !slices.Equal(now, moved) {
			return fmt.Errorf("with auto.leader.rebalance.enable=false, partitions not led by their preferred replica went from %v to %v", moved, now)
		}
		return nil
	})

	election := func(args ...string) string {
		t.Helper()
		return runJava(t, "org.apache.kafka.tools.LeaderElectionCommand",
			append([]string{"--bootstrap-server", bootstrap, "--election-type", "preferred"}, args...)...).stdout
	}
	out := election("--all-topic-partitions")
	t.Logf("kafka-leader-election --election-type preferred --all-topic-partitions: %s", out)
	m := regexp.MustCompile(`(?m)^Successfully completed leader election \(PREFERRED\) for partitions (.+)$`).FindStringSubmatch(out)
	if m == nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("kafka-leader-election --all-topic-partitions printed:\n%s\nwant one line: Successfully completed leader election (PREFERRED) for partitions ...", out)
	}
	var want []string
	for _, p := range moved {
		want = append(want, fmt.Sprintf("%s-%d", topic, p))
	}
	if got := sortedList(m[1]); !slices.Equal(got, want) {
		t.Fatalf("kafka-leader-election elected %v; want %v", got, want)
	}
	testutil.WaitFor(t, clusterTimeout, func() error {
		if left := notPreferred(ctx, t, adm, topic); len(left) > 0 {
			return fmt.Errorf("after the election, partitions %v are not led by their first replica", left)
		}
		return nil
	})
	waitElectionAcks(t, prod, 200)

	// Again: for all partitions Kafka lists none, so the tool prints nothing; named ones are
	// answered ELECTION_NOT_NEEDED.
	if out := election("--all-topic-partitions"); out != "" {
		t.Fatalf("second kafka-leader-election --all-topic-partitions printed:\n%s\nwant nothing", out)
	}
	if out, want := election("--topic", topic, "--partition", "0"), "Valid replica already elected for partitions "+topic+"-0\n"; out != want {
		t.Fatalf("kafka-leader-election --topic %s --partition 0 printed %q; want %q", topic, out, want)
	}
	var parts []string
	for p := range electionPartitions {
		parts = append(parts, fmt.Sprintf(`{"topic": %q, "partition": %d}`, topic, p))
	}
	file := filepath.Join(t.TempDir(), "election.json")
	writeFile(t, file, `{"partitions": [`+strings.Join(parts, ", ")+`]}`)
	out = election("--path-to-json-file", file)
	m = regexp.MustCompile(`^Valid replica already elected for partitions (.+)\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("kafka-leader-election --path-to-json-file printed %q; want Valid replica already elected for partitions ...", out)
	}
	var all []string
	for p := range electionPartitions {
		all = append(all, fmt.Sprintf("%s-%d", topic, p))
	}
	if got := sortedList(m[1]); !slices.Equal(got, all) {
		t.Fatalf("kafka-leader-election --path-to-json-file: already elected %v; want %v", got, all)
	}
	stopAndCheck(ctx, t, prod, addrs, topic)
}

// TestLeaderElectionAuto kills and restarts the preferred leader of a partition of a 3-node
// cluster (ringbroker, or Kafka with E2E_BROKER=kafka) with auto.leader.rebalance.enable (the default) and a check interval of
// 1 s: once the restarted broker is back in the ISR, the active controller gives every
// partition back to its first replica by itself. A producer writes with acks=all throughout,
// and every acknowledged record is read back once, in order.
func TestLeaderElectionAuto(t *testing.T) {
	nodes := startCluster(t, 3, "leader.imbalance.check.interval.seconds=1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "auto-elect"
	addrs, adm := replicatedTopic(ctx, t, nodes, topic, electionPartitions)
	prod := startAckedProducer(ctx, t, addrs, topic, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))

	victim := failOverPreferredLeader(ctx, t, nodes, adm, prod, topic)
	testutil.WaitFor(t, clusterTimeout, func() error {
		if left := notPreferred(ctx, t, adm, topic); len(left) > 0 {
			return fmt.Errorf("node %d is back in every ISR, but partitions %v are not led by their first replica", victim, left)
		}
		return nil
	})
	if n := countInLogs(t, nodes, "moved leadership back to preferred replicas"); n == 0 && brokerKind() == "ringbroker" {
		t.Fatal("leaders are back on their preferred replicas, but no controller logged moving them")
	}
	waitElectionAcks(t, prod, 200)
	stopAndCheck(ctx, t, prod, addrs, topic)
}

// failOverPreferredLeader SIGKILLs the preferred leader of partition 0 of topic and waits until
// it leads nothing and the producer writes again; then restarts it, waits until it is back in
// every ISR and returns its node id.
func failOverPreferredLeader(ctx context.Context, t *testing.T, nodes []*Broker, adm *kadm.Client, prod *ackedProducer, topic string) int32 {
	t.Helper()
	waitElectionAcks(t, prod, 200)
	if left := notPreferred(ctx, t, adm, topic); len(left) > 0 {
		t.Fatalf("before any fault, partitions %v are not led by their first replica", left)
	}
	victim := topicReplicas(ctx, t, adm, topic)[0][0]
	t.Logf("killing node %d, preferred leader of %s-0", victim, topic)
	nodes[victim-1].Kill()
	waitLeaders(t, nodes, topic, electionPartitions, victim)
	waitElectionAcks(t, prod, 200)
	nodes[victim-1].Restart()
	waitISR(ctx, t, adm, topic, 3)
	waitElectionAcks(t, prod, 200)
	return victim
}

// topicReplicas returns the replicas of each partition of topic, by partition.
func topicReplicas(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) map[int32][]int32 {
	t.Helper()
	out := map[int32][]int32{}
	testutil.WaitFor(t, clusterTimeout, func() error {
		tds, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		if err := tds[topic].Err; err != nil {
			return err
		}
		for _, p := range tds[topic].Partitions {
			out[p.Partition] = p.Replicas
		}
		return nil
	})
	return out
}

// notPreferred returns, in order, the partitions of topic that Metadata shows led by another
// broker than their first replica.
func notPreferred(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) []int32 {
	t.Helper()
	var out []int32
	testutil.WaitFor(t, clusterTimeout, func() error {
		out = nil
		tds, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		td := tds[topic]
		if td.Err != nil {
			return td.Err
		}
		if len(td.Partitions) != electionPartitions {
			return fmt.Errorf("%s has %d partitions in metadata; want %d", topic, len(td.Partitions), electionPartitions)
		}
		for _, p := range td.Partitions {
			if len(p.Replicas) == 0 || p.Leader != p.Replicas[0] {
				out = append(out, p.Partition)
			}
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// preferredOn returns, in order, the partitions of topic whose first replica is node.
func preferredOn(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, node int32) []int32 {
	t.Helper()
	var out []int32
	for p, reps := range topicReplicas(ctx, t, adm, topic) {
		if reps[0] == node {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// sortedList splits a ", "-separated list as Kafka's tools print sets, sorted.
func sortedList(s string) []string {
	out := strings.Split(strings.TrimSpace(s), ", ")
	sort.Strings(out)
	return out
}

// alwaysFor checks cond repeatedly for d and fails the test the first time it does not hold:
// the bounded observation that something does not happen.
func alwaysFor(t *testing.T, d time.Duration, cond func() error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if err := cond(); err != nil {
			t.Fatal(err)
		}
	}
}

// waitElectionAcks waits until n more values are acknowledged, or the producer failed.
func waitElectionAcks(t *testing.T, p *ackedProducer, n int) {
	t.Helper()
	want := p.count() + n
	testutil.WaitFor(t, clusterTimeout, func() error {
		select {
		case err := <-p.done:
			t.Fatalf("producer stopped: %v", err)
		default:
		}
		if got := p.count(); got < want {
			return fmt.Errorf("%d values acknowledged; want %d", got, want)
		}
		return nil
	})
}

// stopAndCheck stops the producer and reads every partition of topic from the start: each
// acknowledged value must be there once, in the partition that acknowledged it, in increasing
// order.
func stopAndCheck(ctx context.Context, t *testing.T, p *ackedProducer, addrs []string, topic string) {
	t.Helper()
	acked := p.finish(t)
	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[int]int32{}
	last := map[int32]int{}
	found := 0
	for found < len(acked) {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read back %d of %d acknowledged values: %v", found, len(acked), err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v, err := strconv.Atoi(string(r.Value))
			if err != nil {
				t.Fatalf("%s-%d offset %d holds %q, not a produced value", r.Topic, r.Partition, r.Offset, r.Value)
			}
			if at, dup := seen[v]; dup {
				t.Fatalf("value %d read twice: in partition %d and at %s-%d offset %d", v, at, r.Topic, r.Partition, r.Offset)
			}
			if prev, ok := last[r.Partition]; ok && v < prev {
				t.Fatalf("%s-%d offset %d holds %d after %d: out of order", r.Topic, r.Partition, r.Offset, v, prev)
			}
			seen[v], last[r.Partition] = r.Partition, v
			if v < len(acked) {
				if acked[v] != r.Partition {
					t.Fatalf("value %d acknowledged by partition %d, read from %d", v, acked[v], r.Partition)
				}
				found++
			}
		})
	}
	t.Logf("read back all %d acknowledged values", len(acked))
}
