package coord

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/eventloop"
	"ringbroker/internal/testutil"
)

func TestPartitionFor(t *testing.T) {
	tests := []struct {
		group string
		n     int
		want  int32
	}{
		{"", 50, 0},
		{"hello", 50, 99162322 % 50},         // "hello".hashCode() == 99162322
		{"polygenelubricants", 50, 0},        // hashCode() == Integer.MIN_VALUE; Utils.abs maps it to 0
		{"Aa", 7, 2112 % 7},                  // "Aa".hashCode() == 2112
		{"\U0001F600", 50, 1772899 % 50},     // surrogate pair d83d de00
		{"zzzzzzzzzzzzzzzzzzzz", 50, 2 % 50}, // negative hash, abs taken
	}
	for _, tc := range tests {
		if tc.group == "zzzzzzzzzzzzzzzzzzzz" {
			var h int32
			for _, c := range tc.group {
				h = 31*h + c
			}
			if h < 0 {
				h = -h
			}
			tc.want = h % 50
		}
		if got := PartitionFor(tc.group, tc.n); got != tc.want {
			t.Errorf("PartitionFor(%q, %d) = %d; want %d", tc.group, tc.n, got, tc.want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"no shards", func(c *Config) { c.Shards = 0 }},
		{"no partitions", func(c *Config) { c.OffsetsPartitions = 0 }},
		{"negative delay", func(c *Config) { c.InitialRebalanceDelay = -1 }},
		{"inverted session range", func(c *Config) { c.MinSessionTimeout, c.MaxSessionTimeout = time.Minute, time.Second }},
		{"zero group size", func(c *Config) { c.MaxGroupSize = 0 }},
		{"zero retention", func(c *Config) { c.OffsetsRetention = 0 }},
	}
	for _, tc := range tests {
		cfg := testConfig()
		tc.mod(&cfg)
		if c, err := New(cfg, newMemStore(), nil); err == nil {
			c.Close()
			t.Errorf("%s: New succeeded; want an error", tc.name)
		}
	}
	if _, err := New(testConfig(), nil, nil); err == nil {
		t.Error("New without a store succeeded")
	}
}

// stableGroup makes actor "a" (member a-1, generation 1) the only member of
// Stable consumer group g with protocol "range", using JoinGroup v3.
func stableGroup(t *testing.T, d *driver) {
	t.Helper()
	join := joinReq("g", "", 3)
	resp := d.roundTrip(RequestInfo{ClientID: "a"}, join).(*kmsg.JoinGroupResponse)
	if resp.ErrorCode != 0 || resp.MemberID != "a-1" || resp.Generation != 1 {
		t.Fatalf("join: error %s member %q generation %d", errName(resp.ErrorCode), resp.MemberID, resp.Generation)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, "g", "a-1", 1
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: "a-1", MemberAssignment: []byte("A")}}
	if sr := d.roundTrip(RequestInfo{}, sync).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
		t.Fatalf("sync: %s", errName(sr.ErrorCode))
	}
}

func joinReq(group, member string, version int16) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = version
	req.Group, req.MemberID = group, member
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 30000
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMetadata("t0")}}
	return req
}

