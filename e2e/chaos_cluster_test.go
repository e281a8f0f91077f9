package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// Timing of the chaos cluster: short enough that a fenced broker loses its partitions within
// a fault, so the nemesis exercises elections and ISR changes, not only retries.
const (
	chaosHeartbeat      = 500 * time.Millisecond
	chaosSessionTimeout = 3 * time.Second
	chaosReplicaLag     = 4 * time.Second
)

// startChaosCluster formats and starts n nodes, each broker and controller of one KRaft
// quorum, on the chaos network: ringbroker processes, or Apache Kafka when E2E_BROKER=kafka.
func startChaosCluster(t *testing.T, cn chaosNet, n int) []*Broker {
	t.Helper()
	var voters []string
	for i := range n {
		_, ctl := cn.Advertised(i)
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, ctl))
	}
	cid := newClusterID(t)
	kind := brokerKind()
	nodes := make([]*Broker, n)
	for i := range n {
		dir := t.TempDir()
		host, cport, ctlPort := cn.Listen(i)
		adv, _ := cn.Advertised(i)
		props := []string{
			"process.roles=broker,controller",
			fmt.Sprintf("node.id=%d", i+1),
			"controller.quorum.voters=" + strings.Join(voters, ","),
			fmt.Sprintf("listeners=PLAINTEXT://%s:%d,CONTROLLER://%s:%d", host, cport, host, ctlPort),
			"advertised.listeners=PLAINTEXT://" + adv,
			"controller.listener.names=CONTROLLER",
			"log.dirs=" + filepath.Join(dir, "data"),
			fmt.Sprintf("broker.heartbeat.interval.ms=%d", chaosHeartbeat.Milliseconds()),
			fmt.Sprintf("broker.session.timeout.ms=%d", chaosSessionTimeout.Milliseconds()),
			fmt.Sprintf("replica.lag.time.max.ms=%d", chaosReplicaLag.Milliseconds()),
			"replica.fetch.backoff.ms=200",
			"group.initial.rebalance.delay.ms=0",
		}
		ringOnly := []string{"metrics.listen=" + cn.MetricsAddr(i), "pprof.listen=" + cn.PprofAddr(i),
			"metadata.snapshot.interval.entries=64"}
		kafkaOnly := []string{"controller.quorum.election.timeout.ms=1000", "controller.quorum.fetch.timeout.ms=2000"}
		b := clusterNode(t, kind, i, cid, dir, adv, props, ringOnly, kafkaOnly, func(argv []string) []string { return cn.Wrap(i, argv) })
		b.startProcess()
		nodes[i] = b
	}
	for _, b := range nodes {
		b.waitReady()
	}
	// Every node lists every broker: all registered, so RF n can be placed.
	testutil.WaitFor(t, clusterTimeout, func() error {
		for i, b := range nodes {
			md, err := clusterMetadata(t, b, "none")
			if err != nil {
				return fmt.Errorf("node %d: %w", i+1, err)
			}
			if len(md.Brokers) != n {
				return fmt.Errorf("node %d lists %d brokers, want %d", i+1, len(md.Brokers), n)
			}
		}
		return nil
	})
	return nodes
}

// signal sends sig to the node's running process.
func (b *Broker) signal(sig syscall.Signal) error {
	p := b.current()
	if p == nil {
		return errors.New("not running")
	}
	return p.cmd.Process.Signal(sig)
}

// pid is the node's process id, 0 when it is not running.
func (b *Broker) pid() int {
	if p := b.current(); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// chaosClient is a franz-go client bootstrapped at every node.
func chaosClient(nodes []*Broker, opts ...kgo.Opt) (*kgo.Client, error) {
	var seeds []string
	for _, b := range nodes {
		seeds = append(seeds, b.Addr())
	}
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.MetadataMaxAge(5 * time.Second)}, opts...)...)
}

// partitionState is one partition's leader, replicas and ISR as metadata shows them.
type partitionState struct {
	topic     string
	partition int32
	leader    int32
	replicas  []int32
	isr       []int32
}

// clusterState asks node b (with a client of its own, no retries) for the partitions of
// topics.
func clusterState(b *Broker, topics []string) ([]partitionState, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, rt)
	}
	// A broker answers from its own metadata image: send it to this node, not to whichever
	// the client picks.
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var out []partitionState
	for _, td := range resp.Topics {
		if td.Topic == nil || td.ErrorCode != 0 {
			return nil, fmt.Errorf("topic %v: error code %d", td.Topic, td.ErrorCode)
		}
		for _, p := range td.Partitions {
			out = append(out, partitionState{topic: *td.Topic, partition: p.Partition, leader: p.Leader,
				replicas: p.Replicas, isr: p.ISR})
		}
	}
	return out, nil
}

// fullISR reports nil once node b shows every partition of topics with a leader and all
// replicas in sync.
func fullISR(b *Broker, topics []string, rf int) error {
	ps, err := clusterState(b, topics)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p.leader < 0 || len(p.isr) != rf || len(p.replicas) != rf {
			return fmt.Errorf("%s-%d: leader %d, replicas %v, isr %v", p.topic, p.partition, p.leader, p.replicas, p.isr)
		}
	}
	return nil
}

// activeControllerOf returns the index of the active controller: from DescribeQuorum where
// the broker serves it (Kafka), else from the nodes' logs (ringbroker).
func activeControllerOf(nodes []*Broker) (int, error) {
	for _, b := range nodes {
		if !b.Alive() {
			continue
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequestRetries(0))
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rp := kmsg.NewDescribeQuorumRequestTopicPartition()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		cl.Close()
		if err == nil && resp.ErrorCode == 0 && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
			if id := resp.Topics[0].Partitions[0].LeaderID; id >= 1 && int(id) <= len(nodes) {
				return int(id) - 1, nil
			}
		}
		break
	}
	return activeController(nodes)
}

// dumpGoroutines saves every running ringbroker node's goroutine stacks (from its pprof
// listener) under dir, named by prefix, and returns what it wrote or why not.
func dumpGoroutines(cn chaosNet, nodes []*Broker, dir, prefix string) string {
	if brokerKind() != "ringbroker" {
		return "no goroutine dumps: not ringbroker"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err.Error()
	}
	var out []string
	hc := &http.Client{Timeout: 5 * time.Second}
	for i := range nodes {
		path := filepath.Join(dir, fmt.Sprintf("%s-node%d-goroutines.txt", prefix, i+1))
		resp, err := hc.Get("http://" + cn.PprofAddr(i) + "/debug/pprof/goroutine?debug=2")
		if err == nil {
			var data []byte
			data, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				err = os.WriteFile(path, data, 0o644)
			}
		}
		if err != nil {
			out = append(out, fmt.Sprintf("node %d: %v", i+1, err))
			continue
		}
		out = append(out, path)
	}
	return strings.Join(out, ", ")
}

// keepLogs copies every node's full log under dir, for a failed run to be read at leisure
// after the test's temp dirs are gone.
func keepLogs(t *testing.T, nodes []*Broker, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keep logs: %v", err)
		return
	}
	for i, b := range nodes {
		data, err := os.ReadFile(b.log)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("node%d.log", i+1)), data, 0o644)
		}
		if err != nil {
			t.Logf("keep log of node %d: %v", i+1, err)
		}
	}
	t.Logf("full node logs kept in %s", dir)
}
