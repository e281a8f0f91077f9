package coord

import (
	"cmp"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/eventloop"
	"ringbroker/internal/testutil"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of coord/testdata scenarios")

// epoch is the fake clock's start.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// memStore is an in-memory OffsetStore: a transport-level fake of the
// __consumer_offsets log, where an entry's offset is its index. Appends
// complete synchronously unless held.
type memStore struct {
	mu    sync.Mutex
	logs  map[int32][]LoggedRecord
	fail  func(p int32, recs []Record) error
	hold  bool
	held  []func()
	loads int
}

func newMemStore() *memStore { return &memStore{logs: make(map[int32][]LoggedRecord)} }

func (m *memStore) Append(p int32, producerID int64, _ int16, recs []Record, done func(int64, error)) {
	m.mu.Lock()
	if m.hold {
		m.held = append(m.held, func() { m.finish(p, producerID, recs, done) })
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	m.finish(p, producerID, recs, done)
}

func (m *memStore) finish(p int32, producerID int64, recs []Record, done func(int64, error)) {
	m.mu.Lock()
	var err error
	if m.fail != nil {
		err = m.fail(p, recs)
	}
	base := int64(len(m.logs[p]))
	if err == nil {
		for i, r := range recs {
			m.logs[p] = append(m.logs[p], LoggedRecord{Record: r, Offset: base + int64(i), ProducerID: producerID})
		}
	}
	m.mu.Unlock()
	done(base, err)
}

// appendMarker writes a transaction marker of producerID to partition p and
// returns its offset.
func (m *memStore) appendMarker(p int32, producerID int64, commit bool) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	mk := AbortMarker
	if commit {
		mk = CommitMarker
	}
	off := int64(len(m.logs[p]))
	m.logs[p] = append(m.logs[p], LoggedRecord{Offset: off, ProducerID: producerID, Marker: mk})
	return off
}

func (m *memStore) Load(p int32, fn func(LoggedRecord) error) error {
	m.mu.Lock()
	recs := slices.Clone(m.logs[p])
	m.loads++
	m.mu.Unlock()
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// release completes the held appends and stops holding.
func (m *memStore) release() {
	m.mu.Lock()
	held := m.held
	m.held, m.hold = nil, false
	m.mu.Unlock()
	for _, f := range held {
		f()
	}
}

func (m *memStore) heldCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.held)
}

// records returns the records of partition p, without markers.
func (m *memStore) records(p int32) []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Record
	for _, e := range m.logs[p] {
		if e.Marker == NoMarker {
			out = append(out, e.Record)
		}
	}
	return out
}

// entries returns the records and markers of partition p.
func (m *memStore) entries(p int32) []LoggedRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.logs[p])
}

// testConfig is the configuration tests start from: Kafka's defaults with
// no initial rebalance delay, two shards and a deterministic member id
// source.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Shards = 2
	cfg.InitialRebalanceDelay = 0
	return cfg
}

// event is one response delivered by the coordinator.
type event struct {
	actor string
	resp  kmsg.Response
}

// driver runs a coordinator on a fake clock and an in-memory store and
// collects its responses.
type driver struct {
	t     testing.TB
	clock *eventloop.ManualClock
	store *memStore
	cfg   Config
	c     *GroupCoordinator
	ids   int

	mu     sync.Mutex
	events []event
}

func newDriver(t testing.TB, cfg Config) *driver {
	d := &driver{t: t, clock: eventloop.NewManualClock(epoch), store: newMemStore()}
	d.start(cfg)
	t.Cleanup(func() { d.c.Close() })
	return d
}

// start (re)creates the coordinator over the driver's store and loads every
// partition.
func (d *driver) start(cfg Config) {
	d.t.Helper()
	cfg.Clock = d.clock
	var idMu sync.Mutex
	cfg.NewUUID = func() string {
		idMu.Lock()
		defer idMu.Unlock()
		d.ids++
		return strconv.Itoa(d.ids)
	}
	c, err := New(cfg, d.store, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	d.c, d.cfg = c, cfg
	for p := range cfg.OffsetsPartitions {
		d.load(int32(p))
	}
}

func (d *driver) load(p int32) {
	d.t.Helper()
	done := make(chan error, 1)
	if err := d.c.LoadPartition(p, func(err error) { done <- err }); err != nil {
		d.t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			d.t.Fatalf("load partition %d: %v", p, err)
		}
	case <-time.After(10 * time.Second):
		d.t.Fatalf("partition %d did not load within 10s", p)
	}
}

