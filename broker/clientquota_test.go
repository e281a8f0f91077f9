package broker

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// TestClientQuotas: a producer_byte_rate set with AlterClientQuotas is described back, and a
// client over it gets throttle_time_ms in its produce responses while its connection stays
// usable; a client without a quota is not throttled.
func TestClientQuotas(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b := startBroker(t, backend, t.TempDir())
		adm := kadm.NewClient(newClient(t, b))
		slow := "slow"
		altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: &slow}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 64 << 10}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range altered {
			if a.Err != nil {
				t.Fatalf("AlterClientQuotas: %v", a.Err)
			}
		}
		described, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: &slow, MatchType: 0}})
		if err != nil {
			t.Fatal(err)
		}
		if len(described) != 1 || len(described[0].Values) != 1 || described[0].Values[0].Key != "producer_byte_rate" || described[0].Values[0].Value != 64<<10 {
			t.Fatalf("DescribeClientQuotas of client-id slow: %+v", described)
		}
		created, err := adm.CreateTopic(ctx, 1, 1, nil, "q")
		if err != nil {
			t.Fatal(err)
		}

		produce := func(clientID string) int32 {
			cl := newClient(t, b, kgo.ClientID(clientID))
			var most int32
			for i := range 8 {
				req := kmsg.NewPtrProduceRequest()
				req.Acks, req.TimeoutMillis = 1, 5000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic, rt.TopicID = "q", created.ID
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = testutil.SealBatch(testutil.NewBatch(int64(i), kmsg.Record{Value: make([]byte, 128<<10)}))
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					t.Fatalf("%s: produce %d: %v", clientID, i, err)
				}
				if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
					t.Fatalf("%s: produce %d: error %d", clientID, i, code)
				}
				if most = resp.ThrottleMillis; most > 0 {
					// The connection is held for that long, then serves again.
					if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
						t.Fatalf("%s: a request after a %d ms throttle: %v", clientID, most, err)
					}
					break
				}
			}
			return most
		}
		if ms := produce(slow); ms <= 0 {
			t.Fatalf("1 MiB produced by a client limited to 64 KiB/s was never throttled")
		}
		if ms := produce("fast"); ms != 0 {
			t.Fatalf("a client without a quota was throttled %d ms", ms)
		}
	})
}

// TestConnectionQuotas: max.connections.per.ip closes connections over the limit, and an
// override for the address raises it.
func TestConnectionQuotas(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, backend string) {
		for _, c := range []struct {
			overrides []string
			served    int
		}{
			{[]string{"max.connections.per.ip=2"}, 2},
			{[]string{"max.connections.per.ip=2", "max.connections.per.ip.overrides=127.0.0.1:4"}, 4},
		} {
			b := startBroker(t, backend, t.TempDir(), c.overrides...)
			var open []net.Conn
			served := 0
			for range 5 {
				conn, err := net.DialTimeout("tcp", b.Addr().String(), 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				open = append(open, conn)
				// A refused connection is closed by the broker: a read ends at once.
				conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
				if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
					served++
				}
			}
			for _, conn := range open {
				conn.Close()
			}
			if served != c.served {
				t.Fatalf("%v: %d of 5 connections from one address served; want %d", c.overrides, served, c.served)
			}
		}
	})
}

// TestControllerMutationQuota: with controller_mutation_rate=2 for a client id (a bucket of
// 22 partitions over 11 windows), a CreateTopics of four 10-partition topics creates three (a
// strict quota refuses once the bucket is below zero) and answers THROTTLING_QUOTA_EXCEEDED
// for the fourth, with a throttle time.
func TestControllerMutationQuota(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b := startBroker(t, backend, t.TempDir())
		adm := kadm.NewClient(newClient(t, b))
		client := "mut"
		setClientQuota(ctx, t, adm, "client-id", client, "controller_mutation_rate", 2)
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		for i := range 4 {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "mut"+strconv.Itoa(i), 10, 1
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, newClient(t, b, kgo.ClientID(client)))
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []int16{0, 0, 0, kerr.ThrottlingQuotaExceeded.Code} {
			if got := resp.Topics[i].ErrorCode; got != want {
				t.Fatalf("topic %d: error %d; want %d", i, got, want)
			}
		}
		if resp.ThrottleMillis <= 0 {
			t.Fatal("a CreateTopics over its mutation quota has no throttle time")
		}
	})
}

