package coord

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeTopics is a mutable Topics source for tests: every change bumps the
// version, as a new metadata image would.
type fakeTopics struct {
	mu      sync.Mutex
	version int64
	topics  map[string]TopicInfo
}

func newFakeTopics() *fakeTopics { return &fakeTopics{topics: make(map[string]TopicInfo)} }

// set creates or resizes topic name; its id derives from the name.
func (f *fakeTopics) set(name string, partitions int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var id [16]byte
	copy(id[:], name)
	id[15] = 1
	f.topics[name] = TopicInfo{Name: name, ID: id, Partitions: partitions}
	f.version++
}

func (f *fakeTopics) id(name string) [16]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.topics[name].ID
}

// snapshot returns an immutable view, as Config.Topics must.
func (f *fakeTopics) snapshot() Topics {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]TopicInfo, len(f.topics))
	for k, v := range f.topics {
		m[k] = v
	}
	return topicsView{version: f.version, topics: m}
}

type topicsView struct {
	version int64
	topics  map[string]TopicInfo
}

func (v topicsView) Version() int64 { return v.version }

func (v topicsView) ByName(name string) (TopicInfo, bool) { ti, ok := v.topics[name]; return ti, ok }

func (v topicsView) ByID(id [16]byte) (TopicInfo, bool) {
	for _, ti := range v.topics {
		if ti.ID == id {
			return ti, true
		}
	}
	return TopicInfo{}, false
}

func (v topicsView) Names() []string {
	var out []string
	for n := range v.topics {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func consumerDriver(t *testing.T, topics *fakeTopics) *driver {
	cfg := testConfig()
	cfg.Topics = topics.snapshot
	return newDriver(t, cfg)
}

// simMember is a KIP-848 client as the Java consumer behaves: it adopts each
// assignment it receives (revoking what is missing first) and reports what
// it owns in every heartbeat.
type simMember struct {
	id      string
	epoch   int32
	owned   partSet
	topics  []string
	regex   *string
	joined  bool
	fenced  int
	version int16
}

func (m *simMember) request(group string) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = m.version
	req.Group, req.MemberID, req.MemberEpoch = group, m.id, m.epoch
	if !m.joined {
		req.MemberEpoch = 0
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = m.topics
		req.SubscribedTopicRegex = m.regex
		if req.SubscribedTopicNames == nil && m.regex == nil {
			req.SubscribedTopicNames = []string{}
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return req
	}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, tp := range m.owned.sorted() {
		n := len(req.Topics)
		if n == 0 || req.Topics[n-1].TopicID != tp.topic {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.topic})
			n++
		}
		req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, tp.partition)
	}
	return req
}

func (m *simMember) apply(t *testing.T, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	t.Helper()
	switch resp.ErrorCode {
	case 0:
	case kerr.FencedMemberEpoch.Code, kerr.UnknownMemberID.Code:
		m.owned, m.epoch, m.joined = nil, 0, false
		m.fenced++
		return
	default:
		t.Fatalf("member %s heartbeat: %s %s", m.id, errName(resp.ErrorCode), deref(resp.ErrorMessage))
	}
	m.joined = true
	m.epoch = resp.MemberEpoch
	if resp.HeartbeatIntervalMillis <= 0 {
		t.Fatalf("member %s: heartbeat interval %d", m.id, resp.HeartbeatIntervalMillis)
	}
	if resp.Assignment != nil {
		m.owned = make(partSet)
		for _, at := range resp.Assignment.Topics {
			for _, p := range at.Partitions {
				m.owned[tpID{at.TopicID, p}] = struct{}{}
			}
		}
	}
}

// heartbeat sends one heartbeat of m and applies the answer.
func (d *driver) heartbeat(t *testing.T, group string, m *simMember) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	resp := d.roundTrip(RequestInfo{ClientID: "sim", ClientHost: "/127.0.0.1"}, m.request(group)).(*kmsg.ConsumerGroupHeartbeatResponse)
	m.apply(t, resp)
	return resp
}

