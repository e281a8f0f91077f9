package broker

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
	"ringbroker/coord"
	"ringbroker/wire"
)

// offsetsTopic is Kafka's internal topic of committed offsets and group metadata.
const offsetsTopic = "__consumer_offsets"

// offsetsTopicSegmentBytes is offsets.topic.segment.bytes: smaller segments than user topics.
const offsetsTopicSegmentBytes = "104857600"

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
	p := s.b.parts.Load().leader(offsetsTopic, partition)
	if p == nil {
		done(0, fmt.Errorf("append to %s-%d: %w", offsetsTopic, partition, kerr.NotLeaderForPartition))
		return
	}
	recs := make([]wire.Record, len(records))
	for i, r := range records {
		recs[i] = wire.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	base, end, err := s.b.appendInternal(p, producerID, producerEpoch, recs, true)
	if err != nil {
		done(base, err)
		return
	}
	s.b.waitInternal(p, end, s.b.cfg.OffsetsCommitTimeout, func(err error) { done(base, err) })
}

// Load replays every record and transaction marker of the partition in offset order: each
// record with the producer id of a transactional batch, each COMMIT or ABORT marker as such.
func (s offsetsStore) Load(partition int32, fn func(coord.LoggedRecord) error) error {
	p := s.b.parts.Load().leader(offsetsTopic, partition)
	if p == nil {
		return fmt.Errorf("load %s-%d: %w", offsetsTopic, partition, kerr.NotLeaderForPartition)
	}
	return s.b.scanInternal(p, func(b wire.Batch, from int64) error {
		producerID := int64(-1)
		if b.IsTransactional() {
			producerID = b.ProducerID()
		}
		return s.b.decodeInternal(b, from, func(offset int64, key, value []byte) error {
			rec := coord.LoggedRecord{Offset: offset, ProducerID: producerID}
			if !b.IsControl() {
				rec.Key, rec.Value = key, value
				return fn(rec)
			}
			typ, err := wire.ParseControlKey(key)
			if err != nil {
				return fmt.Errorf("control record at offset %d: %w", offset, err)
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
		})
	})
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
	cfg.GroupTimeouts = b.groupTimeouts
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
		// Every group request only queues on a coordinator shard, which answers it, and so runs
		// inline; but a TxnOffsetCommit first waits for the transaction coordinator's
		// verification (verifyTxnOffsetCommit).
		out = append(out, &api{key: a.Key, minVersion: a.MinVersion, maxVersion: a.MaxVersion,
			keepsRequest: true, handle: handleGroupRequest, inline: a.Key != kmsg.TxnOffsetCommit})
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
	// Authorization, as Kafka's KafkaApis, before the coordinator sees the request
	// (groupauthz.go).
	gate := gateGroupRequest(rc.authorizer(), b.meta.Image(), req)
	if gate.answer != nil {
		rc.respond(gate.answer)
		return
	}
	req = gate.req
	respond := func(resp kmsg.Response) {
		if gate.finish != nil {
			gate.finish(resp)
		}
		rc.respond(resp)
	}
	if commit, ok := req.(*kmsg.TxnOffsetCommitRequest); ok {
		if code := b.verifyTxnOffsetCommit(commit); code != nil {
			respond(txnOffsetCommitError(commit, code))
			return
		}
	}
	info := coord.RequestInfo{ClientID: rc.hdr.ClientID, ClientHost: "/" + hostOf(rc.cs.c.RemoteAddr().String())}
	err := b.groups.Handle(info, req, respond)
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
