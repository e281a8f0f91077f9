package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"ringbroker/internal/brokertest"
	"ringbroker/internal/testutil"
)

// TestClientMetricsTelemetry: Apache Kafka's kafka-client-metrics (ClientMetricsCommand)
// creates a client metrics subscription with a 1 s push interval for producers whose client id
// starts with telemetry-e2e, lists it, describes it and finally deletes it. On ringbroker, a
// Java producer (kafka-producer-perf-test; enable.metrics.push is on by default) is given the
// subscription and pushes its metrics, which appear on ringbroker's /metrics within a few push
// intervals. Against Kafka (E2E_BROKER=kafka), which serves telemetry only with a client
// telemetry plugin and has no /metrics, only the tool's part runs.
func TestClientMetricsTelemetry(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		var metricsAddr string
		var b *Broker
		if brokerKind() == "ringbroker" {
			metricsAddr = fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t))
			b = tg.start(t, "metrics.listen="+metricsAddr)
		} else {
			b = tg.start(t)
		}
		const name, clientID = "e2e-producers", "telemetry-e2e-1"
		tool := func(args ...string) string {
			t.Helper()
			return runJava(t, "org.apache.kafka.tools.ClientMetricsCommand", append([]string{"--bootstrap-server", b.Addr()}, args...)...).stdout
		}
		expectLines := func(what, out string, want ...string) {
			t.Helper()
			for _, w := range want {
				if !hasLine(out, w) {
					t.Fatalf("kafka-client-metrics %s printed no line %q:\n%s", what, w, out)
				}
			}
		}
		expectLines("--alter", tool("--alter", "--name", name, "--metrics", "org.apache.kafka.producer.", "--interval", "1000",
			"--match", "client_id=telemetry-e2e.*"), "Altered client metrics config for "+name+".")
		expectLines("--list", tool("--list"), name)
		expectLines("--describe", tool("--describe", "--name", name), "Client metrics configs for "+name+" are:",
			"  metrics=org.apache.kafka.producer.", "  interval.ms=1000", "  match=client_id=telemetry-e2e.*")
		expectLines("--describe of every subscription", tool("--describe"), "Client metrics configs for "+name+" are:", "  interval.ms=1000")

		if b.Kind() == "ringbroker" {
			p := startPerfProducer(t, b, "telemetry-e2e", clientID)
			// A series of the producer's own metrics, with the labels the broker adds.
			series := regexp.MustCompile(`(?m)^kafka_client_org_apache_kafka_producer_record_send_total\{[^}]*client_id="` + clientID +
				`"[^}]*client_software_name="apache-kafka-java"[^}]*\} ([0-9.e+]+)$`)
			start := time.Now()
			var page string
			testutil.WaitFor(t, 60*time.Second, func() error {
				p.alive(t)
				page = scrapeMetrics(t, metricsAddr)
				if m := series.FindStringSubmatch(page); m == nil || m[1] == "0" {
					return fmt.Errorf("no record send total of %s above 0 on /metrics yet; its client metrics:\n%s", clientID, clientLines(page, 40))
				}
				return nil
			})
			t.Logf("the producer's metrics reached /metrics %v after it started, %d series of it:\n%s",
				time.Since(start).Round(100*time.Millisecond), strings.Count(page, `client_id="`+clientID+`"`), clientLines(page, 8))
			if strings.Contains(page, "kafka_client_org_apache_kafka_consumer") {
				t.Fatalf("metrics outside the subscription's prefix were exported:\n%s", clientLines(page, 40))
			}
		}

		expectLines("--delete", tool("--delete", "--name", name), "Deleted client metrics config for "+name+".")
		if out := tool("--list"); hasLine(out, name) {
			t.Fatalf("kafka-client-metrics --list after --delete still lists %s:\n%s", name, out)
		}
	})
}

func hasLine(out, line string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimRight(l, "\r") == line {
			return true
		}
	}
	return false
}

// clientLines is the first n pushed-metric lines of a /metrics page, for messages.
func clientLines(page string, n int) string {
	var out []string
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "kafka_client_") && len(out) < n {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// scrapeMetrics returns the /metrics page at addr.
func scrapeMetrics(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics of %s: %v", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics of %s: status %d, %v", addr, resp.StatusCode, err)
	}
	return string(body)
}

// perfProducer is a running kafka-producer-perf-test (org.apache.kafka.tools.ProducerPerformance).
type perfProducer struct {
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  bytes.Buffer
}

func (p *perfProducer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// alive fails the test when the producer has exited.
func (p *perfProducer) alive(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		t.Fatalf("kafka-producer-perf-test exited (%v):\n%s", p.cmd.ProcessState, tail(p.out.String(), 4<<10))
	default:
	}
}

// startPerfProducer runs a Java producer sending 100 small records a second to topic with
// client id clientID until the test ends.
func startPerfProducer(t *testing.T, b *Broker, topic, clientID string) *perfProducer {
	t.Helper()
	log4j := filepath.Join(t.TempDir(), "log4j2-perf.properties")
	writeFile(t, log4j, log4jConfig("warn", "SYSTEM_ERR"))
	p := &perfProducer{done: make(chan struct{})}
	p.cmd = exec.Command("java", javaArgs(t, []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile=" + log4j}, "org.apache.kafka.tools.ProducerPerformance",
		"--topic", topic, "--num-records", "100000000", "--throughput", "100", "--record-size", "100",
		"--producer-props", "bootstrap.servers="+b.Addr(), "client.id="+clientID, "linger.ms=5")...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start kafka-producer-perf-test: %v", err)
	}
	go func() {
		_ = p.cmd.Wait() // alive reports an early exit; the cleanup kills it otherwise
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			p.mu.Lock()
			t.Logf("kafka-producer-perf-test output (tail):\n%s", tail(p.out.String(), 4<<10))
			p.mu.Unlock()
		}
	})
	return p
}
