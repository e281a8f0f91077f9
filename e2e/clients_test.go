package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// Where `make deps` installs the Python and Node.js clients, relative to the repo root.
const (
	pythonClients = ".cache/python"
	nodeClients   = ".cache/node/node_modules"
	// clientRecords is how many records each client round trip produces and consumes.
	clientRecords = 2000
	scriptTimeout = 2 * time.Minute
)

// TestOtherClients runs the clients that speak older, non-flexible protocol versions (KIP-896's
// reason for the v0 Produce advertisement) through a produce/consume/commit round trip:
// kafka-python, kafkajs and sarama.
func TestOtherClients(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t, "group.initial.rebalance.delay.ms=0")
		t.Run("kafka-python", func(t *testing.T) {
			out := runScript(t, []string{"PYTHONPATH=" + filepath.Join(repoRoot(), pythonClients)}, b.Addr(), "py",
				"python3", filepath.Join("testdata", "clients", "kafka_python_roundtrip.py"))
			checkScript(t, b, "py", out)
		})
		t.Run("kafkajs", func(t *testing.T) {
			out := runScript(t, []string{"NODE_PATH=" + filepath.Join(repoRoot(), nodeClients)}, b.Addr(), "js",
				"node", filepath.Join("testdata", "clients", "kafkajs_roundtrip.js"))
			checkScript(t, b, "js", out)
		})
		t.Run("sarama", func(t *testing.T) { saramaRoundTrip(t, b) })
	})
}

// runScript runs a client script with BOOTSTRAP, TOPIC, GROUP and COUNT set and returns stdout.
func runScript(t *testing.T, env []string, addr, topic, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "BOOTSTRAP="+addr, "TOPIC="+topic, "GROUP="+topic+"-group", fmt.Sprintf("COUNT=%d", clientRecords))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), tail(stderr.String(), 8<<10))
	}
	return stdout.String()
}

// checkScript checks the script's own verdict and that the broker holds exactly its records.
func checkScript(t *testing.T, b *Broker, topic, out string) {
	t.Helper()
	if want := fmt.Sprintf("OK %d", clientRecords); !strings.Contains(out, want) {
		t.Fatalf("client printed %q, want %q", out, want)
	}
	var total int64
	for _, o := range b.EndOffsets(t, topic) {
		total += o
	}
	if total != clientRecords {
		t.Fatalf("broker holds %d records in %s, want %d", total, topic, clientRecords)
	}
}

// saramaRoundTrip produces with sarama's idempotent snappy producer at the oldest protocol
// versions it allows (Kafka 2.1), then reads every partition back.
func saramaRoundTrip(t *testing.T, b *Broker) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Compression = sarama.CompressionSnappy
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	admin, err := sarama.NewClusterAdmin([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic("sar", &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	b.WaitTopic(t, "sar", 3)
	p, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]*sarama.ProducerMessage, clientRecords)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: "sar", Key: sarama.StringEncoder(fmt.Sprint(i)), Value: sarama.StringEncoder(fmt.Sprint("v", i)),
			Headers: []sarama.RecordHeader{{Key: []byte("h"), Value: []byte(fmt.Sprint(i))}}}
	}
	if err := p.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
	p.Close()

	c, err := sarama.NewConsumer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seen := map[string]bool{}
	for pt, end := range b.EndOffsets(t, "sar") {
		if end == 0 {
			continue
		}
		pc, err := c.ConsumePartition("sar", pt, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for next := int64(0); next < end; {
			select {
			case m := <-pc.Messages():
				if m.Offset != next {
					t.Fatalf("partition %d: offset %d, want %d", pt, m.Offset, next)
				}
				k := string(m.Key)
				if string(m.Value) != "v"+k || len(m.Headers) != 1 || string(m.Headers[0].Value) != k {
					t.Fatalf("record %s: value %q headers %v", k, m.Value, m.Headers)
				}
				seen[k] = true
				next++
			case err := <-pc.Errors():
				t.Fatalf("consume partition %d: %v", pt, err)
			case <-time.After(30 * time.Second):
				t.Fatalf("partition %d: stuck at offset %d of %d", pt, next, end)
			}
		}
		pc.Close()
	}
	if len(seen) != clientRecords {
		t.Fatalf("sarama read %d distinct records, want %d", len(seen), clientRecords)
	}
}
