package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/brokertest"
	"ringbroker/internal/testutil"
)

// clusterTimeout bounds each wait of the cluster test (elections, fencing, catch-up).
const clusterTimeout = 30 * time.Second

// startCluster formats and starts n nodes on loopback, all broker and controller, forming one
// n-voter metadata quorum: ringbroker processes, or Apache Kafka when E2E_BROKER=kafka. extra
// keys (Kafka's names) come last and win.
func startCluster(t *testing.T, n int, extra ...string) []*Broker {
	t.Helper()
	nodes, _ := startClusterPorts(t, n, extra...)
	return nodes
}

// startClusterPorts is startCluster, also returning each node's ports.
func startClusterPorts(t *testing.T, n int, extra ...string) ([]*Broker, []clusterPorts) {
	t.Helper()
	ps := freeClusterPorts(t, n)
	var voters []string
	for i, p := range ps {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, p.controller))
	}
	cid := newClusterID(t)
	var out []*Broker
	for i, p := range ps {
		dir := t.TempDir()
		props := combinedNodeProps(i, p, "controller.quorum.voters="+strings.Join(voters, ","), dir)
		b := clusterNode(t, brokerKind(), i, cid, dir, p.clientAddr(), append(props, extra...), p.ringOnly(), nil, nil)
		b.startProcess()
		out = append(out, b)
	}
	for _, b := range out {
		b.waitReady()
	}
	return out, ps
}

// clusterPorts are one node's loopback ports.
type clusterPorts struct{ client, controller, metrics int }

// freeClusterPorts picks the ports of n nodes.
func freeClusterPorts(t *testing.T, n int) []clusterPorts {
	ps := make([]clusterPorts, n)
	for i := range ps {
		ps[i] = clusterPorts{brokertest.FreePort(t), brokertest.FreePort(t), brokertest.FreePort(t)}
	}
	return ps
}

// clientAddr is where the node serves clients.
func (p clusterPorts) clientAddr() string { return fmt.Sprintf("127.0.0.1:%d", p.client) }

// ringOnly are the node's keys that only ringbroker has: its metrics port, and snapshots every
// few metadata entries, so that the cluster tests run through them.
func (p clusterPorts) ringOnly() []string {
	return []string{fmt.Sprintf("metrics.listen=127.0.0.1:%d", p.metrics), "metadata.snapshot.interval.entries=4"}
}

// combinedNodeProps are the keys (Kafka's names) of node i, broker and controller, on ports p
// with its log dir under dir and its quorum given by the key=value quorum.
func combinedNodeProps(i int, p clusterPorts, quorum, dir string) []string {
	return []string{
		"process.roles=broker,controller",
		fmt.Sprintf("node.id=%d", i+1),
		quorum,
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", p.client, p.controller),
		"controller.listener.names=CONTROLLER",
		"log.dirs=" + filepath.Join(dir, "data"),
		"broker.heartbeat.interval.ms=500",
		"broker.session.timeout.ms=3000",
		"group.initial.rebalance.delay.ms=0",
	}
}

// clusterNode writes node i's server.properties in dir and formats its log dir for cluster cid,
// like kafka-storage format, and returns the node, not started, serving clients at addr: a
// ringbroker process with props and ringOnly, or, for kind "kafka", Apache Kafka with props,
// the listener keys Kafka needs besides, internal topics of RF 3, and kafkaOnly. Keys later
// in the file win. wrap, when set, wraps the command line (to run it in a network namespace).
// formatArgs are given to the format step of either kind (--standalone, say).
func clusterNode(t *testing.T, kind string, i int, cid, dir, addr string, props, ringOnly, kafkaOnly []string, wrap func([]string) []string, formatArgs ...string) *Broker {
	t.Helper()
	if wrap == nil {
		wrap = func(argv []string) []string { return argv }
	}
	b := &Broker{t: t, kind: kind, addr: addr, dir: dir, log: filepath.Join(dir, "broker.log")}
	cfg := filepath.Join(dir, "server.properties")
	switch kind {
	case "ringbroker":
		writeFile(t, cfg, strings.Join(append(ringOnly, props...), "\n")+"\n")
		if out, err := exec.Command(ringbrokerBinary(), append([]string{"format", "--cluster-id", cid, "--config", cfg}, formatArgs...)...).CombinedOutput(); err != nil {
			t.Fatalf("ringbroker format node %d: %v\n%s", i+1, err, out)
		}
		b.argv = wrap([]string{ringbrokerBinary(), "--config", cfg})
		b.cleanExit = func(code int) bool { return code == 0 }
	case "kafka":
		kafkaProps := []string{
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"inter.broker.listener.name=PLAINTEXT",
			"offsets.topic.replication.factor=3",
			"transaction.state.log.replication.factor=3",
			"transaction.state.log.min.isr=2",
			"share.coordinator.state.topic.replication.factor=3",
			"share.coordinator.state.topic.min.isr=2",
		}
		writeFile(t, cfg, strings.Join(append(append(kafkaProps, props...), kafkaOnly...), "\n")+"\n")
		runJava(t, "kafka.tools.StorageTool", append([]string{"format", "-t", cid, "-c", cfg}, formatArgs...)...)
		log4j := filepath.Join(dir, "log4j2.properties")
		writeFile(t, log4j, log4jConfig("info", "SYSTEM_OUT"))
		b.argv = wrap(append([]string{"java"}, javaArgs(t, []string{"-Xms128m", "-Xmx512m", "-XX:+UseG1GC",
			"-Dlog4j2.configurationFile=" + log4j}, "kafka.Kafka", cfg)...))
		b.cleanExit = func(code int) bool { return code == 0 || code == 143 }
	default:
		t.Fatalf("%s=%q: want ringbroker or kafka", envBroker, kind)
	}
	t.Cleanup(func() {
		b.Kill()
		if t.Failed() {
			t.Logf("node %d log %s (tail):\n%s", i+1, b.log, brokertest.TailFile(b.log, logTailBytes))
		}
	})
	return b
}