func TestJoinGroupErrors(t *testing.T) {
	ptr := func(s string) *string { return &s }
	tests := []struct {
		name    string
		mod     func(*kmsg.JoinGroupRequest)
		wCode   *kerr.Error
		wMember string
	}{
		{"empty group id", func(r *kmsg.JoinGroupRequest) { r.Group = "" }, kerr.InvalidGroupID, ""},
		{"session below minimum", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 5999 }, kerr.InvalidSessionTimeout, ""},
		{"session above maximum", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 1800001 }, kerr.InvalidSessionTimeout, ""},
		{"member id for an unknown group", func(r *kmsg.JoinGroupRequest) { r.Group, r.MemberID = "nope", "m-1" }, kerr.UnknownMemberID, "m-1"},
		{"unknown member id", func(r *kmsg.JoinGroupRequest) { r.MemberID = "m-1" }, kerr.UnknownMemberID, "m-1"},
		{"empty protocol type in a new group", func(r *kmsg.JoinGroupRequest) { r.Group, r.ProtocolType = "new", "" }, kerr.InconsistentGroupProtocol, ""},
		{"no protocols in a new group", func(r *kmsg.JoinGroupRequest) { r.Group, r.Protocols = "new", nil }, kerr.InconsistentGroupProtocol, ""},
		{"other protocol type", func(r *kmsg.JoinGroupRequest) { r.ProtocolType = "connect" }, kerr.InconsistentGroupProtocol, ""},
		{"no common protocol", func(r *kmsg.JoinGroupRequest) {
			r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "roundrobin"}}
		}, kerr.InconsistentGroupProtocol, ""},
		{"existing member, other protocol type", func(r *kmsg.JoinGroupRequest) { r.MemberID, r.ProtocolType = "a-1", "connect" }, kerr.InconsistentGroupProtocol, "a-1"},
		{"new dynamic member on v4 needs an id", func(r *kmsg.JoinGroupRequest) { r.Version = 4 }, kerr.MemberIDRequired, "-2"},
		{"static instance unknown with a member id", func(r *kmsg.JoinGroupRequest) {
			r.Version, r.MemberID, r.InstanceID = 5, "a-1", ptr("i")
		}, kerr.UnknownMemberID, "a-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, testConfig())
			stableGroup(t, d)
			req := joinReq("g", "", 3)
			tc.mod(req)
			resp := d.roundTrip(RequestInfo{}, req).(*kmsg.JoinGroupResponse)
			if resp.ErrorCode != tc.wCode.Code || resp.MemberID != tc.wMember {
				t.Errorf("got %s member %q; want %s member %q", errName(resp.ErrorCode), resp.MemberID, tc.wCode.Message, tc.wMember)
			}
			if resp.Generation != -1 || resp.Protocol != nil || resp.LeaderID != "" {
				t.Errorf("error response carries group data: generation %d protocol %v leader %q", resp.Generation, resp.Protocol, resp.LeaderID)
			}
		})
	}
}

func TestJoinGroupMaxSize(t *testing.T) {
	cfg := testConfig()
	cfg.MaxGroupSize = 1
	d := newDriver(t, cfg)
	stableGroup(t, d)
	resp := d.roundTrip(RequestInfo{ClientID: "b"}, joinReq("g", "", 3)).(*kmsg.JoinGroupResponse)
	if resp.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("second member: %s; want GROUP_MAX_SIZE_REACHED", errName(resp.ErrorCode))
	}
}

func TestStaticMemberFencedOnJoin(t *testing.T) {
	d := newDriver(t, testConfig())
	inst := "i"
	req := joinReq("g", "", 5)
	req.InstanceID = &inst
	first := d.roundTrip(RequestInfo{ClientID: "a"}, req).(*kmsg.JoinGroupResponse)
	if first.ErrorCode != 0 {
		t.Fatalf("static join: %s", errName(first.ErrorCode))
	}
	again := joinReq("g", "i-someone-else", 5)
	again.InstanceID = &inst
	resp := d.roundTrip(RequestInfo{}, again).(*kmsg.JoinGroupResponse)
	if resp.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("join with another member id for the instance: %s; want FENCED_INSTANCE_ID", errName(resp.ErrorCode))
	}
}

