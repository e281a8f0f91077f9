package e2e

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClientQuotaCommand sets producer_byte_rate=1048576 for a client id with Apache Kafka's
// kafka-configs --entity-type clients and reads it back with --describe. A franz-go producer
// with that client id then sends as fast as it can for 33 s. Kafka's quota measures a rate over
// the last quota.window.num (11) one-second windows, at least 10 of them: a producer at full
// speed gets a burst of about 10 MiB through at once, waits, and bursts again as the windows
// holding the burst expire, on Kafka as here, so any 11 s hold about 11 MiB but a 20 s span
// holds one or two bursts. The rate is therefore measured over 22 s, two of those spans, after
// the first 11 s, every record acknowledged. The sensor divides 11 windows of bytes by a span
// of 10 to 11 s, so it lets a little more than the bound through: Apache Kafka 4.1.1 measured
// 1.07-1.12 MiB/s in this test (1.12 with the producer's requests pipelined), ringbroker
// 1.12. The bound asserted is 0.9-1.15 MiB/s, not the 1.1 the issue names, which Kafka itself
// exceeds. The quota is then removed and described as gone.
func TestClientQuotaCommand(t *testing.T) {
	forEachTargetParallel(t, func(t *testing.T, tg target) {
		const (
			client, topic = "quota-perf", "quota-perf"
			warmup        = 11 * time.Second
			measured      = 22 * time.Second
		)
		b := tg.start(t)
		configs := func(args ...string) cmdResult {
			t.Helper()
			return runJava(t, "kafka.admin.ConfigCommand", append([]string{"--bootstrap-server", b.Addr()}, args...)...)
		}
		if res := configs("--alter", "--add-config", "producer_byte_rate=1048576", "--entity-type", "clients", "--entity-name", client); !strings.Contains(res.stdout, "Completed updating config for client "+client) {
			t.Fatalf("kafka-configs --alter: unexpected output:\n%s\n%s", res.stdout, tail(res.stderr, 4<<10))
		}
		out := configs("--describe", "--entity-type", "clients", "--entity-name", client).stdout
		if !strings.Contains(out, "producer_byte_rate=1048576") {
			t.Fatalf("kafka-configs --describe does not show the quota:\n%s", out)
		}
		b.CreateTopic(t, topic, 1)

		cl := b.Client(t, kgo.ClientID(client), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.MaxBufferedRecords(2048), kgo.MaxProduceRequestsInflightPerBroker(1))
		ctx, cancel := context.WithTimeout(context.Background(), warmup+measured+30*time.Second)
		defer cancel()
		var inWindow, failed atomic.Int64
		start := time.Now()
		from, to := start.Add(warmup), start.Add(warmup+measured)
		value := make([]byte, 1024)
		for time.Now().Before(to) {
			cl.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					return
				}
				if now := time.Now(); now.After(from) && now.Before(to) {
					inWindow.Add(int64(len(r.Value)))
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if n := failed.Load(); n > 0 {
			t.Fatalf("%d records of the throttled producer failed", n)
		}
		rate := float64(inWindow.Load()) / measured.Seconds() / (1 << 20)
		t.Logf("a producer limited to 1 MiB/s: %.3f MiB/s acknowledged from %v to %v", rate, warmup, warmup+measured)
		if rate < 0.9 || rate > 1.15 {
			t.Fatalf("a producer limited to 1 MiB/s measured %.3f MiB/s over %v; want 0.9-1.15", rate, measured)
		}
		configs("--alter", "--delete-config", "producer_byte_rate", "--entity-type", "clients", "--entity-name", client)
		if out := configs("--describe", "--entity-type", "clients", "--entity-name", client).stdout; strings.Contains(out, "producer_byte_rate") {
			t.Fatalf("kafka-configs --describe after --delete-config still shows the quota:\n%s", out)
		}
	})
}
