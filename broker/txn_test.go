package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/recordbatch"
	"ringbroker/internal/testutil"
)

// noTxnVerification turns KIP-890's verification off for tests of the partition side alone,
// whose transactional batches no transaction coordinator knows.
const noTxnVerification = "transaction.partition.verification.enable=false"

// txnProducer is a producer id and epoch handed out by InitProducerId.
type txnProducer struct {
	id    int64
	epoch int16
}

func initProducer(ctx context.Context, t *testing.T, cl *kgo.Client) txnProducer {
	t.Helper()
	resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %+v", err, resp)
	}
	return txnProducer{resp.ProducerID, resp.ProducerEpoch}
}

// produceKind is what produceRaw sends.
type produceKind int

const (
	nonTxn    produceKind = iota // a plain or idempotent batch
	txnWithID                    // a transactional batch, in a request with a transactional id
	txnNoID                      // a transactional batch, in a request without one
)

// produceRaw sends one batch of values of kind to partition 0 of topic (by name and id) with
// acks=all, from producer p at sequence seq (p.id -1: a plain batch), and returns the
// partition's error code and base offset.
func produceRaw(ctx context.Context, t *testing.T, b *Broker, cl *kgo.Client, topic string, p txnProducer, seq int32, kind produceKind, values ...string) (int16, int64) {
	t.Helper()
	var recs []kmsg.Record
	for _, v := range values {
		recs = append(recs, kmsg.Record{Value: []byte(v)})
	}
	rb := testutil.NewBatch(time.Now().UnixMilli(), recs...)
	rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = p.id, p.epoch, seq
	if kind != nonTxn {
		rb.Attributes |= recordbatch.AttrTransactional
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10000
	if kind == txnWithID {
		req.TransactionID = kmsg.StringPtr("txn-test")
	}
	mt := b.meta.Image().Topics[topic]
	if mt == nil {
		// b has not applied the topic's creation yet: what it would answer.
		return kerr.UnknownTopicOrPartition.Code, -1
	}
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rt.TopicID = mt.ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = testutil.SealBatch(rb)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	sp := resp.Topics[0].Partitions[0]
	return sp.ErrorCode, sp.BaseOffset
}

// txnMarker is one marker of a WriteTxnMarkers request, to partitions of one topic.
type txnMarker struct {
	p          txnProducer
	commit     bool
	coordEpoch int32
	topic      string
	partitions []int32
}

// writeMarkers sends WriteTxnMarkers and returns each marker's partition error codes, by topic
// and partition, in request order.
func writeMarkers(ctx context.Context, t *testing.T, b *Broker, cl *kgo.Client, markers ...txnMarker) []map[string]map[int32]int16 {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	for _, m := range markers {
		rm := kmsg.NewWriteTxnMarkersRequestMarker()
		rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = m.p.id, m.p.epoch, m.commit, m.coordEpoch
		rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		rt.Topic, rt.Partitions = m.topic, m.partitions
		rm.Topics = append(rm.Topics, rt)
		req.Markers = append(req.Markers, rm)
	}
	// Sent to the broker directly: the client would split the request by partition leader and
	// fail it whole for an unknown topic.
	raw, err := cl.Broker(int(b.cfg.NodeID)).Request(ctx, req)
	if err != nil {
		t.Fatalf("write txn markers: %v", err)
	}
	resp := raw.(*kmsg.WriteTxnMarkersResponse)
	if len(resp.Markers) != len(markers) {
		t.Fatalf("write txn markers: %d markers answered; want %d", len(resp.Markers), len(markers))
	}
	var out []map[string]map[int32]int16
	for i, rm := range resp.Markers {
		if rm.ProducerID != markers[i].p.id {
			t.Fatalf("marker %d answered for producer %d; want %d", i, rm.ProducerID, markers[i].p.id)
		}
		codes := map[string]map[int32]int16{}
		for _, rt := range rm.Topics {
			codes[rt.Topic] = map[int32]int16{}
			for _, rp := range rt.Partitions {
				codes[rt.Topic][rp.Partition] = rp.ErrorCode
			}
		}
		out = append(out, codes)
	}
	return out
}

// fetchedBatch is a batch of a raw Fetch response.
type fetchedBatch struct {
	first, last int64
	producerID  int64
	control     bool
}

// fetchRaw fetches partition 0 of topic from offset with isolation (0 read_uncommitted, 1
// read_committed).
func fetchRaw(ctx context.Context, t *testing.T, b *Broker, cl *kgo.Client, topic string, offset int64, isolation int8) (kmsg.FetchResponseTopicPartition, []fetchedBatch) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	req.IsolationLevel = isolation
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = b.meta.Image().Topics[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	fp := resp.Topics[0].Partitions[0]
	if fp.ErrorCode != 0 {
		t.Fatalf("fetch %s from %d: %v", topic, offset, kerr.ErrorForCode(fp.ErrorCode))
	}
	var batches []fetchedBatch
	for data := fp.RecordBatches; len(data) > 0; {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(data); err != nil {
			t.Fatalf("fetched batch: %v", err)
		}
		batches = append(batches, fetchedBatch{first: rb.FirstOffset, last: rb.FirstOffset + int64(rb.LastOffsetDelta),
			producerID: rb.ProducerID, control: rb.Attributes&recordbatch.AttrControl != 0})
		data = data[recordbatch.LogOverhead+int(rb.Length):]
	}
	return fp, batches
}

// listLatest answers ListOffsets latest for partition 0 of topic with isolation.
func listLatest(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("list offsets: %v %+v", err, resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// TestTransactionsPartitionSide drives transactions without a coordinator: transactional
// batches by raw Produce, their end by WriteTxnMarkers, read back by Fetch and ListOffsets with
// both isolation levels and by franz-go consumers.
func TestTransactionsPartitionSide(t *testing.T) {
	forBackends(t, testTransactionsPartitionSide)
}

func testTransactionsPartitionSide(t *testing.T, io string) {
	b := startBroker(t, io, t.TempDir(), noTxnVerification)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "tx"); err != nil {
		t.Fatal(err)
	}
	plainP := txnProducer{-1, -1}
	a, c := initProducer(ctx, t, cl), initProducer(ctx, t, cl)
	// 0: plain; 1-2: a's transaction; 3: c's transaction.
	mustProduce := func(p txnProducer, seq int32, kind produceKind, wantBase int64, values ...string) {
		t.Helper()
		if code, base := produceRaw(ctx, t, b, cl, "tx", p, seq, kind, values...); code != 0 || base != wantBase {
			t.Fatalf("produce %v: %v at %d; want offset %d", values, kerr.ErrorForCode(code), base, wantBase)
		}
	}
	mustProduce(plainP, -1, nonTxn, 0, "p0")
	mustProduce(a, 0, txnWithID, 1, "a1", "a2")
	mustProduce(c, 0, txnWithID, 3, "c1")
	if code, _ := produceRaw(ctx, t, b, cl, "tx", a, 2, nonTxn, "plain during txn"); code != kerr.InvalidTxnState.Code {
		t.Fatalf("non-transactional batch during a transaction: %v; want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	if code, _ := produceRaw(ctx, t, b, cl, "tx", a, 2, txnNoID, "no transactional id"); code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional batch without a transactional id: %v; want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}

	if got := listLatest(ctx, t, cl, "tx", 1); got != 1 {
		t.Fatalf("ListOffsets latest read_committed = %d; want 1 (a's transaction is open)", got)
	}
	if got := listLatest(ctx, t, cl, "tx", 0); got != 4 {
		t.Fatalf("ListOffsets latest read_uncommitted = %d; want 4", got)
	}
	fp, batches := fetchRaw(ctx, t, b, cl, "tx", 0, 1)
	if fp.LastStableOffset != 1 || fp.HighWatermark != 4 || len(batches) != 1 || batches[0].last != 0 {
		t.Fatalf("read_committed fetch with open transactions: LSO %d HW %d batches %+v; want LSO 1, HW 4, the plain batch", fp.LastStableOffset, fp.HighWatermark, batches)
	}

	// a aborts, c commits (offsets 4 and 5); unknown partitions answer per partition.
	codes := writeMarkers(ctx, t, b, cl,
		txnMarker{p: a, commit: false, coordEpoch: 5, topic: "tx", partitions: []int32{0, 7}},
		txnMarker{p: c, commit: true, coordEpoch: 5, topic: "tx", partitions: []int32{0}},
		txnMarker{p: c, commit: true, coordEpoch: 5, topic: "nope", partitions: []int32{0}})
	if codes[0]["tx"][0] != 0 || codes[0]["tx"][7] != kerr.UnknownTopicOrPartition.Code ||
		codes[1]["tx"][0] != 0 || codes[2]["nope"][0] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("write txn markers: %v", codes)
	}
	// Fenced: an older producer epoch, an older coordinator epoch.
	codes = writeMarkers(ctx, t, b, cl,
		txnMarker{p: txnProducer{a.id, a.epoch - 1}, coordEpoch: 5, topic: "tx", partitions: []int32{0}},
		txnMarker{p: c, commit: true, coordEpoch: 4, topic: "tx", partitions: []int32{0}})
	if codes[0]["tx"][0] != kerr.InvalidProducerEpoch.Code || codes[1]["tx"][0] != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("fenced markers: %v; want INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED", codes)
	}
	mustProduce(plainP, -1, nonTxn, 6, "p6")

	if got := listLatest(ctx, t, cl, "tx", 1); got != 7 {
		t.Fatalf("ListOffsets latest read_committed = %d; want 7", got)
	}
	fp, batches = fetchRaw(ctx, t, b, cl, "tx", 0, 1)
	wantAborted := []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: a.id, FirstOffset: 1}}
	if fp.LastStableOffset != 7 || len(batches) != 6 || !slices.EqualFunc(fp.AbortedTransactions, wantAborted,
		func(x, y kmsg.FetchResponseTopicPartitionAbortedTransaction) bool {
			return x.ProducerID == y.ProducerID && x.FirstOffset == y.FirstOffset
		}) {
		t.Fatalf("read_committed fetch: LSO %d, %d batches, aborted %+v; want LSO 7, 6 batches, aborted %+v",
			fp.LastStableOffset, len(batches), fp.AbortedTransactions, wantAborted)
	}
	if !batches[3].control || batches[3].producerID != a.id || !batches[4].control || batches[4].producerID != c.id {
		t.Fatalf("batches 3 and 4 are not the markers of a and c: %+v", batches)
	}
	fp, _ = fetchRaw(ctx, t, b, cl, "tx", 5, 1)
	if len(fp.AbortedTransactions) != 0 {
		t.Fatalf("read_committed fetch from 5 lists aborted transactions %+v that end before it", fp.AbortedTransactions)
	}
	fp, _ = fetchRaw(ctx, t, b, cl, "tx", 0, 0)
	if fp.AbortedTransactions != nil || fp.LastStableOffset != 7 {
		t.Fatalf("read_uncommitted fetch: aborted %+v, LSO %d; want none, 7", fp.AbortedTransactions, fp.LastStableOffset)
	}

	consume := func(isolation kgo.IsolationLevel) []string {
		t.Helper()
		consumer := newClient(t, b, kgo.ConsumeTopics("tx"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(isolation))
		var got []string
		for !slices.Contains(got, "p6") {
			fs := consumer.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("poll: %v", err)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		return got
	}
	if got, want := consume(kgo.ReadCommitted()), []string{"p0", "c1", "p6"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed consumer: %q; want %q", got, want)
	}
	if got, want := consume(kgo.ReadUncommitted()), []string{"p0", "a1", "a2", "c1", "p6"}; !slices.Equal(got, want) {
		t.Fatalf("read_uncommitted consumer: %q; want %q", got, want)
	}

	// Markers go to __consumer_offsets partitions too.
	waitGroupCoordinator(ctx, t, b, cl, "txn-group", 0)
	before := listLatest(ctx, t, cl, offsetsTopic, 0)
	codes = writeMarkers(ctx, t, b, cl, txnMarker{p: c, commit: true, coordEpoch: 6, topic: offsetsTopic, partitions: []int32{0}})
	if codes[0][offsetsTopic][0] != 0 {
		t.Fatalf("marker to %s-0: %v", offsetsTopic, kerr.ErrorForCode(codes[0][offsetsTopic][0]))
	}
	if after := listLatest(ctx, t, cl, offsetsTopic, 0); after != before+1 {
		t.Fatalf("%s-0 end offset %d after the marker; want %d", offsetsTopic, after, before+1)
	}
}

// TestTxnMarkersReplicated: WriteTxnMarkers answers once the ISR has the marker, and the
// followers, replicating it like any batch, list the aborted transaction too.
func TestTxnMarkersReplicated(t *testing.T) {
	t.Parallel()
	bs, ctx, _ := replicatedCluster(t, "rtx", 1, nil, func(c *Config) { c.TxnPartitionVerification = false })
	cl := newClient(t, bs[0], clusterSeeds(bs))
	leaderID := bs[0].meta.Image().Topics["rtx"].Partitions[0].Leader
	var leader *Broker
	for _, b := range bs {
		if b.cfg.NodeID == leaderID {
			leader = b
		}
	}
	p := initProducer(ctx, t, cl)
	testutil.WaitFor(t, 20*time.Second, func() error {
		// NOT_LEADER_OR_FOLLOWER until the leader has opened the partition: nothing written.
		code, base := produceRaw(ctx, t, leader, cl, "rtx", p, 0, txnWithID, "x", "y")
		if code == 0 && base != 0 {
			t.Fatalf("transactional produce at %d; want 0", base)
		}
		return kerr.ErrorForCode(code)
	})
	codes := writeMarkers(ctx, t, leader, cl, txnMarker{p: p, coordEpoch: 1, topic: "rtx", partitions: []int32{0}})
	if codes[0]["rtx"][0] != 0 {
		t.Fatalf("abort marker: %v", kerr.ErrorForCode(codes[0]["rtx"][0]))
	}
	lp := leader.parts.Load().lookup("rtx", 0)
	if hw := lp.highWatermark(); hw < 3 {
		t.Fatalf("WriteTxnMarkers answered with the high watermark at %d, below the marker's end 3", hw)
	}
	waitReplicasEqual(t, bs, "rtx", 3)
	for _, b := range bs {
		got := b.parts.Load().lookup("rtx", 0).log().AbortedTransactions(0, 3)
		if len(got) != 1 || got[0].ProducerID != p.id || got[0].FirstOffset != 0 {
			t.Fatalf("node %d lists aborted transactions %+v; want producer %d from 0", b.cfg.NodeID, got, p.id)
		}
	}
}