func TestSyncGroupErrors(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name  string
		mod   func(*kmsg.SyncGroupRequest)
		wCode *kerr.Error
	}{
		{"stale generation", func(r *kmsg.SyncGroupRequest) { r.Generation = 0 }, kerr.IllegalGeneration},
		{"future generation", func(r *kmsg.SyncGroupRequest) { r.Generation = 2 }, kerr.IllegalGeneration},
		{"unknown member", func(r *kmsg.SyncGroupRequest) { r.MemberID = "x" }, kerr.UnknownMemberID},
		{"unknown group", func(r *kmsg.SyncGroupRequest) { r.Group = "nope" }, kerr.UnknownMemberID},
		{"empty group id", func(r *kmsg.SyncGroupRequest) { r.Group = "" }, kerr.InvalidGroupID},
		{"protocol type mismatch", func(r *kmsg.SyncGroupRequest) { r.ProtocolType = str("connect") }, kerr.InconsistentGroupProtocol},
		{"protocol name mismatch", func(r *kmsg.SyncGroupRequest) { r.Protocol = str("roundrobin") }, kerr.InconsistentGroupProtocol},
		{"unknown instance", func(r *kmsg.SyncGroupRequest) { r.InstanceID = str("i") }, kerr.UnknownMemberID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, testConfig())
			stableGroup(t, d)
			req := kmsg.NewPtrSyncGroupRequest()
			req.Version, req.Group, req.MemberID, req.Generation = 5, "g", "a-1", 1
			tc.mod(req)
			resp := d.roundTrip(RequestInfo{}, req).(*kmsg.SyncGroupResponse)
			if resp.ErrorCode != tc.wCode.Code {
				t.Errorf("got %s; want %s", errName(resp.ErrorCode), tc.wCode.Message)
			}
			if resp.MemberAssignment != nil {
				t.Errorf("error response carries assignment %q", resp.MemberAssignment)
			}
		})
	}
}

func TestHeartbeatErrors(t *testing.T) {
	tests := []struct {
		name      string
		rebalance bool // a second member joins first
		mod       func(*kmsg.HeartbeatRequest)
		wCode     *kerr.Error
	}{
		{"ok", false, func(*kmsg.HeartbeatRequest) {}, nil},
		{"during rebalance", true, func(*kmsg.HeartbeatRequest) {}, kerr.RebalanceInProgress},
		{"stale generation during rebalance", true, func(r *kmsg.HeartbeatRequest) { r.Generation = 0 }, kerr.IllegalGeneration},
		{"stale generation", false, func(r *kmsg.HeartbeatRequest) { r.Generation = 0 }, kerr.IllegalGeneration},
		{"unknown member", false, func(r *kmsg.HeartbeatRequest) { r.MemberID = "x" }, kerr.UnknownMemberID},
		{"unknown group", false, func(r *kmsg.HeartbeatRequest) { r.Group = "nope" }, kerr.UnknownMemberID},
		{"empty group id", false, func(r *kmsg.HeartbeatRequest) { r.Group = "" }, kerr.InvalidGroupID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, testConfig())
			stableGroup(t, d)
			if tc.rebalance {
				d.send("b", RequestInfo{ClientID: "b"}, joinReq("g", "", 3))
				d.settle()
			}
			req := kmsg.NewPtrHeartbeatRequest()
			req.Version, req.Group, req.MemberID, req.Generation = 4, "g", "a-1", 1
			tc.mod(req)
			resp := d.roundTrip(RequestInfo{}, req).(*kmsg.HeartbeatResponse)
			if resp.ErrorCode != errCode(tc.wCode) {
				t.Errorf("got %s; want %s", errName(resp.ErrorCode), errName(errCode(tc.wCode)))
			}
		})
	}
}

