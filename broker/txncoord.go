package broker

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/coord/txn"
	rlog "ringbroker/log"
	"ringbroker/wire"
)

// txnStateTopic is Kafka's internal topic of transaction state.
const txnStateTopic = "__transaction_state"

// maxTxnShards bounds the transaction coordinator's shards (one per partition up to here), each a
// goroutine with a timing wheel of 64 KiB, where transaction.state.log.num.partitions is large.
const maxTxnShards = 256

// newTxnCoordinator builds the transaction coordinator from the broker config.
func (b *Broker) newTxnCoordinator() (*txn.Coordinator, error) {
	cfg := txn.DefaultConfig()
	cfg.Partitions = int(b.cfg.TxnStatePartitions)
	// One shard per partition: the transactions of two producers then share a shard only when
	// their ids hash to one partition, so a request finds its shard idle to lend and seldom
	// waits for its goroutine to be woken (with a shard per CPU, concurrent transactions made a
	// twentieth of EndTxns wait for that wake-up; BENCHMARKS.md, Transactions).
	cfg.Shards = min(cfg.Partitions, maxTxnShards)
	cfg.OffsetsPartitions = int(b.cfg.OffsetsPartitions)
	cfg.MaxTimeout = b.cfg.TxnMaxTimeout
	cfg.AbortTimedOutInterval = b.cfg.TxnAbortTimedOutInterval
	cfg.IDExpiration = b.cfg.TxnIDExpiration
	cfg.RemoveExpiredInterval = b.cfg.TxnRemoveExpiredInterval
	cfg.NewProducerID = b.producerIDs.allocate
	cfg.PartitionExists = func(topic string, partition int32) bool {
		t := b.meta.Image().Topics[topic]
		return t != nil && partition >= 0 && int(partition) < len(t.Partitions)
	}
	return txn.New(cfg, txnStateStore{b: b}, txnMarkerWriter{b: b}, b.logger)
}

// txnAPIs wraps the transaction coordinator's APIs as broker APIs, InitProducerId excepted:
// the broker serves that one and hands requests with a transactional id to the coordinator.
// They run inline: handleTxnRequest only authorizes and queues the request on a coordinator
// shard, which answers it.
func txnAPIs() []*api {
	var out []*api
	for _, a := range txn.APIs() {
		if a.Key == kmsg.InitProducerID {
			continue
		}
		out = append(out, &api{key: a.Key, minVersion: a.MinVersion, maxVersion: a.MaxVersion,
			keepsRequest: true, handle: handleTxnRequest, inline: true})
	}
	return out
}

// handleTxnRequest authorizes a transaction coordinator request as Kafka's KafkaApis does
// (txnauthz.go) and hands it to the coordinator. It never blocks.
func handleTxnRequest(b *Broker, rc *reqCtx, req kmsg.Request) {
	gate := gateTxnRequest(rc.authorizer(), b.meta.Image(), req)
	if gate.answer != nil {
		rc.respond(gate.answer)
		return
	}
	err := b.txns.Handle(gate.req, func(resp kmsg.Response) {
		if gate.finish != nil {
			gate.finish(resp)
		}
		rc.respond(resp)
	})
	if err == nil {
		return
	}
	if !errors.Is(err, txn.ErrClosed) {
		b.logger.Error("transaction coordinator refused a request it advertised", "api", kmsg.NameForKey(rc.hdr.APIKey), "err", err)
	}
	rc.closeConn()
}

// ensureTxnStateTopic creates __transaction_state on first use, as Kafka does on the first
// FindCoordinator for a transactional id, and makes the coordinator load the partitions it leads.
func (b *Broker) ensureTxnStateTopic() error {
	if _, ok := b.meta.Image().Topics[txnStateTopic]; ok {
		return nil
	}
	compact := "compact"
	seg := strconv.Itoa(int(b.cfg.TxnStateSegmentBytes))
	minISR := strconv.Itoa(int(b.cfg.txnStateMinISR()))
	unclean := "false"
	res := b.createTopics([]topicSpec{{name: txnStateTopic, partitions: b.cfg.TxnStatePartitions, rf: b.cfg.txnStateTopicRF(), internal: true,
		configs: map[string]*string{"cleanup.policy": &compact, "segment.bytes": &seg, "min.insync.replicas": &minISR,
			"unclean.leader.election.enable": &unclean}}}, false)
	if res[0].err != nil && res[0].err != kerr.TopicAlreadyExists {
		return fmt.Errorf("create %s: %s: %s", txnStateTopic, res[0].err.Message, res[0].message)
	}
	return b.loadTxnPartitions()
}