// checkExclusive fails if two members own one partition.
func checkExclusive(t *testing.T, members []*simMember) {
	t.Helper()
	owner := map[tpID]string{}
	for _, m := range members {
		for tp := range m.owned {
			if o, ok := owner[tp]; ok {
				t.Fatalf("partition %x-%d owned by %s and %s", tp.topic[:4], tp.partition, o, m.id)
			}
			owner[tp] = m.id
		}
	}
}

// converge heartbeats every member in turn until the group is Stable with
// every partition of want owned, checking exclusivity after each heartbeat.
func converge(t *testing.T, d *driver, group string, members []*simMember, want int) {
	t.Helper()
	for round := 0; round < 50; round++ {
		for _, m := range members {
			d.heartbeat(t, group, m)
			checkExclusive(t, members)
		}
		total, lo, hi := 0, 1<<30, 0
		for _, m := range members {
			total += len(m.owned)
			lo, hi = min(lo, len(m.owned)), max(hi, len(m.owned))
		}
		if total == want && hi-lo <= 1 && describeState(t, d, group) == "Stable" {
			return
		}
	}
	t.Fatalf("group %s did not converge: state %s", group, describeState(t, d, group))
}

func describeState(t *testing.T, d *driver, group string) string {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version = 1
	req.Groups = []string{group}
	resp := d.roundTrip(RequestInfo{}, req).(*kmsg.ConsumerGroupDescribeResponse)
	if g := resp.Groups[0]; g.ErrorCode != 0 {
		t.Fatalf("describe %s: %s", group, errName(g.ErrorCode))
	}
	return resp.Groups[0].State
}

func TestConsumerGroupJoinRebalanceLeave(t *testing.T) {
	topics := newFakeTopics()
	topics.set("t", 12)
	d := consumerDriver(t, topics)
	var members []*simMember
	for i := range 3 {
		members = append(members, &simMember{id: fmt.Sprintf("m%d", i), topics: []string{"t"}, version: 1})
		converge(t, d, "g", members, 12)
	}
	for _, m := range members {
		if len(m.owned) != 4 {
			t.Errorf("member %s owns %d partitions; want 4", m.id, len(m.owned))
		}
	}
	// Describe shows epochs, assignor and each member's assignment.
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version = 1
	req.Groups = []string{"g", "missing"}
	resp := d.roundTrip(RequestInfo{}, req).(*kmsg.ConsumerGroupDescribeResponse)
	g := resp.Groups[0]
	if g.State != "Stable" || g.AssignorName != assignorUniform || g.Epoch != g.AssignmentEpoch || len(g.Members) != 3 {
		t.Fatalf("describe: state %s assignor %s epoch %d/%d members %d", g.State, g.AssignorName, g.Epoch, g.AssignmentEpoch, len(g.Members))
	}
	for _, dm := range g.Members {
		if dm.MemberEpoch != g.Epoch || len(dm.Assignment.TopicPartitions) != 1 || dm.Assignment.TopicPartitions[0].Topic != "t" ||
			len(dm.Assignment.TopicPartitions[0].Partitions) != 4 || dm.MemberType != memberTypeConsumer || dm.ClientHost != "/127.0.0.1" {
			t.Errorf("member %s: epoch %d assignment %+v type %d host %s", dm.MemberID, dm.MemberEpoch, dm.Assignment, dm.MemberType, dm.ClientHost)
		}
	}
	if resp.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("describe missing group: %s; want GROUP_ID_NOT_FOUND", errName(resp.Groups[1].ErrorCode))
	}

	// A member leaves: the others take its partitions.
	leave := members[1].request("g")
	leave.MemberEpoch = epochLeave
	lr := d.roundTrip(RequestInfo{}, leave).(*kmsg.ConsumerGroupHeartbeatResponse)
	if lr.ErrorCode != 0 || lr.MemberEpoch != epochLeave {
		t.Fatalf("leave: %s epoch %d", errName(lr.ErrorCode), lr.MemberEpoch)
	}
	members = []*simMember{members[0], members[2]}
	converge(t, d, "g", members, 12)

	// A member that stops heartbeating is removed after the session timeout.
	d.clock.Advance(d.cfg.ConsumerSessionTimeout - time.Second)
	d.heartbeat(t, "g", members[0])
	d.clock.Advance(2 * time.Second)
	d.settle()
	converge(t, d, "g", members[:1], 12)
	if r := d.heartbeat(t, "g", members[1]); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member heartbeat: %s; want UNKNOWN_MEMBER_ID", errName(r.ErrorCode))
	}
	// It rejoins with epoch 0 and gets half again.
	converge(t, d, "g", members, 12)
}

