package broker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
	"ringbroker/coord"
	"ringbroker/internal/recordbatch"
	"ringbroker/wire"
)

// offsetsTopic is Kafka's internal topic of committed offsets and group metadata.
const offsetsTopic = "__consumer_offsets"

// offsetsTopicSegmentBytes is offsets.topic.segment.bytes: smaller segments than user topics.
const offsetsTopicSegmentBytes = "104857600"

// maxOffsetsLoadBatch bounds one read while a shard loads an offsets partition.
const maxOffsetsLoadBatch = 1 << 20

// offsetsStore keeps the group coordinator's records in the __consumer_offsets partitions.
type offsetsStore struct{ b *Broker }

// Append writes records to the partition as one uncompressed batch, a transactional one of
// producerID and producerEpoch when producerID >= 0 (TxnOffsetCommit), and reports the batch's
// base offset once the high watermark covers it, as Kafka appends coordinator records with
// acks=all: the ISR has them (and they are flushed under the topic's flush policy), so a new
// leader loads them. An ISR below min.insync.replicas refuses the append (NOT_ENOUGH_REPLICAS),
// and a wait longer than offsets.commit.timeout.ms fails it (REQUEST_TIMED_OUT); the
// coordinator answers both with COORDINATOR_NOT_AVAILABLE.
func (s offsetsStore) Append(partition int32, producerID int64, producerEpoch int16, records []coord.Record, done func(int64, error)) {
	p, base, end, err := s.append(partition, producerID, producerEpoch, records)
	if err != nil || p.highWatermark() >= end {
		done(base, err)
		return
	}
	var once sync.Once
	finish := func(err error) { once.Do(func() { done(base, err) }) }
	timer := s.b.purgatory.after(time.Now().Add(s.b.cfg.OffsetsCommitTimeout), func() {
		finish(fmt.Errorf("append to %s-%d: not replicated within %v: %w", offsetsTopic, partition, s.b.cfg.OffsetsCommitTimeout, kerr.RequestTimedOut))
	})
	if !p.waitHW(end, func(code *kerr.Error) {
		s.b.purgatory.cancel(timer)
		if code != nil {
			finish(fmt.Errorf("append to %s-%d: %w", offsetsTopic, partition, code))
			return
		}
		finish(nil)
	}) {
		s.b.purgatory.cancel(timer)
		finish(nil)
	}
}

// append writes records as one batch to the partition led here and returns it with the batch's
// base offset and the log end after it. The log checks the batch as a coordinator's
// (AppendAsCoordinator): a transactional batch carries no sequence numbers, but an older
// producer epoch fails with INVALID_PRODUCER_EPOCH.
func (s offsetsStore) append(partition int32, producerID int64, producerEpoch int16, records []coord.Record) (*partition, int64, int64, error) {
	p := s.b.parts.Load().leader(offsetsTopic, partition)
	if p == nil {
		return nil, 0, 0, fmt.Errorf("append to %s-%d: %w", offsetsTopic, partition, kerr.NotLeaderForPartition)
	}
	if st := p.state(); len(st.isr) < st.minISR {
		return nil, 0, 0, fmt.Errorf("append to %s-%d: ISR %v is smaller than min.insync.replicas %d: %w", offsetsTopic, partition, st.isr, st.minISR, kerr.NotEnoughReplicas)
	}
	recs := make([]wire.Record, len(records))
	for i, r := range records {
		recs[i] = wire.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	now := time.Now().UnixMilli()
	h := wire.BatchHeader{FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if producerID >= 0 {
		h.ProducerID, h.ProducerEpoch, h.Attributes = producerID, producerEpoch, recordbatch.AttrTransactional
	}
	batch, err := s.b.codecs.AppendBatch(nil, h, wire.CodecNone, recs)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("encode %s-%d batch: %w", offsetsTopic, partition, err)
	}
	p.appendMu.Lock()
	res, err := p.log.AppendAsCoordinator(batch)
	end := p.log.LogEndOffset()
	p.appendMu.Unlock()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("append to %s-%d: %w: %w", offsetsTopic, partition, appendErrorCode(err), err)
	}
	p.afterLeaderAppend(s.b.cfg.NodeID)
	p.wakeWaiters()
	return p, res.BaseOffset, end, nil
}

// Load replays every record and transaction marker of the partition in offset order.
func (s offsetsStore) Load(partition int32, fn func(coord.LoggedRecord) error) error {
	p := s.b.parts.Load().leader(offsetsTopic, partition)
	if p == nil {
		return fmt.Errorf("load %s-%d: %w", offsetsTopic, partition, kerr.NotLeaderForPartition)
	}
	end := p.log.LogEndOffset()
	for off := p.log.LogStartOffset(); off < end; {
		rr, err := p.log.Read(off, maxOffsetsLoadBatch, end, true)
		if err != nil {
			return fmt.Errorf("load %s-%d at %d: %w", offsetsTopic, partition, off, err)
		}
		next, err := s.replay(rr.Data, off, fn)
		rr.Release()
		if err != nil {
			return fmt.Errorf("load %s-%d at %d: %w", offsetsTopic, partition, off, err)
		}
		if next <= off {
			return fmt.Errorf("load %s-%d: no progress at offset %d", offsetsTopic, partition, off)
		}
		off = next
	}
	return nil
}

