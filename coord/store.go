package coord

import (
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one __consumer_offsets record: key and value encoded exactly as
// Kafka encodes them (kmsg's OffsetCommitKey/Value and
// GroupMetadataKey/Value). A nil Value is a tombstone.
type Record struct {
	// Key identifies what the record is about: a group's offset for one
	// topic partition (key versions 0-1) or a group's metadata (version 2).
	Key []byte
	// Value is the committed offset or group metadata; nil deletes the key.
	Value []byte
}

// LoggedRecord is one entry Load reads back from a __consumer_offsets partition: a record with
// its place in the log, or a transaction marker.
type LoggedRecord struct {
	Record
	// Offset is the entry's log offset. It orders a transactional offset commit against plain
	// ones when its transaction commits.
	Offset int64
	// ProducerID is the producer of the entry's batch when the batch is transactional (a
	// TxnOffsetCommit's, or a marker's), -1 otherwise.
	ProducerID int64
	// Marker is set on the COMMIT or ABORT control record that ends ProducerID's transaction;
	// Record is then empty.
	Marker Marker
}

// Marker says whether a LoggedRecord is a transaction marker, and which.
type Marker int8

// Markers: NoMarker for records, CommitMarker and AbortMarker for the control records
// WriteTxnMarkers appends.
const (
	NoMarker Marker = iota
	CommitMarker
	AbortMarker
)

// OffsetStore persists coordinator state in the __consumer_offsets log; the
// broker implements it over its partitions.
type OffsetStore interface {
	// Append writes records, in order, to partition as one batch and calls
	// done once when they are durable, with the log offset of the first
	// record, or with an error. A producerID >= 0 makes the batch
	// transactional, of that producer id and epoch (TxnOffsetCommit); -1
	// writes a plain batch. done may be called from any goroutine, including
	// before Append returns. A Kafka error (*kerr.Error, possibly wrapped) is
	// mapped to the client's error code as Kafka maps it; any other error
	// becomes UNKNOWN_SERVER_ERROR.
	Append(partition int32, producerID int64, producerEpoch int16, records []Record, done func(base int64, err error))
	// Load calls fn for every record and transaction marker of partition in
	// log order, from the log start to its end. Compaction may have removed
	// superseded records. An error from fn stops the load and is returned.
	Load(partition int32, fn func(LoggedRecord) error) error
}

// Key versions of __consumer_offsets records, as Kafka writes them.
const (
	offsetCommitKeyVersion  = 1 // versions 0 and 1 are offset commits
	groupMetadataKeyVersion = 2
)

// Value versions Kafka 3.x/4.x writes.
const (
	offsetCommitValueVersion       = 3 // with leader epoch
	offsetCommitValueExpireVersion = 1 // with an explicit expire timestamp (OffsetCommit v2-v4 retention)
	groupMetadataValueVersion      = 3 // with static member instance ids
)

type topicPartition struct {
	topic     string
	partition int32
}

// committedOffset is one committed offset with what Kafka keeps beside it.
type committedOffset struct {
	offset          int64
	leaderEpoch     int32 // -1 if unknown
	metadata        string
	commitTimestamp int64 // ms
	expireTimestamp int64 // ms, -1 unless the commit asked for a retention time
	// recordOffset is the log offset of the record that wrote the commit
	// (Kafka's OffsetAndMetadata.recordOffset): a transactional commit replaces
	// the current offset when its transaction commits only if written after it.
	recordOffset int64
}

func offsetCommitRecord(group string, tp topicPartition, o committedOffset) Record {
	k := kmsg.NewOffsetCommitKey()
	k.Version = offsetCommitKeyVersion
	k.Group, k.Topic, k.Partition = group, tp.topic, tp.partition
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetCommitValueVersion
	if o.expireTimestamp >= 0 {
		v.Version = offsetCommitValueExpireVersion
		v.ExpireTimestamp = o.expireTimestamp
	}
	v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = o.offset, o.leaderEpoch, o.metadata, o.commitTimestamp
	// One allocation for both: key (versions, two strings, partition) and
	// value (version, offset, epoch, metadata, two timestamps at most).
	buf := make([]byte, 0, 12+len(group)+len(tp.topic)+32+len(o.metadata))
	key := k.AppendTo(buf)
	value := v.AppendTo(key[len(key):len(key):cap(buf)])
	return Record{Key: key[:len(key):len(key)], Value: value}
}

func offsetTombstone(group string, tp topicPartition) Record {
	k := kmsg.NewOffsetCommitKey()
	k.Version = offsetCommitKeyVersion
	k.Group, k.Topic, k.Partition = group, tp.topic, tp.partition
	return Record{Key: k.AppendTo(nil)}
}

func groupMetadataKey(group string) []byte {
	k := kmsg.NewGroupMetadataKey()
	k.Version = groupMetadataKeyVersion
	k.Group = group
	return k.AppendTo(nil)
}

// groupMetadataRecord encodes g's current generation with the given member
// assignments, as Kafka's GroupMetadataManager.storeGroup does.
func groupMetadataRecord(g *group, assignment map[string][]byte) Record {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupMetadataValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	v.Protocol = nonEmpty(g.protocol)
	v.Leader = nonEmpty(g.leader)
	v.CurrentStateTimestamp = g.stateTime
	for _, m := range g.members {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.id
		vm.InstanceID = m.instanceID
		vm.ClientID, vm.ClientHost = m.clientID, m.clientHost
		vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis = m.rebalanceTimeout, m.sessionTimeout
		vm.Subscription = m.metadata(g.protocol)
		vm.Assignment = assignment[m.id]
		v.Members = append(v.Members, vm)
	}
	return Record{Key: groupMetadataKey(g.id), Value: v.AppendTo(nil)}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// decodedRecord is one parsed __consumer_offsets record. Exactly one of
// offset (with tp) and groupMeta is meaningful, per isOffset; tombstone
// means the value was nil.
type decodedRecord struct {
	group     string
	isOffset  bool
	tp        topicPartition
	offset    committedOffset
	groupMeta *kmsg.GroupMetadataValue
	tombstone bool
	// consumer is set for KIP-848 consumer-group records.
	consumer *consumerRecord
}

// errUnknownRecord marks records of types this coordinator does not use,
// such as share and streams group records; loading skips them.
var errUnknownRecord = errors.New("unknown __consumer_offsets record type")

// decodeRecord parses a __consumer_offsets record. It never panics on
// malformed input.
func decodeRecord(r Record) (decodedRecord, error) {
	if len(r.Key) < 2 {
		return decodedRecord{}, fmt.Errorf("record key of %d bytes: too short for a version", len(r.Key))
	}
	version := int16(r.Key[0])<<8 | int16(r.Key[1])
	switch version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.Key); err != nil {
			return decodedRecord{}, fmt.Errorf("decode offset commit key version %d: %w", version, err)
		}
		d := decodedRecord{group: k.Group, isOffset: true, tp: topicPartition{k.Topic, k.Partition}}
		if r.Value == nil {
			d.tombstone = true
			return d, nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(r.Value); err != nil {
			return decodedRecord{}, fmt.Errorf("decode offset commit value for group %q %s-%d: %w", k.Group, k.Topic, k.Partition, err)
		}
		d.offset = committedOffset{offset: v.Offset, leaderEpoch: -1, metadata: v.Metadata, commitTimestamp: v.CommitTimestamp, expireTimestamp: -1}
		if v.Version >= 3 {
			d.offset.leaderEpoch = v.LeaderEpoch
		}
		if v.Version == 1 && v.ExpireTimestamp >= 0 {
			d.offset.expireTimestamp = v.ExpireTimestamp
		}
		return d, nil
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			return decodedRecord{}, fmt.Errorf("decode group metadata key: %w", err)
		}
		d := decodedRecord{group: k.Group}
		if r.Value == nil {
			d.tombstone = true
			return d, nil
		}
		v := new(kmsg.GroupMetadataValue)
		if err := v.ReadFrom(r.Value); err != nil {
			return decodedRecord{}, fmt.Errorf("decode group metadata value for group %q: %w", k.Group, err)
		}
		d.groupMeta = v
		return d, nil
	case keyConsumerGroupPartitionMeta:
		return decodedRecord{consumer: &consumerRecord{typ: version}}, nil
	case keyConsumerGroupMetadata, keyConsumerGroupMemberMetadata, keyConsumerGroupTargetMetadata,
		keyConsumerGroupTargetMember, keyConsumerGroupCurrentAssigment:
		c, err := decodeConsumerRecord(version, r)
		if err != nil {
			return decodedRecord{}, err
		}
		return decodedRecord{group: c.group, consumer: &c}, nil
	default:
		return decodedRecord{}, fmt.Errorf("%w: key version %d", errUnknownRecord, version)
	}
}