// TestMaxConnections: at max.connections a new connection is held unread, its request not
// answered, until another connection closes; then it is served.
func TestMaxConnections(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, backend string) {
		b := startBroker(t, backend, t.TempDir(), "max.connections=2")
		answered := func(c net.Conn, within time.Duration) bool {
			c.SetReadDeadline(time.Now().Add(within))
			_, err := c.Read(make([]byte, 4))
			return err == nil
		}
		var conns []net.Conn
		for range 3 {
			conns = append(conns, dialAPIVersions(t, b))
		}
		// Which connection waits depends on the order the broker opened them in.
		time.Sleep(500 * time.Millisecond)
		waiting := -1
		for i, c := range conns {
			if !answered(c, 300*time.Millisecond) {
				if waiting >= 0 {
					t.Fatalf("connections %d and %d were not answered; want one held at max.connections=2", waiting, i)
				}
				waiting = i
			}
		}
		if waiting < 0 {
			t.Fatal("all 3 connections were answered at max.connections=2")
		}
		conns[(waiting+1)%3].Close()
		if !answered(conns[waiting], 5*time.Second) {
			t.Fatal("the waiting connection was not served after another closed")
		}
	})
}

// TestConnectionCreationRate: max.connection.creation.rate delays connections over the
// broker's rate and serves every one of them in the end; an IP's connection_creation_rate
// (AlterClientQuotas on an ip entity) closes those over it instead, as Kafka's
// ConnectionQuotas. With quota.window.num=3 a rate of 2/s admits a burst of 4 at once.
func TestConnectionCreationRate(t *testing.T) {
	t.Parallel()
	// burst dials n connections at once, each sending an ApiVersions, and returns when each
	// was answered, after start (a negative duration: closed unanswered).
	burst := func(t *testing.T, b *Broker, n int) []time.Duration {
		start := time.Now()
		answers := make(chan int, n)
		took := make([]time.Duration, n)
		for i := range n {
			c := dialAPIVersions(t, b)
			go func() {
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				_, err := io.ReadFull(c, make([]byte, 4))
				took[i] = time.Since(start)
				if err != nil {
					took[i] = -took[i]
				}
				answers <- i
			}()
		}
		for range n {
			<-answers
		}
		return took
	}
	forBackends(t, func(t *testing.T, backend string) {
		t.Run("broker", func(t *testing.T) {
			b := startBroker(t, backend, t.TempDir(), "max.connection.creation.rate=2", "quota.window.num=3")
			took := burst(t, b, 8)
			slowest := time.Duration(0)
			for i, d := range took {
				if d < 0 {
					t.Fatalf("connection %d was closed after %v; want every connection served at a broker-wide rate", i, -d)
				}
				slowest = max(slowest, d)
			}
			t.Logf("answered after %v", took)
			// 4 at once, the other 4 at 2/s: the last is held about 2 s.
			if slowest < time.Second {
				t.Fatalf("8 connections at max.connection.creation.rate=2 all served within %v (%v); want some held", slowest, took)
			}
		})
		t.Run("ip", func(t *testing.T) {
			b := startBroker(t, backend, t.TempDir(), "quota.window.num=3")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			adm := kadm.NewClient(newClient(t, b))
			ip := "127.0.0.1"
			setClientQuota(ctx, t, adm, "ip", ip, "connection_creation_rate", 2)
			adm.Close()
			took := burst(t, b, 8)
			served, closed := 0, 0
			for _, d := range took {
				if d < 0 {
					closed++
				} else {
					served++
				}
			}
			t.Logf("%d served, %d closed: %v", served, closed, took)
			if served == 0 || closed == 0 {
				t.Fatalf("8 connections at connection_creation_rate=2 for %s: %d served, %d closed (%v); want both", ip, served, closed, took)
			}
		})
	})
}