func TestOffsetCommitErrors(t *testing.T) {
	tests := []struct {
		name  string
		mod   func(*kmsg.OffsetCommitRequest)
		wCode *kerr.Error
	}{
		{"member commit", func(*kmsg.OffsetCommitRequest) {}, nil},
		{"unknown member", func(r *kmsg.OffsetCommitRequest) { r.MemberID = "x" }, kerr.UnknownMemberID},
		{"no member in a non-empty group", func(r *kmsg.OffsetCommitRequest) { r.MemberID, r.Generation = "", -1 }, kerr.UnknownMemberID},
		{"stale generation", func(r *kmsg.OffsetCommitRequest) { r.Generation = 0 }, kerr.IllegalGeneration},
		{"unknown group v8", func(r *kmsg.OffsetCommitRequest) { r.Group, r.Version = "nope", 8 }, kerr.IllegalGeneration},
		{"unknown group v9", func(r *kmsg.OffsetCommitRequest) { r.Group = "nope" }, kerr.GroupIDNotFound},
		{"unknown topic", func(r *kmsg.OffsetCommitRequest) { r.Topics[0].Topic = "missing" }, kerr.UnknownTopicOrPartition},
		{"metadata too large", func(r *kmsg.OffsetCommitRequest) {
			md := string(make([]byte, 4097))
			r.Topics[0].Partitions[0].Metadata = &md
		}, kerr.OffsetMetadataTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.PartitionExists = func(topic string, _ int32) bool { return topic != "missing" }
			d := newDriver(t, cfg)
			stableGroup(t, d)
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version, req.Group, req.MemberID, req.Generation = 9, "g", "a-1", 1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = "t0"
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Offset = 42
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			tc.mod(req)
			resp := d.roundTrip(RequestInfo{}, req).(*kmsg.OffsetCommitResponse)
			if got := resp.Topics[0].Partitions[0].ErrorCode; got != errCode(tc.wCode) {
				t.Errorf("got %s; want %s", errName(got), errName(errCode(tc.wCode)))
			}
		})
	}
}

// blockingStore is a memStore whose Load waits for release.
type blockingStore struct {
	*memStore
	release chan struct{}
}

func (b *blockingStore) Load(p int32, fn func(LoggedRecord) error) error {
	<-b.release
	return b.memStore.Load(p, fn)
}

// newOnePartition starts a coordinator of one __consumer_offsets partition over store, on a
// fake clock, closed when the test ends. No partition is loaded.
func newOnePartition(t *testing.T, store OffsetStore) *GroupCoordinator {
	t.Helper()
	cfg := testConfig()
	cfg.OffsetsPartitions = 1
	cfg.Clock = eventloop.NewManualClock(epoch)
	c, err := New(cfg, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestLoadInProgress checks the answers for groups of a partition that is
// still loading, and that they turn normal once it is loaded.
func TestLoadInProgress(t *testing.T) {
	store := &blockingStore{memStore: newMemStore(), release: make(chan struct{})}
	c := newOnePartition(t, store)
	got := make(chan kmsg.Response, 10)
	respond := func(r kmsg.Response) { got <- r }
	recv := func() kmsg.Response {
		t.Helper()
		select {
		case r := <-got:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no response within 10s")
			return nil
		}
	}
	if err := c.Handle(RequestInfo{}, joinReq("g", "", 3), respond); err != nil {
		t.Fatal(err)
	}
	if r := recv().(*kmsg.JoinGroupResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("before load: %s; want NOT_COORDINATOR", errName(r.ErrorCode))
	}
	loaded := make(chan error, 1)
	if err := c.LoadPartition(0, func(err error) { loaded <- err }); err != nil {
		t.Fatal(err)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID = "g", "m"
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "g"
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 9
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
	for _, tc := range []struct {
		req  kmsg.Request
		code func(kmsg.Response) int16
		want *kerr.Error
	}{
		{joinReq("g", "", 3), func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }, kerr.CoordinatorLoadInProgress},
		{sync, func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode }, kerr.RebalanceInProgress},
		{hb, func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode }, kerr.CoordinatorLoadInProgress},
		{fetch, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode }, kerr.CoordinatorLoadInProgress},
	} {
		if err := c.Handle(RequestInfo{}, tc.req, respond); err != nil {
			t.Fatal(err)
		}
		if code := tc.code(recv()); code != tc.want.Code {
			t.Errorf("%T while loading: %s; want %s", tc.req, errName(code), tc.want.Message)
		}
	}
	list := kmsg.NewPtrListGroupsRequest()
	if err := c.Handle(RequestInfo{}, list, respond); err != nil {
		t.Fatal(err)
	}
	if r := recv().(*kmsg.ListGroupsResponse); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("ListGroups while loading: %s", errName(r.ErrorCode))
	}
	close(store.release)
	if err := <-loaded; err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := c.Handle(RequestInfo{}, joinReq("g", "", 3), respond); err != nil {
		t.Fatal(err)
	}
	if r := recv().(*kmsg.JoinGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("after load: %s", errName(r.ErrorCode))
	}
}