// restart closes the coordinator and starts a new one over the same store,
// as after a broker restart or a coordinator move.
func (d *driver) restart() {
	d.c.Close()
	d.start(d.cfg)
}

func (d *driver) send(actor string, info RequestInfo, req kmsg.Request) {
	d.t.Helper()
	err := d.c.Handle(info, req, func(resp kmsg.Response) {
		// Every response must be of the request's version and encodable.
		if resp.GetVersion() != req.GetVersion() || resp.Key() != req.Key() {
			d.t.Errorf("%T v%d answered with %T v%d", req, req.GetVersion(), resp, resp.GetVersion())
		}
		var decoded = req.ResponseKind()
		if err := decoded.ReadFrom(resp.AppendTo(nil)); err != nil {
			d.t.Errorf("%T v%d does not round-trip: %v", resp, resp.GetVersion(), err)
		}
		d.mu.Lock()
		d.events = append(d.events, event{actor, resp})
		d.mu.Unlock()
	})
	if err != nil {
		d.t.Fatalf("Handle(%T): %v", req, err)
	}
}

// settle waits until every shard has processed everything queued, fired its
// due timers and has no store append completion outstanding, then returns
// the responses delivered since the last settle.
func (d *driver) settle() []event {
	d.t.Helper()
	var wg sync.WaitGroup
	for _, s := range d.c.shards {
		wg.Add(1)
		var barrier func(*shard)
		barrier = func(s *shard) {
			s.loop.RunDue()
			if len(s.appends) > d.store.heldCount() {
				s.push(barrier) // completions are queued behind us
				return
			}
			wg.Done()
		}
		s.push(barrier)
	}
	waitGroup(d.t, &wg, 10*time.Second)
	d.mu.Lock()
	defer d.mu.Unlock()
	ev := d.events
	d.events = nil
	return ev
}

// waitGroup waits for wg for at most limit.
func waitGroup(t testing.TB, wg *sync.WaitGroup, limit time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("coordinator did not settle within %v", limit)
	}
}

// roundTrip sends one request and returns its response after settling.
func (d *driver) roundTrip(info RequestInfo, req kmsg.Request) kmsg.Response {
	d.t.Helper()
	d.send("", info, req)
	ev := d.settle()
	if len(ev) != 1 {
		d.t.Fatalf("%T: got %d responses, want 1", req, len(ev))
	}
	return ev[0].resp
}

// actor is a scripted group member.
type actor struct {
	name       string
	group      string
	memberID   string
	generation int32
	instanceID *string
	version    int16
	session    int32
	rebalance  int32
	protoType  string
	protos     []kmsg.JoinGroupRequestProtocol
}

// scenario runs one testdata script.
type scenario struct {
	t      *testing.T
	d      *driver
	actors map[string]*actor
}

func (sc *scenario) actor(name string) *actor {
	a := sc.actors[name]
	if a == nil {
		a = &actor{name: name, group: "g", version: 9, session: 10000, rebalance: 30000, protoType: "consumer", generation: -1}
		a.protos = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMetadata("t0")}}
		sc.actors[name] = a
	}
	return a
}

func consumerMetadata(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 0
	m.Topics = topics
	return m.AppendTo(nil)
}

// args are a command's arguments: key=value pairs and bare words.
type args struct {
	kv    map[string]string
	words []string
}

func parseArgs(fields []string) args {
	a := args{kv: map[string]string{}}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			a.kv[k] = v
		} else {
			a.words = append(a.words, f)
		}
	}
	return a
}

func (a args) int(t *testing.T, key string, def int64) int64 {
	v, ok := a.kv[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("argument %s=%q: %v", key, v, err)
	}
	return n
}

func (a args) has(word string) bool { return slices.Contains(a.words, word) }

