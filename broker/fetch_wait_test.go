package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// parkedCounts returns how many fetches are parked on each partition of topic.
func parkedCounts(b *Broker, topic string) []int {
	ps := b.parts.Load().byName[topic]
	out := make([]int, len(ps))
	for i, p := range ps {
		p.waitMu.Lock()
		out[i] = len(p.waiters)
		p.waitMu.Unlock()
	}
	return out
}

// waitParked polls until every partition of topic has want parked fetches.
func waitParked(t *testing.T, b *Broker, topic string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		counts := parkedCounts(b, topic)
		ok := true
		for _, n := range counts {
			ok = ok && n == want
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("parked fetches per partition of %s: %v; want %d each", topic, counts, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// longPoll issues one Fetch of every partition of topic from offset 0 and delivers its result.
// The client picks the version, so the topic goes by name and by id.
func longPoll(ctx context.Context, b *Broker, cl *kgo.Client, topic string, partitions int, minBytes int32, wait time.Duration) (<-chan *kmsg.FetchResponse, <-chan error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(wait / time.Millisecond)
	req.MinBytes = minBytes
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = b.meta.Image().Topics[topic].ID
	for i := range partitions {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(i)
		rp.PartitionMaxBytes = 1 << 20
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resCh, errCh := make(chan *kmsg.FetchResponse, 1), make(chan error, 1)
	go func() {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			errCh <- err
			return
		}
		resCh <- resp
	}()
	return resCh, errCh
}

// produceTo appends one record of size bytes to partition p of topic.
func produceTo(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, p int32, size int) {
	t.Helper()
	r := &kgo.Record{Topic: topic, Partition: p, Value: make([]byte, size)}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("produce to %s-%d: %v", topic, p, err)
	}
}

// TestFetchLongPollRegistration checks that a parked fetch is registered once on each of its
// partitions however often appends wake it, is answered by the append that brings min bytes,
// and leaves no registration behind.
func TestFetchLongPollRegistration(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		const topic, partitions = "lp", 4
		b := startBroker(t, io, t.TempDir())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		createTestTopic(ctx, t, b, topic, partitions)
		producer := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
			kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
		fetcher := newClient(t, b)

		// min bytes 1: the first append answers, and the fetch leaves every partition.
		resCh, errCh := longPoll(ctx, b, fetcher, topic, partitions, 1, 20*time.Second)
		waitParked(t, b, topic, 1)
		start := time.Now()
		produceTo(ctx, t, producer, topic, 2, 10)
		resp := awaitFetch(t, resCh, errCh)
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("parked fetch answered %v after the append; want at once", d)
		}
		if got := fetchedPartitionsWithData(resp); len(got) != 1 || got[0] != 2 {
			t.Errorf("partitions with data: %v; want [2]", got)
		}
		if counts := parkedCounts(b, topic); counts[0]+counts[1]+counts[2]+counts[3] != 0 {
			t.Errorf("parked fetches after the answer: %v; want none", counts)
		}

		// min bytes above what a few appends bring: each append wakes the fetch, it parks
		// again, and still it is registered once per partition.
		resCh, errCh = longPoll(ctx, b, fetcher, topic, partitions, 4000, 20*time.Second)
		waitParked(t, b, topic, 1)
		for i := range 3 {
			produceTo(ctx, t, producer, topic, int32(i%partitions), 100)
			waitParked(t, b, topic, 1)
		}
		select {
		case resp := <-resCh:
			t.Fatalf("fetch answered with %d topics before min bytes were there", len(resp.Topics))
		case err := <-errCh:
			t.Fatal(err)
		default:
		}
		produceTo(ctx, t, producer, topic, 3, 5000)
		resp = awaitFetch(t, resCh, errCh)
		// The attempt that answers may have read partitions 0-2 before the appends above
		// reached them (waitParked cannot tell a parked fetch from one being retried, which
		// stays registered): only partition 3's data, which brought min bytes, must be there.
		if got := fetchedPartitionsWithData(resp); !slices.Contains(got, 3) {
			t.Errorf("partitions with data: %v; want partition 3 among them", got)
		}
		if n := fetchedBytes(resp); n < 4000 {
			t.Errorf("answered with %d bytes of records; want at least the 4000 of min bytes", n)
		}
		waitParked(t, b, topic, 0)
	})
}

// createTestTopic creates topic with partitions (replication 1) through a new client.
func createTestTopic(ctx context.Context, t *testing.T, b *Broker, topic string, partitions int32) {
	t.Helper()
	createTopicWith(ctx, t, newClient(t, b), topic, partitions)
}

// createTopicWith creates topic with partitions (replication 1) through cl.
func createTopicWith(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create topic %s: error code %d", topic, code)
	}
}

func awaitFetch(t *testing.T, resCh <-chan *kmsg.FetchResponse, errCh <-chan error) *kmsg.FetchResponse {
	t.Helper()
	select {
	case resp := <-resCh:
		return resp
	case err := <-errCh:
		t.Fatalf("fetch: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("parked fetch not answered within 15s")
	}
	return nil
}

// fetchedBytes is how many bytes of records resp holds over its partitions.
func fetchedBytes(resp *kmsg.FetchResponse) int {
	n := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			n += len(rp.RecordBatches)
		}
	}
	return n
}

// fetchedPartitionsWithData lists the partitions of resp that returned records.
func fetchedPartitionsWithData(resp *kmsg.FetchResponse) []int32 {
	var out []int32
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				continue
			}
			if len(rp.RecordBatches) > 0 {
				out = append(out, rp.Partition)
			}
		}
	}
	return out
}

// TestFetchFromUnknownReplica sends a replica fetch (Fetch v15+ with ReplicaState) from a
// broker id that is not a replica of the partition: the leader answers NOT_LEADER_OR_FOLLOWER
// instead of serving it as a follower, and a consumer fetch still gets the partition.
func TestFetchFromUnknownReplica(t *testing.T) {
	b := startBroker(t, "netpoll", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createTestTopic(ctx, t, b, "solo", 1)
	cl := newClient(t, b)
	fetch := func(replica int32) int16 {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version = 15
		req.ReplicaID = -1
		req.ReplicaState.ID = replica
		req.ReplicaState.Epoch = -1
		req.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = b.meta.Image().Topics["solo"].ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch as replica %d: response %+v; want one partition", replica, resp)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := fetch(7); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch as broker 7, not a replica: error %d; want NOT_LEADER_OR_FOLLOWER", code)
	}
	if code := fetch(-1); code != 0 {
		t.Fatalf("consumer fetch: error %d; want none", code)
	}
}
