package e2e

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// TestBootstrapController runs Apache Kafka's tools with --bootstrap-controller (KIP-919: an
// admin client that reaches the cluster through the controllers' listeners) against a 3-node
// cluster, ringbroker or, with E2E_BROKER=kafka, Apache Kafka 4.1.1, and checks Kafka's output
// shapes: kafka-metadata-quorum describe --status names the cluster id, a leader among the
// three voters and each voter at its controller endpoint, as through a broker;
// describe --replication lists one Leader and two Followers, caught up; kafka-features
// describe lists the same features as through a broker; kafka-cluster list-endpoints lists the
// three controllers with endpoint type controller. A DescribeCluster for brokers on the
// controller listener, or for controllers on a broker listener, is MISMATCHED_ENDPOINT_TYPE
// with Kafka's message. The controller listener's Kafka clients run on goroutines whatever
// io.backend is (ring.Adopted), so the test runs once.
func TestBootstrapController(t *testing.T) {
	start := time.Now()
	nodes, ps := startClusterPorts(t, 3)
	var ctrl []string
	for _, p := range ps {
		ctrl = append(ctrl, fmt.Sprintf("127.0.0.1:%d", p.controller))
	}
	controllers := strings.Join(ctrl, ",")
	t.Logf("3 nodes ready in %v", time.Since(start).Round(time.Millisecond))

	quorum := func(bootstrap string, args ...string) string {
		t.Helper()
		return runJava(t, "org.apache.kafka.tools.MetadataQuorumCommand", append([]string{bootstrap, controllers, "describe"}, args...)...).stdout
	}
	viaBroker := runJava(t, "org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", nodes[0].Addr(), "describe", "--status").stdout
	status := quorum("--bootstrap-controller", "--status")
	t.Logf("describe --status through the controllers:\n%s", status)
	fields := statusFields(t, status)
	brokerFields := statusFields(t, viaBroker)
	if fields["ClusterId"] != brokerFields["ClusterId"] || fields["ClusterId"] == "" {
		t.Fatalf("ClusterId %q through the controllers, %q through a broker", fields["ClusterId"], brokerFields["ClusterId"])
	}
	if !regexp.MustCompile(`^[123]$`).MatchString(fields["LeaderId"]) {
		t.Fatalf("LeaderId %q; want one of the voters 1-3", fields["LeaderId"])
	}
	for _, k := range []string{"LeaderEpoch", "HighWatermark", "MaxFollowerLag", "MaxFollowerLagTimeMs"} {
		if !regexp.MustCompile(`^-?\d+$`).MatchString(fields[k]) {
			t.Fatalf("%s %q; want a number", k, fields[k])
		}
	}
	for i, p := range ps {
		voter := fmt.Sprintf(`\{"id": %d(, "directoryId": "[A-Za-z0-9_-]{22}")?, "endpoints": \["CONTROLLER://127\.0\.0\.1:%d"\]\}`, i+1, p.controller)
		if !regexp.MustCompile(voter).MatchString(fields["CurrentVoters"]) {
			t.Fatalf("CurrentVoters %s lacks voter %d at its controller listener (%s)", fields["CurrentVoters"], i+1, voter)
		}
	}
	if fields["CurrentObservers"] != "[]" {
		t.Fatalf("CurrentObservers %s; want none, every node is a voter", fields["CurrentObservers"])
	}

	testutil.WaitFor(t, 30*time.Second, func() error {
		out := quorum("--bootstrap-controller", "--replication")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if got := strings.Join(strings.Fields(lines[0]), " "); got != "NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp Status" {
			return fmt.Errorf("describe --replication header %q:\n%s", got, out)
		}
		var statuses []string
		for _, line := range lines[1:] {
			f := strings.Fields(line)
			if len(f) != 7 {
				return fmt.Errorf("row %q has %d columns; want 7:\n%s", line, len(f), out)
			}
			if f[3] != "0" {
				return fmt.Errorf("node %s lags %s:\n%s", f[0], f[3], out)
			}
			statuses = append(statuses, f[6])
		}
		sort.Strings(statuses)
		if fmt.Sprint(statuses) != "[Follower Follower Leader]" {
			return fmt.Errorf("describe --replication shows %v; want a Leader and two Followers:\n%s", statuses, out)
		}
		t.Logf("describe --replication through the controllers:\n%s", out)
		return nil
	})

	features := func(bootstrap, addr string) string {
		out := runJava(t, "org.apache.kafka.tools.FeatureCommand", bootstrap, addr, "describe").stdout
		// The epoch is the metadata offset each side last applied; the rest must agree.
		return regexp.MustCompile(`\tEpoch: \d+`).ReplaceAllString(out, "")
	}
	viaCtrl := features("--bootstrap-controller", controllers)
	if got, want := viaCtrl, features("--bootstrap-server", nodes[0].Addr()); got != want {
		t.Fatalf("kafka-features describe through the controllers:\n%s\nthrough a broker:\n%s", got, want)
	}
	if !strings.Contains(viaCtrl, "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.1-IV1\tFinalizedVersionLevel: 4.1-IV1") {
		t.Fatalf("kafka-features describe through the controllers lacks metadata.version 4.1-IV1:\n%s", viaCtrl)
	}

	endpoints := runJava(t, "org.apache.kafka.tools.ClusterTool", "list-endpoints", "--bootstrap-controller", controllers).stdout
	t.Logf("kafka-cluster list-endpoints through the controllers:\n%s", endpoints)
	for i, p := range ps {
		row := fmt.Sprintf(`(?m)^%d\s+127\.0\.0\.1\s+%d\s+null\s+controller\s*$`, i+1, p.controller)
		if !regexp.MustCompile(row).MatchString(endpoints) {
			t.Fatalf("kafka-cluster list-endpoints lacks controller %d (%s):\n%s", i+1, row, endpoints)
		}
	}

	wrongEndpoint := func(addr string, asked int8, want string) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = asked
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("DescribeCluster of endpoint type %d at %s: %v", asked, addr, err)
		}
		if msg := kmsg.StringPtr(""); resp.ErrorCode != kerr.MismatchedEndpointType.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != want {
			if resp.ErrorMessage != nil {
				msg = resp.ErrorMessage
			}
			t.Fatalf("DescribeCluster of endpoint type %d at %s: error %d %q; want MISMATCHED_ENDPOINT_TYPE %q",
				asked, addr, resp.ErrorCode, *msg, want)
		}
	}
	wrongEndpoint(ctrl[1], 1, "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER")
	wrongEndpoint(nodes[1].Addr(), 2, "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")
	t.Logf("whole run %v", time.Since(start).Round(time.Millisecond))
}

// statusFields parses kafka-metadata-quorum describe --status into its fields.
func statusFields(t *testing.T, out string) map[string]string {
	t.Helper()
	fields := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(\w+):\s+(.*)$`).FindAllStringSubmatch(out, -1) {
		fields[m[1]] = strings.TrimSpace(m[2])
	}
	want := []string{"ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag", "MaxFollowerLagTimeMs", "CurrentVoters", "CurrentObservers"}
	var got []string
	for k := range fields {
		got = append(got, k)
	}
	sort.Strings(got)
	sorted := append([]string(nil), want...)
	sort.Strings(sorted)
	if fmt.Sprint(got) != fmt.Sprint(sorted) {
		t.Fatalf("describe --status printed fields %v; want Kafka's %v:\n%s", got, want, out)
	}
	return fields
}