// loadTxnPartitions hands every __transaction_state partition led here to the transaction
// coordinator, under its leader epoch (the coordinator epoch of its markers), and takes back those
// no longer led here, as loadOffsetsPartitions does for groups.
func (b *Broker) loadTxnPartitions() error {
	b.txnsLoadMu.Lock()
	defer b.txnsLoadMu.Unlock()
	return b.syncCoordinatorPartitions(txnStateTopic, b.txnsLoaded, func(idx, epoch int32) error {
		return b.txns.LoadPartition(idx, epoch, func(err error) {
			if err != nil {
				b.logger.Error("load transaction state partition", "partition", idx, "err", err)
			}
		})
	}, b.txns.UnloadPartition)
}

// txnCoordinatorFor is the broker that leads the __transaction_state partition of id, at its
// endpoint of listener.
func txnCoordinatorFor(b *Broker, id, listener string) (brokerAddr, bool) {
	im := b.meta.Image()
	t := im.Topics[txnStateTopic]
	if t == nil || len(t.Partitions) == 0 {
		return brokerAddr{}, false
	}
	p := t.Partitions[txn.PartitionFor(id, len(t.Partitions))]
	br, ok := im.Brokers[p.Leader]
	if !ok || br.Fenced {
		return brokerAddr{}, false
	}
	host, port, ok := br.Endpoint(listener)
	if !ok {
		return brokerAddr{}, false
	}
	return brokerAddr{br.NodeID, host, port}, true
}

// brokerAddr is where FindCoordinator sends a client.
type brokerAddr struct {
	nodeID int32
	host   string
	port   int32
}

// txnStateStore keeps the transaction coordinator's records in the __transaction_state partitions.
type txnStateStore struct{ b *Broker }

// Append writes records as one batch and reports once the ISR has them, as Kafka appends
// transaction state with acks=all; a wait longer than request.timeout.ms fails it.
func (s txnStateStore) Append(partition int32, records []txn.Record, done func(error)) {
	s.append(partition, records, done, true)
}

// TryAppend is Append on an event loop thread: it reports false, having written nothing, where
// the append would block there.
func (s txnStateStore) TryAppend(partition int32, records []txn.Record, done func(error)) bool {
	return s.append(partition, records, done, false)
}

// append is Append, or TryAppend where mayBlock is false.
func (s txnStateStore) append(partition int32, records []txn.Record, done func(error), mayBlock bool) bool {
	p := s.b.parts.Load().leader(txnStateTopic, partition)
	if p == nil {
		done(fmt.Errorf("append to %s-%d: %w", txnStateTopic, partition, kerr.NotLeaderForPartition))
		return true
	}
	recs := make([]wire.Record, len(records))
	for i, r := range records {
		recs[i] = wire.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	_, end, err := s.b.appendInternal(p, -1, -1, recs, mayBlock)
	switch {
	case errors.Is(err, rlog.ErrWouldBlock):
		return false
	case err != nil:
		done(err)
		return true
	}
	s.b.waitInternal(p, end, txnMarkerTimeout, done)
	return true
}

// Load replays every record of the partition in offset order.
func (s txnStateStore) Load(partition int32, fn func(txn.Record) error) error {
	p := s.b.parts.Load().leader(txnStateTopic, partition)
	if p == nil {
		return fmt.Errorf("load %s-%d: %w", txnStateTopic, partition, kerr.NotLeaderForPartition)
	}
	return s.b.scanInternal(p, func(b wire.Batch, from int64) error {
		if b.IsControl() {
			return nil
		}
		return s.b.decodeInternal(b, from, func(_ int64, key, value []byte) error {
			return fn(txn.Record{Key: key, Value: value})
		})
	})
}

// txnMarkerWriter writes a transaction's markers: to partitions led here directly, as a
// WriteTxnMarkers request would, and to the others with WriteTxnMarkers to their leaders.
type txnMarkerWriter struct{ b *Broker }

// WriteMarkers groups m's partitions by leader and sends each leader its markers at once.
func (w txnMarkerWriter) WriteMarkers(m txn.Markers, done func(failed []txn.TopicPartition)) {
	b := w.b
	im := b.meta.Image()
	byLeader := make(map[int32][]txn.TopicPartition)
	var mu sync.Mutex
	var failed []txn.TopicPartition
	for _, tp := range m.Partitions {
		t := im.Topics[tp.Topic]
		if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) || t.Partitions[tp.Partition].Leader < 0 {
			failed = append(failed, tp)
			continue
		}
		leader := t.Partitions[tp.Partition].Leader
		byLeader[leader] = append(byLeader[leader], tp)
	}
	if len(byLeader) == 0 {
		done(failed)
		return
	}
	left := len(byLeader)
	finish := func(f []txn.TopicPartition) {
		mu.Lock()
		failed = append(failed, f...)
		left--
		last := left == 0
		mu.Unlock()
		if last {
			done(failed)
		}
	}
	for leader, tps := range byLeader {
		req := markersRequest(m, tps)
		if leader == b.cfg.NodeID {
			// Off the coordinator's shard, which WriteMarkers is called from: the appends would
			// hold up every other transaction of the shard meanwhile.
			go b.writeTxnMarkers(req, func(resp *kmsg.WriteTxnMarkersResponse) { finish(failedMarkers(resp, tps)) })
			continue
		}
		go func() {
			resp := kmsg.NewPtrWriteTxnMarkersResponse()
			if err := b.markerSender.send(leader, req, resp, markerRequestTimeout); err != nil {
				b.logger.Warn("send transaction markers", "leader", leader, "producer_id", m.ProducerID, "err", err)
				finish(tps)
				return
			}
			finish(failedMarkers(resp, tps))
		}()
	}
}

