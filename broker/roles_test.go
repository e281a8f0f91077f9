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

// TestProcessRoles runs a quorum of three voters, two combined and one controller-only, with a
// broker-only node following the metadata log as a Raft learner. Topics created through the
// learner appear on every node, the learner serves produce and fetch for its partitions, only
// brokers register, and stopping the learner leaves the quorum committing.
func TestProcessRoles(t *testing.T) {
	t.Parallel()
	var voters []string
	ctrl := map[int32]int{}
	for id := int32(1); id <= 3; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctrl[id] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", id, ctrl[id]))
	}
	cid := meta.NewUUID().String()
	logger := slog.New(slog.NewTextHandler(&strings.Builder{}, nil))
	nodes := map[int32]*Broker{}
	for id, roles := range map[int32]string{1: "broker,controller", 2: "broker,controller", 3: "controller", 4: "broker"} {
		cfg := DefaultConfig()
		cfg.LogDirs = []string{filepath.Join(t.TempDir(), "data")}
		cfg.MetricsListen = ""
		cfg.IO = "netpoll"
		cfg.Rings = 1
		cfg.NodeID = id
		cfg.ClusterID = cid
		cfg.QuorumVoters = strings.Join(voters, ",")
		cfg.ControllerListenerNames = []string{"CONTROLLER"}
		cfg.ProcessRoles = strings.Split(roles, ",")
		cfg.Listeners = nil
		if roles != "controller" {
			cfg.Listeners = append(cfg.Listeners, Listener{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 0})
		}
		if roles != "broker" {
			cfg.Listeners = append(cfg.Listeners, Listener{Name: "CONTROLLER", Host: "127.0.0.1", Port: ctrl[id]})
		}
		b, err := New(cfg, logger)
		if err != nil {
			t.Fatalf("node %d (%s): %v", id, roles, err)
		}
		t.Cleanup(func() { b.Shutdown(context.Background()) })
		nodes[id] = b
	}
	var wg sync.WaitGroup
	errs := make(map[int32]error)
	var mu sync.Mutex
	for id, b := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := b.Start()
			mu.Lock()
			errs[id] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	for id, err := range errs {
		if err != nil {
			t.Fatalf("start node %d: %v", id, err)
		}
	}
	if got, want := nodes[3].Addr().String(), fmt.Sprintf("127.0.0.1:%d", ctrl[3]); got != want {
		t.Fatalf("controller-only node's Addr = %s, want its controller listener %s", got, want)
	}

	// waitAll polls every running node's image until ok holds on each.
	waitAll := func(what string, ok func(*meta.Image) bool, ids ...int32) {
		t.Helper()
		for _, id := range ids {
			deadline := time.Now().Add(20 * time.Second)
			for !ok(nodes[id].meta.Image()) {
				if time.Now().After(deadline) {
					t.Fatalf("node %d: %s not seen within 20s", id, what)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	waitAll("brokers 1, 2 and 4 registered", func(im *meta.Image) bool {
		_, b1 := im.Brokers[1]
		_, b2 := im.Brokers[2]
		_, b4 := im.Brokers[4]
		return b1 && b2 && b4
	}, 1, 2, 3, 4)
	for id, b := range nodes {
		if _, ok := b.meta.Image().Brokers[3]; ok {
			t.Fatalf("node %d's image registers the controller-only node 3 as a broker", id)
		}
	}
	if nodes[4].meta.IsLeader() {
		t.Fatal("the learner leads the quorum")
	}

	// Create through the learner; with three brokers and nine partitions each leads three.
	cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[4].Addr().String()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ConsumePartitions(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 9, 1, nil, "via-learner")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic through the learner: %v", err)
	}
	waitAll("topic via-learner", func(im *meta.Image) bool { return im.Topics["via-learner"] != nil }, 1, 2, 3, 4)
	leaders := map[int32]int{}
	for _, p := range nodes[3].meta.Image().Topics["via-learner"].Partitions {
		leaders[p.Leader]++
	}
	if leaders[4] == 0 || leaders[3] != 0 {
		t.Fatalf("partition leaders %v: want some on the learner (4), none on the controller-only node (3)", leaders)
	}

	// Produce one record to each partition through the learner's metadata, then read them back.
	for p := range int32(9) {
		r := &kgo.Record{Topic: "via-learner", Partition: p, Value: fmt.Appendf(nil, "v%d", p)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to via-learner/%d: %v", p, err)
		}
	}
	offs := map[int32]kgo.Offset{}
	for p := range int32(9) {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{"via-learner": offs})
	got := map[int32]string{}
	for len(got) < 9 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 9 partitions: %v", len(got), err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Errorf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = string(r.Value) })
	}
	for p := range int32(9) {
		if got[p] != fmt.Sprintf("v%d", p) {
			t.Fatalf("partition %d holds %q, want v%d", p, got[p], p)
		}
	}

	// Stopping the learner does not touch the quorum: topics still commit everywhere else.
	if err := nodes[4].Shutdown(context.Background()); err != nil {
		t.Fatalf("stop the learner: %v", err)
	}
	if _, err := nodes[1].meta.Commit([]meta.Record{{Type: meta.TypeTopic, TopicName: "after-learner", TopicID: meta.NewUUID()}}); err != nil {
		t.Fatalf("commit after stopping the learner: %v", err)
	}
	waitAll("topic after-learner", func(im *meta.Image) bool { return im.Topics["after-learner"] != nil }, 1, 2, 3)
}
