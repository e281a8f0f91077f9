package broker

// WriteTxnMarkers (key 27), versions 0-1.
//
// Behavior: what a transaction coordinator sends to the leaders of the partitions a
// transaction wrote to, as Kafka's KafkaApis.handleWriteTxnMarkersRequest: for each marker, a
// control batch (the producer id and epoch, COMMIT or ABORT and the coordinator epoch: Kafka's
// EndTransactionMarker) is appended to each listed partition led here, __consumer_offsets
// included, and the marker's partitions are answered once the ISR has them, as Produce with
// acks=all (REQUEST_TIMED_OUT after Kafka's request.timeout.ms default, 30 s). Errors are per
// partition: UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does not hold,
// NOT_LEADER_OR_FOLLOWER when this broker does not lead it, INVALID_PRODUCER_EPOCH for a
// producer epoch older than the partition's, TRANSACTION_COORDINATOR_FENCED for a coordinator
// epoch older than the producer's last marker's, NOT_ENOUGH_REPLICAS below
// min.insync.replicas, KAFKA_STORAGE_ERROR for a failed write. Followers replicate the markers
// like any batch. A marker on a __consumer_offsets partition also ends the producer's
// transactional offset commits (TxnOffsetCommit) there: once the high watermark passes it, the
// group coordinator makes them committed offsets (COMMIT) or drops them (ABORT); a leader that
// loses the partition first leaves that to the next leader's load, which replays the marker.
// Only a principal with ALTER or CLUSTER_ACTION on the cluster (a transaction coordinator's
// broker) may send it; any other gets CLUSTER_AUTHORIZATION_FAILED in every partition, as
// Kafka's.
//
// Version notes: v1 is v0 made flexible. v2 (TransactionVersion, KIP-890) is not served.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/coord"
	rlog "ringbroker/log"
	"ringbroker/wire"
)

var writeTxnMarkersAPI = &api{key: kmsg.WriteTxnMarkers, minVersion: 0, maxVersion: 1, handle: handleWriteTxnMarkers}

// txnMarkerTimeout is how long markers wait for the ISR: Kafka's request.timeout.ms default.
const txnMarkerTimeout = 30 * time.Second

func handleWriteTxnMarkers(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.WriteTxnMarkersRequest)
	if z := rc.authorizer(); !z.mayCluster(acl.OpAlter) && !z.mayCluster(acl.OpClusterAction) {
		rc.respond(writeTxnMarkersError(req, kerr.ClusterAuthorizationFailed))
		return
	}
	b.writeTxnMarkers(req, func(resp *kmsg.WriteTxnMarkersResponse) { rc.respond(resp) })
}

// writeTxnMarkersError answers every partition of every marker of req with code, as Kafka's
// WriteTxnMarkersRequest.getErrorResponse.
func writeTxnMarkersError(req *kmsg.WriteTxnMarkersRequest, code *kerr.Error) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, code.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