// TestConsumerGroupRandomized drives a group through random joins, leaves,
// session expirations, subscription changes and partition additions, with
// heartbeats in random order, and checks that no partition is ever owned
// by two members and that the group always converges to a balanced, Stable
// assignment of every subscribed partition.
func TestConsumerGroupRandomized(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			topics := newFakeTopics()
			topics.set("a", 7)
			topics.set("b", 5)
			d := consumerDriver(t, topics)
			var members []*simMember
			next := 0
			for step := 0; step < 120; step++ {
				switch r := rng.IntN(20); {
				case r < 3 || len(members) == 0:
					next++
					members = append(members, &simMember{id: fmt.Sprintf("m%d", next), topics: []string{"a", "b"}, version: 1})
				case r < 5 && len(members) > 1:
					i := rng.IntN(len(members))
					req := members[i].request("g")
					req.MemberEpoch = epochLeave
					d.roundTrip(RequestInfo{}, req)
					members = slices.Delete(members, i, i+1)
				case r == 5:
					n := int32(5 + rng.IntN(6))
					topics.set("b", max(n, topics.snapshot().(topicsView).topics["b"].Partitions))
				default:
					m := members[rng.IntN(len(members))]
					d.heartbeat(t, "g", m)
				}
				checkExclusive(t, members)
			}
			want := int(topics.snapshot().(topicsView).topics["a"].Partitions + topics.snapshot().(topicsView).topics["b"].Partitions)
			converge(t, d, "g", members, want)
		})
	}
}

func TestConsumerGroupRegexAndRange(t *testing.T) {
	topics := newFakeTopics()
	topics.set("orders-eu", 4)
	topics.set("orders-us", 4)
	topics.set("other", 4)
	d := consumerDriver(t, topics)
	re := "orders-.*"
	rangeName := assignorRange
	members := []*simMember{{id: "x", regex: &re, version: 1}, {id: "y", regex: &re, version: 1}}
	first := members[0].request("g")
	first.ServerAssignor = &rangeName
	members[0].apply(t, d.roundTrip(RequestInfo{}, first).(*kmsg.ConsumerGroupHeartbeatResponse))
	converge(t, d, "g", members, 8)
	// Range: x gets partitions 0-1 of each topic, y 2-3.
	for _, m := range members {
		for tp := range m.owned {
			if tp.topic == topics.id("other") {
				t.Fatalf("member %s owns a partition of a topic the regex does not match", m.id)
			}
			if (m.id == "x") != (tp.partition < 2) {
				t.Errorf("range assignor gave %s partition %d", m.id, tp.partition)
			}
		}
	}
	// A new matching topic is picked up.
	topics.set("orders-apac", 2)
	converge(t, d, "g", members, 10)
}

