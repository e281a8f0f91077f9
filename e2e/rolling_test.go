package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ringbroker/internal/brokertest"
	"ringbroker/internal/testutil"
)

// TestRollingRestartVerifiable runs Kafka's own VerifiableProducer (idempotent, acks=-1) and
// VerifiableConsumer (a consumer group) against a 3-node ringbroker cluster while each broker
// in turn is stopped (SIGTERM: controlled shutdown) and started again, waiting for the full
// ISR in between, as an operator rolls an upgrade. Every record the producer reports acked is
// consumed, and neither tool reports an error: the clients retried whatever the restarts did
// to them.
func TestRollingRestartVerifiable(t *testing.T) {
	if brokerKind() != "ringbroker" {
		t.Skip("starts a ringbroker cluster; E2E_BROKER=" + brokerKind())
	}
	nodes := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic = "rolling"
	addrs, adm := replicatedTopic(ctx, t, nodes, topic, 3)
	bootstrap := strings.Join(addrs, ",")

	dir := t.TempDir()
	prodCfg := filepath.Join(dir, "producer.properties")
	// VerifiableProducer sets retries=0 unless told otherwise, which idempotence refuses.
	writeFile(t, prodCfg, "enable.idempotence=true\nacks=all\nretries=2147483647\nlinger.ms=5\n")
	const messages = 12000
	producer := startJavaTool(t, "org.apache.kafka.tools.VerifiableProducer", "--topic", topic, "--bootstrap-server", bootstrap,
		"--acks", "-1", "--max-messages", fmt.Sprint(messages), "--throughput", "600", "--producer.config", prodCfg)
	consumer := startJavaTool(t, "org.apache.kafka.tools.VerifiableConsumer", "--topic", topic, "--bootstrap-server", bootstrap,
		"--group-id", "rolling-group", "--reset-policy", "earliest", "--verbose")

	for i, b := range nodes {
		time.Sleep(2 * time.Second)
		start := time.Now()
		b.Stop()
		b.Restart()
		waitISR(ctx, t, adm, topic, 3)
		t.Logf("node %d rolled in %v", i+1, time.Since(start).Round(time.Millisecond))
	}
	if err := producer.wait(2 * time.Minute); err != nil {
		evs := producer.events()
		var last []string
		for _, ev := range evs[max(0, len(evs)-5):] {
			last = append(last, ev.raw)
		}
		t.Fatalf("VerifiableProducer: %v after %d events, ending:\n%s\nstderr (tail):\n%s", err, len(evs), strings.Join(last, "\n"), producer.stderrTail())
	}
	acked := map[string]bool{} // "partition/offset" of each acked record
	for _, ev := range producer.events() {
		switch ev.Name {
		case "producer_send_success":
			acked[fmt.Sprintf("%d/%d", ev.Partition, ev.Offset)] = true
		case "producer_send_error":
			t.Fatalf("VerifiableProducer reported a send error: %s", ev.raw)
		}
	}
	if len(acked) != messages {
		t.Fatalf("VerifiableProducer acked %d distinct records of %d", len(acked), messages)
	}
	testutil.WaitFor(t, time.Minute, func() error {
		seen := map[string]bool{}
		for _, ev := range consumer.events() {
			if ev.Name == "record_data" {
				seen[fmt.Sprintf("%d/%d", ev.Partition, ev.Offset)] = true
			}
		}
		missing := 0
		for k := range acked {
			if !seen[k] {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("VerifiableConsumer has not read %d of %d acked records", missing, len(acked))
		}
		return nil
	})
	consumer.stop()
	for _, ev := range consumer.events() {
		if ev.Name == "offsets_committed" && !ev.Success {
			t.Errorf("VerifiableConsumer failed an offset commit: %s", ev.raw)
		}
	}
}

// javaTool is one of Kafka's Verifiable* tools running in the background; it prints one JSON
// event per line.
type javaTool struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr string
	done   chan error

	mu  sync.Mutex
	evs []toolEvent
}

// toolEvent is one JSON line of a Verifiable* tool: the fields these tests read, and the line.
type toolEvent struct {
	Name      string `json:"name"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Success   bool   `json:"success"`
	raw       string
}

// startJavaTool starts mainClass from the Kafka jars with its log at WARN on stderr (kept in a
// file) and collects its stdout events; the tool is killed when the test ends.
func startJavaTool(t *testing.T, mainClass string, args ...string) *javaTool {
	t.Helper()
	dir := t.TempDir()
	log4j := filepath.Join(dir, "log4j2.properties")
	writeFile(t, log4j, log4jConfig("warn", "SYSTEM_ERR"))
	jt := &javaTool{t: t, stderr: filepath.Join(dir, "stderr.log"), done: make(chan error, 1)}
	jt.cmd = exec.Command("java", javaArgs(t, []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile=" + log4j}, mainClass, args...)...)
	errf, err := os.Create(jt.stderr)
	if err != nil {
		t.Fatal(err)
	}
	jt.cmd.Stderr = errf
	out, err := jt.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := jt.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", mainClass, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			ev := toolEvent{raw: sc.Text()}
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			jt.mu.Lock()
			jt.evs = append(jt.evs, ev)
			jt.mu.Unlock()
		}
		jt.done <- jt.cmd.Wait()
		errf.Close()
	}()
	t.Cleanup(func() {
		_ = jt.cmd.Process.Kill() // fails only when it already exited
	})
	return jt
}

// events returns the events printed so far.
func (jt *javaTool) events() []toolEvent {
	jt.mu.Lock()
	defer jt.mu.Unlock()
	return append([]toolEvent(nil), jt.evs...)
}

// wait waits for the tool to exit by itself.
func (jt *javaTool) wait(timeout time.Duration) error {
	select {
	case err := <-jt.done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("did not exit within %v", timeout)
	}
}

// stop asks the tool to exit (SIGTERM, which its shutdown hook handles) and waits for it.
func (jt *javaTool) stop() {
	_ = jt.cmd.Process.Signal(syscall.SIGTERM)
	if err := jt.wait(30 * time.Second); err != nil && !strings.Contains(err.Error(), "signal") && !strings.Contains(err.Error(), "exit status 143") {
		jt.t.Logf("%s exit: %v", filepath.Base(jt.cmd.Path), err)
	}
}

// stderrTail is the end of the tool's log.
func (jt *javaTool) stderrTail() string { return brokertest.TailFile(jt.stderr, 8<<10) }
