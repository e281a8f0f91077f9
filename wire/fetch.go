package wire

import (
	"encoding/binary"
	"fmt"
)

// Fetch versions the writer encodes. v12 is the first flexible version;
// v13 replaces topic names with topic ids; v16 adds node endpoints.
const (
	FetchMinVersion = 4
	FetchMaxVersion = 18

	fetchFlexibleVersion = 12
	fetchTopicIDVersion  = 13
	fetchEndpointVersion = 16
)

// FetchAbortedTxn is an aborted transaction overlapping the returned data,
// sent to read_committed consumers.
type FetchAbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// FetchDivergingEpoch tells a follower its log diverged from the leader's
// (tagged field 0, v12+).
type FetchDivergingEpoch struct {
	Epoch     int32
	EndOffset int64
}

// FetchCurrentLeader names the partition's leader when the fetch hit
// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH (tagged field 1, v12+).
type FetchCurrentLeader struct {
	LeaderID    int32
	LeaderEpoch int32
}

// FetchSnapshotID asks a fetcher to load a snapshot (tagged field 2, v12+).
type FetchSnapshotID struct {
	EndOffset int64
	Epoch     int32
}

// FetchPartition is one partition's part of a Fetch response except its
// records. Use NewFetchPartition for Kafka's defaults.
type FetchPartition struct {
	Partition        int32
	ErrorCode        int16
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// AbortedTxns nil encodes as null, as Kafka sends to read_uncommitted
	// fetchers.
	AbortedTxns []FetchAbortedTxn
	// PreferredReadReplica is -1 when the fetcher should stay (v11+).
	PreferredReadReplica int32
	// Tagged fields, sent in v12+ when non-nil.
	DivergingEpoch *FetchDivergingEpoch
	CurrentLeader  *FetchCurrentLeader
	SnapshotID     *FetchSnapshotID
}

// NewFetchPartition returns a FetchPartition for partition with Kafka's
// defaults: offsets -1, no preferred replica, no tagged fields.
func NewFetchPartition(partition int32) FetchPartition {
	return FetchPartition{
		Partition:            partition,
		HighWatermark:        -1,
		LastStableOffset:     -1,
		LogStartOffset:       -1,
		PreferredReadReplica: -1,
	}
}

// FetchNodeEndpoint is a broker address sent with leader changes in v16+
// (top-level tagged field 0).
type FetchNodeEndpoint struct {
	NodeID int32
	Host   string
	Port   int32
	// Rack is "" for null.
	Rack string
}

type fetchTopic struct {
	name      string
	id        [16]byte
	firstPart int
}

type fetchPart struct {
	FetchPartition
	// chunks[firstChunk:firstChunk+nChunks] are the records; null when
	// nullRecords.
	firstChunk, nChunks int
	recordsLen          int
	nullRecords         bool
}

// fetchCut marks where, in the encoded metadata, a partition's record
// chunks go.
type fetchCut struct {
	at         int
	firstChunk int
	nChunks    int
}

// FetchWriter builds a Fetch response as iovecs: encoded metadata pieces
// interleaved with the caller's record slices, which are never copied. Use
// Reset, then AddTopic and AddPartition in response order, then Finish.
// Reusing one FetchWriter makes building a response allocation-free once
// its buffers have grown.
type FetchWriter struct {
	corr      int32
	version   int16
	flexible  bool
	throttle  int32
	errCode   int16
	sessionID int32

	topics    []fetchTopic
	parts     []fetchPart
	chunks    [][]byte
	endpoints []FetchNodeEndpoint

	buf  []byte
	cuts []fetchCut
	iov  [][]byte
	size int
}

// Reset starts a response to the request h. It fails for versions outside
// FetchMinVersion..FetchMaxVersion or a header of another API.
func (w *FetchWriter) Reset(h RequestHeader, throttleMs int32, errCode int16, sessionID int32) error {
	if h.APIKey != 1 || h.APIVersion < FetchMinVersion || h.APIVersion > FetchMaxVersion {
		return fmt.Errorf("fetch writer: api key %d version %d, want key 1 version %d..%d",
			h.APIKey, h.APIVersion, FetchMinVersion, FetchMaxVersion)
	}
	w.corr, w.version = h.CorrelationID, h.APIVersion
	w.flexible = h.APIVersion >= fetchFlexibleVersion
	w.throttle, w.errCode, w.sessionID = throttleMs, errCode, sessionID
	clear(w.chunks)
	clear(w.iov)
	clear(w.topics)
	clear(w.parts)
	w.topics, w.parts, w.chunks = w.topics[:0], w.parts[:0], w.chunks[:0]
	w.endpoints = nil
	w.buf, w.cuts, w.iov, w.size = w.buf[:0], w.cuts[:0], w.iov[:0], 0
	return nil
}

