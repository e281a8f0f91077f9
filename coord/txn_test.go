package coord

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnCommitReq is a TxnOffsetCommit of producer 7 for group g: offset 42 of each partition.
func txnCommitReq(version int16, group string, parts ...topicPartition) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group, req.ProducerID = version, "tx", group, 7
	for _, tp := range parts {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = tp.topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = tp.partition, 42
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// txnCodes lists a TxnOffsetCommit response's partition error codes in order.
func txnCodes(r kmsg.Response) []int16 {
	var out []int16
	for _, t := range r.(*kmsg.TxnOffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

func TestTxnOffsetCommitErrors(t *testing.T) {
	cfg := testConfig()
	cfg.PartitionExists = func(topic string, _ int32) bool { return topic != "missing" }
	d := newDriver(t, cfg)
	tp, missing := topicPartition{"t0", 0}, topicPartition{"missing", 0}

	// An empty group id fails the known partitions; unknown ones fail alone.
	if got := txnCodes(d.roundTrip(RequestInfo{}, txnCommitReq(4, "", tp, missing))); got[0] != kerr.InvalidGroupID.Code || got[1] != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("empty group id: %v; want INVALID_GROUP_ID, UNKNOWN_TOPIC_OR_PARTITION", got)
	}
	// Metadata longer than offset.metadata.max.bytes fails its partition only.
	req := txnCommitReq(0, "g", tp, topicPartition{"t1", 0})
	md := string(make([]byte, cfg.OffsetMetadataMaxBytes+1))
	req.Topics[0].Partitions[0].Metadata = &md
	if got := txnCodes(d.roundTrip(RequestInfo{}, req)); got[0] != kerr.OffsetMetadataTooLarge.Code || got[1] != 0 {
		t.Errorf("oversized metadata: %v; want OFFSET_METADATA_TOO_LARGE, OK", got)
	}
	// v0-v2 carry no member fields: a generation in the decoded struct is ignored.
	req = txnCommitReq(2, "other", tp)
	req.Generation, req.MemberID = 5, "m"
	if got := txnCodes(d.roundTrip(RequestInfo{}, req)); got[0] != 0 {
		t.Errorf("v2 commit to an unknown group: %v; want OK", got)
	}
	// v3 with a generation for an unknown group.
	req = txnCommitReq(3, "unknown", tp)
	req.Generation, req.MemberID = 5, "m"
	if got := txnCodes(d.roundTrip(RequestInfo{}, req)); got[0] != kerr.IllegalGeneration.Code {
		t.Errorf("v3 generation for an unknown group: %v; want ILLEGAL_GENERATION", got)
	}
}

// TestCompleteTransactionWhileLoading: a marker reported while the partition loads applies
// once the load is done, to the offsets the load replayed; one for a partition not owned here
// is ignored.
func TestCompleteTransactionWhileLoading(t *testing.T) {
	store := &blockingStore{memStore: newMemStore(), release: make(chan struct{})}
	store.logs[0] = []LoggedRecord{
		{Record: offsetCommitRecord("g", topicPartition{"t", 0}, committedOffset{offset: 3, leaderEpoch: -1, expireTimestamp: -1}), ProducerID: -1},
		{Record: offsetCommitRecord("g", topicPartition{"t", 0}, committedOffset{offset: 9, leaderEpoch: -1, expireTimestamp: -1}), Offset: 1, ProducerID: 7},
	}
	c := newOnePartition(t, store)
	// Not owned yet: ignored (a real log, which the load reads, would hold the marker).
	if err := c.CompleteTransaction(0, 7, false, 2); err != nil {
		t.Fatal(err)
	}
	loaded := make(chan error, 1)
	if err := c.LoadPartition(0, func(err error) { loaded <- err }); err != nil {
		t.Fatal(err)
	}
	fetch := func() int64 {
		t.Helper()
		got := make(chan kmsg.Response, 1)
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}}
		if err := c.Handle(RequestInfo{}, req, func(r kmsg.Response) { got <- r }); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			return r.(*kmsg.OffsetFetchResponse).Groups[0].Topics[0].Partitions[0].Offset
		case <-time.After(10 * time.Second):
			t.Fatal("no OffsetFetch response within 10s")
			return 0
		}
	}
	// Reported while the load is blocked: kept until the replay is installed.
	if err := c.CompleteTransaction(0, 7, true, 2); err != nil {
		t.Fatal(err)
	}
	close(store.release)
	if err := <-loaded; err != nil {
		t.Fatalf("load: %v", err)
	}
	if got := fetch(); got != 9 {
		t.Fatalf("offset after a marker reported during the load: %d; want 9", got)
	}
	if err := c.CompleteTransaction(1, 7, true, 2); err == nil {
		t.Fatal("CompleteTransaction of a partition out of range succeeded")
	}
}