func TestConsumerGroupHeartbeatErrors(t *testing.T) {
	topics := newFakeTopics()
	topics.set("t", 3)
	d := consumerDriver(t, topics)
	m := &simMember{id: "m", topics: []string{"t"}, version: 1}
	converge(t, d, "g", []*simMember{m}, 3)

	str := func(s string) *string { return &s }
	bad := "nope"
	tests := []struct {
		name string
		mod  func(r *kmsg.ConsumerGroupHeartbeatRequest)
		want *kerr.Error
	}{
		{"empty group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }, kerr.InvalidRequest},
		{"empty member id v1", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest},
		{"unknown member", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "zz" }, kerr.UnknownMemberID},
		{"fenced epoch", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch += 5 }, kerr.FencedMemberEpoch},
		{"bad epoch", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest},
		{"unsupported assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = &bad }, kerr.UnsupportedAssignor},
		{"bad regex", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = str("(") }, kerr.InvalidRegularExpression},
		{"classic group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "classic" }, kerr.GroupIDNotFound},
		{"join without subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.MemberEpoch, r.RebalanceTimeoutMillis, r.SubscribedTopicNames, r.Topics = 0, 1000, nil, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}, kerr.InvalidRequest},
	}
	join := joinReq("classic", "", 3)
	if r := d.roundTrip(RequestInfo{ClientID: "c"}, join).(*kmsg.JoinGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("classic join: %s", errName(r.ErrorCode))
	}
	for _, tc := range tests {
		req := m.request("g")
		tc.mod(req)
		resp := d.roundTrip(RequestInfo{}, req).(*kmsg.ConsumerGroupHeartbeatResponse)
		if resp.ErrorCode != tc.want.Code {
			t.Errorf("%s: %s; want %s", tc.name, errName(resp.ErrorCode), tc.want.Message)
		}
	}
	// A classic JoinGroup cannot join the consumer group.
	if r := d.roundTrip(RequestInfo{ClientID: "c"}, joinReq("g", "", 4)).(*kmsg.JoinGroupResponse); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("classic join of consumer group: %s; want INCONSISTENT_GROUP_PROTOCOL", errName(r.ErrorCode))
	}
}