// SetSessionID replaces the session id given to Reset: a fetch that opens a session (KIP-227)
// learns its id only once the response is complete.
func (w *FetchWriter) SetSessionID(id int32) { w.sessionID = id }

// SetThrottle sets the response's throttle_time_ms, known only once the response's size is:
// a client over its fetch quota learns how long the broker holds its connection.
func (w *FetchWriter) SetThrottle(ms int32) { w.throttle = ms }

// AddTopic starts a topic; partitions added next belong to it. Versions up
// to 12 send name, later ones id.
func (w *FetchWriter) AddTopic(name string, id [16]byte) {
	w.topics = append(w.topics, fetchTopic{name: name, id: id, firstPart: len(w.parts)})
}

// AddPartition adds a partition to the last topic added. records are the
// partition's record set in pieces (for example slices of a mapped
// segment); their total length is the records length, and they are sent
// as is. nil records encode as null; a non-nil empty list as empty. The
// slices must stay unchanged until the response is sent.
func (w *FetchWriter) AddPartition(p FetchPartition, records [][]byte) {
	fp := fetchPart{FetchPartition: p, firstChunk: len(w.chunks), nullRecords: records == nil}
	for _, c := range records {
		if len(c) == 0 {
			continue
		}
		w.chunks = append(w.chunks, c)
		fp.nChunks++
		fp.recordsLen += len(c)
	}
	w.parts = append(w.parts, fp)
}

// SetNodeEndpoints sets the brokers sent in v16+ so clients can reach a new
// leader named in CurrentLeader. The slice is kept until Finish.
func (w *FetchWriter) SetNodeEndpoints(eps []FetchNodeEndpoint) { w.endpoints = eps }

// Finish encodes the response and returns it as iovecs: the first holds
// the 4-byte frame size and the response header, record slices appear
// unchanged between metadata pieces, and no slice is empty. The result is
// valid until the next Reset. Size reports the total length.
func (w *FetchWriter) Finish() [][]byte {
	b := w.buf[:0]
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(w.corr))
	if w.flexible {
		b = append(b, 0)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(w.throttle))
	if w.version >= 7 {
		b = binary.BigEndian.AppendUint16(b, uint16(w.errCode))
		b = binary.BigEndian.AppendUint32(b, uint32(w.sessionID))
	}
	b = w.appendArrayLen(b, len(w.topics))
	for ti, t := range w.topics {
		if w.version >= fetchTopicIDVersion {
			b = append(b, t.id[:]...)
		} else {
			b = w.appendString(b, t.name)
		}
		end := len(w.parts)
		if ti+1 < len(w.topics) {
			end = w.topics[ti+1].firstPart
		}
		b = w.appendArrayLen(b, end-t.firstPart)
		for pi := t.firstPart; pi < end; pi++ {
			b = w.appendPartition(b, &w.parts[pi])
		}
		if w.flexible {
			b = append(b, 0)
		}
	}
	if w.flexible {
		b = w.appendTopTags(b)
	}
	w.buf = b
	w.iov = w.iov[:0]
	prev := 0
	for _, c := range w.cuts {
		if c.at > prev {
			w.iov = append(w.iov, b[prev:c.at])
		}
		w.iov = append(w.iov, w.chunks[c.firstChunk:c.firstChunk+c.nChunks]...)
		prev = c.at
	}
	if len(b) > prev {
		w.iov = append(w.iov, b[prev:])
	}
	w.size = len(b)
	for _, c := range w.cuts {
		for _, ch := range w.chunks[c.firstChunk : c.firstChunk+c.nChunks] {
			w.size += len(ch)
		}
	}
	binary.BigEndian.PutUint32(b, uint32(w.size-4))
	return w.iov
}

// Size is the total length of the iovecs Finish returned, frame size
// prefix included.
func (w *FetchWriter) Size() int { return w.size }

