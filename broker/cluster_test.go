package broker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/broker/meta"
)

func TestFenceRecords(t *testing.T) {
	inc1, inc2 := meta.NewUUID(), meta.NewUUID()
	im := meta.EmptyImage("cid")
	tid := meta.NewUUID()
	im, err := im.Apply(0, []meta.Record{
		{Type: meta.TypeBroker, NodeID: 1, Incarnation: inc1},
		{Type: meta.TypeBroker, NodeID: 2, Incarnation: inc2},
		{Type: meta.TypeTopic, TopicName: "t", TopicID: tid},
		{Type: meta.TypePartition, TopicID: tid, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3},
		{Type: meta.TypePartition, TopicID: tid, Partition: 1, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	since := now.Add(-time.Minute)
	// Node 1 heartbeats; node 2 heartbeated with a stale incarnation only: it is fenced and
	// its partition goes offline with a new leader epoch.
	hbs := map[int32]meta.Heartbeat{1: {Incarnation: inc1, At: now}, 2: {Incarnation: meta.NewUUID(), At: now}}
	recs := fenceRecords(im, hbs, since, now, 9*time.Second)
	if len(recs) != 2 || recs[0].Type != meta.TypeFence || recs[0].NodeID != 2 || !recs[0].Fenced ||
		recs[1].Type != meta.TypePartition || recs[1].Partition != 1 || recs[1].Leader != -1 || recs[1].LeaderEpoch != 1 {
		t.Fatalf("fence records = %+v", recs)
	}
	if im, err = im.Apply(1, recs); err != nil {
		t.Fatal(err)
	}
	// A new leader gives every broker a full session from when it began leading.
	if recs := fenceRecords(im, nil, now, now.Add(time.Second), 9*time.Second); len(recs) != 2 || recs[0].Fenced {
		t.Fatalf("under a fresh leader, fence records = %+v; want node 2 unfenced and its leader back", recs)
	}
	// Node 2 heartbeats again: unfenced, and its partition led by it again.
	hbs[2] = meta.Heartbeat{Incarnation: inc2, At: now}
	recs = fenceRecords(im, hbs, since, now, 9*time.Second)
	if len(recs) != 2 || recs[0].Fenced || recs[1].Leader != 2 || recs[1].LeaderEpoch != 2 {
		t.Fatalf("unfence records = %+v", recs)
	}
	if im, err = im.Apply(2, recs); err != nil {
		t.Fatal(err)
	}
	if recs := fenceRecords(im, hbs, since, now, 9*time.Second); len(recs) != 0 {
		t.Fatalf("steady state produced records %+v", recs)
	}
}

func TestClusterConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		props []string
		want  string
	}{
		{[]string{"process.roles=broker"}, "needs controller.quorum.voters"},
		{[]string{"process.roles=broker", "controller.quorum.voters=1@127.0.0.1:9093", "controller.listener.names=CONTROLLER"}, "but process.roles=broker"},
		{[]string{"process.roles=broker", "controller.quorum.voters=2@127.0.0.1:9093", "controller.listener.names=CONTROLLER",
			"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, "must not contain the controller listener"},
		{[]string{"process.roles=controller", "controller.quorum.voters=1@127.0.0.1:9093", "controller.listener.names=CONTROLLER",
			"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, "serves no clients"},
		{[]string{"process.roles=controller", "controller.quorum.voters=2@127.0.0.1:9093", "controller.listener.names=CONTROLLER",
			"listeners=CONTROLLER://127.0.0.1:0"}, "not in controller.quorum.voters"},
		{[]string{"controller.quorum.bootstrap.servers=127.0.0.1:9093"}, "KIP-853"},
		{[]string{"controller.quorum.voters=2@127.0.0.1:9093", "controller.listener.names=CONTROLLER"}, "not in controller.quorum.voters"},
		{[]string{"controller.quorum.voters=1@127.0.0.1:9093"}, "controller.listener.names is required"},
		{[]string{"controller.quorum.voters=1@127.0.0.1:9093", "controller.listener.names=CONTROLLER"}, "not in listeners"},
		{[]string{"controller.quorum.voters=1@127.0.0.1:9093", "controller.listener.names=CONTROLLER",
			"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, "is not formatted"},
	} {
		cfg := DefaultConfig()
		cfg.LogDirs = []string{t.TempDir()}
		cfg.MetricsListen = ""
		var err error
		for _, p := range tc.props {
			if err = cfg.Override(p); err != nil {
				break
			}
		}
		if err == nil {
			var b *Broker
			b, err = New(cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				b.Shutdown(context.Background())
			}
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one containing %q", tc.props, err, tc.want)
		}
	}
}

// startInProcessCluster starts n brokers in this process forming one quorum; n == 0 starts a
// single node with no config, the sole voter of its quorum without a controller listener.
func startInProcessCluster(tb testing.TB, n int) []*Broker {
	tb.Helper()
	base := func(dir string) Config {
		cfg := DefaultConfig()
		cfg.Listeners = []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 0}}
		cfg.LogDirs = []string{dir}
		cfg.MetricsListen = ""
		cfg.IO = "netpoll"
		cfg.Rings = 1
		return cfg
	}
	logger := slog.New(slog.NewTextHandler(&strings.Builder{}, nil))
	if n == 0 {
		b, err := New(base(tb.TempDir()), logger)
		if err != nil {
			tb.Fatal(err)
		}
		if err := b.Start(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { b.Shutdown(context.Background()) })
		return []*Broker{b}
	}
	var voters []string
	var ctrl []int
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ctrl = append(ctrl, ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrl[i]))
	}
	cid := meta.NewUUID().String()
	bs := make([]*Broker, n)
	for i := range n {
		cfg := base(filepath.Join(tb.TempDir(), "data"))
		cfg.NodeID = int32(i + 1)
		cfg.ClusterID = cid
		cfg.QuorumVoters = strings.Join(voters, ",")
		cfg.ControllerListenerNames = []string{"CONTROLLER"}
		cfg.Listeners = append(cfg.Listeners, Listener{Name: "CONTROLLER", Host: "127.0.0.1", Port: ctrl[i]})
		b, err := New(cfg, logger)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { b.Shutdown(context.Background()) })
		bs[i] = b
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, b := range bs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = b.Start() }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			tb.Fatalf("start node %d: %v", i+1, err)
		}
	}
	return bs
}