// TestUnloadAndClose checks that parked requests are answered with
// NOT_COORDINATOR when their partition is unloaded or the coordinator
// closes, and that Handle refuses requests after Close.
func TestUnloadAndClose(t *testing.T) {
	for _, how := range []string{"unload", "close"} {
		t.Run(how, func(t *testing.T) {
			d := newDriver(t, testConfig())
			stableGroup(t, d)
			d.send("b", RequestInfo{ClientID: "b"}, joinReq("g", "", 3)) // parked: a must rejoin
			if ev := d.settle(); len(ev) != 0 {
				t.Fatalf("join answered early: %v", ev)
			}
			if how == "unload" {
				if err := d.c.UnloadPartition(PartitionFor("g", d.cfg.OffsetsPartitions)); err != nil {
					t.Fatal(err)
				}
			} else {
				d.c.Close()
			}
			var ev []event
			if how == "unload" {
				ev = d.settle()
			} else {
				d.mu.Lock()
				ev = d.events
				d.mu.Unlock()
			}
			if len(ev) != 1 || ev[0].resp.(*kmsg.JoinGroupResponse).ErrorCode != kerr.NotCoordinator.Code {
				t.Fatalf("parked join after %s: %+v; want one NOT_COORDINATOR", how, ev)
			}
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, "g", "a-1", 1
			if how == "unload" {
				if r := d.roundTrip(RequestInfo{}, hb).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.NotCoordinator.Code {
					t.Fatalf("heartbeat after unload: %s", errName(r.ErrorCode))
				}
				return
			}
			if err := d.c.Handle(RequestInfo{}, hb, func(kmsg.Response) { t.Error("responded after Close") }); !errors.Is(err, ErrClosed) {
				t.Fatalf("Handle after Close: %v; want ErrClosed", err)
			}
		})
	}
}

func TestHandleUnsupported(t *testing.T) {
	d := newDriver(t, testConfig())
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 11
	for _, req := range []kmsg.Request{kmsg.NewPtrProduceRequest(), commit} {
		if err := d.c.Handle(RequestInfo{}, req, func(kmsg.Response) {}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Handle(%T v%d) = %v; want ErrUnsupported", req, req.GetVersion(), err)
		}
	}
}