func (w *FetchWriter) appendPartition(b []byte, p *fetchPart) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
	b = binary.BigEndian.AppendUint16(b, uint16(p.ErrorCode))
	b = binary.BigEndian.AppendUint64(b, uint64(p.HighWatermark))
	b = binary.BigEndian.AppendUint64(b, uint64(p.LastStableOffset))
	if w.version >= 5 {
		b = binary.BigEndian.AppendUint64(b, uint64(p.LogStartOffset))
	}
	if p.AbortedTxns == nil {
		b = w.appendNullLen(b)
	} else {
		b = w.appendArrayLen(b, len(p.AbortedTxns))
		for _, a := range p.AbortedTxns {
			b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
			b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
			if w.flexible {
				b = append(b, 0)
			}
		}
	}
	if w.version >= 11 {
		b = binary.BigEndian.AppendUint32(b, uint32(p.PreferredReadReplica))
	}
	switch {
	case p.nullRecords:
		b = w.appendNullLen(b)
	case w.flexible:
		b = binary.AppendUvarint(b, uint64(p.recordsLen)+1)
	default:
		b = binary.BigEndian.AppendUint32(b, uint32(p.recordsLen))
	}
	if p.nChunks > 0 {
		w.cuts = append(w.cuts, fetchCut{at: len(b), firstChunk: p.firstChunk, nChunks: p.nChunks})
	}
	if w.flexible {
		b = appendPartitionTags(b, &p.FetchPartition)
	}
	return b
}

// appendPartitionTags appends a partition's tagged fields in tag order.
func appendPartitionTags(b []byte, p *FetchPartition) []byte {
	n := 0
	for _, set := range [...]bool{p.DivergingEpoch != nil, p.CurrentLeader != nil, p.SnapshotID != nil} {
		if set {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	if d := p.DivergingEpoch; d != nil {
		b = append(b, 0, 4+8+1)
		b = binary.BigEndian.AppendUint32(b, uint32(d.Epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(d.EndOffset))
		b = append(b, 0)
	}
	if l := p.CurrentLeader; l != nil {
		b = append(b, 1, 4+4+1)
		b = binary.BigEndian.AppendUint32(b, uint32(l.LeaderID))
		b = binary.BigEndian.AppendUint32(b, uint32(l.LeaderEpoch))
		b = append(b, 0)
	}
	if s := p.SnapshotID; s != nil {
		b = append(b, 2, 8+4+1)
		b = binary.BigEndian.AppendUint64(b, uint64(s.EndOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(s.Epoch))
		b = append(b, 0)
	}
	return b
}

// appendTopTags appends the response's tagged fields: node endpoints in
// v16+ when set.
func (w *FetchWriter) appendTopTags(b []byte) []byte {
	if w.version < fetchEndpointVersion || len(w.endpoints) == 0 {
		return append(b, 0)
	}
	b = append(b, 1, 0)
	sizeAt := len(b)
	b = binary.AppendUvarint(b, uint64(len(w.endpoints))+1)
	for _, e := range w.endpoints {
		b = binary.BigEndian.AppendUint32(b, uint32(e.NodeID))
		b = w.appendString(b, e.Host)
		b = binary.BigEndian.AppendUint32(b, uint32(e.Port))
		if e.Rack == "" {
			b = append(b, 0)
		} else {
			b = w.appendString(b, e.Rack)
		}
		b = append(b, 0)
	}
	// The field's size precedes it; insert the uvarint now that it is known.
	size := len(b) - sizeAt
	var tmp [binary.MaxVarintLen64]byte
	sz := binary.PutUvarint(tmp[:], uint64(size))
	b = append(b, tmp[:sz]...)
	copy(b[sizeAt+sz:], b[sizeAt:sizeAt+size])
	copy(b[sizeAt:], tmp[:sz])
	return b
}

func (w *FetchWriter) appendArrayLen(b []byte, n int) []byte {
	if w.flexible {
		return binary.AppendUvarint(b, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

func (w *FetchWriter) appendNullLen(b []byte) []byte {
	if w.flexible {
		return append(b, 0)
	}
	return binary.BigEndian.AppendUint32(b, 0xFFFFFFFF)
}

func (w *FetchWriter) appendString(b []byte, s string) []byte {
	if w.flexible {
		b = binary.AppendUvarint(b, uint64(len(s))+1)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	}
	return append(b, s...)
}
