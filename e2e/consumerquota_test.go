package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The topic and quota of TestThrottledConsumer.
const (
	// throttledRecords of throttledValueBytes make a topic of 4 MiB.
	throttledRecords    = 4096
	throttledValueBytes = 1024
	// consumerByteRate is the consumer_byte_rate of the throttled client id: 1 MiB/s.
	consumerByteRate = 1 << 20
	// quotaWindows is quota.window.num. Kafka measures a quota's rate over quota.window.num
	// windows of quota.window.size.seconds, but over no less than quota.window.num-1 of them,
	// so a consumer gets (quota.window.num-1) seconds' worth at once before it is held back:
	// with the default 11, the 4 MiB topic would be read in one burst. With 3 it gets 2 MiB at
	// once and the rest at about 1 MiB/s.
	quotaWindows = 3
	// throttledMinTime is the least the throttled consumer must take: the 2 MiB past its
	// first burst at 1 MiB/s would take 2 s; half of that leaves room for how Kafka's
	// windows roll.
	throttledMinTime = time.Second
	// throttledTimeout bounds each consumer's read of the whole topic.
	throttledTimeout = 30 * time.Second
)

// TestThrottledConsumer sets consumer_byte_rate for a client id with Apache Kafka's
// kafka-configs and reads a 4 MiB topic with two franz-go consumers, one with another
// client id and one with the limited one. The first reads it without any throttle. The
// second reads every record too, in order, without its connection being closed, but its
// fetch responses carry throttle times (the OnBrokerThrottle hook; only Fetch counts against
// consumer_byte_rate) and it takes longer.
func TestThrottledConsumer(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		const (
			topic     = "quota-consumer"
			throttled = "quota-consumer-limited"
			free      = "quota-consumer-free"
		)
		b := tg.start(t, fmt.Sprintf("quota.window.num=%d", quotaWindows))
		out := runJava(t, "kafka.admin.ConfigCommand", "--bootstrap-server", b.Addr(), "--alter",
			"--add-config", fmt.Sprintf("consumer_byte_rate=%d", consumerByteRate), "--entity-type", "clients", "--entity-name", throttled).stdout
		if want := "Completed updating config for client " + throttled + "."; strings.TrimSpace(out) != want {
			t.Fatalf("kafka-configs --alter consumer_byte_rate printed %q, want %q", out, want)
		}
		b.CreateTopic(t, topic, 1)
		fillTopic(t, b, topic)

		unlimited := readAllCounting(t, b, topic, free)
		t.Logf("client %s: read %d records in %v, %d throttles", free, throttledRecords, unlimited.took.Round(time.Millisecond), unlimited.throttles)
		if unlimited.throttles != 0 {
			t.Fatalf("client %s, without a quota, was throttled %d times (%v in all)", free, unlimited.throttles, unlimited.throttled)
		}

		limited := readAllCounting(t, b, topic, throttled)
		t.Logf("client %s: read %d records in %v, %d throttles of %v in all", throttled, throttledRecords, limited.took.Round(time.Millisecond), limited.throttles, limited.throttled)
		if limited.throttles == 0 {
			t.Fatalf("client %s, limited to %d bytes/s, read %d bytes in %v without a throttle time in any response",
				throttled, consumerByteRate, throttledRecords*throttledValueBytes, limited.took)
		}
		if limited.disconnects != 0 {
			t.Fatalf("client %s lost its connection %d times while throttled", throttled, limited.disconnects)
		}
		if limited.took < throttledMinTime {
			t.Fatalf("client %s, limited to %d bytes/s, read %d bytes in %v; want at least %v",
				throttled, consumerByteRate, throttledRecords*throttledValueBytes, limited.took, throttledMinTime)
		}
	})
}

// fillTopic writes throttledRecords uncompressed records of throttledValueBytes to partition
// 0 of topic.
func fillTopic(t *testing.T, b *Broker, topic string) {
	t.Helper()
	cl := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, throttledRecords)
	for i := range recs {
		v := make([]byte, throttledValueBytes)
		copy(v, fmt.Sprintf("%d", i))
		recs[i] = &kgo.Record{Value: v}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records to %s: %v", len(recs), topic, err)
	}
}

// readResult is what one consumer's read of the whole topic saw.
type readResult struct {
	took        time.Duration
	throttles   int64         // responses with a throttle time
	throttled   time.Duration // their throttle times summed
	disconnects int64         // connections that ended while reading
}

// readAllCounting reads partition 0 of topic from the start to its end with a new franz-go
// client of the given client id, checking that every offset comes once and in order, and
// counts the throttles and lost connections its hooks saw meanwhile.
func readAllCounting(t *testing.T, b *Broker, topic, clientID string) readResult {
	t.Helper()
	h := &throttleHooks{}
	cl := b.Client(t, kgo.ClientID(clientID), kgo.WithHooks(h),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxBytes(256<<10), kgo.FetchMaxPartitionBytes(256<<10))
	ctx, cancel := context.WithTimeout(context.Background(), throttledTimeout)
	defer cancel()
	start := time.Now()
	next := int64(0)
	for next < throttledRecords {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("client %s read %d of %d records within %v", clientID, next, throttledRecords, throttledTimeout)
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("client %s: fetch: %v", clientID, err)
		}
		for _, r := range fs.Records() {
			if r.Offset != next || len(r.Value) != throttledValueBytes {
				t.Fatalf("client %s read offset %d (%d bytes); want offset %d of %d bytes", clientID, r.Offset, len(r.Value), next, throttledValueBytes)
			}
			next++
		}
	}
	res := readResult{took: time.Since(start), throttles: h.throttles.Load(),
		throttled: time.Duration(h.throttledNs.Load()), disconnects: h.disconnects.Load()}
	cl.Close()
	return res
}

// throttleHooks counts a client's throttled responses and lost connections.
type throttleHooks struct {
	throttles, throttledNs, disconnects atomic.Int64
}

// OnBrokerThrottle implements kgo.HookBrokerThrottle.
func (h *throttleHooks) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.throttles.Add(1)
		h.throttledNs.Add(int64(d))
	}
}

// OnBrokerDisconnect implements kgo.HookBrokerDisconnect.
func (h *throttleHooks) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { h.disconnects.Add(1) }
