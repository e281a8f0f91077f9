package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"ringbroker/internal/testutil"
)

// TestMetadataQuorumTool runs Apache Kafka's kafka-metadata-quorum (MetadataQuorumCommand)
// against a 3-node cluster through a node's client listener. describe --status names a leader
// among the three voters, its epoch and high watermark, and the voters' endpoints;
// describe --replication lists the three voters, one as Leader and two as Follower, each
// caught up once the quorum is idle (lag 0).
func TestMetadataQuorumTool(t *testing.T) {
	nodes := startCluster(t, 3)
	quorum := func(args ...string) string {
		t.Helper()
		res := runJava(t, "org.apache.kafka.tools.MetadataQuorumCommand", append([]string{"--bootstrap-server", nodes[1].Addr(), "describe"}, args...)...)
		return res.stdout
	}
	status := quorum("--status")
	t.Logf("describe --status:\n%s", status)
	field := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `:\s*(.*)$`).FindStringSubmatch(status)
		if m == nil {
			t.Fatalf("describe --status printed no %s:\n%s", name, status)
		}
		return strings.TrimSpace(m[1])
	}
	leader, err := strconv.Atoi(field("LeaderId"))
	if err != nil || leader < 1 || leader > 3 {
		t.Fatalf("LeaderId %q; want one of the voters 1-3", field("LeaderId"))
	}
	if hw, err := strconv.ParseInt(field("HighWatermark"), 10, 64); err != nil || hw <= 0 {
		t.Fatalf("HighWatermark %q; want a positive offset", field("HighWatermark"))
	}
	if e, err := strconv.Atoi(field("LeaderEpoch")); err != nil || e < 1 {
		t.Fatalf("LeaderEpoch %q; want at least 1", field("LeaderEpoch"))
	}
	voters := field("CurrentVoters")
	for id := 1; id <= 3; id++ {
		if !strings.Contains(voters, `"id": `+strconv.Itoa(id)) {
			t.Fatalf("CurrentVoters %s lacks node %d", voters, id)
		}
	}
	if !strings.Contains(voters, "CONTROLLER://127.0.0.1:") {
		t.Fatalf("CurrentVoters %s gives no controller endpoints", voters)
	}

	// Followers hear heartbeats at least every few hundred milliseconds; once the metadata
	// log is idle every voter holds all of it.
	testutil.WaitFor(t, 30*time.Second, func() error {
		out := quorum("--replication")
		rows := map[string]int{}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 6 || f[0] == "NodeId" {
				continue
			}
			status := f[len(f)-1]
			rows[status]++
			if lag := f[len(f)-4]; (status == "Leader" || status == "Follower") && lag != "0" {
				return fmt.Errorf("node %s (%s) lags %s:\n%s", f[0], status, lag, out)
			}
		}
		if rows["Leader"] != 1 || rows["Follower"] != 2 {
			return fmt.Errorf("describe --replication shows %v; want 1 Leader and 2 Followers:\n%s", rows, out)
		}
		t.Logf("describe --replication:\n%s", out)
		return nil
	})
}