// markersRequest is the WriteTxnMarkers request of m for the partitions tps.
func markersRequest(m txn.Markers, tps []txn.TopicPartition) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	for _, tp := range tps {
		if n := len(mk.Topics); n > 0 && mk.Topics[n-1].Topic == tp.Topic {
			mk.Topics[n-1].Partitions = append(mk.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
		mk.Topics = append(mk.Topics, t)
	}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{mk}
	return req
}

// failedMarkers lists the partitions of tps whose marker resp does not report written.
func failedMarkers(resp *kmsg.WriteTxnMarkersResponse, tps []txn.TopicPartition) []txn.TopicPartition {
	ok := make(map[txn.TopicPartition]bool, len(tps))
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 {
					ok[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = true
				}
			}
		}
	}
	var failed []txn.TopicPartition
	for _, tp := range tps {
		if !ok[tp] {
			failed = append(failed, tp)
		}
	}
	return failed
}

// peerSender keeps one connection per broker for the requests one broker sends another
// (WriteTxnMarkers to partition leaders, AddPartitionsToTxn to transaction coordinators).
type peerSender struct {
	// purpose names the sender in its client id.
	purpose string
	b       *Broker
	mu      sync.Mutex
	// conns are the leaders' connections; closed is set by close, after which none is dialled.
	conns  map[int32]*peerConn
	closed bool
}

// peerConn is one broker's connection; requests on it take turns under mu. conn is the
// socket, guarded by the sender's mu, so that close can end a round trip in flight.
type peerConn struct {
	mu   sync.Mutex
	c    *replicaClient
	conn net.Conn
}

// markerRequestTimeout bounds one WriteTxnMarkers round trip: the leader waits up to
// txnMarkerTimeout for its ISR.
const markerRequestTimeout = txnMarkerTimeout + 5*time.Second

// errPeerSenderClosed is returned by send once the broker shuts down.
var errPeerSenderClosed = errors.New("peer request sender closed")

// send sends req to broker leader and decodes its response into resp within timeout.
func (s *peerSender) send(leader int32, req kmsg.Request, resp kmsg.Response, timeout time.Duration) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errPeerSenderClosed
	}
	if s.conns == nil {
		s.conns = make(map[int32]*peerConn)
	}
	mc := s.conns[leader]
	if mc == nil {
		mc = &peerConn{}
		s.conns[leader] = mc
	}
	s.mu.Unlock()
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.c == nil {
		br, ok := s.b.meta.Image().Brokers[leader]
		if !ok || br.Fenced {
			return fmt.Errorf("broker %d is not registered or fenced", leader)
		}
		addr := net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port)))
		conn, err := s.b.peers.dial(leader, addr, replicaSocketTimeout)
		if err != nil {
			return fmt.Errorf("dial broker %d at %s: %w", leader, addr, err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return errPeerSenderClosed
		}
		mc.conn = conn
		s.mu.Unlock()
		clientID := "ringbroker-" + s.purpose + "-" + strconv.Itoa(int(s.b.cfg.NodeID))
		mc.c = &replicaClient{conn: conn, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
	}
	if err := mc.c.roundTrip(req, resp, timeout); err != nil {
		s.mu.Lock()
		mc.conn = nil
		s.mu.Unlock()
		mc.c.conn.Close()
		mc.c = nil
		return err
	}
	return nil
}

// close closes every connection, ending the round trips in flight.
func (s *peerSender) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, mc := range s.conns {
		if mc.conn != nil {
			mc.conn.Close()
		}
	}
}
