package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"ringbroker/internal/testutil"
)

// TestDynamicQuorum grows a dynamic metadata quorum (KIP-853) from one voter to three and
// shrinks it back with Apache Kafka's kafka-metadata-quorum, while a producer keeps producing
// with acks=all: node 1 is formatted --standalone, nodes 2 and 3 --no-initial-controllers, all
// combined broker and controller nodes with controller.quorum.bootstrap.servers. describe
// --replication shows 2 and 3 as observers with the directory ids of their meta.properties,
// add-controller promotes each to Follower, remove-controller takes the leader out (another
// voter leads) and then one more, each removed node observing again; describe --status lists
// the voters with their endpoints and kafka-features kraft.version 1. Every record the producer
// had acknowledged (one at a time, acks=all, to a topic of RF 3 with min.insync.replicas=2) is
// read back at the end, in order. It runs ringbroker on each I/O backend, or Apache
// Kafka 4.1.1 with E2E_BROKER=kafka.
func TestDynamicQuorum(t *testing.T) {
	if k := brokerKind(); k == "kafka" {
		t.Run("kafka", func(t *testing.T) { testDynamicQuorum(t, "kafka", nil) })
		return
	}
	for _, io := range []string{"uring", "netpoll"} {
		t.Run(io, func(t *testing.T) { testDynamicQuorum(t, "ringbroker", []string{"io.backend=" + io}) })
	}
}

// quorumRow is one row of kafka-metadata-quorum describe --replication.
type quorumRow struct {
	dir, lag, status string
}

func testDynamicQuorum(t *testing.T, kind string, ringOnly []string) {
	start := time.Now()
	const n = 3
	ps := freeClusterPorts(t, n)
	var bootstrap []string
	for _, p := range ps {
		bootstrap = append(bootstrap, fmt.Sprintf("127.0.0.1:%d", p.controller))
	}
	cid := newClusterID(t)
	nodes := make([]*Broker, n)
	configs := make([]string, n)
	dirIDs := make([]string, n)
	for i, p := range ps {
		dir := t.TempDir()
		// Every controller is a bootstrap server, as Kafka advises: a removed voter of Kafka
		// finds the new leader through them alone.
		props := combinedNodeProps(i, p, "controller.quorum.bootstrap.servers="+strings.Join(bootstrap, ","), dir)
		format := "--no-initial-controllers"
		if i == 0 {
			format = "--standalone"
		}
		nodes[i] = clusterNode(t, kind, i, cid, dir, p.clientAddr(), props, append(p.ringOnly(), ringOnly...), nil, nil, format)
		configs[i] = filepath.Join(dir, "server.properties")
		dirIDs[i] = directoryID(t, filepath.Join(dir, "data"))
		nodes[i].startProcess()
		if i == 0 {
			nodes[0].waitReady() // the others join through it
		}
	}
	for _, b := range nodes[1:] {
		b.waitReady()
	}
	t.Logf("3 nodes ready in %v", time.Since(start).Round(time.Millisecond))

	quorum := func(args ...string) (string, error) {
		return tryJava(t, "org.apache.kafka.tools.MetadataQuorumCommand", append([]string{"--bootstrap-server", nodes[0].Addr()}, args...)...)
	}
	replication := func() (map[string]quorumRow, string, error) {
		out, err := quorum("describe", "--replication")
		if err != nil {
			return nil, out, err
		}
		rows := map[string]quorumRow{}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) != 7 || f[0] == "NodeId" {
				continue
			}
			rows[f[0]] = quorumRow{dir: f[1], lag: f[3], status: f[6]}
		}
		return rows, out, nil
	}
	// waitMembers waits until describe --replication shows the voters (one Leader, the
	// others Follower) and the observers, each with its directory id and caught up.
	waitMembers := func(voters, observers []int) map[string]quorumRow {
		t.Helper()
		var last map[string]quorumRow
		testutil.WaitFor(t, 30*time.Second, func() error {
			rows, out, err := replication()
			if err != nil {
				return fmt.Errorf("describe --replication: %v\n%s", err, out)
			}
			leaders := 0
			want := map[int]string{}
			for _, id := range voters {
				want[id] = "voter"
			}
			for _, id := range observers {
				want[id] = "Observer"
			}
			for id, role := range want {
				r, ok := rows[fmt.Sprint(id)]
				switch {
				case !ok:
					return fmt.Errorf("node %d missing:\n%s", id, out)
				case r.dir != dirIDs[id-1]:
					return fmt.Errorf("node %d has directory id %s; meta.properties says %s:\n%s", id, r.dir, dirIDs[id-1], out)
				case r.lag != "0":
					return fmt.Errorf("node %d lags %s:\n%s", id, r.lag, out)
				case role == "Observer" && r.status != "Observer", role == "voter" && r.status != "Leader" && r.status != "Follower":
					return fmt.Errorf("node %d is %s; want %s:\n%s", id, r.status, role, out)
				}
				if r.status == "Leader" {
					leaders++
				}
			}
			if leaders != 1 {
				return fmt.Errorf("%d leaders:\n%s", leaders, out)
			}
			voting := 0
			for _, r := range rows {
				if r.status == "Leader" || r.status == "Follower" {
					voting++
				}
			}
			if voting != len(voters) {
				return fmt.Errorf("%d voters; want %v:\n%s", voting, voters, out)
			}
			t.Logf("describe --replication:\n%s", out)
			last = rows
			return nil
		})
		return last
	}
	waitMembers([]int{1}, []int{2, 3})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "voters"
	addrs, _ := replicatedTopic(ctx, t, nodes, topic, 1)
	prod := startAckedProducer(ctx, t, addrs, topic)

	for _, id := range []int{2, 3} {
		addController(t, quorum, configs[id-1], id, dirIDs[id-1], ps[id-1].controller)
		if id == 2 {
			waitMembers([]int{1, 2}, []int{3})
		}
	}
	rows := waitMembers([]int{1, 2, 3}, nil)
	status, err := quorum("describe", "--status")
	if err != nil {
		t.Fatalf("describe --status: %v\n%s", err, status)
	}
	t.Logf("describe --status:\n%s", status)
	for i := range n {
		want := fmt.Sprintf(`{"id": %d, "directoryId": "%s", "endpoints": ["CONTROLLER://127.0.0.1:%d"]}`, i+1, dirIDs[i], ps[i].controller)
		if !strings.Contains(status, want) {
			t.Fatalf("describe --status lacks voter %s:\n%s", want, status)
		}
	}
	features, err := tryJava(t, "org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", nodes[0].Addr(), "describe")
	if err != nil || !regexp.MustCompile(`Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\t`).MatchString(features) {
		t.Fatalf("kafka-features describe: %v; want kraft.version finalized at 1 of 0-1:\n%s", err, features)
	}

	// Shrink back to one voter: the leader first, then a follower of the two left.
	withStatus := func(rows map[string]quorumRow, status string) []int {
		var ids []int
		for id, r := range rows {
			var k int
			fmt.Sscan(id, &k)
			if r.status == status {
				ids = append(ids, k)
			}
		}
		sort.Ints(ids)
		return ids
	}
	leader := withStatus(rows, "Leader")[0]
	removeController(t, quorum, leader, dirIDs[leader-1])
	rows = waitMembers(withStatus(rows, "Follower"), []int{leader})
	follower := withStatus(rows, "Follower")[0]
	removeController(t, quorum, follower, dirIDs[follower-1])
	last := withStatus(rows, "Leader")[0]
	waitMembers([]int{last}, sortedInts([]int{leader, follower}))

	acked := len(prod.finish(t))
	if acked < 100 {
		t.Fatalf("the producer had %d records acknowledged while the quorum changed; want at least 100", acked)
	}
	checkReadBackInOrder(ctx, t, []string{nodes[last-1].Addr()}, topic, acked)
	t.Logf("%d acknowledged records read back in order; whole run %v", acked, time.Since(start).Round(time.Millisecond))
}