// activeController returns the index of the node whose log last says it became the active
// controller, among the running ones, or an error.
func activeController(nodes []*Broker) (int, error) {
	found := -1
	for i, b := range nodes {
		if !b.Alive() {
			continue
		}
		data, err := os.ReadFile(b.log)
		if err != nil {
			return -1, err
		}
		s := string(data)
		if k := strings.LastIndex(s, "=== e2e: start"); k >= 0 {
			s = s[k:]
		}
		became, resigned := strings.LastIndex(s, "became the active controller"), strings.LastIndex(s, "no longer the active controller")
		if became > resigned {
			if found >= 0 {
				return -1, fmt.Errorf("nodes %d and %d both claim to be the active controller", found+1, i+1)
			}
			found = i
		}
	}
	if found < 0 {
		return -1, errors.New("no active controller yet")
	}
	return found, nil
}

// clusterMetadata asks node b for metadata of topic and returns brokers and partition leaders.
func clusterMetadata(t *testing.T, b *Broker, topic string) (*kmsg.MetadataResponse, error) {
	cl := b.Client(t, kgo.RequestRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	return req.RequestWith(ctx, cl)
}

// waitLeaders waits until every running node sees topic with n partitions and the same
// leaders, all >= 0 unless offline says which leader is gone, and returns the leaders.
func waitLeaders(t *testing.T, nodes []*Broker, topic string, n int, offline int32) []int32 {
	t.Helper()
	var leaders []int32
	testutil.WaitFor(t, clusterTimeout, func() error {
		leaders = nil
		for i, b := range nodes {
			if !b.Alive() {
				continue
			}
			md, err := clusterMetadata(t, b, topic)
			if err != nil {
				return fmt.Errorf("node %d: %w", i+1, err)
			}
			if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != n {
				return fmt.Errorf("node %d: topic %s not there with %d partitions: %+v", i+1, topic, n, md.Topics)
			}
			var ls []int32
			for _, p := range md.Topics[0].Partitions {
				ls = append(ls, p.Leader)
				switch {
				case p.Leader == -1 && offline == 0:
					return fmt.Errorf("node %d: %s-%d has no leader", i+1, topic, p.Partition)
				case p.Leader == -1 && p.ErrorCode != kerr.LeaderNotAvailable.Code:
					return fmt.Errorf("node %d: offline %s-%d answers error %d, want LEADER_NOT_AVAILABLE", i+1, topic, p.Partition, p.ErrorCode)
				case p.Leader == offline:
					return fmt.Errorf("node %d: %s-%d still led by fenced node %d", i+1, topic, p.Partition, offline)
				}
			}
			if leaders != nil && fmt.Sprint(leaders) != fmt.Sprint(ls) {
				return fmt.Errorf("node %d sees leaders %v, another node %v", i+1, ls, leaders)
			}
			leaders = ls
		}
		return nil
	})
	return leaders
}

func TestCluster(t *testing.T) {
	if brokerKind() != "ringbroker" {
		t.Skip("the multi-process cluster test runs ringbroker processes; Kafka clusters are not started here")
	}
	nodes := startCluster(t, 3)
	// Every node lists all three brokers.
	testutil.WaitFor(t, clusterTimeout, func() error {
		for i, b := range nodes {
			md, err := clusterMetadata(t, b, "none")
			if err != nil {
				return err
			}
			if len(md.Brokers) != 3 {
				return fmt.Errorf("node %d lists %d brokers, want 3", i+1, len(md.Brokers))
			}
		}
		return nil
	})

	// Topics created through any node appear on all, spread over the brokers.
	for i, b := range nodes {
		b.CreateTopic(t, fmt.Sprintf("spread-%d", i+1), 6)
	}
	for i := range nodes {
		leaders := waitLeaders(t, nodes, fmt.Sprintf("spread-%d", i+1), 6, 0)
		distinct := map[int32]bool{}
		for _, l := range leaders {
			distinct[l] = true
		}
		if len(distinct) != 3 {
			t.Fatalf("spread-%d leaders %v: want partitions on all 3 brokers", i+1, leaders)
		}
	}
	// Replication factor 2 is placed on two of the three brokers; 4 is refused with Kafka's
	// error, as only 3 brokers are registered.
	resp, err := nodes[1].Admin(t).CreateTopic(context.Background(), 1, 2, nil, "rf2")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create with replication factor 2: %v", err)
	}
	resp, err = nodes[1].Admin(t).CreateTopic(context.Background(), 1, 4, nil, "rf4")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("create with replication factor 4 on 3 brokers: %v, want INVALID_REPLICATION_FACTOR", err)
	}

	// franz-go and kcat produce and consume across all three brokers.
	produceAcross(t, nodes[0], "spread-1", 6, 60)
	consumeAcross(t, nodes[2], "spread-1", 6, 60)
	kcatAcross(t, nodes, "spread-2", 6)

	// SIGKILL the active controller: another is elected, topic creation goes on, and the
	// dead broker is fenced (its partitions go offline with RF=1).
	var lead int
	testutil.WaitFor(t, clusterTimeout, func() (err error) { lead, err = activeController(nodes); return err })
	t.Logf("active controller: node %d; killing it", lead+1)
	nodes[lead].Kill()
	var next int
	testutil.WaitFor(t, clusterTimeout, func() (err error) { next, err = activeController(nodes); return err })
	t.Logf("new active controller: node %d", next+1)
	survivor := nodes[(lead+1)%3]
	for i := range 6 {
		name := fmt.Sprintf("after-%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
		resp, err := survivor.Admin(t).CreateTopic(ctx, 2, 1, nil, name)
		cancel()
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s after the controller died: %v", name, err)
		}
		waitLeaders(t, nodes, name, 2, int32(lead+1))
	}
	leaders := waitLeaders(t, nodes, "spread-1", 6, int32(lead+1))
	offline := 0
	for _, l := range leaders {
		if l == -1 {
			offline++
		}
	}
	if offline != 2 {
		t.Fatalf("leaders of spread-1 after killing node %d: %v; want its 2 partitions offline", lead+1, leaders)
	}

	// The killed node comes back, catches up from a snapshot (the others compacted past its
	// log), is unfenced, and its partitions return.
	nodes[lead].Restart()
	for i := range 6 {
		waitLeaders(t, nodes, fmt.Sprintf("after-%d", i), 2, 0)
	}
	waitLeaders(t, nodes, "spread-1", 6, 0)
	data, err := os.ReadFile(nodes[lead].log)
	if err != nil {
		t.Fatal(err)
	}
	run := string(data)[strings.LastIndex(string(data), "=== e2e: start"):]
	if !strings.Contains(run, "metadata image restored from a snapshot") {
		t.Fatalf("restarted node %d caught up without a snapshot", lead+1)
	}
	produceAcross(t, nodes[lead], "spread-1", 6, 60)
	consumeAcross(t, nodes[(lead+2)%3], "spread-1", 6, 120)
}