// batchSize returns the size of records as one uncompressed Kafka record
// batch (magic 2), the size Kafka compares with max.message.bytes.
func batchSize(records []Record) int {
	const batchOverhead = 61
	size := batchOverhead
	for i, r := range records {
		body := 1 + varintLen(0) + varintLen(int64(i)) // attributes, timestamp delta, offset delta
		body += varintLen(int64(len(r.Key))) + len(r.Key)
		if r.Value == nil {
			body += varintLen(-1)
		} else {
			body += varintLen(int64(len(r.Value))) + len(r.Value)
		}
		body += varintLen(0) // header count
		size += varintLen(int64(body)) + body
	}
	return size
}

// varintLen is the length of v as a zig-zag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// appendGroupError maps a store error to the error code Kafka returns for a
// failed group metadata write (GroupMetadataManager.storeGroup).
func appendGroupError(err error) *kerr.Error { return appendError(err, kerr.UnknownServerError) }

// appendOffsetError maps a store error to the error code Kafka returns for a
// failed offset commit write.
func appendOffsetError(err error) *kerr.Error { return appendError(err, kerr.InvalidCommitOffsetSize) }

// appendError maps a store error as Kafka's coordinator does for its writes;
// a batch that is too large gets tooLarge, which differs by write.
func appendError(err error, tooLarge *kerr.Error) *kerr.Error {
	switch e := storeKafkaError(err); e {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return kerr.CoordinatorNotAvailable
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return kerr.NotCoordinator
	case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
		return tooLarge
	default:
		return e
	}
}

func storeKafkaError(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	return kerr.UnknownServerError
}

// randomUUID returns a random version 4 UUID in its canonical text form.
func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