// addController runs kafka-metadata-quorum add-controller through quorum with node id's config
// file cfg until it succeeds, and checks that it names the node's directory id dir and its
// controller endpoint on port.
func addController(t *testing.T, quorum func(...string) (string, error), cfg string, id int, dir string, port int) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, func() error {
		out, err := quorum("--command-config", cfg, "add-controller")
		if err != nil {
			return fmt.Errorf("add-controller %d: %v\n%s", id, err, out)
		}
		want := fmt.Sprintf("Added controller %d with directory id %s and endpoints: CONTROLLER://127.0.0.1:%d", id, dir, port)
		if !strings.Contains(out, want) {
			t.Fatalf("add-controller %d printed %q; want %q", id, out, want)
		}
		return nil
	})
}

// removeController runs kafka-metadata-quorum remove-controller of voter id with directory id
// dir through quorum until it succeeds, and checks what it prints.
func removeController(t *testing.T, quorum func(...string) (string, error), id int, dir string) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, func() error {
		out, err := quorum("remove-controller", "--controller-id", fmt.Sprint(id), "--controller-directory-id", dir)
		if err != nil {
			return fmt.Errorf("remove-controller %d: %v\n%s", id, err, out)
		}
		// Kafka 4.1.1's tool prints two spaces after "Removed".
		if want := fmt.Sprintf(`Removed\s+KRaft controller %d with directory id %s`, id, regexp.QuoteMeta(dir)); !regexp.MustCompile(want).MatchString(out) {
			t.Fatalf("remove-controller %d printed %q; want %q", id, out, want)
		}
		return nil
	})
}

// sortedInts returns a sorted copy of ids.
func sortedInts(ids []int) []int {
	out := append([]int(nil), ids...)
	sort.Ints(out)
	return out
}

// directoryID reads directory.id from the meta.properties the format step wrote in dir.
func directoryID(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "meta.properties"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^directory\.id=(\S+)$`).FindStringSubmatch(string(data))
	if m == nil {
		t.Fatalf("%s/meta.properties has no directory.id:\n%s", dir, data)
	}
	return m[1]
}

// tryJava runs an Apache Kafka tool and returns what it printed (stdout, then stderr) and
// whether it failed, for tools whose failure a test retries.
func tryJava(t *testing.T, mainClass string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), javaTimeout)
	defer cancel()
	log4j := filepath.Join(t.TempDir(), "log4j2-tools.properties")
	writeFile(t, log4j, log4jConfig("warn", "SYSTEM_ERR"))
	cmd := exec.CommandContext(ctx, "java", javaArgs(t, []string{"-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile=" + log4j}, mainClass, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String() + stderr.String(), err
}
