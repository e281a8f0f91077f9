package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchCase is one partition of a test Fetch response.
type fetchCase struct {
	p      FetchPartition
	chunks [][]byte
}

type fetchTopicCase struct {
	name  string
	id    [16]byte
	parts []fetchCase
}

// fetchContent builds topics exercising every field: multi-chunk, null and
// empty record sets, aborted transactions, errors and tagged fields.
func fetchContent(t testing.TB) ([]fetchTopicCase, []FetchNodeEndpoint) {
	c := NewCodecs()
	b1 := buildBatch(t, c, plainSpec(CodecNone), testRecords(5, 200))
	b2 := buildBatch(t, c, plainSpec(CodecZstd), testRecords(9, 200))
	b3 := buildBatch(t, c, plainSpec(CodecSnappy), testRecords(2, 3000))
	p0 := NewFetchPartition(0)
	p0.HighWatermark, p0.LastStableOffset, p0.LogStartOffset = 100, 90, 3
	p0.AbortedTxns = []FetchAbortedTxn{{ProducerID: 7, FirstOffset: 12}, {ProducerID: 8, FirstOffset: 40}}
	p1 := NewFetchPartition(1)
	p1.ErrorCode = 6
	p1.CurrentLeader = &FetchCurrentLeader{LeaderID: 2, LeaderEpoch: 9}
	p2 := NewFetchPartition(2)
	p2.HighWatermark, p2.AbortedTxns, p2.PreferredReadReplica = 5, []FetchAbortedTxn{}, 3
	p3 := NewFetchPartition(7)
	p3.HighWatermark = 1 << 40
	p3.DivergingEpoch = &FetchDivergingEpoch{Epoch: 4, EndOffset: 55}
	p3.SnapshotID = &FetchSnapshotID{EndOffset: 66, Epoch: 5}
	topics := []fetchTopicCase{
		{name: "alpha", id: [16]byte{1, 2, 3}, parts: []fetchCase{
			{p0, [][]byte{b1[:10], b1[10:70], {}, b1[70:], b2}},
			{p1, nil},
			{p2, [][]byte{}},
		}},
		{name: "empty-topic", id: [16]byte{9}},
		{name: "beta", id: [16]byte{0xFF, 15: 0xEE}, parts: []fetchCase{{p3, [][]byte{b3}}}},
	}
	eps := []FetchNodeEndpoint{{NodeID: 2, Host: "broker-2.example", Port: 9093, Rack: "r1"}, {NodeID: 3, Host: "b3", Port: 1}}
	return topics, eps
}

// kmsgFetch builds the same response with kmsg for version.
func kmsgFetch(version int16, topics []fetchTopicCase, eps []FetchNodeEndpoint) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version = version
	r.ThrottleMillis, r.ErrorCode, r.SessionID = 25, 0, 1234
	for _, tc := range topics {
		kt := kmsg.NewFetchResponseTopic()
		kt.Topic, kt.TopicID = tc.name, tc.id
		for _, pc := range tc.parts {
			kp := kmsg.NewFetchResponseTopicPartition()
			p := pc.p
			kp.Partition, kp.ErrorCode, kp.HighWatermark = p.Partition, p.ErrorCode, p.HighWatermark
			kp.LastStableOffset, kp.LogStartOffset, kp.PreferredReadReplica = p.LastStableOffset, p.LogStartOffset, p.PreferredReadReplica
			if p.AbortedTxns != nil {
				kp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
				for _, a := range p.AbortedTxns {
					kp.AbortedTransactions = append(kp.AbortedTransactions,
						kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
				}
			}
			if d := p.DivergingEpoch; d != nil {
				kp.DivergingEpoch.Epoch, kp.DivergingEpoch.EndOffset = d.Epoch, d.EndOffset
			}
			if l := p.CurrentLeader; l != nil {
				kp.CurrentLeader.LeaderID, kp.CurrentLeader.LeaderEpoch = l.LeaderID, l.LeaderEpoch
			}
			if s := p.SnapshotID; s != nil {
				kp.SnapshotID.EndOffset, kp.SnapshotID.Epoch = s.EndOffset, s.Epoch
			}
			if pc.chunks != nil {
				kp.RecordBatches = bytes.Join(pc.chunks, nil)
			}
			kt.Partitions = append(kt.Partitions, kp)
		}
		r.Topics = append(r.Topics, kt)
	}
	for _, e := range eps {
		b := kmsg.NewFetchResponseBroker()
		b.NodeID, b.Host, b.Port = e.NodeID, e.Host, e.Port
		if e.Rack != "" {
			b.Rack = kmsg.StringPtr(e.Rack)
		}
		r.Brokers = append(r.Brokers, b)
	}
	return r
}

func writeFetch(t testing.TB, w *FetchWriter, version int16, topics []fetchTopicCase, eps []FetchNodeEndpoint) [][]byte {
	h := RequestHeader{APIKey: 1, APIVersion: version, CorrelationID: 4242, Flexible: version >= 12}
	if err := w.Reset(h, 25, 0, 1234); err != nil {
		t.Fatal(err)
	}
	for _, tc := range topics {
		w.AddTopic(tc.name, tc.id)
		for _, pc := range tc.parts {
			w.AddPartition(pc.p, pc.chunks)
		}
	}
	w.SetNodeEndpoints(eps)
	return w.Finish()
}

