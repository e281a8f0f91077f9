package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ringbroker/internal/brokertest"
	"ringbroker/internal/testutil"
)

// TestClusterRoles runs ringbroker processes in each process.roles: nodes 1 and 2 are broker
// and controller, node 3 controller only (a voter serving no clients), node 4 broker only (a
// Raft learner of the metadata log). Topics created through the learner appear on every
// broker, the learner serves produce and fetch for its partitions, and SIGKILLing it leaves
// the quorum creating topics. kafka-metadata-quorum --bootstrap-controller reaches the quorum
// through the controller-only node.
func TestClusterRoles(t *testing.T) {
	if brokerKind() != "ringbroker" {
		t.Skip("the multi-process cluster test runs ringbroker processes; Kafka clusters are not started here")
	}
	roles := []string{"broker,controller", "broker,controller", "controller", "broker"}
	client := make([]int, len(roles))
	ctrl := make([]int, len(roles))
	var voters []string
	for i, r := range roles {
		client[i], ctrl[i] = brokertest.FreePort(t), brokertest.FreePort(t)
		if strings.Contains(r, "controller") {
			voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrl[i]))
		}
	}
	cid := newClusterID(t)
	nodes := make([]*Broker, len(roles))
	for i, r := range roles {
		dir := t.TempDir()
		var ls []string
		if r != "controller" {
			ls = append(ls, fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", client[i]))
		}
		if r != "broker" {
			ls = append(ls, fmt.Sprintf("CONTROLLER://127.0.0.1:%d", ctrl[i]))
		}
		props := []string{
			"process.roles=" + r,
			fmt.Sprintf("node.id=%d", i+1),
			"controller.quorum.voters=" + strings.Join(voters, ","),
			"listeners=" + strings.Join(ls, ","),
			"controller.listener.names=CONTROLLER",
			"log.dirs=" + filepath.Join(dir, "data"),
			fmt.Sprintf("metrics.listen=127.0.0.1:%d", brokertest.FreePort(t)),
			"broker.heartbeat.interval.ms=500",
			"broker.session.timeout.ms=3000",
		}
		cfg := filepath.Join(dir, "server.properties")
		writeFile(t, cfg, strings.Join(props, "\n")+"\n")
		if out, err := exec.Command(ringbrokerBinary(), "format", "--cluster-id", cid, "--config", cfg).CombinedOutput(); err != nil {
			t.Fatalf("ringbroker format node %d: %v\n%s", i+1, err, out)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", client[i])
		if r == "controller" {
			addr = fmt.Sprintf("127.0.0.1:%d", ctrl[i])
		}
		b := &Broker{t: t, kind: "ringbroker", addr: addr, dir: dir,
			log: filepath.Join(dir, "broker.log"), argv: []string{ringbrokerBinary(), "--config", cfg},
			cleanExit: func(code int) bool { return code == 0 }}
		t.Cleanup(func() {
			b.Kill()
			if t.Failed() {
				t.Logf("node %d (%s) log %s (tail):\n%s", i+1, r, b.log, brokertest.TailFile(b.log, logTailBytes))
			}
		})
		b.startProcess()
		nodes[i] = b
	}
	brokers := []*Broker{nodes[0], nodes[1], nodes[3]}
	for _, b := range brokers {
		b.waitReady()
	}
	// The controller-only node listens on its controller port only.
	testutil.WaitFor(t, clusterTimeout, func() error {
		if !nodes[2].Alive() {
			return fmt.Errorf("controller-only node 3 exited:\n%s", brokertest.TailFile(nodes[2].log, logTailBytes))
		}
		c, err := net.DialTimeout("tcp", nodes[2].addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", client[2]), time.Second); err == nil {
		c.Close()
		t.Fatalf("controller-only node 3 accepts on client port %d", client[2])
	}
	// It serves admin clients on that port (--bootstrap-controller, KIP-919): the quorum has the
	// three voters at their controller listeners and the broker-only node as an observer.
	testutil.WaitFor(t, clusterTimeout, func() error {
		status := runJava(t, "org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-controller", nodes[2].addr, "describe", "--status").stdout
		fields := statusFields(t, status)
		for i := range 3 {
			if voter := fmt.Sprintf(`{"id": %d, "endpoints": ["CONTROLLER://127.0.0.1:%d"]}`, i+1, ctrl[i]); !strings.Contains(fields["CurrentVoters"], voter) {
				return fmt.Errorf("describe --status through controller-only node 3 lacks voter %s:\n%s", voter, status)
			}
		}
		if !strings.Contains(fields["CurrentObservers"], `{"id": 4`) {
			return fmt.Errorf("describe --status through controller-only node 3 lacks observer 4:\n%s", status)
		}
		return nil
	})

	// Every broker lists the three brokers; the controller-only node is not one of them.
	testutil.WaitFor(t, clusterTimeout, func() error {
		for _, b := range brokers {
			md, err := clusterMetadata(t, b, "none")
			if err != nil {
				return err
			}
			var ids []int32
			for _, br := range md.Brokers {
				ids = append(ids, br.NodeID)
			}
			if fmt.Sprint(ids) != "[1 2 4]" {
				return fmt.Errorf("%s lists brokers %v, want [1 2 4]", b.Addr(), ids)
			}
		}
		return nil
	})
	learnerLog, err := os.ReadFile(nodes[3].log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(learnerLog), "joined the metadata quorum as a learner") {
		t.Fatalf("node 4's log does not show it joined as a learner:\n%s", brokertest.TailFile(nodes[3].log, logTailBytes))
	}

	// A topic created through the learner appears on every broker, with partitions on it.
	nodes[3].CreateTopic(t, "via-learner", 6)
	leaders := waitLeaders(t, brokers, "via-learner", 6, 0)
	onLearner := 0
	for _, l := range leaders {
		if l == 3 {
			t.Fatalf("via-learner leaders %v: a partition on the controller-only node 3", leaders)
		}
		if l == 4 {
			onLearner++
		}
	}
	if onLearner != 2 {
		t.Fatalf("via-learner leaders %v: want 2 of 6 partitions on the learner (node 4)", leaders)
	}
	produceAcross(t, nodes[3], "via-learner", 6, 20)
	consumeAcross(t, nodes[0], "via-learner", 6, 20)

	// SIGKILL the learner: the three voters still commit, and its partitions go offline.
	nodes[3].Kill()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	resp, err := nodes[0].Admin(t).CreateTopic(ctx, 4, 1, nil, "after-learner")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create a topic after killing the learner: %v", err)
	}
	waitLeaders(t, brokers, "after-learner", 4, 4)
	leaders = waitLeaders(t, brokers, "via-learner", 6, 4)
	offline := 0
	for _, l := range leaders {
		if l == -1 {
			offline++
		}
	}
	if offline != 2 {
		t.Fatalf("via-learner leaders after killing the learner: %v; want its 2 partitions offline", leaders)
	}
}