// replay decodes the batches in data, calls fn for each record at or after from, with the
// producer id of a transactional batch, and for each COMMIT or ABORT marker, and returns the
// offset after the last batch.
func (s offsetsStore) replay(data []byte, from int64, fn func(coord.LoggedRecord) error) (int64, error) {
	next := from
	for i, pos := 0, 0; len(data) > 0; i++ {
		b, rest, err := wire.NextBatch(data, i, pos)
		if err != nil {
			return next, err
		}
		base, control := b.BaseOffset(), b.IsControl()
		producerID := int64(-1)
		if b.IsTransactional() {
			producerID = b.ProducerID()
		}
		err = s.b.codecs.DecodeRecords(b, maxOffsetsLoadBatch*16, func(r *wire.Record) error {
			rec := coord.LoggedRecord{Offset: base + int64(r.OffsetDelta), ProducerID: producerID}
			if rec.Offset < from {
				return nil
			}
			if control {
				typ, err := wire.ParseControlKey(r.Key)
				if err != nil {
					return fmt.Errorf("control record at offset %d: %w", rec.Offset, err)
				}
				switch typ {
				case wire.ControlCommit:
					rec.Marker = coord.CommitMarker
				case wire.ControlAbort:
					rec.Marker = coord.AbortMarker
				default:
					return nil // another control record type: nothing for the coordinator
				}
				return fn(rec)
			}
			rec.Key = append([]byte(nil), r.Key...)
			if r.Value != nil {
				rec.Value = append([]byte{}, r.Value...)
			}
			return fn(rec)
		})
		if err != nil {
			return next, err
		}
		next = b.LastOffset() + 1
		pos += len(b)
		data = rest
	}
	return next, nil
}

// newGroupCoordinator builds the coordinator from the broker config.
func (b *Broker) newGroupCoordinator() (*coord.GroupCoordinator, error) {
	cfg := coord.DefaultConfig()
	cfg.OffsetsPartitions = int(b.cfg.OffsetsPartitions)
	cfg.InitialRebalanceDelay = b.cfg.GroupInitialRebalanceDelay
	cfg.MinSessionTimeout = b.cfg.GroupMinSessionTimeout
	cfg.MaxSessionTimeout = b.cfg.GroupMaxSessionTimeout
	cfg.PartitionExists = func(topic string, partition int32) bool {
		t := b.meta.Image().Topics[topic]
		return t != nil && partition >= 0 && int(partition) < len(t.Partitions)
	}
	cfg.Topics = func() coord.Topics { return imageTopics{b.meta.Image()} }
	c := b.cfg
	switch {
	case c.ConsumerHeartbeatInterval < c.ConsumerMinHeartbeatInterval || c.ConsumerHeartbeatInterval > c.ConsumerMaxHeartbeatInterval:
		return nil, fmt.Errorf("group.consumer.heartbeat.interval.ms %d outside [%d, %d]", c.ConsumerHeartbeatInterval.Milliseconds(),
			c.ConsumerMinHeartbeatInterval.Milliseconds(), c.ConsumerMaxHeartbeatInterval.Milliseconds())
	case c.ConsumerSessionTimeout < c.ConsumerMinSessionTimeout || c.ConsumerSessionTimeout > c.ConsumerMaxSessionTimeout:
		return nil, fmt.Errorf("group.consumer.session.timeout.ms %d outside [%d, %d]", c.ConsumerSessionTimeout.Milliseconds(),
			c.ConsumerMinSessionTimeout.Milliseconds(), c.ConsumerMaxSessionTimeout.Milliseconds())
	}
	cfg.ConsumerHeartbeatInterval = c.ConsumerHeartbeatInterval
	cfg.ConsumerSessionTimeout = c.ConsumerSessionTimeout
	cfg.ConsumerAssignors = c.ConsumerAssignors
	return coord.New(cfg, offsetsStore{b: b}, b.logger)
}

// imageTopics is the coordinator's view of one metadata image.
type imageTopics struct{ img *meta.Image }

// Version is the metadata log offset the image was built at.
func (t imageTopics) Version() int64 { return t.img.Offset }

// ByName looks a topic up by name.
func (t imageTopics) ByName(name string) (coord.TopicInfo, bool) {
	return topicInfo(t.img.Topics[name])
}

// ByID looks a topic up by id.
func (t imageTopics) ByID(id [16]byte) (coord.TopicInfo, bool) {
	return topicInfo(t.img.TopicsByID[meta.UUID(id)])
}