// TestThrottledFetchIsEmpty: a consumer over its consumer_byte_rate is answered as Kafka
// answers it (KIP-219): no data, a throttle time, and for an incremental fetch its session's
// id, the session still usable by the next request. A fetch never asks for more than the
// quota allows in its windows (64 KiB/s × 2 of quota.window.num=3 here), so the first one is
// served.
func TestThrottledFetchIsEmpty(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, backend string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b := startBroker(t, backend, t.TempDir(), "quota.window.num=3")
		adm := kadm.NewClient(newClient(t, b))
		const rate = 64 << 10
		slow := "slow-consumer"
		setClientQuota(ctx, t, adm, "client-id", slow, "consumer_byte_rate", rate)
		created, err := adm.CreateTopic(ctx, 1, 1, nil, "fq")
		if err != nil {
			t.Fatal(err)
		}
		pr := newClient(t, b, kgo.DefaultProduceTopic("fq"), kgo.ProducerBatchMaxBytes(200<<10),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		for i := range 16 {
			if err := pr.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 32<<10)}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}

		cl := newClient(t, b, kgo.ClientID(slow))
		fetch := func(sessionID, epoch int32, offset int64) *kmsg.FetchResponse {
			t.Helper()
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = -1, 16<<20, 100
			req.SessionID, req.SessionEpoch = sessionID, epoch
			if offset >= 0 {
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = "fq", created.ID
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = offset, 16<<20, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
			}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("fetch (session %d epoch %d): %v", sessionID, epoch, err)
			}
			if resp.ErrorCode != 0 {
				t.Fatalf("fetch (session %d epoch %d): error %d", sessionID, epoch, resp.ErrorCode)
			}
			return resp
		}
		records := func(resp *kmsg.FetchResponse) int {
			n := 0
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					n += len(rp.RecordBatches)
				}
			}
			return n
		}

		first := fetch(0, 0, 0)
		got := records(first)
		if got == 0 || got > 2*rate+(32<<10) {
			t.Fatalf("first fetch of a client limited to %d B/s returned %d bytes; want some, within one quota window", rate, got)
		}
		if first.SessionID == 0 {
			t.Fatalf("a full fetch asking for a session got none")
		}
		t.Logf("first fetch: %d bytes, throttle %d ms", got, first.ThrottleMillis)
		// The session's fetch offset stays at 0 (the incremental requests name no partition), so
		// the next fetch would read the same bytes again, over the quota this time.
		second := fetch(first.SessionID, 1, -1)
		if second.ThrottleMillis <= 0 || records(second) != 0 || len(second.Topics) != 0 {
			t.Fatalf("second fetch: throttle %d ms, %d bytes in %d topics; want a throttle time and no data", second.ThrottleMillis, records(second), len(second.Topics))
		}
		if second.SessionID != first.SessionID {
			t.Fatalf("throttled incremental fetch answered session %d; want %d", second.SessionID, first.SessionID)
		}
		if third := fetch(first.SessionID, 2, -1); third.SessionID != first.SessionID {
			t.Fatalf("the fetch after a throttled one answered session %d; want %d", third.SessionID, first.SessionID)
		}
	})
}

// setClientQuota sets one quota key of one entity (type and name) with AlterClientQuotas.
func setClientQuota(ctx context.Context, t *testing.T, adm *kadm.Client, typ, name, key string, value float64) {
	t.Helper()
	altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: typ, Name: &name}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: key, Value: value}},
	}})
	if err != nil || len(altered) != 1 || altered[0].Err != nil {
		t.Fatalf("AlterClientQuotas %s=%s %s=%v: %v %+v", typ, name, key, value, err, altered)
	}
}

// dialAPIVersions opens a raw connection to b, closed when the test ends, and sends an
// ApiVersions v0 request on it (key 18, version 0, correlation id 1, null client id, no body).
func dialAPIVersions(t *testing.T, b *Broker) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", b.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	return c
}