// produceAcross produces per records to each partition of topic through a client
// bootstrapped at b, which routes each to its leader.
func produceAcross(t *testing.T, b *Broker, topic string, partitions int32, per int) {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(20))
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	for p := range partitions {
		for i := range per {
			r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce to %s-%d through %s: %v", topic, p, b.Addr(), err)
			}
		}
	}
}

// consumeAcross reads every partition of topic from the start through a client bootstrapped
// at b and checks each holds want records.
func consumeAcross(t *testing.T, b *Broker, topic string, partitions int32, want int) {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for p := range partitions {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	got := map[int32]int{}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	total := 0
	for total < int(partitions)*want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s through %s: got %v after %v", topic, b.Addr(), got, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition]++
			total++
		})
	}
	for p := range partitions {
		if got[p] != want {
			t.Fatalf("consume %s through %s: partition %d has %d records, want %d (%v)", topic, b.Addr(), p, got[p], want, got)
		}
	}
}

// kcatAcross produces to every partition of topic with kcat bootstrapped at one node and
// reads each back with kcat bootstrapped at another.
func kcatAcross(t *testing.T, nodes []*Broker, topic string, partitions int) {
	t.Helper()
	for p := range partitions {
		in := fmt.Sprintf("k%d-a\nk%d-b\n", p, p)
		runKcatStdin(t, []byte(in), "-b", nodes[p%3].Addr(), "-P", "-t", topic, "-p", fmt.Sprint(p))
		out := runKcat(t, "-b", nodes[(p+1)%3].Addr(), "-C", "-t", topic, "-p", fmt.Sprint(p), "-o", "beginning", "-e", "-f", "%s\n").stdout
		if out != in {
			t.Fatalf("kcat read %s-%d through %s: %q, want %q", topic, p, nodes[(p+1)%3].Addr(), out, in)
		}
	}
}
