package coord

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
)

// KIP-848 consumer groups are persisted in __consumer_offsets with the
// record types Kafka 4 writes (group-coordinator's ConsumerGroup*Key/Value
// JSON schemas): a key starts with its type as an int16 and is encoded
// non-flexibly; a value starts with its version (0) and is encoded flexibly
// (compact strings and arrays, tagged fields, of which none are written).
// kmsg has no types for them, so they are encoded here.

// Record key types of consumer groups.
const (
	keyConsumerGroupMetadata         = 3
	keyConsumerGroupPartitionMeta    = 4 // written by Kafka before 4.1; ignored
	keyConsumerGroupMemberMetadata   = 5
	keyConsumerGroupTargetMetadata   = 6
	keyConsumerGroupTargetMember     = 7
	keyConsumerGroupCurrentAssigment = 8
)

// consumerKey encodes a consumer-group record key: the type, the group id
// and, for member records, the member id.
func consumerKey(typ int16, group string, member ...string) []byte {
	k := kbin.AppendInt16(nil, typ)
	k = kbin.AppendString(k, group)
	for _, m := range member {
		k = kbin.AppendString(k, m)
	}
	return k
}

func valueHeader() []byte { return kbin.AppendInt16(nil, 0) }

// noTags ends a flexible struct without tagged fields.
func noTags(b []byte) []byte { return kbin.AppendUvarint(b, 0) }

func groupEpochRecord(group string, epoch int32) Record {
	v := kbin.AppendInt32(valueHeader(), epoch)
	return Record{Key: consumerKey(keyConsumerGroupMetadata, group), Value: noTags(v)}
}

func targetMetadataRecord(group string, epoch int32) Record {
	v := kbin.AppendInt32(valueHeader(), epoch)
	return Record{Key: consumerKey(keyConsumerGroupTargetMetadata, group), Value: noTags(v)}
}

func memberMetadataRecord(group string, m *consumerMember) Record {
	v := valueHeader()
	v = kbin.AppendCompactNullableString(v, m.instanceID)
	v = kbin.AppendCompactNullableString(v, m.rackID)
	v = kbin.AppendCompactString(v, m.clientID)
	v = kbin.AppendCompactString(v, m.clientHost)
	v = kbin.AppendCompactArrayLen(v, len(m.topics))
	for _, t := range m.topics {
		v = kbin.AppendCompactString(v, t)
	}
	v = kbin.AppendCompactNullableString(v, nonEmpty(m.regex))
	v = kbin.AppendInt32(v, m.rebalanceTimeout)
	v = kbin.AppendCompactNullableString(v, nonEmpty(m.assignor))
	return Record{Key: consumerKey(keyConsumerGroupMemberMetadata, group, m.id), Value: noTags(v)}
}

func targetMemberRecord(group, member string, target partSet) Record {
	v := appendTopicPartitions(valueHeader(), target)
	return Record{Key: consumerKey(keyConsumerGroupTargetMember, group, member), Value: noTags(v)}
}

func currentAssignmentRecord(group string, m *consumerMember) Record {
	v := valueHeader()
	v = kbin.AppendInt32(v, m.epoch)
	v = kbin.AppendInt32(v, m.prevEpoch)
	v = kbin.AppendInt8(v, int8(m.state))
	v = appendTopicPartitions(v, m.assigned)
	v = appendTopicPartitions(v, m.revoking)
	return Record{Key: consumerKey(keyConsumerGroupCurrentAssigment, group, m.id), Value: noTags(v)}
}

// memberTombstones delete every record of member.
func memberTombstones(group, member string) []Record {
	return []Record{
		{Key: consumerKey(keyConsumerGroupCurrentAssigment, group, member)},
		{Key: consumerKey(keyConsumerGroupTargetMember, group, member)},
		{Key: consumerKey(keyConsumerGroupMemberMetadata, group, member)},
	}
}

// consumerGroupTombstones delete a consumer group without members.
func consumerGroupTombstones(group string) []Record {
	return []Record{
		{Key: consumerKey(keyConsumerGroupTargetMetadata, group)},
		{Key: consumerKey(keyConsumerGroupMetadata, group)},
	}
}

// appendTopicPartitions encodes s as Kafka's []TopicPartitions: per topic
// id, its partitions, each struct ending with its (empty) tagged fields.
func appendTopicPartitions(b []byte, s partSet) []byte {
	tps := s.sorted()
	var topics [][16]byte
	for _, tp := range tps {
		if n := len(topics); n == 0 || topics[n-1] != tp.topic {
			topics = append(topics, tp.topic)
		}
	}
	b = kbin.AppendCompactArrayLen(b, len(topics))
	i := 0
	for _, id := range topics {
		j := i
		for j < len(tps) && tps[j].topic == id {
			j++
		}
		b = kbin.AppendUuid(b, id)
		b = kbin.AppendCompactArrayLen(b, j-i)
		for _, tp := range tps[i:j] {
			b = kbin.AppendInt32(b, tp.partition)
		}
		b = noTags(b)
		i = j
	}
	return b
}

// consumerRecord is one decoded consumer-group record.
type consumerRecord struct {
	typ       int16
	group     string
	member    string
	tombstone bool
	epoch     int32           // group metadata, target metadata
	meta      *consumerMember // member metadata; current assignment fields too
	target    partSet         // target member
}

var errTruncated = errors.New("truncated consumer group record")

