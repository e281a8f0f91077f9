package e2e

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// TestClusterUnregister stops one broker of three, sees it fenced with Apache Kafka's
// kafka-cluster list-endpoints --include-fenced-brokers, removes its registration with
// kafka-cluster unregister, and sees it listed no more, a second UnregisterBroker of it
// answered BROKER_ID_NOT_REGISTERED; started again, it registers and is listed unfenced.
func TestClusterUnregister(t *testing.T) {
	nodes := startCluster(t, 3)
	tool := func(args ...string) string {
		t.Helper()
		return runJava(t, "org.apache.kafka.tools.ClusterTool", append(args[:1:1], append([]string{"--bootstrap-server", nodes[0].Addr()}, args[1:]...)...)...).stdout
	}
	// state lists the node ids kafka-cluster list-endpoints shows, each with its state.
	row := regexp.MustCompile(`(?m)^(\d+)\s+\S+\s+\d+\s+\S+\s+(fenced|unfenced)\b`)
	state := func() map[string]string {
		t.Helper()
		out := tool("list-endpoints", "--include-fenced-brokers")
		got := map[string]string{}
		for _, m := range row.FindAllStringSubmatch(out, -1) {
			got[m[1]] = m[2]
		}
		if len(got) == 0 {
			t.Fatalf("kafka-cluster list-endpoints printed no brokers:\n%s", out)
		}
		return got
	}
	want := func(what string, ids map[string]string) {
		t.Helper()
		testutil.WaitFor(t, clusterTimeout, func() error {
			if got := state(); !maps.Equal(got, ids) {
				return fmt.Errorf("%s: list-endpoints shows %v; want %v", what, got, ids)
			}
			return nil
		})
	}
	want("all up", map[string]string{"1": "unfenced", "2": "unfenced", "3": "unfenced"})
	nodes[2].Stop()
	want("node 3 stopped", map[string]string{"1": "unfenced", "2": "unfenced", "3": "fenced"})

	if out := tool("unregister", "--id", "3"); !strings.Contains(out, "Broker 3 is no longer registered.") {
		t.Fatalf("kafka-cluster unregister --id 3 printed:\n%s", out)
	}
	want("node 3 unregistered", map[string]string{"1": "unfenced", "2": "unfenced"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = 3
	resp, err := req.RequestWith(ctx, nodes[0].Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.BrokerIDNotRegistered.Code || deref(resp.ErrorMessage) != "Broker ID 3 is not currently registered" {
		t.Fatalf("UnregisterBroker of an unregistered broker: error %d %q; want BROKER_ID_NOT_REGISTERED", resp.ErrorCode, deref(resp.ErrorMessage))
	}

	nodes[2].Restart()
	want("node 3 back", map[string]string{"1": "unfenced", "2": "unfenced", "3": "unfenced"})
}