// TestRecordEncoding pins the exact bytes of the records written to
// __consumer_offsets against Kafka's layout.
func TestRecordEncoding(t *testing.T) {
	rec := offsetCommitRecord("g", topicPartition{"t", 1}, committedOffset{offset: 5, leaderEpoch: 2, metadata: "m", commitTimestamp: 7, expireTimestamp: -1})
	wantKey := "0001" + "0001" + "67" + "0001" + "74" + "00000001"
	wantValue := "0003" + "0000000000000005" + "00000002" + "0001" + "6d" + "0000000000000007"
	if hex.EncodeToString(rec.Key) != wantKey || hex.EncodeToString(rec.Value) != wantValue {
		t.Errorf("offset commit record\n key %x, want %s\n value %x, want %s", rec.Key, wantKey, rec.Value, wantValue)
	}
	expiring := offsetCommitRecord("g", topicPartition{"t", 1}, committedOffset{offset: 5, leaderEpoch: 2, metadata: "m", commitTimestamp: 7, expireTimestamp: 9})
	if want := "0001" + "0000000000000005" + "0001" + "6d" + "0000000000000007" + "0000000000000009"; hex.EncodeToString(expiring.Value) != want {
		t.Errorf("offset commit value with expiry %x; want %s", expiring.Value, want)
	}
	if got, want := hex.EncodeToString(offsetTombstone("g", topicPartition{"t", 1}).Key), wantKey; got != want {
		t.Errorf("tombstone key %s; want %s", got, want)
	}

	g := newGroup("g", 0, 11)
	g.generation, g.protocolType, g.protocol, g.leader = 3, "consumer", "range", "m"
	inst := "i"
	g.add(&member{id: "m", instanceID: &inst, clientID: "c", clientHost: "/h", rebalanceTimeout: 4, sessionTimeout: 5, protocolType: "consumer",
		protocols: []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0xaa}}}}, nil)
	rec = groupMetadataRecord(g, map[string][]byte{"m": {0xbb}})
	if want := "0002" + "0001" + "67"; hex.EncodeToString(rec.Key) != want {
		t.Errorf("group key %x; want %s", rec.Key, want)
	}
	wantValue = "0003" + "0008" + hex.EncodeToString([]byte("consumer")) + "00000003" + "0005" + hex.EncodeToString([]byte("range")) +
		"0001" + "6d" + "000000000000000b" + "00000001" +
		"0001" + "6d" + "0001" + "69" + "0001" + "63" + "0002" + hex.EncodeToString([]byte("/h")) + "00000004" + "00000005" +
		"00000001" + "aa" + "00000001" + "bb"
	if hex.EncodeToString(rec.Value) != wantValue {
		t.Errorf("group value\n %x\nwant\n %s", rec.Value, wantValue)
	}
}

func TestBatchSize(t *testing.T) {
	// One record, 3-byte key, 4-byte value: 61 batch bytes, then the record:
	// length varint (1) + attributes (1) + timestamp delta (1) + offset delta
	// (1) + key length (1) + 3 + value length (1) + 4 + header count (1).
	if got, want := batchSize([]Record{{Key: []byte("abc"), Value: []byte("defg")}}), 61+1+13; got != want {
		t.Errorf("batchSize = %d; want %d", got, want)
	}
	if got, want := batchSize([]Record{{Key: []byte("abc")}}), 61+1+9; got != want {
		t.Errorf("batchSize of a tombstone = %d; want %d", got, want)
	}
}

// TestReplaySkipsBadRecords checks that loading skips undecodable records
// and unknown record types but keeps the rest.
func TestReplaySkipsBadRecords(t *testing.T) {
	store := newMemStore()
	good := offsetCommitRecord("g", topicPartition{"t", 0}, committedOffset{offset: 3, leaderEpoch: -1, expireTimestamp: -1})
	for i, r := range []Record{
		{Key: []byte{0}},
		{Key: []byte{0, 9, 1, 2}, Value: []byte{1}},
		{Key: good.Key, Value: []byte{0, 3, 1}},
		good,
	} {
		store.logs[0] = append(store.logs[0], LoggedRecord{Record: r, Offset: int64(i), ProducerID: -1})
	}
	r, err := replay(store, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.skipped != 3 || r.offsets["g"][topicPartition{"t", 0}].offset != 3 {
		t.Fatalf("skipped %d, offsets %v; want 3 skipped and offset 3", r.skipped, r.offsets)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	g := newGroup("g", 0, 1)
	g.protocolType, g.protocol, g.generation = "consumer", "range", 1
	g.add(&member{id: "m", protocols: []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("x")}}}, nil)
	for _, r := range []Record{
		offsetCommitRecord("g", topicPartition{"t", 0}, committedOffset{offset: 1, leaderEpoch: 2, metadata: "m", expireTimestamp: -1}),
		offsetCommitRecord("g", topicPartition{"t", 0}, committedOffset{offset: 1, expireTimestamp: 5}),
		groupMetadataRecord(g, map[string][]byte{"m": []byte("a")}),
		offsetTombstone("g", topicPartition{"t", 0}),
		{Key: []byte{0, 2}},
	} {
		f.Add(r.Key, r.Value, r.Value == nil)
	}
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		}
		rec := Record{Key: key, Value: value}
		d, err := decodeRecord(rec)
		r := newReplayed()
		r.apply(LoggedRecord{Record: rec, ProducerID: -1})
		if err != nil {
			return
		}
		// A decoded group must be restorable without panicking.
		if d.groupMeta != nil {
			s := &shard{c: &GroupCoordinator{cfg: testConfig()}}
			s.loop, _ = eventloop.New(eventloop.NewManualClock(epoch))
			s.restoreGroup(newGroup(d.group, 0, 0), d.groupMeta)
		}
		// Re-encoding a decoded offset must decode to the same value.
		if d.isOffset && !d.tombstone {
			again, err := decodeRecord(offsetCommitRecord(d.group, d.tp, d.offset))
			if err != nil || again.offset != d.offset {
				t.Fatalf("offset %+v re-encoded to %+v, %v", d.offset, again.offset, err)
			}
		}
	})
}

