package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
	"ringbroker/internal/testutil"
	rlog "ringbroker/log"
	"ringbroker/wire"
)

// fastReplication shortens the cluster's timeouts so that fencing, ISR changes and follower
// fetches happen within a test's patience.
func fastReplication(c *Config) {
	c.BrokerHeartbeatInterval = 100 * time.Millisecond
	c.BrokerSessionTimeout = time.Second
	c.ReplicaLagTimeMax = 2 * time.Second
	c.ReplicaFetchWaitMax = 100 * time.Millisecond
	c.ReplicaFetchBackoff = 100 * time.Millisecond
}

// stopOne shuts down stop, one of bs, and returns the others.
func stopOne(ctx context.Context, t *testing.T, bs []*Broker, stop *Broker) []*Broker {
	t.Helper()
	if err := stop.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(slices.Clone(bs), func(b *Broker) bool { return b == stop })
}

// replicatedCluster starts 3 brokers with fastReplication (then mods), waits until each sees
// all unfenced and creates topic with RF 3, the partitions and configs; ctx ends with the test
// or after 90 s.
func replicatedCluster(t *testing.T, topic string, partitions int32, configs map[string]*string, mods ...func(*Config)) ([]*Broker, context.Context, *kadm.Client) {
	t.Helper()
	bs := startInProcessCluster(t, 3, append([]func(*Config){fastReplication}, mods...)...)
	waitUnfenced(t, bs)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	adm := newAdmin(t, clusterSeeds(bs))
	if _, err := adm.CreateTopic(ctx, partitions, 3, configs, topic); err != nil {
		t.Fatal(err)
	}
	// The topic is committed; wait until every node has applied it, so tests may read it
	// from any node's image.
	testutil.WaitFor(t, 10*time.Second, func() error {
		for _, b := range bs {
			if b.meta.Image().Topics[topic] == nil {
				return fmt.Errorf("node %d has not applied topic %s yet", b.cfg.NodeID, topic)
			}
		}
		return nil
	})
	return bs, ctx, adm
}

func TestStripeReplicas(t *testing.T) {
	brokers := []int32{1, 2, 3, 4}
	got := stripeReplicas(brokers, 0, 8, 3, 1, 0)
	leaders := map[int32]int{}
	for p, reps := range got {
		if len(reps) != 3 {
			t.Fatalf("partition %d has replicas %v, want 3", p, reps)
		}
		seen := map[int32]bool{}
		for _, r := range reps {
			if seen[r] || !slices.Contains(brokers, r) {
				t.Fatalf("partition %d has replicas %v: a repeat or an unknown broker", p, reps)
			}
			seen[r] = true
		}
		leaders[reps[0]]++
	}
	for _, b := range brokers {
		if leaders[b] != 2 {
			t.Fatalf("leaders %v: want every broker to lead 2 of 8 partitions", leaders)
		}
	}
	// Kafka's assignReplicasToBrokersRackUnaware with start 1 and shift 0 on 4 brokers.
	want := [][]int32{{2, 3, 4}, {3, 4, 1}, {4, 1, 2}, {1, 2, 3}, {2, 4, 1}, {3, 1, 2}, {4, 2, 3}, {1, 3, 4}}
	for p := range want {
		if !slices.Equal(got[p], want[p]) {
			t.Fatalf("partition %d: replicas %v, want %v (all: %v)", p, got[p], want[p], got)
		}
	}
	// Added partitions continue the stripe where the existing ones end.
	if more := stripeReplicas(brokers, 4, 4, 3, 1, 0); !slices.Equal(more[0], want[4]) || !slices.Equal(more[3], want[7]) {
		t.Fatalf("partitions 4-7 placed as %v, want %v", more, want[4:])
	}
}