func TestConsumerGroupOffsets(t *testing.T) {
	topics := newFakeTopics()
	topics.set("t", 2)
	d := consumerDriver(t, topics)
	m := &simMember{id: "m", topics: []string{"t"}, version: 1}
	converge(t, d, "g", []*simMember{m}, 2)

	commit := func(version int16, member string, epoch int32, byID bool) *kmsg.OffsetCommitResponse {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = version, "g", member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		if byID {
			rt.TopicID = topics.id("t")
		} else {
			rt.Topic = "t"
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 1, 42
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return d.roundTrip(RequestInfo{}, req).(*kmsg.OffsetCommitResponse)
	}
	code := func(r *kmsg.OffsetCommitResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode }
	for _, tc := range []struct {
		name    string
		version int16
		member  string
		epoch   int32
		want    *kerr.Error
	}{
		{"unknown member", 9, "zz", m.epoch, kerr.UnknownMemberID},
		{"no member while members exist", 9, "", -1, kerr.UnknownMemberID},
		{"stale epoch", 9, "m", m.epoch - 1, kerr.StaleMemberEpoch},
		{"future epoch", 9, "m", m.epoch + 1, kerr.FencedMemberEpoch},
		{"old version", 8, "m", m.epoch, kerr.UnsupportedVersion},
	} {
		if got := code(commit(tc.version, tc.member, tc.epoch, false)); got != tc.want.Code {
			t.Errorf("%s: %s; want %s", tc.name, errName(got), tc.want.Message)
		}
	}
	if r := commit(10, "m", m.epoch, true); code(r) != 0 || r.Topics[0].TopicID != topics.id("t") {
		t.Fatalf("v10 commit: %s topic id %x", errName(code(r)), r.Topics[0].TopicID)
	}
	var unknown [16]byte
	unknown[0] = 9
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 10, "g", "m", m.epoch
	req.Topics = []kmsg.OffsetCommitRequestTopic{{TopicID: unknown, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if r := d.roundTrip(RequestInfo{}, req).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("v10 commit of unknown topic id: %s; want UNKNOWN_TOPIC_ID", errName(r.Topics[0].Partitions[0].ErrorCode))
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 10
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group, fg.MemberID, fg.MemberEpoch = "g", kmsg.StringPtr("m"), m.epoch
	fg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{TopicID: topics.id("t"), Partitions: []int32{0, 1}}, {TopicID: unknown, Partitions: []int32{0}}}
	fetch.Groups = append(fetch.Groups, fg)
	fr := d.roundTrip(RequestInfo{}, fetch).(*kmsg.OffsetFetchResponse)
	g := fr.Groups[0]
	if g.ErrorCode != 0 || len(g.Topics) != 2 || g.Topics[0].TopicID != topics.id("t") || g.Topics[0].Partitions[1].Offset != 42 ||
		g.Topics[0].Partitions[0].Offset != -1 || g.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("v10 fetch: %+v", g)
	}
	fetch.Groups[0].MemberEpoch = m.epoch - 1
	if fr := d.roundTrip(RequestInfo{}, fetch).(*kmsg.OffsetFetchResponse); fr.Groups[0].ErrorCode != kerr.StaleMemberEpoch.Code {
		t.Errorf("fetch with stale epoch: %s; want STALE_MEMBER_EPOCH", errName(fr.Groups[0].ErrorCode))
	}

	// ListGroups filters by type and by the consumer group's state.
	list := kmsg.NewPtrListGroupsRequest()
	list.Version = 5
	list.TypesFilter = []string{"Consumer"}
	list.StatesFilter = []string{"stable"}
	lr := d.roundTrip(RequestInfo{}, list).(*kmsg.ListGroupsResponse)
	if len(lr.Groups) != 1 || lr.Groups[0].Group != "g" || lr.Groups[0].GroupType != "consumer" || lr.Groups[0].GroupState != "Stable" || lr.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("list consumer groups: %+v", lr.Groups)
	}
	list.TypesFilter = []string{"classic"}
	if lr := d.roundTrip(RequestInfo{}, list).(*kmsg.ListGroupsResponse); len(lr.Groups) != 0 {
		t.Fatalf("list classic groups: %+v", lr.Groups)
	}
	// DescribeGroups treats a consumer group as not found, like Kafka.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 6, []string{"g"}
	if r := d.roundTrip(RequestInfo{}, dg).(*kmsg.DescribeGroupsResponse); r.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("DescribeGroups of a consumer group: %s", errName(r.Groups[0].ErrorCode))
	}
	// Once empty, the group keeps its offsets and a classic member may join.
	leave := m.request("g")
	leave.MemberEpoch = epochLeave
	d.roundTrip(RequestInfo{}, leave)
	if r := d.roundTrip(RequestInfo{ClientID: "c"}, joinReq("g", "", 3)).(*kmsg.JoinGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("classic join of empty consumer group: %s", errName(r.ErrorCode))
	}
}