// BenchmarkCreate10kPartitions times creating 100 topics of 100 partitions each through the
// Kafka API, on a single node and in a 3-node cluster (through a node that may not lead the
// quorum), until every node's image has them all. Each partition holds one descriptor (its
// .log; the indexes are mapped without one), so 10,000 fit a 20,000 open-file limit.
func BenchmarkCreate10kPartitions(b *testing.B) {
	for _, n := range []int{0, 3} {
		name := "single"
		if n > 0 {
			name = fmt.Sprintf("cluster%d", n)
		}
		b.Run(name, func(b *testing.B) {
			nodes := startInProcessCluster(b, n)
			cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[len(nodes)-1].Addr().String()))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			b.ResetTimer()
			for it := range b.N {
				for i := range 100 {
					resp, err := adm.CreateTopic(context.Background(), 100, 1, nil, fmt.Sprintf("b%d-t%d", it, i))
					if err == nil {
						err = resp.Err
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				want := (it + 1) * 100
				for _, nd := range nodes {
					for deadline := time.Now().Add(time.Minute); len(nd.meta.Image().Topics) < want; {
						if time.Now().After(deadline) {
							b.Fatalf("node %d has %d topics, want %d", nd.cfg.NodeID, len(nd.meta.Image().Topics), want)
						}
						time.Sleep(time.Millisecond)
					}
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/10k-partitions")
		})
	}
}
