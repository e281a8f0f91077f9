package broker

import (
	"context"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// TestRateQuotaWindows checks the bytes-per-window accounting against Kafka's Rate: the
// measured rate is the bytes of the last quotaWindows windows over at least quotaWindows-1
// windows, so a quota from rest lets a burst of that many windows' worth through, and a window
// older than quotaWindows no longer counts.
func TestRateQuotaWindows(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	q := newRateQuota()
	if q.bounded() || q.exceeded(t0) {
		t.Fatal("a new quota is bounded")
	}
	q.setBound(1000)
	q.record(t0, 10_000) // 10 windows' worth at once
	if r := q.rate(t0); r != 1000 {
		t.Fatalf("rate after 10000 bytes at rest = %v, want 1000 (over the 10 s minimum span)", r)
	}
	if q.exceeded(t0) {
		t.Fatal("exceeded at exactly the bound")
	}
	q.record(t0.Add(500*time.Millisecond), 1)
	if !q.exceeded(t0.Add(500 * time.Millisecond)) {
		t.Fatal("not exceeded one byte over the bound")
	}
	if r := q.rate(t0.Add(20 * time.Second)); r != 0 {
		t.Fatalf("rate 20 s later = %v, want 0: the windows expired", r)
	}
	// Past the minimum span the rate divides by the time the windows really span.
	q2 := newRateQuota()
	q2.setBound(1000)
	for s := range 11 {
		q2.record(t0.Add(time.Duration(s)*time.Second), 1000)
	}
	if r := q2.rate(t0.Add(10*time.Second + 500*time.Millisecond)); r < 1000 || r > 1100 {
		t.Fatalf("rate of 1000 B each second for 11 s = %v, want about 1000-1100", r)
	}
	q.setBound(1<<63 - 1)
	if q.bounded() || q.exceeded(t0.Add(500*time.Millisecond)) {
		t.Fatal("unbounded again, still throttled")
	}
}

// TestRateQuotaPacesASender simulates a follower that fetches 64 KiB whenever the quota is not
// exceeded, every 10 ms for 60 s at a bound of 100 KiB/s: after the first burst of 10 windows
// it moves at the bound.
func TestRateQuotaPacesASender(t *testing.T) {
	const bound, chunk = 100 << 10, 64 << 10
	q := newRateQuota()
	q.setBound(bound)
	t0 := time.Unix(1_700_000_000, 0)
	sent := 0
	for ms := 0; ms < 60_000; ms += 10 {
		now := t0.Add(time.Duration(ms) * time.Millisecond)
		if !q.exceeded(now) {
			q.record(now, chunk)
			sent += chunk
		}
	}
	// 60 s at the bound, at most one chunk over at each check of a window.
	if lo, hi := 55*bound, 62*bound+60*chunk; sent < lo || sent > hi {
		t.Fatalf("sent %d bytes in 60 s at %d B/s, want %d-%d", sent, bound, lo, hi)
	}
}

func TestListsReplica(t *testing.T) {
	for _, tc := range []struct {
		val     string
		p, node int32
		want    bool
	}{
		{"*", 3, 7, true},
		{"0:1,1:2", 1, 2, true},
		{"0:1, 1:2", 1, 2, true},
		{"0:1,1:2", 1, 1, false},
		{"", 0, 1, false},
		{"10:1", 1, 1, false},
	} {
		if got := listsReplica(tc.val, tc.p, tc.node); got != tc.want {
			t.Errorf("listsReplica(%q, %d, %d) = %v, want %v", tc.val, tc.p, tc.node, got, tc.want)
		}
	}
}

// createAssigned creates topic with one partition on replicas, with configs.
func createAssigned(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, replicas []int32, configs map[string]string) {
	t.Helper()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	ct.ReplicaAssignment = append(ct.ReplicaAssignment, ra)
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		ct.Configs = append(ct.Configs, c)
	}
	create.Topics = append(create.Topics, ct)
	if resp, err := create.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic %s on %v: %v %+v", topic, replicas, err, resp)
	}
}

// TestReplicationThrottleSlowsCatchUp moves a partition holding 3 MiB from node 1 to nodes 1
// and 2 with both replication throttles at 256 KiB/s, as kafka-reassign-partitions --throttle
// sets them: the new replica catches up in about 12 s (3 MiB at the rate; the first
// quotaWindows-1 windows' worth goes at once, then the rate holds), not in the fraction of a
// second an unthrottled copy takes on loopback. The bounds are generous; the bytes each
// throttle counted are checked too.
func TestReplicationThrottleSlowsCatchUp(t *testing.T) {
	t.Parallel()
	const rate, size = 256 << 10, 3 << 20
	bs := startInProcessCluster(t, 2)
	cl := newClient(t, bs[0], kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(256<<10),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createAssigned(ctx, t, cl, "thr", []int32{1}, map[string]string{leaderThrottledReplicas: "0:1", followerThrottledReplicas: "0:2"})
	value := make([]byte, 64<<10)
	for i := 0; i < size/len(value); i++ {
		rand.Read(value)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "thr", Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	r := strconv.Itoa(rate)
	if err := alterBroker(t, cl, "", "leader.replication.throttled.rate", r, "follower.replication.throttled.rate", r); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("both nodes throttled", func() bool {
		return bs[0].quotas.leader.bounded() && bs[1].quotas.follower.bounded()
	}))
	move := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	mt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	mt.Topic = "thr"
	mp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	mp.Partition, mp.Replicas = 0, []int32{1, 2}
	mt.Partitions = append(mt.Partitions, mp)
	move.Topics = append(move.Topics, mt)
	start := time.Now()
	if resp, err := move.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("reassign: %v %+v", err, resp)
	}
	testutil.WaitFor(t, 80*time.Second, testutil.Holds("node 2 in the ISR", func() bool {
		p := bs[0].meta.Image().Topics["thr"].Partitions[0]
		return p.InISR(2) && !p.Reassigning()
	}))
	took := time.Since(start)
	if took < 5*time.Second || took > 60*time.Second {
		t.Fatalf("a throttled replica caught up with %d bytes in %v at %d B/s; want about %v", size, took, rate, time.Duration(size/rate)*time.Second)
	}
	// The first burst has left the windows by now; the last seconds' bytes are still there.
	now := time.Now()
	if lr, fr := bs[0].quotas.leader.rate(now), bs[1].quotas.follower.rate(now); lr <= 0 || fr <= 0 || lr > rate || fr > rate {
		t.Fatalf("measured rates after the catch-up: leader %.0f B/s, follower %.0f B/s; want the throttled bytes counted, within the bound", lr, fr)
	}
	t.Logf("caught up in %v", took.Round(100*time.Millisecond))
}