func TestElectLeader(t *testing.T) {
	tid := meta.NewUUID()
	topic := &meta.Topic{Name: "t", ID: tid}
	no := func(*meta.Topic) bool { return false }
	yes := func(*meta.Topic) bool { return true }
	p := meta.Partition{Index: 0, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 7, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	if _, ok := electLeader(topic, p, map[int32]bool{1: true, 2: true, 3: true}, no); ok {
		t.Fatal("all live: want no change")
	}
	// The leader is fenced: it leaves the ISR and the next in-sync replica leads, one leader
	// epoch and one partition epoch later.
	rec, ok := electLeader(topic, p, map[int32]bool{1: false, 2: true, 3: true}, no)
	if !ok || rec.Leader != 2 || rec.LeaderEpoch != 5 || rec.PartitionEpoch != 8 || !slices.Equal(rec.ISR, []int32{2, 3}) {
		t.Fatalf("leader fenced: %+v", rec)
	}
	// A fenced follower leaves the ISR; the leader and its epoch stay.
	rec, ok = electLeader(topic, p, map[int32]bool{1: true, 2: true, 3: false}, no)
	if !ok || rec.Leader != 1 || rec.LeaderEpoch != 4 || !slices.Equal(rec.ISR, []int32{1, 2}) {
		t.Fatalf("follower fenced: %+v", rec)
	}
	// Only a replica outside the ISR is live: offline, the last ISR member kept, unless
	// unclean election is allowed.
	q := meta.Partition{Index: 0, Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{1}}
	rec, ok = electLeader(topic, q, map[int32]bool{1: false, 2: true}, no)
	if !ok || rec.Leader != -1 || !slices.Equal(rec.ISR, []int32{1}) {
		t.Fatalf("clean, no ISR member live: %+v", rec)
	}
	rec, ok = electLeader(topic, q, map[int32]bool{1: false, 2: true}, yes)
	if !ok || rec.Leader != 2 || !slices.Equal(rec.ISR, []int32{2}) {
		t.Fatalf("unclean: %+v", rec)
	}
	// The last ISR member comes back: it leads again.
	off := meta.Partition{Index: 0, Leader: -1, LeaderEpoch: 5, Replicas: []int32{1, 2}, ISR: []int32{1}}
	rec, ok = electLeader(topic, off, map[int32]bool{1: true, 2: true}, no)
	if !ok || rec.Leader != 1 || rec.LeaderEpoch != 6 {
		t.Fatalf("last ISR member back: %+v", rec)
	}
}

// TestReplication produces with acks=all to a replication factor 3 topic on 3 brokers: every
// follower ends with the leader's log byte for byte, the ISR holds all three, and consumers
// read everything acknowledged.
func TestReplication(t *testing.T) {
	t.Parallel()
	bs, ctx, _ := replicatedCluster(t, "rep", 3, nil)
	seeds := clusterSeeds(bs)
	prod, err := kgo.NewClient(seeds, kgo.DefaultProduceTopic("rep"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 600
	produceValues(ctx, t, prod, 0, n)
	waitReplicasEqual(t, bs, "rep", 3)
	im := bs[0].meta.Image()
	for _, p := range im.Topics["rep"].Partitions {
		if len(p.Replicas) != 3 || len(p.ISR) != 3 {
			t.Fatalf("partition %d: replicas %v, ISR %v; want all three in both", p.Index, p.Replicas, p.ISR)
		}
	}
	checkConsumeAll(ctx, t, seeds, "rep", n)

	// Every node's Metadata names the active controller.
	leader := bs[0].meta.Leader()
	for _, b := range bs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.ControllerID != leader || leader < 0 {
			t.Fatalf("node %d's Metadata names controller %d; the active controller is %d", b.cfg.NodeID, resp.ControllerID, leader)
		}
	}
}

// TestNotEnoughReplicas stops one of three replicas of a topic with min.insync.replicas=3:
// once the ISR shrinks, acks=all is refused with NOT_ENOUGH_REPLICAS, and acks=1 still works.
func TestNotEnoughReplicas(t *testing.T) {
	t.Parallel()
	minISR := "3"
	bs, ctx, _ := replicatedCluster(t, "nr", 1, map[string]*string{"min.insync.replicas": &minISR})
	testutil.WaitFor(t, 30*time.Second, func() error {
		// Node 1 may apply the topic's record after the node that created it answered.
		topic := bs[0].meta.Image().Topics["nr"]
		if topic == nil {
			return errors.New("node 1 does not know the topic yet")
		}
		if isr := topic.Partitions[0].ISR; len(isr) != 3 {
			return fmt.Errorf("ISR %v", isr)
		}
		return nil
	})
	p := bs[0].meta.Image().Topics["nr"].Partitions[0]
	var leader, follower *Broker
	for _, b := range bs {
		switch {
		case b.cfg.NodeID == p.Leader:
			leader = b
		case follower == nil:
			follower = b
		}
	}
	if err := follower.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, func() error {
		if isr := leader.meta.Image().Topics["nr"].Partitions[0].ISR; len(isr) != 2 {
			return fmt.Errorf("ISR %v, want 2 members", isr)
		}
		return nil
	})
	for _, tc := range []struct {
		acks int16
		want *kerr.Error
	}{{-1, kerr.NotEnoughReplicas}, {1, nil}} {
		// kgo sends a Produce request with its own acks setting, whatever the request says.
		opts := []kgo.Opt{kgo.SeedBrokers(leader.Addr().String()), kgo.RequiredAcks(kgo.AllISRAcks())}
		if tc.acks == 1 {
			opts = []kgo.Opt{kgo.SeedBrokers(leader.Addr().String()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		code := produceOne(ctx, t, cl, leader.cfg.NodeID, "nr", leader.meta.Image().Topics["nr"].ID, tc.acks)
		if err := kerr.ErrorForCode(code); err != errOrNil(tc.want) {
			t.Fatalf("acks=%d with 2 of min.insync.replicas=3 in sync: %v, want %v", tc.acks, err, tc.want)
		}
	}
}

// produceOne sends one record to partition 0 of topic (id id) on node with acks and returns the
// partition's error code.
func produceOne(ctx context.Context, t *testing.T, cl *kgo.Client, node int32, topic string, id meta.UUID, acks int16) int16 {
	t.Helper()
	raw, err := cl.Broker(int(node)).Request(ctx, oneRecordProduce(t, topic, id, acks, 5000))
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

// oneRecordProduce is a Produce request of one record to partition 0 of topic (id id).
func oneRecordProduce(t *testing.T, topic string, id meta.UUID, acks int16, timeoutMs int32) *kmsg.ProduceRequest {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, timeoutMs
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = oneRecordBatch(t)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// oneRecordBatch encodes one record as an uncompressed batch.
func oneRecordBatch(t *testing.T) []byte {
	t.Helper()
	now := time.Now().UnixMilli()
	batch, err := wire.NewCodecs().AppendBatch(nil, wire.BatchHeader{FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, wire.CodecNone, []wire.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

// waitUnfenced waits until every broker of bs sees all of them registered and unfenced, so
// that replicas can be placed on each.
func waitUnfenced(t *testing.T, bs []*Broker) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, func() error {
		for _, b := range bs {
			live := 0
			for _, br := range b.meta.Image().Brokers {
				if !br.Fenced {
					live++
				}
			}
			if live != len(bs) {
				return fmt.Errorf("node %d sees %d of %d brokers unfenced", b.cfg.NodeID, live, len(bs))
			}
		}
		return nil
	})
}

func clusterSeeds(bs []*Broker) kgo.Opt {
	var addrs []string
	for _, b := range bs {
		addrs = append(addrs, b.Addr().String())
	}
	return kgo.SeedBrokers(addrs...)
}

func newAdmin(t *testing.T, seeds kgo.Opt) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// produceValues produces the values from..to-1 (as decimal strings) and waits for every ack.
func produceValues(ctx context.Context, t *testing.T, cl *kgo.Client, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// waitReplicasEqual waits until on every broker of bs that has a replica of topic, each
// partition's log equals its leader's, byte for byte, up to the same end and high watermark,
// and replicas of each partition are on want of bs.
func waitReplicasEqual(t *testing.T, bs []*Broker, topic string, want int) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, func() error {
		im := bs[0].meta.Image()
		tp := im.Topics[topic]
		if tp == nil {
			return fmt.Errorf("no topic %s", topic)
		}
		for _, pm := range tp.Partitions {
			var logs [][]byte
			var ends []string
			for _, b := range bs {
				p := b.parts.Load().lookup(topic, pm.Index)
				if p == nil {
					continue
				}
				data, err := readWholeLog(p)
				if err != nil {
					return err
				}
				logs = append(logs, data)
				ends = append(ends, fmt.Sprintf("node %d: end %d hw %d leader %v", b.cfg.NodeID, p.log().LogEndOffset(), p.highWatermark(), p.isLeader()))
				if p.highWatermark() != p.log().LogEndOffset() {
					return fmt.Errorf("partition %d: %v", pm.Index, ends)
				}
			}
			if len(logs) != want {
				return fmt.Errorf("partition %d: %d replicas open, want %d", pm.Index, len(logs), want)
			}
			for i := 1; i < len(logs); i++ {
				if !bytes.Equal(logs[i], logs[0]) {
					return fmt.Errorf("partition %d: replica logs differ (%d vs %d bytes): %v", pm.Index, len(logs[i]), len(logs[0]), ends)
				}
			}
		}
		return nil
	})
}

// readWholeLog returns every batch of p's log.
func readWholeLog(p *partition) ([]byte, error) {
	var out []byte
	end := p.log().LogEndOffset()
	for off := p.log().LogStartOffset(); off < end; {
		rr, err := p.log().Read(off, 1<<20, end, true)
		if err != nil {
			return nil, fmt.Errorf("read %s-%d at %d: %w", p.topic, p.index, off, err)
		}
		if len(rr.Data) == 0 {
			rr.Release()
			break
		}
		out = append(out, rr.Data...)
		rr.Release()
		next := lastOffsetAfter(out)
		if next <= off {
			return nil, fmt.Errorf("read %s-%d: no progress at %d", p.topic, p.index, off)
		}
		off = next
	}
	return out, nil
}

// lastOffsetAfter returns the offset after the last whole batch in data.
func lastOffsetAfter(data []byte) int64 {
	var next int64
	for len(data) >= 61 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(data); err != nil {
			break
		}
		next = b.FirstOffset + int64(b.LastOffsetDelta) + 1
		data = data[12+b.Length:]
	}
	return next
}

// checkConsumeAll reads topic from the start and checks it holds the values 0..n-1 exactly once,
// each partition in produce order.
func checkConsumeAll(ctx context.Context, t *testing.T, seeds kgo.Opt, topic string, n int) {
	t.Helper()
	cons, err := kgo.NewClient(seeds, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[int]bool{}
	last := map[int32]int{}
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(seen), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			v, err := strconv.Atoi(string(r.Value))
			if err != nil || seen[v] {
				t.Fatalf("record %q at %d/%d: unparsable or repeated", r.Value, r.Partition, r.Offset)
			}
			if prev, ok := last[r.Partition]; ok && v < prev {
				t.Fatalf("partition %d: %d after %d", r.Partition, v, prev)
			}
			seen[v], last[r.Partition] = true, v
		})
	}
	for i := range n {
		if !seen[i] {
			t.Fatalf("value %d missing", i)
		}
	}
}

// TestControlledShutdown stops a partition's leader while a producer writes with acks=all:
// Shutdown returns only after the controller moved leadership away, well before the session
// timeout could have fenced the broker, and nothing acknowledged is lost.
func TestControlledShutdown(t *testing.T) {
	t.Parallel()
	minISR := "2"
	bs, ctx, _ := replicatedCluster(t, "cs", 2, map[string]*string{"min.insync.replicas": &minISR},
		func(c *Config) { c.BrokerSessionTimeout = 20 * time.Second })
	seeds := clusterSeeds(bs)
	prod, err := kgo.NewClient(seeds, kgo.DefaultProduceTopic("cs"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produceValues(ctx, t, prod, 0, 200)
	waitReplicasEqual(t, bs, "cs", 3)
	before := bs[0].meta.Image().Topics["cs"].Partitions[0]
	old := bs[before.Leader-1]
	inc := old.incarnation
	produced := make(chan error, 1)
	go func() {
		for i := 200; i < 600; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				produced <- fmt.Errorf("produce %d: %w", i, err)
				return
			}
		}
		produced <- nil
	}()
	rest := stopOne(ctx, t, bs, old)
	// The controller answered "may stop" only from an image where the old leader leads
	// nothing; the others apply that image at once, long before a fence could happen.
	testutil.WaitFor(t, 5*time.Second, func() error {
		im := rest[0].meta.Image()
		br := im.Brokers[old.cfg.NodeID]
		// Once stopped it may be fenced too, as soon as its port refuses connections.
		if !br.InControlledShutdown || br.Incarnation != inc {
			return fmt.Errorf("broker %d = %+v; want in controlled shutdown", old.cfg.NodeID, br)
		}
		for _, p := range im.Topics["cs"].Partitions {
			if p.Leader == old.cfg.NodeID || slices.Contains(p.ISR, old.cfg.NodeID) {
				return fmt.Errorf("partition %+v still has node %d as leader or in its ISR", p, old.cfg.NodeID)
			}
		}
		if p := im.Topics["cs"].Partitions[0]; p.LeaderEpoch <= before.LeaderEpoch {
			return fmt.Errorf("partition 0 at leader epoch %d, not after %d", p.LeaderEpoch, before.LeaderEpoch)
		}
		return nil
	})
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	waitReplicasEqual(t, rest, "cs", 2)
	checkConsumeAll(ctx, t, clusterSeeds(rest), "cs", 600)
}

// TestStaleLeadershipIgnored opens a replica whose log followed leader epoch 2 and gives it an
// image that names it leader at epoch 1, as a restart replaying a lagging metadata log does: it
// neither fails nor leads, and a current image makes it leader.
func TestStaleLeadershipIgnored(t *testing.T) {
	l, err := rlog.Open(t.TempDir(), rlog.DefaultConfig(), rlog.Options{Topic: "t", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.SetLeaderEpoch(2); err != nil {
		t.Fatal(err)
	}
	p := &partition{topic: "t"}
	p.lg.Store(l)
	now := time.Now()
	if _, err := p.applyState(&replicaState{leader: true, leaderID: 1, leaderEpoch: 1, replicas: []int32{1, 2}, isr: []int32{1, 2}, minISR: 1}, 1, now); err != nil {
		t.Fatalf("stale leadership: %v", err)
	}
	if st := p.state(); p.isLeader() || st.leaderID != -1 {
		t.Fatalf("after a stale leadership: state %+v; want no leader", st)
	}
	if _, err := p.applyState(&replicaState{leader: true, leaderID: 1, leaderEpoch: 3, replicas: []int32{1, 2}, isr: []int32{1, 2}, minISR: 1}, 1, now); err != nil || !p.isLeader() {
		t.Fatalf("current leadership: err %v, leader %v", err, p.isLeader())
	}
}

// TestTopicConfigReachesEveryReplica alters a replicated topic's config through one node and
// checks that the open log of every replica takes it, not only the node that took the request,
// and that removing it restores the default everywhere.
func TestTopicConfigReachesEveryReplica(t *testing.T) {
	t.Parallel()
	bs, ctx, adm := replicatedCluster(t, "tc", 1, nil)
	retentionOn := func(want int64) {
		t.Helper()
		testutil.WaitFor(t, 30*time.Second, func() error {
			for _, b := range bs {
				ps := b.parts.Load().byName["tc"]
				if len(ps) != 1 || ps[0] == nil {
					return fmt.Errorf("node %d has no open log of tc-0", b.cfg.NodeID)
				}
				if got := ps[0].log().Config().RetentionMs; got != want {
					b.partsMu.Lock()
					seen := ps[0].configs
					b.partsMu.Unlock()
					return fmt.Errorf("node %d: retention.ms %d in its open log; want %d (image at %d has configs %v, the partition was last given %v)",
						b.cfg.NodeID, got, want, b.meta.Image().Offset, b.meta.Image().Topics["tc"].Configs, seen)
				}
			}
			return nil
		})
	}
	var def int64
	testutil.WaitFor(t, 30*time.Second, func() error {
		ps := bs[0].parts.Load().byName["tc"]
		if len(ps) != 1 || ps[0] == nil {
			return fmt.Errorf("node %d has no open log of tc-0", bs[0].cfg.NodeID)
		}
		def = ps[0].log().Config().RetentionMs
		return nil
	})
	for _, op := range []struct {
		cfg  kadm.AlterConfig
		want int64
	}{
		{kadm.AlterConfig{Name: "retention.ms", Value: kmsg.StringPtr("123456")}, 123456},
		{kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"}, def},
	} {
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{op.cfg}, "tc")
		if err == nil {
			// The change must be taken by whichever broker the client asked, even one that
			// has not applied the topic's creation yet; a refusal is in the resource's result.
			_, err = resp.On("tc", func(r *kadm.AlterConfigsResponse) error {
				if r.Err != nil {
					return fmt.Errorf("alter configs of tc: %w (%s)", r.Err, r.ErrMessage)
				}
				return nil
			})
		}
		if err != nil {
			t.Fatal(err)
		}
		retentionOn(op.want)
	}
}