// Names lists every topic, __consumer_offsets included: as in Kafka, a regex subscription that
// matches an internal topic is assigned it.
func (t imageTopics) Names() []string {
	return slices.Collect(maps.Keys(t.img.Topics))
}

func topicInfo(tp *meta.Topic) (coord.TopicInfo, bool) {
	if tp == nil {
		return coord.TopicInfo{}, false
	}
	return coord.TopicInfo{Name: tp.Name, ID: tp.ID, Partitions: int32(len(tp.Partitions))}, true
}

// ensureOffsetsTopic creates __consumer_offsets on first use, as Kafka does on the first
// FindCoordinator, and makes the coordinator load the partitions it leads.
func (b *Broker) ensureOffsetsTopic() error {
	if _, ok := b.meta.Image().Topics[offsetsTopic]; ok {
		return nil
	}
	compact, seg := "compact", offsetsTopicSegmentBytes
	res := b.createTopics([]topicSpec{{name: offsetsTopic, partitions: b.cfg.OffsetsPartitions, rf: b.cfg.offsetsTopicRF(), internal: true,
		configs: map[string]*string{"cleanup.policy": &compact, "segment.bytes": &seg}}}, false)
	if res[0].err != nil && res[0].err != kerr.TopicAlreadyExists {
		return fmt.Errorf("create %s: %s: %s", offsetsTopic, res[0].err.Message, res[0].message)
	}
	return b.loadOffsetsPartitions()
}

// loadOffsetsPartitions hands every __consumer_offsets partition led here to the coordinator,
// which answers COORDINATOR_LOAD_IN_PROGRESS for its groups until the replay is done, and takes
// back those no longer led here, whose groups then get NOT_COORDINATOR: the clients look the
// coordinator up again and find the new leader, which loads the groups from its replica.
func (b *Broker) loadOffsetsPartitions() error {
	b.groupsLoadMu.Lock()
	defer b.groupsLoadMu.Unlock()
	return b.syncCoordinatorPartitions(offsetsTopic, b.groupsLoaded, func(idx, _ int32) error {
		return b.groups.LoadPartition(idx, func(err error) {
			if err != nil {
				b.logger.Error("load offsets partition", "partition", idx, "err", err)
			}
		})
	}, b.groups.UnloadPartition)
}

// groupAPIs wraps the coordinator's APIs, as declared in coord/, as broker APIs: requests are
// decoded into memory of their own (the coordinator keeps strings) and answered when the
// coordinator responds.
func groupAPIs() []*api {
	var out []*api
	for _, a := range coord.APIs() {
		out = append(out, &api{key: a.Key, minVersion: a.MinVersion, maxVersion: a.MaxVersion,
			keepsRequest: true, handle: handleGroupRequest})
	}
	return out
}

func handleGroupRequest(b *Broker, rc *reqCtx, req kmsg.Request) {
	if sync, ok := req.(*kmsg.SyncGroupRequest); ok && sync.Version >= 5 && (sync.ProtocolType == nil || sync.Protocol == nil) {
		// From v5 the protocol type and name are mandatory; Kafka's request handler answers
		// INCONSISTENT_GROUP_PROTOCOL before the coordinator sees the request.
		resp := sync.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		rc.respond(resp)
		return
	}
	if featureLevel(b.meta.Image(), featureGroupVersion) < 1 {
		// group.version 0: the KIP-848 consumer protocol is off, as Kafka turns it off.
		switch req := req.(type) {
		case *kmsg.ConsumerGroupHeartbeatRequest:
			resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			rc.respond(resp)
			return
		case *kmsg.ConsumerGroupDescribeRequest:
			resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
			for _, g := range req.Groups {
				rg := kmsg.NewConsumerGroupDescribeResponseGroup()
				rg.Group, rg.ErrorCode = g, kerr.UnsupportedVersion.Code
				resp.Groups = append(resp.Groups, rg)
			}
			rc.respond(resp)
			return
		}
	}
	if commit, ok := req.(*kmsg.TxnOffsetCommitRequest); ok {
		if code := b.verifyTxnOffsetCommit(commit); code != nil {
			rc.respond(txnOffsetCommitError(commit, code))
			return
		}
	}
	info := coord.RequestInfo{ClientID: rc.hdr.ClientID, ClientHost: "/" + hostOf(rc.cs.c.RemoteAddr().String())}
	err := b.groups.Handle(info, req, func(resp kmsg.Response) { rc.respond(resp) })
	if err == nil {
		return
	}
	if errors.Is(err, coord.ErrClosed) {
		rc.closeConn()
		return
	}
	b.logger.Error("group coordinator refused a request it advertised", "api", kmsg.NameForKey(rc.hdr.APIKey), "err", err)
	rc.closeConn()
}