// TestConsumerGroupSurvivesRestart checks that a consumer group's epochs,
// subscriptions and assignments are written to __consumer_offsets in
// Kafka's record types and reloaded: after a coordinator restart the members
// go on heartbeating with their epochs, without being fenced or rebalanced.
func TestConsumerGroupSurvivesRestart(t *testing.T) {
	topics := newFakeTopics()
	topics.set("t", 6)
	d := consumerDriver(t, topics)
	re := "t"
	members := []*simMember{{id: "a", topics: []string{"t"}, version: 1}, {id: "b", regex: &re, version: 1}}
	converge(t, d, "g", members, 6)
	before := map[string]partSet{}
	for _, m := range members {
		before[m.id] = m.owned
	}
	epoch := members[0].epoch

	var types []int16
	for _, r := range d.store.records(PartitionFor("g", d.cfg.OffsetsPartitions)) {
		types = append(types, int16(r.Key[0])<<8|int16(r.Key[1]))
	}
	for _, want := range []int16{keyConsumerGroupMetadata, keyConsumerGroupMemberMetadata, keyConsumerGroupTargetMetadata,
		keyConsumerGroupTargetMember, keyConsumerGroupCurrentAssigment} {
		if !slices.Contains(types, want) {
			t.Errorf("no record of key type %d written; types %v", want, types)
		}
	}

	d.restart()
	for _, m := range members {
		r := d.heartbeat(t, "g", m)
		if r.ErrorCode != 0 || r.MemberEpoch != epoch || !m.owned.equal(before[m.id]) || m.fenced != 0 {
			t.Fatalf("after restart %s: error %s epoch %d (want %d) owned %v (want %v)", m.id, errName(r.ErrorCode), r.MemberEpoch, epoch, m.owned, before[m.id])
		}
	}
	if s := describeState(t, d, "g"); s != "Stable" {
		t.Fatalf("after restart the group is %s; want Stable", s)
	}
	// A member leaving after the restart is written too: the next restart
	// loads one member owning everything.
	leave := members[1].request("g")
	leave.MemberEpoch = epochLeave
	d.roundTrip(RequestInfo{}, leave)
	converge(t, d, "g", members[:1], 6)
	d.restart()
	r := d.heartbeat(t, "g", members[0])
	if r.ErrorCode != 0 || len(members[0].owned) != 6 {
		t.Fatalf("after second restart: %s, owns %d", errName(r.ErrorCode), len(members[0].owned))
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"g"}
	if g := d.roundTrip(RequestInfo{}, req).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]; len(g.Members) != 1 {
		t.Fatalf("after second restart the group has %d members; want 1", len(g.Members))
	}
}

func TestConsumerRecordRoundTrip(t *testing.T) {
	var id [16]byte
	id[3] = 7
	inst, rack := "i", "r"
	m := &consumerMember{id: "m", instanceID: &inst, rackID: &rack, clientID: "c", clientHost: "/h", topics: []string{"a", "b"},
		regex: "x.*", rebalanceTimeout: 3000, assignor: "range", epoch: 5, prevEpoch: 4, state: memberUnrevoked,
		assigned: partSet{{id, 1}: {}, {id, 2}: {}}, revoking: partSet{{id, 3}: {}}}
	for _, rec := range []Record{memberMetadataRecord("g", m), currentAssignmentRecord("g", m), targetMemberRecord("g", "m", m.assigned),
		groupEpochRecord("g", 9), targetMetadataRecord("g", 9)} {
		d, err := decodeRecord(rec)
		if err != nil || d.consumer == nil || d.group != "g" {
			t.Fatalf("decode %x: %v", rec.Key, err)
		}
		c := d.consumer
		switch c.typ {
		case keyConsumerGroupMemberMetadata:
			got := c.meta
			if *got.instanceID != inst || *got.rackID != rack || got.clientID != "c" || got.clientHost != "/h" || !slices.Equal(got.topics, m.topics) ||
				got.regex != m.regex || got.rebalanceTimeout != 3000 || got.assignor != "range" {
				t.Errorf("member metadata round trip: %+v", got)
			}
		case keyConsumerGroupCurrentAssigment:
			got := c.meta
			if got.epoch != 5 || got.prevEpoch != 4 || got.state != memberUnrevoked || !got.assigned.equal(m.assigned) || !got.revoking.equal(m.revoking) {
				t.Errorf("current assignment round trip: %+v", got)
			}
		case keyConsumerGroupTargetMember:
			if !c.target.equal(m.assigned) || c.member != "m" {
				t.Errorf("target round trip: %v", c.target)
			}
		default:
			if c.epoch != 9 {
				t.Errorf("type %d epoch %d; want 9", c.typ, c.epoch)
			}
		}
		// Truncated values are errors, never panics.
		for n := range len(rec.Value) {
			if _, err := decodeRecord(Record{Key: rec.Key, Value: rec.Value[:n]}); err == nil {
				t.Errorf("type %d value truncated to %d bytes decoded without error", c.typ, n)
			}
		}
	}
}