// run executes one command line and returns its output lines: the
// responses delivered until the coordinator settled, as "actor: Response
// ...". Commands:
//
//	config [shards= partitions= initial-delay=ms max-size= max-batch=]  restart with settings
//	join <actor>... [v= group= session= rebalance= instance= member=<id>|none type= topics= protos=name:meta,...] [oversized]
//	sync <actor> [v= gen= assign=<actor>:<bytes>,...]
//	heartbeat <actor>... [v= gen= member=]
//	leave <actor>... [v=] [by-instance]
//	commit <actor>|- <topic>:<partition>@<offset>... [v= group= gen= member= meta=]
//	txn-commit <actor>|- <topic>:<partition>@<offset>... pid= [epoch= v= group= gen= member= instance= meta=]
//	end-txn pid= commit|abort [group=]  a marker on the group's partition, then CompleteTransaction
//	fetch [group=] [<topic>:<partition>...] [stable] [v=]
//	describe <group>... [v=] | list [states=] | delete <group>... | offset-delete [group=] <topic>:<partition>...
//	advance <duration> | restart | hold-store | release-store | fail-store <ERROR>|off | log [group=]
//
// Actors remember their member id and generation from JoinGroup responses.
func (sc *scenario) run(line string) []string {
	t := sc.t
	fields := strings.Fields(line)
	cmd, a := fields[0], parseArgs(fields[1:])
	d := sc.d
	switch cmd {
	case "config":
		cfg := testConfig()
		cfg.Shards = int(a.int(t, "shards", int64(cfg.Shards)))
		cfg.OffsetsPartitions = int(a.int(t, "partitions", int64(cfg.OffsetsPartitions)))
		cfg.InitialRebalanceDelay = time.Duration(a.int(t, "initial-delay", 0)) * time.Millisecond
		cfg.MaxGroupSize = int(a.int(t, "max-size", int64(cfg.MaxGroupSize)))
		cfg.MaxBatchBytes = int(a.int(t, "max-batch", int64(cfg.MaxBatchBytes)))
		d.c.Close()
		d.start(cfg)
		return nil
	case "join":
		// Several actors join one after the other, each after the previous
		// join was processed, so that the outcome does not depend on how
		// the shard batches its queue.
		var out []string
		for _, name := range a.words {
			if name == "oversized" {
				continue
			}
			act := sc.actor(name)
			act.apply(t, a)
			sc.join(act, a)
			for _, ev := range d.settle() {
				out = append(out, sc.format(ev)...)
			}
		}
		return out
	case "sync":
		act := sc.actor(a.words[0])
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = int16(a.int(t, "v", 5))
		req.Group, req.MemberID, req.InstanceID = act.group, act.memberID, act.instanceID
		req.Generation = int32(a.int(t, "gen", int64(act.generation)))
		if spec, ok := a.kv["assign"]; ok {
			for _, part := range strings.Split(spec, ",") {
				who, what, _ := strings.Cut(part, ":")
				ga := kmsg.NewSyncGroupRequestGroupAssignment()
				ga.MemberID = sc.actor(who).memberID
				ga.MemberAssignment = []byte(what)
				req.GroupAssignment = append(req.GroupAssignment, ga)
			}
		}
		d.send(act.name, RequestInfo{ClientID: act.name}, req)
	case "heartbeat":
		for _, name := range a.words {
			act := sc.actor(name)
			req := kmsg.NewPtrHeartbeatRequest()
			req.Version = int16(a.int(t, "v", 4))
			req.Group, req.MemberID, req.InstanceID = act.group, act.memberID, act.instanceID
			req.MemberID = cmp.Or(a.kv["member"], req.MemberID)
			req.Generation = int32(a.int(t, "gen", int64(act.generation)))
			d.send(act.name, RequestInfo{ClientID: act.name}, req)
		}
	case "leave":
		// leave a b [v=N]: one request per actor before v3, else one batch.
		v := int16(a.int(t, "v", 5))
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version = v
		for _, name := range a.words {
			if name == "by-instance" {
				continue
			}
			act := sc.actor(name)
			req.Group = act.group
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID, lm.InstanceID = act.memberID, act.instanceID
			if a.has("by-instance") {
				lm.MemberID = ""
			}
			req.Members = append(req.Members, lm)
			if v < 3 {
				one := kmsg.NewPtrLeaveGroupRequest()
				one.Version, one.Group, one.MemberID = v, act.group, act.memberID
				d.send(act.name, RequestInfo{ClientID: act.name}, one)
			}
		}
		if v >= 3 {
			d.send(a.words[0], RequestInfo{}, req)
		}
	case "commit":
		// commit <actor|-> topic:partition@offset... [gen=] [member=] [meta=] [v=]
		name := a.words[0]
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = int16(a.int(t, "v", 9))
		req.Group = a.kv["group"]
		if name != "-" {
			act := sc.actor(name)
			req.Group, req.MemberID, req.InstanceID = act.group, act.memberID, act.instanceID
			req.Generation = act.generation
		} else if req.Group == "" {
			req.Group = "g"
		}
		req.Generation = int32(a.int(t, "gen", int64(req.Generation)))
		if m, ok := a.kv["member"]; ok {
			req.MemberID = m
		}
		for _, specs := range parseOffsetSpecs(t, a.words[1:]) {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = specs[0].topic
			for _, sp := range specs {
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset = sp.partition, sp.offset
				if md, ok := a.kv["meta"]; ok {
					rp.Metadata = &md
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		d.send(name, RequestInfo{ClientID: name}, req)
	case "txn-commit":
		sc.txnCommit(a)
	case "end-txn":
		p := PartitionFor(cmp.Or(a.kv["group"], "g"), d.cfg.OffsetsPartitions)
		pid := a.int(t, "pid", -1)
		off := d.store.appendMarker(p, pid, a.has("commit"))
		if err := d.c.CompleteTransaction(p, pid, a.has("commit"), off); err != nil {
			t.Fatalf("complete transaction: %v", err)
		}
	case "fetch":
		// fetch [group=g] [t:p ...] [stable] [v=]
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = int16(a.int(t, "v", 9))
		req.RequireStable = a.has("stable")
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = cmp.Or(a.kv["group"], "g")
		for _, w := range a.words {
			if w == "stable" {
				continue
			}
			topic, p := splitTP(t, w)
			i := slices.IndexFunc(rg.Topics, func(rt kmsg.OffsetFetchRequestGroupTopic) bool { return rt.Topic == topic })
			if i < 0 {
				rt := kmsg.NewOffsetFetchRequestGroupTopic()
				rt.Topic = topic
				rg.Topics = append(rg.Topics, rt)
				i = len(rg.Topics) - 1
			}
			rg.Topics[i].Partitions = append(rg.Topics[i].Partitions, p)
		}
		if req.Version >= 8 {
			req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
		} else {
			req.Group = rg.Group
			for _, rt := range rg.Topics {
				req.Topics = append(req.Topics, kmsg.OffsetFetchRequestTopic{Topic: rt.Topic, Partitions: rt.Partitions})
			}
		}
		d.send("-", RequestInfo{}, req)
	case "describe":
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version = int16(a.int(t, "v", 5))
		req.Groups = a.words
		d.send("-", RequestInfo{}, req)
	case "list":
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 5
		if s, ok := a.kv["states"]; ok {
			req.StatesFilter = strings.Split(s, ",")
		}
		d.send("-", RequestInfo{}, req)
	case "delete":
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version = 2
		req.Groups = a.words
		d.send("-", RequestInfo{}, req)
	case "offset-delete":
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = cmp.Or(a.kv["group"], "g")
		for _, w := range a.words {
			topic, p := splitTP(t, w)
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = topic
			rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: p}}
			req.Topics = append(req.Topics, rt)
		}
		d.send("-", RequestInfo{}, req)
	case "advance":
		dur, err := time.ParseDuration(a.words[0])
		if err != nil {
			t.Fatalf("advance %q: %v", a.words[0], err)
		}
		d.clock.Advance(dur)
	case "restart":
		d.settle()
		d.restart()
		return nil
	case "hold-store":
		d.store.mu.Lock()
		d.store.hold = true
		d.store.mu.Unlock()
	case "release-store":
		d.store.release()
	case "fail-store":
		code := a.words[0]
		if code == "off" {
			d.store.mu.Lock()
			d.store.fail = nil
			d.store.mu.Unlock()
			break
		}
		ke := errorByName(t, code)
		d.store.mu.Lock()
		d.store.fail = func(int32, []Record) error { return fmt.Errorf("injected: %w", ke) }
		d.store.mu.Unlock()
	case "log":
		// log: print the __consumer_offsets records of group g's partition.
		g := cmp.Or(a.kv["group"], "g")
		return formatLog(t, d.store.entries(PartitionFor(g, d.cfg.OffsetsPartitions)))
	default:
		t.Fatalf("unknown command %q", cmd)
	}
	var out []string
	for _, ev := range d.settle() {
		out = append(out, sc.format(ev)...)
	}
	return out
}

// txnCommit sends a TxnOffsetCommit: txn-commit <actor>|- t:p@offset... pid= [epoch=] [v=]
// [group=] [gen=] [member=] [instance=] [meta=]. An actor's member id and
// generation are sent unless overridden; "-" sends none.
func (sc *scenario) txnCommit(a args) {
	t := sc.t
	name := a.words[0]
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = int16(a.int(t, "v", 4))
	req.TransactionalID = "txn-" + name
	req.ProducerID = a.int(t, "pid", -1)
	req.ProducerEpoch = int16(a.int(t, "epoch", 0))
	req.Group = cmp.Or(a.kv["group"], "g")
	if name != "-" {
		act := sc.actor(name)
		req.Group, req.MemberID, req.InstanceID, req.Generation = act.group, act.memberID, act.instanceID, act.generation
	}
	req.Generation = int32(a.int(t, "gen", int64(req.Generation)))
	if m, ok := a.kv["member"]; ok {
		req.MemberID = m
	}
	if v, ok := a.kv["instance"]; ok {
		req.InstanceID = &v
	}
	for _, specs := range parseOffsetSpecs(t, a.words[1:]) {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = specs[0].topic
		for _, sp := range specs {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = sp.partition, sp.offset
			if md, ok := a.kv["meta"]; ok {
				rp.Metadata = &md
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	sc.d.send(name, RequestInfo{ClientID: name}, req)
}

// offsetSpec is one topic:partition@offset argument of commit and txn-commit.
type offsetSpec struct {
	topic     string
	partition int32
	offset    int64
}

// parseOffsetSpecs parses topic:partition@offset arguments, grouped by topic in the order the
// topics first appear.
func parseOffsetSpecs(t *testing.T, args []string) [][]offsetSpec {
	var out [][]offsetSpec
	for _, arg := range args {
		tpart, off, _ := strings.Cut(arg, "@")
		topic, p := splitTP(t, tpart)
		n, err := strconv.ParseInt(off, 10, 64)
		if err != nil {
			t.Fatalf("offset argument %q: %v", arg, err)
		}
		sp := offsetSpec{topic, p, n}
		if i := slices.IndexFunc(out, func(g []offsetSpec) bool { return g[0].topic == topic }); i >= 0 {
			out[i] = append(out[i], sp)
		} else {
			out = append(out, []offsetSpec{sp})
		}
	}
	return out
}

func errorByName(t *testing.T, name string) *kerr.Error {
	for code := int16(-1); code < 200; code++ {
		if e := kerr.TypedErrorForCode(code); e != nil && e.Message == name {
			return e
		}
	}
	t.Fatalf("unknown Kafka error %q", name)
	return nil
}

func splitTP(t *testing.T, s string) (string, int32) {
	topic, p, ok := strings.Cut(s, ":")
	n, err := strconv.Atoi(p)
	if !ok || err != nil {
		t.Fatalf("topic partition %q: want topic:partition", s)
	}
	return topic, int32(n)
}

// apply sets actor options from join arguments.
func (act *actor) apply(t *testing.T, a args) {
	act.group = cmp.Or(a.kv["group"], act.group)
	act.version = int16(a.int(t, "v", int64(act.version)))
	act.session = int32(a.int(t, "session", int64(act.session)))
	act.rebalance = int32(a.int(t, "rebalance", int64(act.rebalance)))
	if v, ok := a.kv["instance"]; ok {
		act.instanceID = &v
	}
	if v, ok := a.kv["type"]; ok {
		act.protoType = v
	}
	if v, ok := a.kv["member"]; ok {
		act.memberID = v
		if v == "none" {
			act.memberID = ""
		}
	}
	if v, ok := a.kv["topics"]; ok {
		act.protos = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMetadata(strings.Split(v, ",")...)}}
	}
	if v, ok := a.kv["protos"]; ok {
		act.protos = nil
		for _, p := range strings.Split(v, ",") {
			name, md, _ := strings.Cut(p, ":")
			act.protos = append(act.protos, kmsg.JoinGroupRequestProtocol{Name: name, Metadata: []byte(md)})
		}
	}
}

func (sc *scenario) join(act *actor, a args) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = act.version
	req.Group, req.MemberID, req.InstanceID = act.group, act.memberID, act.instanceID
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = act.session, act.rebalance
	req.ProtocolType = act.protoType
	req.Protocols = act.protos
	if a.has("oversized") {
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: make([]byte, 2<<20)}}
	}
	sc.d.send(act.name, RequestInfo{ClientID: act.name, ClientHost: "/127.0.0.1"}, req)
}