// TestConcurrentGroups runs many groups on the system clock, members in
// their own goroutines joining, syncing and heartbeating concurrently (for
// the race detector), until every group is Stable with all its members
// holding the assignment their leader computed.
func TestConcurrentGroups(t *testing.T) {
	cfg := testConfig()
	cfg.Shards = 4
	c, err := New(cfg, newMemStore(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	for p := range cfg.OffsetsPartitions {
		wg.Add(1)
		if err := c.LoadPartition(int32(p), func(err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitGroup(t, &wg, 10*time.Second)

	stop := make(chan struct{})
	call := func(req kmsg.Request) kmsg.Response {
		ch := make(chan kmsg.Response, 1)
		if err := c.Handle(RequestInfo{ClientID: "c"}, req, func(r kmsg.Response) { ch <- r }); err != nil {
			t.Error(err)
			return nil
		}
		select {
		case r := <-ch:
			return r
		case <-time.After(60 * time.Second):
			t.Errorf("%T not answered in 60s", req)
			return nil
		}
	}
	const groups, members = 20, 3
	groupName := func(i int) string { return "group-" + string(rune('a'+i)) }
	member := func(group string) {
		defer wg.Done()
		memberID, generation := "", int32(-1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if generation < 0 {
				jr, ok := call(joinReq(group, memberID, 9)).(*kmsg.JoinGroupResponse)
				if !ok {
					return
				}
				memberID = jr.MemberID
				if jr.ErrorCode != 0 {
					continue
				}
				sync := kmsg.NewPtrSyncGroupRequest()
				sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, group, memberID, jr.Generation
				for _, m := range jr.Members {
					sync.GroupAssignment = append(sync.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: []byte(m.MemberID)})
				}
				if sr, ok := call(sync).(*kmsg.SyncGroupResponse); ok && sr.ErrorCode == 0 {
					generation = jr.Generation
				}
				continue
			}
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, group, memberID, generation
			hr, ok := call(hb).(*kmsg.HeartbeatResponse)
			if !ok {
				return
			}
			if hr.ErrorCode != 0 {
				generation = -1
				continue
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	for gi := range groups {
		for range members {
			wg.Add(1)
			go member(groupName(gi))
		}
	}
	defer func() {
		close(stop)
		waitGroup(t, &wg, 30*time.Second)
	}()

	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Version = 5
	for gi := range groups {
		describe.Groups = append(describe.Groups, groupName(gi))
	}
	stable := 0
	testutil.WaitFor(t, 30*time.Second, func() error {
		resp, ok := call(describe).(*kmsg.DescribeGroupsResponse)
		if !ok {
			return nil
		}
		stable = 0
		for _, g := range resp.Groups {
			good := g.State == "Stable" && len(g.Members) == members
			for _, m := range g.Members {
				good = good && string(m.MemberAssignment) == m.MemberID
			}
			if good {
				stable++
			}
		}
		if stable != groups {
			return fmt.Errorf("%d of %d groups stable with all members", stable, groups)
		}
		return nil
	})
}

// TestMetadataPassThrough checks that protocol metadata and assignments of a
// non-consumer protocol reach the leader and members byte for byte.
func TestMetadataPassThrough(t *testing.T) {
	d := newDriver(t, testConfig())
	meta := []byte{0, 1, 2, 0xff, 'x'}
	join := func(member string) *kmsg.JoinGroupRequest {
		r := joinReq("connect-cluster", member, 3)
		r.ProtocolType = "connect"
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "sessioned", Metadata: meta}, {Name: "default", Metadata: []byte("other")}}
		return r
	}
	jr := d.roundTrip(RequestInfo{ClientID: "w"}, join("")).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 || deref(jr.Protocol) != "sessioned" || len(jr.Members) != 1 || !bytes.Equal(jr.Members[0].ProtocolMetadata, meta) {
		t.Fatalf("leader join: error %s protocol %s members %+v", errName(jr.ErrorCode), deref(jr.Protocol), jr.Members)
	}
	assignment := []byte{9, 8, 7, 0}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, "connect-cluster", jr.MemberID, jr.Generation
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: assignment}}
	sr := d.roundTrip(RequestInfo{}, sync).(*kmsg.SyncGroupResponse)
	if sr.ErrorCode != 0 || !bytes.Equal(sr.MemberAssignment, assignment) || deref(sr.ProtocolType) != "connect" {
		t.Fatalf("sync: error %s assignment %x type %s", errName(sr.ErrorCode), sr.MemberAssignment, deref(sr.ProtocolType))
	}
	assignment[0] = 0 // the coordinator must have its own copy
	desc := kmsg.NewPtrDescribeGroupsRequest()
	desc.Groups = []string{"connect-cluster"}
	dr := d.roundTrip(RequestInfo{}, desc).(*kmsg.DescribeGroupsResponse)
	m := dr.Groups[0].Members[0]
	if !bytes.Equal(m.ProtocolMetadata, meta) || !bytes.Equal(m.MemberAssignment, []byte{9, 8, 7, 0}) {
		t.Fatalf("describe: metadata %x assignment %x", m.ProtocolMetadata, m.MemberAssignment)
	}
}

// TestOffsetFetchMultiGroup fetches several groups living on different
// shards in one v8 request.
func TestOffsetFetchMultiGroup(t *testing.T) {
	cfg := testConfig()
	cfg.Shards = 3
	d := newDriver(t, cfg)
	groups := []string{"g0", "g1", "g2", "g3", "g4", "g5"}
	shardsUsed := map[int]bool{}
	for i, g := range groups {
		shardsUsed[int(PartitionFor(g, cfg.OffsetsPartitions))%cfg.Shards] = true
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group = 8, g
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = int64(100 + i)
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		d.roundTrip(RequestInfo{}, req)
	}
	if len(shardsUsed) < 2 {
		t.Fatalf("groups %v all map to one shard; pick others", groups)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	for _, g := range append(groups, "missing") {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
		fetch.Groups = append(fetch.Groups, rg)
	}
	resp := d.roundTrip(RequestInfo{}, fetch).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != len(groups)+1 {
		t.Fatalf("got %d groups; want %d", len(resp.Groups), len(groups)+1)
	}
	for i, g := range resp.Groups {
		want := int64(100 + i)
		if i == len(groups) {
			want = -1
		}
		if g.Group != fetch.Groups[i].Group || g.ErrorCode != 0 || g.Topics[0].Partitions[0].Offset != want {
			t.Errorf("group %d: %s error %s offset %d; want %s offset %d", i, g.Group, errName(g.ErrorCode), g.Topics[0].Partitions[0].Offset, fetch.Groups[i].Group, want)
		}
	}
}