// decodeConsumerRecord parses a consumer-group record of key type typ.
func decodeConsumerRecord(typ int16, r Record) (consumerRecord, error) {
	kr := kbin.Reader{Src: r.Key[2:]}
	d := consumerRecord{typ: typ, group: kr.String()}
	if typ != keyConsumerGroupMetadata && typ != keyConsumerGroupTargetMetadata {
		d.member = kr.String()
	}
	if err := kr.Complete(); err != nil {
		return d, fmt.Errorf("decode consumer group key type %d: %w", typ, err)
	}
	if r.Value == nil {
		d.tombstone = true
		return d, nil
	}
	vr := kbin.Reader{Src: r.Value}
	if v := vr.Int16(); v != 0 {
		return d, fmt.Errorf("consumer group record type %d for group %q: value version %d unsupported", typ, d.group, v)
	}
	switch typ {
	case keyConsumerGroupMetadata, keyConsumerGroupTargetMetadata:
		d.epoch = vr.Int32()
	case keyConsumerGroupMemberMetadata:
		m := &consumerMember{id: d.member}
		m.instanceID = vr.CompactNullableString()
		m.rackID = vr.CompactNullableString()
		m.clientID = vr.CompactString()
		m.clientHost = vr.CompactString()
		n := vr.CompactArrayLen()
		for i := int32(0); i < n && vr.Ok(); i++ {
			m.topics = append(m.topics, vr.CompactString())
		}
		m.regex = stringOr(vr.CompactNullableString(), "")
		m.rebalanceTimeout = vr.Int32()
		m.assignor = stringOr(vr.CompactNullableString(), "")
		d.meta = m
	case keyConsumerGroupTargetMember:
		d.target = readTopicPartitions(&vr)
	case keyConsumerGroupCurrentAssigment:
		m := &consumerMember{id: d.member}
		m.epoch, m.prevEpoch = vr.Int32(), vr.Int32()
		m.state = memberState(vr.Int8())
		m.assigned = readTopicPartitions(&vr)
		m.revoking = readTopicPartitions(&vr)
		d.meta = m
	}
	skipTags(&vr)
	if err := vr.Complete(); err != nil {
		return d, fmt.Errorf("decode consumer group value type %d for group %q: %w", typ, d.group, err)
	}
	if d.meta != nil && d.meta.state > memberUnreleased {
		return d, fmt.Errorf("consumer group %q member %q: unknown member state %d", d.group, d.member, d.meta.state)
	}
	return d, nil
}

func readTopicPartitions(r *kbin.Reader) partSet {
	s := make(partSet)
	n := r.CompactArrayLen()
	for i := int32(0); i < n && r.Ok(); i++ {
		id := r.Uuid()
		np := r.CompactArrayLen()
		for j := int32(0); j < np && r.Ok(); j++ {
			s[tpID{id, r.Int32()}] = struct{}{}
		}
		skipTags(r)
	}
	return s
}

// skipTags reads past a flexible struct's tagged fields.
func skipTags(r *kbin.Reader) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		r.Uvarint() // tag
		r.Span(int(r.Uvarint()))
	}
}

// replayedConsumer is a consumer group rebuilt from its records.
type replayedConsumer struct {
	epoch, assignmentEpoch int32
	members                map[string]*consumerMember
	targets                map[string]partSet
	current                map[string]*consumerMember
}

// applyConsumer folds a consumer-group record into r.
func (r *replayed) applyConsumer(d consumerRecord) {
	if d.typ == keyConsumerGroupPartitionMeta {
		return
	}
	c := r.consumers[d.group]
	if c == nil {
		if d.tombstone {
			return
		}
		c = &replayedConsumer{members: map[string]*consumerMember{}, targets: map[string]partSet{}, current: map[string]*consumerMember{}}
		r.consumers[d.group] = c
	}
	switch d.typ {
	case keyConsumerGroupMetadata:
		if d.tombstone {
			delete(r.consumers, d.group)
			return
		}
		c.epoch = d.epoch
	case keyConsumerGroupTargetMetadata:
		c.assignmentEpoch = d.epoch
	case keyConsumerGroupMemberMetadata:
		if d.tombstone {
			delete(c.members, d.member)
		} else {
			c.members[d.member] = d.meta
		}
	case keyConsumerGroupTargetMember:
		if d.tombstone {
			delete(c.targets, d.member)
		} else {
			c.targets[d.member] = d.target
		}
	case keyConsumerGroupCurrentAssigment:
		if d.tombstone {
			delete(c.current, d.member)
		} else {
			c.current[d.member] = d.meta
		}
	}
}

// restore builds the live consumer group; members without metadata are
// dropped. Sessions restart when the shard schedules them.
func (c *replayedConsumer) restore() *consumerGroup {
	cg := newConsumerGroup()
	cg.epoch, cg.assignmentEpoch = c.epoch, min(c.assignmentEpoch, c.epoch)
	for _, id := range slices.Sorted(maps.Keys(c.members)) {
		m := c.members[id]
		if m.regex != "" {
			re, err := regexp.Compile("^(?:" + m.regex + ")$")
			if err != nil {
				continue // validated when written; skip a member that no longer compiles
			}
			m.re = re
		}
		m.assigned, m.revoking = make(partSet), make(partSet)
		if cur := c.current[id]; cur != nil {
			m.epoch, m.prevEpoch, m.state = cur.epoch, cur.prevEpoch, cur.state
			m.assigned, m.revoking = cur.assigned, cur.revoking
		}
		for _, s := range []partSet{m.assigned, m.revoking} {
			for tp := range s {
				if _, taken := cg.owners[tp]; taken {
					delete(s, tp) // never two owners, even from a damaged log
					continue
				}
				cg.owners[tp] = id
			}
		}
		if t := c.targets[id]; t != nil {
			cg.target[id] = t
		}
		cg.add(m)
	}
	return cg
}