// format renders a response and updates the actor it answers.
func (sc *scenario) format(ev event) []string {
	prefix := ev.actor + ": "
	switch r := ev.resp.(type) {
	case *kmsg.JoinGroupResponse:
		act := sc.actor(ev.actor)
		if r.MemberID != "" || r.ErrorCode == kerr.UnknownMemberID.Code || r.ErrorCode == kerr.FencedInstanceID.Code {
			act.memberID = r.MemberID
		}
		if r.ErrorCode != 0 {
			act.generation = -1
			return []string{fmt.Sprintf("%sJoinGroup %s member=%q", prefix, errName(r.ErrorCode), r.MemberID)}
		}
		act.generation = r.Generation
		line := fmt.Sprintf("%sJoinGroup gen=%d member=%s leader=%s protocol=%s", prefix, r.Generation, r.MemberID, r.LeaderID, deref(r.Protocol))
		if r.SkipAssignment {
			line += " skip-assignment"
		}
		if len(r.Members) > 0 {
			var ms []string
			for _, m := range r.Members {
				s := m.MemberID
				if m.InstanceID != nil {
					s += "(" + *m.InstanceID + ")"
				}
				ms = append(ms, s)
			}
			line += " members=" + strings.Join(ms, ",")
		}
		return []string{line}
	case *kmsg.SyncGroupResponse:
		if r.ErrorCode != 0 {
			return []string{prefix + "SyncGroup " + errName(r.ErrorCode)}
		}
		return []string{fmt.Sprintf("%sSyncGroup assignment=%q", prefix, r.MemberAssignment)}
	case *kmsg.HeartbeatResponse:
		return []string{prefix + "Heartbeat " + errName(r.ErrorCode)}
	case *kmsg.LeaveGroupResponse:
		line := prefix + "LeaveGroup " + errName(r.ErrorCode)
		for _, m := range r.Members {
			line += fmt.Sprintf(" %s/%s=%s", m.MemberID, deref(m.InstanceID), errName(m.ErrorCode))
		}
		return []string{line}
	case *kmsg.OffsetCommitResponse:
		line := prefix + "OffsetCommit"
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				line += fmt.Sprintf(" %s:%d=%s", t.Topic, p.Partition, errName(p.ErrorCode))
			}
		}
		return []string{line}
	case *kmsg.TxnOffsetCommitResponse:
		line := prefix + "TxnOffsetCommit"
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				line += fmt.Sprintf(" %s:%d=%s", t.Topic, p.Partition, errName(p.ErrorCode))
			}
		}
		return []string{line}
	case *kmsg.OffsetFetchResponse:
		var lines []string
		if r.Version < 8 {
			line := prefix + "OffsetFetch " + errName(r.ErrorCode)
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					line += fmt.Sprintf(" %s:%d=%d/%d/%q/%s", t.Topic, p.Partition, p.Offset, p.LeaderEpoch, deref(p.Metadata), errName(p.ErrorCode))
				}
			}
			return []string{line}
		}
		for _, g := range r.Groups {
			line := fmt.Sprintf("%sOffsetFetch %s %s", prefix, g.Group, errName(g.ErrorCode))
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					line += fmt.Sprintf(" %s:%d=%d/%q/%s", t.Topic, p.Partition, p.Offset, deref(p.Metadata), errName(p.ErrorCode))
				}
			}
			lines = append(lines, line)
		}
		return lines
	case *kmsg.DescribeGroupsResponse:
		var lines []string
		for _, g := range r.Groups {
			line := fmt.Sprintf("%sDescribeGroups %s %s state=%s type=%q protocol=%q", prefix, g.Group, errName(g.ErrorCode), g.State, g.ProtocolType, g.Protocol)
			for _, m := range g.Members {
				line += fmt.Sprintf(" %s(client=%s", m.MemberID, m.ClientID)
				if m.InstanceID != nil {
					line += " instance=" + *m.InstanceID
				}
				if m.MemberAssignment != nil {
					line += fmt.Sprintf(" assignment=%q", m.MemberAssignment)
				}
				line += ")"
			}
			lines = append(lines, line)
		}
		return lines
	case *kmsg.ListGroupsResponse:
		line := prefix + "ListGroups " + errName(r.ErrorCode)
		for _, g := range r.Groups {
			line += fmt.Sprintf(" %s/%s/%q", g.Group, g.GroupState, g.ProtocolType)
		}
		return []string{line}
	case *kmsg.DeleteGroupsResponse:
		line := prefix + "DeleteGroups"
		for _, g := range r.Groups {
			line += fmt.Sprintf(" %s=%s", g.Group, errName(g.ErrorCode))
		}
		return []string{line}
	case *kmsg.OffsetDeleteResponse:
		line := prefix + "OffsetDelete " + errName(r.ErrorCode)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				line += fmt.Sprintf(" %s:%d=%s", t.Topic, p.Partition, errName(p.ErrorCode))
			}
		}
		return []string{line}
	}
	return []string{fmt.Sprintf("%s%T", prefix, ev.resp)}
}

