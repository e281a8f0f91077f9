package txn

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/eventloop"
)

// memStore is a Store in memory: records per partition, appends answered at once unless fail
// says otherwise, loads held while hold is set.
type memStore struct {
	mu      sync.Mutex
	records map[int32][]Record
	fail    error
	hold    chan struct{}
	// wouldBlock makes TryAppend refuse; tries counts TryAppend's calls.
	wouldBlock atomic.Bool
	tries      atomic.Int32
}

func (s *memStore) Append(partition int32, records []Record, done func(error)) {
	s.mu.Lock()
	err := s.fail
	if err == nil {
		s.records[partition] = append(s.records[partition], records...)
	}
	s.mu.Unlock()
	done(err)
}

// TryAppend appends as Append unless wouldBlock is set.
func (s *memStore) TryAppend(partition int32, records []Record, done func(error)) bool {
	s.tries.Add(1)
	if s.wouldBlock.Load() {
		return false
	}
	s.Append(partition, records, done)
	return true
}

func (s *memStore) Load(partition int32, fn func(Record) error) error {
	s.mu.Lock()
	hold := s.hold
	recs := append([]Record(nil), s.records[partition]...)
	s.mu.Unlock()
	if hold != nil {
		<-hold
	}
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// states decodes partition's records: each id's state in log order, "tombstone" for a deletion.
func (s *memStore) states(t *testing.T, partition int32) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.records[partition] {
		_, m, err := decodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if m == nil {
			out = append(out, "tombstone")
			continue
		}
		out = append(out, stateName(m.state))
	}
	return out
}

// memMarkers is a MarkerWriter that records what it was asked to write and fails the
// partitions in failOnce the first time they are written.
type memMarkers struct {
	mu       sync.Mutex
	written  []Markers
	failOnce map[TopicPartition]bool
	calls    atomic.Int32
}

func (w *memMarkers) WriteMarkers(m Markers, done func([]TopicPartition)) {
	w.calls.Add(1)
	w.mu.Lock()
	var failed []TopicPartition
	for _, tp := range m.Partitions {
		if w.failOnce[tp] {
			delete(w.failOnce, tp)
			failed = append(failed, tp)
		}
	}
	w.written = append(w.written, m)
	w.mu.Unlock()
	done(failed)
}

func (w *memMarkers) all() []Markers {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Markers(nil), w.written...)
}

// harness is a coordinator on a manual clock with one shard, every __transaction_state partition
// loaded at coordinator epoch 7.
type harness struct {
	t       *testing.T
	c       *Coordinator
	clock   *eventloop.ManualClock
	store   *memStore
	markers *memMarkers
	nextPID atomic.Int64
	// lentPIDs counts producer ids allocated on a goroutine the shard was lent to.
	lentPIDs atomic.Int32
}

func newHarness(t *testing.T, mods ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: eventloop.NewManualClock(time.Unix(1_700_000_000, 0)),
		store: &memStore{records: map[int32][]Record{}}, markers: &memMarkers{failOnce: map[TopicPartition]bool{}}}
	h.nextPID.Store(1000)
	cfg := DefaultConfig()
	cfg.Shards = 1
	cfg.Partitions = 4
	cfg.OffsetsPartitions = 5
	cfg.Clock = h.clock
	cfg.NewProducerID = func() (int64, error) {
		if h.c.shards[0].lent {
			h.lentPIDs.Add(1)
		}
		return h.nextPID.Add(1), nil
	}
	cfg.PartitionExists = func(topic string, _ int32) bool { return topic != "gone" }
	for _, m := range mods {
		m(&cfg)
	}
	c, err := New(cfg, h.store, h.markers, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	t.Cleanup(c.Close)
	for p := range int32(cfg.Partitions) {
		h.load(p)
	}
	return h
}

// load loads partition p at epoch 7 and waits for the load to finish.
func (h *harness) load(p int32) {
	h.t.Helper()
	done := make(chan error, 1)
	if err := h.c.LoadPartition(p, 7, func(err error) { done <- err }); err != nil {
		h.t.Fatal(err)
	}
	if err := <-done; err != nil {
		h.t.Fatal(err)
	}
}

// do sends req and returns the response.
func (h *harness) do(req kmsg.Request) kmsg.Response {
	h.t.Helper()
	ch := make(chan kmsg.Response, 1)
	if err := h.c.Handle(req, func(r kmsg.Response) { ch <- r }); err != nil {
		h.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		h.t.Fatalf("%s: no response", kmsg.NameForKey(req.Key()))
		return nil
	}
}

// settle waits until the shard has run everything queued before it.
func (h *harness) settle() {
	h.t.Helper()
	for range 3 {
		h.do(kmsg.NewPtrListTransactionsRequest())
	}
}

// initPID sends InitProducerId for id (v4) with the expected producer, and returns its answer.
func (h *harness) initPID(id string, timeoutMs int32, pid int64, epoch int16) (int64, int16, *kerr.Error) {
	h.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID = kmsg.StringPtr(id)
	req.TransactionTimeoutMillis = timeoutMs
	req.ProducerID, req.ProducerEpoch = pid, epoch
	resp := h.do(req).(*kmsg.InitProducerIDResponse)
	return resp.ProducerID, resp.ProducerEpoch, errOf(resp.ErrorCode)
}

// addPartitions adds partitions of topic to id's transaction (v3) and returns the first error.
func (h *harness) addPartitions(id string, pid int64, epoch int16, topic string, partitions ...int32) *kerr.Error {
	h.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, partitions
	req.Topics = append(req.Topics, rt)
	resp := h.do(req).(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return errOf(p.ErrorCode)
			}
		}
	}
	return nil
}

// endTxn ends id's transaction (v3).
func (h *harness) endTxn(id string, pid int64, epoch int16, commit bool) *kerr.Error {
	h.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return errOf(h.do(req).(*kmsg.EndTxnResponse).ErrorCode)
}

// describe returns id's state name, or its error.
func (h *harness) describe(id string) (kmsg.DescribeTransactionsResponseTransactionState, *kerr.Error) {
	h.t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	st := h.do(req).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
	return st, errOf(st.ErrorCode)
}

// waitState waits until id is in state.
func (h *harness) waitState(id, state string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := h.describe(id)
		if err == nil && st.State == state {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s is %s (err %v); want %s", id, st.State, err, state)
		}
		time.Sleep(time.Millisecond)
	}
}

func errOf(code int16) *kerr.Error {
	if code == 0 {
		return nil
	}
	return kerr.ErrorForCode(code).(*kerr.Error)
}