// TestFetchWriterMatchesKmsg compares, at every version, the writer's bytes
// with kmsg's encoding of the same response and decodes them with kmsg.
func TestFetchWriterMatchesKmsg(t *testing.T) {
	topics, eps := fetchContent(t)
	var w FetchWriter
	for v := int16(FetchMinVersion); v <= FetchMaxVersion; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			iov := writeFetch(t, &w, v, topics, eps)
			frame := bytes.Join(iov, nil)
			if len(frame) != w.Size() || int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
				t.Fatalf("size prefix %d, frame %d, Size %d", binary.BigEndian.Uint32(frame), len(frame), w.Size())
			}
			if binary.BigEndian.Uint32(frame[4:]) != 4242 {
				t.Fatal("correlation id")
			}
			body := frame[8:]
			if v >= 12 {
				if body[0] != 0 {
					t.Fatal("response header v1 needs empty tags")
				}
				body = body[1:]
			}
			// Node endpoints exist from v16; kmsg would encode the tag at
			// any flexible version, Kafka does not.
			kmsgEps := eps
			if v < fetchEndpointVersion {
				kmsgEps = nil
			}
			want := kmsgFetch(v, topics, kmsgEps).AppendTo(nil)
			if !bytes.Equal(body, want) {
				at := 0
				for at < min(len(body), len(want)) && body[at] == want[at] {
					at++
				}
				t.Fatalf("body differs from kmsg at byte %d (len %d, want %d)", at, len(body), len(want))
			}
			got := kmsg.NewPtrFetchResponse()
			got.Version = v
			if err := got.ReadFrom(body); err != nil {
				t.Fatalf("kmsg decode: %v", err)
			}
			if len(got.Topics) != 3 || got.Topics[0].Partitions[1].RecordBatches != nil ||
				got.Topics[0].Partitions[2].RecordBatches == nil || len(got.Topics[2].Partitions[0].RecordBatches) == 0 {
				t.Fatal("decoded records null/empty distinction lost")
			}
			for i, c := range iov {
				if len(c) == 0 {
					t.Fatalf("iovec %d empty", i)
				}
			}
			for _, tc := range topics {
				for _, pc := range tc.parts {
					for _, ch := range pc.chunks {
						if len(ch) > 0 && !hasIovec(iov, ch) {
							t.Fatal("record chunk copied instead of referenced")
						}
					}
				}
			}
		})
	}
}

// hasIovec reports whether iov holds exactly the memory of ch.
func hasIovec(iov [][]byte, ch []byte) bool {
	for _, v := range iov {
		if len(v) == len(ch) && unsafe.SliceData(v) == unsafe.SliceData(ch) {
			return true
		}
	}
	return false
}

func TestFetchWriterEmptyResponse(t *testing.T) {
	var w FetchWriter
	for _, v := range []int16{4, 7, 12, 18} {
		iov := writeFetch(t, &w, v, nil, nil)
		if len(iov) != 1 {
			t.Fatalf("v%d: %d iovecs for an empty response", v, len(iov))
		}
		got := kmsg.NewPtrFetchResponse()
		got.Version = v
		off := 8
		if v >= 12 {
			off = 9
		}
		if err := got.ReadFrom(iov[0][off:]); err != nil || len(got.Topics) != 0 || got.SessionID != 1234 && v >= 7 {
			t.Fatalf("v%d: %v %+v", v, err, got)
		}
	}
}

// TestFetchWriterSetSessionID: the session id set after Reset is the one encoded.
func TestFetchWriterSetSessionID(t *testing.T) {
	var w FetchWriter
	if err := w.Reset(RequestHeader{APIKey: 1, APIVersion: 18, CorrelationID: 3}, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	w.SetSessionID(98765)
	iov := w.Finish()
	got := kmsg.NewPtrFetchResponse()
	got.Version = 18
	if err := got.ReadFrom(iov[0][9:]); err != nil || got.SessionID != 98765 {
		t.Fatalf("session id %d (err %v); want 98765", got.SessionID, err)
	}
}

func TestFetchWriterRejectsVersions(t *testing.T) {
	var w FetchWriter
	for _, h := range []RequestHeader{{APIKey: 1, APIVersion: 3}, {APIKey: 1, APIVersion: 19}, {APIKey: 0, APIVersion: 9}} {
		if err := w.Reset(h, 0, 0, 0); err == nil {
			t.Fatalf("%+v accepted", h)
		}
	}
}

func TestFetchWriterNoAllocs(t *testing.T) {
	topics, eps := fetchContent(t)
	var w FetchWriter
	writeFetch(t, &w, 16, topics, eps)
	allocs := testing.AllocsPerRun(50, func() { writeFetch(t, &w, 16, topics, eps) })
	if allocs != 0 {
		t.Fatalf("%v allocs per response", allocs)
	}
}

// TestFetchWriterWritev sends the iovecs over a real TCP connection with
// writev (net.Buffers) and decodes what arrives with FrameReader and kmsg.
func TestFetchWriterWritev(t *testing.T) {
	topics, eps := fetchContent(t)
	var w FetchWriter
	iov := writeFetch(t, &w, 16, topics, eps)
	want := bytes.Join(iov, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sent := make(chan error, 1)
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			sent <- err
			return
		}
		defer c.Close()
		bufs := net.Buffers(slices.Clone(iov))
		_, err = bufs.WriteTo(c)
		sent <- err
	}()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	r := NewFrameReader(0, nil)
	var got []byte
	buf := make([]byte, 1000)
	for got == nil {
		n, err := conn.Read(buf)
		if _, ferr := r.Feed(buf[:n], func(f []byte) error {
			got = bytes.Clone(f)
			return nil
		}); ferr != nil {
			t.Fatal(ferr)
		}
		if err != nil {
			break
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("writev: %v", err)
	}
	if !bytes.Equal(got, want[4:]) {
		t.Fatalf("received %d bytes, want %d", len(got), len(want)-4)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	if err := resp.ReadFrom(got[5:]); err != nil || len(resp.Topics) != 3 || len(resp.Brokers) != 2 {
		t.Fatalf("decode: %v", err)
	}
}