func formatLog(t *testing.T, entries []LoggedRecord) []string {
	var out []string
	for _, e := range entries {
		if e.Marker != NoMarker {
			out = append(out, fmt.Sprintf("marker pid=%d commit=%t", e.ProducerID, e.Marker == CommitMarker))
			continue
		}
		d, err := decodeRecord(e.Record)
		if err != nil {
			t.Fatalf("stored record does not decode: %v", err)
		}
		txn := ""
		if e.ProducerID >= 0 {
			txn = fmt.Sprintf(" pid=%d", e.ProducerID)
		}
		switch {
		case d.isOffset && d.tombstone:
			out = append(out, fmt.Sprintf("offset %s %s:%d tombstone", d.group, d.tp.topic, d.tp.partition))
		case d.isOffset:
			out = append(out, fmt.Sprintf("offset %s %s:%d=%d meta=%q%s", d.group, d.tp.topic, d.tp.partition, d.offset.offset, d.offset.metadata, txn))
		case d.tombstone:
			out = append(out, fmt.Sprintf("group %s tombstone", d.group))
		default:
			v := d.groupMeta
			line := fmt.Sprintf("group %s gen=%d type=%q protocol=%s leader=%s", d.group, v.Generation, v.ProtocolType, deref(v.Protocol), deref(v.Leader))
			for _, m := range v.Members {
				line += fmt.Sprintf(" %s(assignment=%q)", m.MemberID, m.Assignment)
			}
			out = append(out, line)
		}
	}
	return out
}

func errName(code int16) string {
	if code == 0 {
		return "OK"
	}
	if e := kerr.TypedErrorForCode(code); e != nil {
		return e.Message
	}
	return fmt.Sprintf("error(%d)", code)
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestScenarios runs the scripts in testdata: each command is followed by
// the responses it caused, after the coordinator settled. Run with -rewrite
// to regenerate the expected output after reviewing a behaviour change.
func TestScenarios(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	sort.Strings(paths)
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			sc := &scenario{t: t, d: newDriver(t, testConfig()), actors: map[string]*actor{}}
			testutil.RunScript(t, path, *rewrite, sc.run)
		})
	}
}
