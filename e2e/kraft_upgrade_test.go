package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"ringbroker/internal/testutil"
)

// TestKRaftVersionUpgrade upgrades a static metadata quorum (controller.quorum.voters,
// kraft.version 0) of three combined nodes to kraft.version 1 with Apache Kafka's tools, as
// Kafka 4.1 allows, then changes its voters as a dynamic quorum's: before the upgrade
// remove-controller is refused because kraft.version is 0; kafka-features upgrade --feature
// kraft.version=1 succeeds (retried while the voters are still telling the leader their
// directory ids) and kafka-features describe shows it finalized at 1; describe --status then
// lists every voter with the directory id of its meta.properties; a follower is removed (it
// observes) and added back with add-controller, after which the three vote again. It runs
// ringbroker, or Apache Kafka 4.1.1 with E2E_BROKER=kafka.
func TestKRaftVersionUpgrade(t *testing.T) {
	start := time.Now()
	nodes, ps := startClusterPorts(t, 3)
	t.Logf("3 nodes ready in %v", time.Since(start).Round(time.Millisecond))
	var ctrl []string
	dirIDs := make([]string, len(nodes))
	for i, p := range ps {
		ctrl = append(ctrl, fmt.Sprintf("127.0.0.1:%d", p.controller))
		dirIDs[i] = directoryID(t, filepath.Join(nodes[i].dir, "data"))
	}
	quorum := func(args ...string) (string, error) {
		return tryJava(t, "org.apache.kafka.tools.MetadataQuorumCommand", append([]string{"--bootstrap-controller", strings.Join(ctrl, ",")}, args...)...)
	}
	kraftVersion := func() string {
		t.Helper()
		out := runJava(t, "org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", nodes[0].Addr(), "describe").stdout
		m := regexp.MustCompile(`Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: (\d+)\t`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("kafka-features describe lists no kraft.version of 0-1:\n%s", out)
		}
		return m[1]
	}
	if v := kraftVersion(); v != "0" {
		t.Fatalf("a static quorum's kraft.version is %s; want 0", v)
	}
	if out, err := quorum("remove-controller", "--controller-id", "2", "--controller-directory-id", dirIDs[1]); err == nil || !strings.Contains(out, "kraft.version feature is 0") {
		t.Fatalf("remove-controller before the upgrade: %v; want it refused because kraft.version is 0:\n%s", err, out)
	}

	testutil.WaitFor(t, 30*time.Second, func() error {
		out, err := tryJava(t, "org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", nodes[0].Addr(), "upgrade", "--feature", "kraft.version=1")
		if err != nil {
			return fmt.Errorf("kafka-features upgrade --feature kraft.version=1: %v\n%s", err, out)
		}
		if !strings.Contains(out, "kraft.version was upgraded to 1.") {
			t.Fatalf("kafka-features upgrade printed %q; want %q", out, "kraft.version was upgraded to 1.")
		}
		return nil
	})
	testutil.WaitFor(t, 30*time.Second, func() error {
		if v := kraftVersion(); v != "1" {
			return fmt.Errorf("kraft.version finalized at %s after the upgrade; want 1", v)
		}
		return nil
	})

	// replication waits until describe --replication shows the voters (a Leader, Followers)
	// and the observers as listed, each caught up with its own directory id, and returns the
	// leader.
	replication := func(voters, observers []int) int {
		t.Helper()
		leader := -1
		testutil.WaitFor(t, 30*time.Second, func() error {
			out, err := quorum("describe", "--replication")
			if err != nil {
				return fmt.Errorf("describe --replication: %v\n%s", err, out)
			}
			rows := map[int][]string{}
			for _, line := range strings.Split(out, "\n") {
				if f := strings.Fields(line); len(f) == 7 && f[0] != "NodeId" {
					var id int
					fmt.Sscan(f[0], &id)
					rows[id] = f
				}
			}
			if len(rows) != len(voters)+len(observers) {
				return fmt.Errorf("%d rows; want voters %v and observers %v:\n%s", len(rows), voters, observers, out)
			}
			leader = -1
			for _, id := range append(append([]int(nil), voters...), observers...) {
				r, ok := rows[id]
				switch {
				case !ok:
					return fmt.Errorf("node %d missing:\n%s", id, out)
				case r[1] != dirIDs[id-1]:
					return fmt.Errorf("node %d has directory id %s; meta.properties says %s:\n%s", id, r[1], dirIDs[id-1], out)
				case r[3] != "0":
					return fmt.Errorf("node %d lags %s:\n%s", id, r[3], out)
				case r[6] == "Leader":
					leader = id
				}
			}
			for _, id := range observers {
				if rows[id][6] != "Observer" {
					return fmt.Errorf("node %d is %s; want Observer:\n%s", id, rows[id][6], out)
				}
			}
			if leader < 0 {
				return fmt.Errorf("no leader among voters %v:\n%s", voters, out)
			}
			t.Logf("describe --replication:\n%s", out)
			return nil
		})
		return leader
	}
	leader := replication([]int{1, 2, 3}, nil)
	status, err := quorum("describe", "--status")
	if err != nil {
		t.Fatalf("describe --status: %v\n%s", err, status)
	}
	for i, p := range ps {
		want := fmt.Sprintf(`{"id": %d, "directoryId": "%s", "endpoints": ["CONTROLLER://127.0.0.1:%d"]}`, i+1, dirIDs[i], p.controller)
		if !strings.Contains(status, want) {
			t.Fatalf("describe --status after the upgrade lacks voter %s:\n%s", want, status)
		}
	}

	follower := leader%3 + 1
	removeController(t, quorum, follower, dirIDs[follower-1])
	var rest []int
	for id := 1; id <= 3; id++ {
		if id != follower {
			rest = append(rest, id)
		}
	}
	replication(rest, []int{follower})

	addController(t, quorum, filepath.Join(nodes[follower-1].dir, "server.properties"), follower, dirIDs[follower-1], ps[follower-1].controller)
	replication([]int{1, 2, 3}, nil)
	t.Logf("whole run %v", time.Since(start).Round(time.Millisecond))
}
