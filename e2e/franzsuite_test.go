package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// franzSuiteTimeout bounds one run of franz-go's kgo test suite; it takes about 80 s.
const franzSuiteTimeout = 6 * time.Minute

// franzSuiteNeedsBroker are tests of franz-go's suite that drive a live broker (producing,
// consuming, groups, transactions, regex subscriptions, KIP-848): they must have run and
// passed, not skipped, for the suite's result to say anything about the broker.
var franzSuiteNeedsBroker = []string{
	"TestGroupETL", "TestTxnEtl", "TestClient_Produce", "TestConsumeRegex", "Test848RegexBrokerResolves",
	"TestPauseIssueOct2023", "TestIssue865", "TestIssueFetchLargerThanBrokerMaxReadBytes",
	"TestAddRemovePartitions", "TestClient_ProduceLargeMessages", "TestGroupSimple",
}

// TestFranzGoSuite runs the franz-go client library's own kgo test suite, the one its authors
// run against Apache Kafka (KGO_SEEDS), against the broker: every test passes, and the tests
// that drive a broker ran. It is the suite of the client ringbroker's own tests and load
// generator use, at the version go.mod pins. Share-group tests skip themselves (no KIP-932
// here), as do the SASL ones without credentials.
func TestFranzGoSuite(t *testing.T) {
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/twmb/franz-go").Output()
	if err != nil {
		t.Fatalf("locate franz-go's module source: %v", err)
	}
	src := strings.TrimSpace(string(dir))
	if src == "" {
		t.Fatal("go list gave no directory for github.com/twmb/franz-go (run go mod download)")
	}
	// In parallel: the suite mostly waits on the broker (about 0.4 of a core busy).
	forEachTargetParallel(t, func(t *testing.T, tg target) {
		b := tg.start(t)
		ctx, cancel := context.WithTimeout(t.Context(), franzSuiteTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "test", "-C", src, "-count=1", "-json", "-timeout", franzSuiteTimeout.String(), "./pkg/kgo")
		cmd.Env = append(os.Environ(), "KGO_SEEDS="+b.Addr(), "KGO_TEST_RF=1", "KGO_TEST_RECORDS=50000", "KGO_LOG_LEVEL=none")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		out, runErr := cmd.Output()
		res := readTestEvents(t, out)
		t.Logf("franz-go kgo suite on %s in %v: %d passed, %d skipped, %d failed", tg.name,
			time.Since(start).Round(time.Second), len(res.passed), len(res.skipped), len(res.failed))
		if len(res.failed) > 0 || runErr != nil {
			for _, name := range res.failed {
				t.Errorf("franz-go %s failed:\n%s", name, res.output[name])
			}
			t.Fatalf("go test ./pkg/kgo: %v\n%s", runErr, stderr.String())
		}
		for _, name := range franzSuiteNeedsBroker {
			if !slices.Contains(res.passed, name) {
				t.Errorf("franz-go %s did not pass (skipped: %v)", name, slices.Contains(res.skipped, name))
			}
		}
	})
}

// testEvents is what a `go test -json` run reported of its top-level tests.
type testEvents struct {
	passed, skipped, failed []string
	// output is each test's printed output, for the failed ones.
	output map[string]string
}

// readTestEvents reads `go test -json` output; subtests count with their parent only.
func readTestEvents(t *testing.T, out []byte) testEvents {
	t.Helper()
	res := testEvents{output: make(map[string]string)}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Action, Test, Output string
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Test == "" || strings.Contains(ev.Test, "/") {
			continue
		}
		switch ev.Action {
		case "pass":
			res.passed = append(res.passed, ev.Test)
		case "skip":
			res.skipped = append(res.skipped, ev.Test)
		case "fail":
			res.failed = append(res.failed, ev.Test)
		case "output":
			res.output[ev.Test] += ev.Output
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read go test -json output: %v", err)
	}
	return res
}