// writeTxnMarkers appends req's markers to the partitions led here and calls respond with the
// outcome once they are replicated: the request's handling, and the transaction coordinator's
// path to partitions it leads itself.
func (b *Broker) writeTxnMarkers(req *kmsg.WriteTxnMarkersRequest, respond func(*kmsg.WriteTxnMarkersResponse)) {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	im := b.meta.Image()
	tbl := b.parts.Load()
	now := time.Now()
	leased := b.leaseHeld(now)
	var waits []produceWait
	// places[i] locates waits[i]'s partition in the response: marker, topic, partition.
	var places [][3]int
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	for i := range req.Markers {
		m := &req.Markers[i]
		rm := &resp.Markers[i]
		*rm = kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		rm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		for j := range m.Topics {
			rt := &m.Topics[j]
			st := &rm.Topics[j]
			*st = kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			st.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(rt.Partitions))
			topic := im.Topics[rt.Topic]
			for k, index := range rt.Partitions {
				sp := &st.Partitions[k]
				*sp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = index
				var p *partition
				if topic != nil {
					p = tbl.leaderID(topic.ID, index)
				}
				var code *kerr.Error
				var upto int64
				switch {
				case topic == nil || index < 0 || int(index) >= len(topic.Partitions):
					code = kerr.UnknownTopicOrPartition
				case p == nil || !leased:
					code = kerr.NotLeaderForPartition
				default:
					code, upto = b.appendTxnMarker(p, m, now)
				}
				if code != nil {
					sp.ErrorCode = code.Code
					continue
				}
				if p.log().GroupCommit() {
					waits = append(waits, produceWait{p: p, upto: upto, fsync: true})
					places = append(places, [3]int{i, j, k})
				}
				if p.highWatermark() < upto {
					waits = append(waits, produceWait{p: p, upto: upto})
					places = append(places, [3]int{i, j, k})
				}
			}
		}
	}
	if len(waits) == 0 {
		respond(resp)
		return
	}
	fail := func(i int, code *kerr.Error, _ string) {
		at := places[i]
		resp.Markers[at[0]].Topics[at[1]].Partitions[at[2]].ErrorCode = code.Code
	}
	b.respondWhenDone(waits, txnMarkerTimeout, fail, func() { respond(resp) })
}

// appendTxnMarker appends marker m's control batch to p, which this broker leads, and returns
// the offset after it (what the high watermark must reach), or the partition's error.
func (b *Broker) appendTxnMarker(p *partition, m *kmsg.WriteTxnMarkersRequestMarker, now time.Time) (*kerr.Error, int64) {
	if st := p.state(); len(st.isr) < st.minISR {
		return kerr.NotEnoughReplicas, 0
	}
	typ := wire.ControlAbort
	if m.Committed {
		typ = wire.ControlCommit
	}
	ts := now.UnixMilli()
	batch, err := b.codecs.AppendControlBatch(nil, wire.BatchHeader{FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch}, typ, m.CoordinatorEpoch)
	if err != nil {
		b.logger.Error("encode transaction marker", "topic", p.topic, "partition", p.index, "producer_id", m.ProducerID, "err", err)
		return kerr.UnknownServerError, 0
	}
	p.appendMu.Lock()
	res, err := p.log().Append(batch)
	p.appendMu.Unlock()
	if err != nil {
		b.noteStorageError(p.dir.Load(), err)
		code := appendErrorCode(err)
		if code == kerr.KafkaStorageError && !errors.Is(err, rlog.ErrClosed) {
			b.logger.Error("append transaction marker", "topic", p.topic, "partition", p.index, "producer_id", m.ProducerID, "err", err)
		}
		return code, 0
	}
	p.countIn(len(batch), res.LastOffset-res.BaseOffset+1)
	p.afterLeaderAppend(b.cfg.NodeID)
	p.wakeWaiters()
	if p.topic == offsetsTopic {
		b.completeGroupTxn(p, m.ProducerID, m.Committed, res.BaseOffset)
	}
	return nil, res.LastOffset + 1
}

// completeGroupTxn tells the group coordinator that producerID's transaction ended with the
// marker at offset of __consumer_offsets partition p, once the high watermark passes the
// marker (under min.insync.replicas too: the marker is then in the ISR all the same). If the
// leadership moves first, the next leader's load replays the marker instead.
func (b *Broker) completeGroupTxn(p *partition, producerID int64, commit bool, offset int64) {
	complete := func() {
		if err := b.groups.CompleteTransaction(p.index, producerID, commit, offset); err != nil && !errors.Is(err, coord.ErrClosed) {
			b.logger.Error("complete transactional offset commits", "partition", p.index, "producer_id", producerID, "err", err)
		}
	}
	if !p.waitHW(offset+1, func(code *kerr.Error) {
		if code == nil || code == kerr.NotEnoughReplicasAfterAppend {
			complete()
		}
	}) {
		complete()
	}
}
