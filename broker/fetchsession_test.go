package broker

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"ringbroker/internal/testutil"
)

// sessionFetch is one Fetch request of a session test: a session id and epoch, the partitions
// it names with their fetch offsets, the partitions it forgets.
type sessionFetch struct {
	id, epoch int32
	offsets   map[int32]int64
	forget    []int32
	// replica is the fetching follower's id, or -1 for a consumer.
	replica int32
}

// sessionClient sends the Fetch requests of a session test for one topic over its own
// connection, with Fetch at most maxVersion: v12 names topics, later versions use ids.
type sessionClient struct {
	t          *testing.T
	cl         *kgo.Client
	b          *Broker
	topic      string
	maxVersion int16
}

func newSessionClient(t *testing.T, b *Broker, topic string, maxVersion int16) *sessionClient {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.Fetch.Int16(), maxVersion)
	return &sessionClient{t: t, cl: newClient(t, b, kgo.MaxVersions(v)), b: b, topic: topic, maxVersion: maxVersion}
}

// fetch sends sf and returns the response, which it checks is of one topic at most.
func (c *sessionClient) fetch(sf sessionFetch) *kmsg.FetchResponse {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	id := c.b.meta.Image().Topics[c.topic].ID
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = sf.replica
	req.ReplicaState.ID = sf.replica
	req.ReplicaState.Epoch = -1
	req.MaxBytes = 1 << 20
	req.SessionID, req.SessionEpoch = sf.id, sf.epoch
	if len(sf.offsets) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = c.topic, id
		for _, p := range slices.Sorted(func(yield func(int32) bool) {
			for p := range sf.offsets {
				if !yield(p) {
					return
				}
			}
		}) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, sf.offsets[p], 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(sf.forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = c.topic, id, sf.forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		c.t.Fatalf("fetch %+v: %v", sf, err)
	}
	if resp.Version > c.maxVersion {
		c.t.Fatalf("fetch answered at v%d; want at most v%d", resp.Version, c.maxVersion)
	}
	for _, rt := range resp.Topics {
		if rt.Topic != c.topic && rt.TopicID != id {
			c.t.Fatalf("fetch of %s answered topic %q %x", c.topic, rt.Topic, rt.TopicID)
		}
	}
	return resp
}

// answered lists the partitions of resp with, for each, its high watermark and whether it
// had records, as "p:hw" or "p:hw+records", in response order.
func answered(resp *kmsg.FetchResponse) []string {
	var out []string
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			s := fmt.Sprintf("%d:%d", rp.Partition, rp.HighWatermark)
			if rp.ErrorCode != 0 {
				s += "!" + kerr.ErrorForCode(rp.ErrorCode).Error()
			}
			if len(rp.RecordBatches) > 0 {
				s += "+records"
			}
			out = append(out, s)
		}
	}
	return out
}

// wantAnswer fails unless resp has no top-level error, the session id and exactly the
// partitions want (as answered lists them).
func wantAnswer(t *testing.T, step string, resp *kmsg.FetchResponse, session int32, want ...string) {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("%s: error %v; want none", step, kerr.ErrorForCode(resp.ErrorCode))
	}
	if resp.SessionID != session {
		t.Fatalf("%s: session id %d; want %d", step, resp.SessionID, session)
	}
	if got := answered(resp); !slices.Equal(got, want) {
		t.Fatalf("%s: partitions %q; want %q", step, got, want)
	}
}

// wantSessionError fails unless resp is the top-level error code with no partitions.
func wantSessionError(t *testing.T, step string, resp *kmsg.FetchResponse, code *kerr.Error) {
	t.Helper()
	if resp.ErrorCode != code.Code || len(resp.Topics) != 0 {
		t.Fatalf("%s: error %v with %d topics; want %v and none", step, kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics), code)
	}
}

// startSessionBroker starts a broker with overrides and creates topic on it.
func startSessionBroker(t *testing.T, io, topic string, partitions int32, overrides ...string) *Broker {
	t.Helper()
	b := startBroker(t, io, t.TempDir(), overrides...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createTestTopic(ctx, t, b, topic, partitions)
	return b
}

// sessionMetrics returns the broker's fetch session metrics as Prometheus lines.
func sessionMetrics(b *Broker) string {
	var buf bytes.Buffer
	b.metrics.set.WritePrometheus(&buf)
	var lines []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(l, "ringbroker_incremental_fetch_") {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestFetchSessions walks one fetch session (KIP-227) through its life over real connections,
// with topics by name (Fetch v12) and by id (v13+): a full fetch opens it; an incremental
// fetch with nothing new is answered without partitions; a partition that receives records,
// one added to the session and one whose error is answered each appear alone; a forgotten
// partition no longer appears; a wrong epoch and a request by topic ids on a session by
// names (or the reverse) are top-level errors that leave the session as it was; the session
// goes on over another connection; epoch -1 closes it, after which its id is unknown, and so
// does forgetting every partition of a session.
func TestFetchSessions(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		for _, v := range []int16{12, 18} {
			t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { testFetchSession(t, io, v) })
		}
	})
}

func testFetchSession(t *testing.T, io string, version int16) {
	const topic = "sess"
	b := startSessionBroker(t, io, topic, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	producer := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	produceTo(ctx, t, producer, topic, 0, 10)
	c := newSessionClient(t, b, topic, version)

	resp := c.fetch(sessionFetch{epoch: 0, offsets: map[int32]int64{0: 0, 1: 0, 2: 0}, replica: -1})
	id := resp.SessionID
	if id <= 0 {
		t.Fatalf("full fetch with epoch 0: session id %d; want a new session", id)
	}
	wantAnswer(t, "full fetch", resp, id, "0:1+records", "1:0", "2:0")
	if got, want := sessionMetrics(b), "ringbroker_incremental_fetch_partitions_cached 3\n"+
		"ringbroker_incremental_fetch_session_evictions_total 0\nringbroker_incremental_fetch_sessions 1"; got != want {
		t.Errorf("metrics after the full fetch:\n%s\nwant\n%s", got, want)
	}

	resp = c.fetch(sessionFetch{id: id, epoch: 1, offsets: map[int32]int64{0: 1}, replica: -1})
	wantAnswer(t, "incremental fetch, nothing new", resp, id)

	produceTo(ctx, t, producer, topic, 2, 10)
	resp = c.fetch(sessionFetch{id: id, epoch: 2, replica: -1})
	wantAnswer(t, "incremental fetch after a record in partition 2", resp, id, "2:1+records")
	resp = c.fetch(sessionFetch{id: id, epoch: 3, offsets: map[int32]int64{2: 1}, replica: -1})
	wantAnswer(t, "incremental fetch past that record", resp, id)

	resp = c.fetch(sessionFetch{id: id, epoch: 4, offsets: map[int32]int64{3: 0, 7: 0}, replica: -1})
	wantAnswer(t, "incremental fetch adding partitions 3 and 7", resp, id, "3:0", "7:-1!"+kerr.UnknownTopicOrPartition.Error())
	resp = c.fetch(sessionFetch{id: id, epoch: 5, replica: -1})
	wantAnswer(t, "incremental fetch with an unknown partition in the session", resp, id, "7:-1!"+kerr.UnknownTopicOrPartition.Error())

	resp = c.fetch(sessionFetch{id: id, epoch: 6, forget: []int32{0, 7}, replica: -1})
	wantAnswer(t, "incremental fetch forgetting partitions 0 and 7", resp, id)
	produceTo(ctx, t, producer, topic, 0, 10)
	produceTo(ctx, t, producer, topic, 1, 10)
	resp = c.fetch(sessionFetch{id: id, epoch: 7, replica: -1})
	wantAnswer(t, "incremental fetch after records in forgotten 0 and in 1", resp, id, "1:1+records")
	if got, want := sessionMetrics(b), "ringbroker_incremental_fetch_partitions_cached 3\n"+
		"ringbroker_incremental_fetch_session_evictions_total 0\nringbroker_incremental_fetch_sessions 1"; got != want {
		t.Errorf("metrics after forgetting:\n%s\nwant\n%s", got, want)
	}

	resp = c.fetch(sessionFetch{id: id, epoch: 7, offsets: map[int32]int64{1: 1}, replica: -1})
	wantSessionError(t, "incremental fetch repeating epoch 7", resp, kerr.InvalidFetchSessionEpoch)
	resp = c.fetch(sessionFetch{id: id, epoch: 9, replica: -1})
	wantSessionError(t, "incremental fetch skipping epoch 8", resp, kerr.InvalidFetchSessionEpoch)
	other := int16(18)
	if version >= 13 {
		other = 12
	}
	resp = newSessionClient(t, b, topic, other).fetch(sessionFetch{id: id, epoch: 8, replica: -1})
	wantSessionError(t, fmt.Sprintf("incremental fetch at v%d of a session opened at v%d", other, version), resp, kerr.FetchSessionTopicIDError)

	// Another connection goes on with the session: partition 1 still waits at offset 0.
	c2 := newSessionClient(t, b, topic, version)
	resp = c2.fetch(sessionFetch{id: id, epoch: 8, replica: -1})
	wantAnswer(t, "incremental fetch over a new connection", resp, id, "1:1+records")

	resp = c2.fetch(sessionFetch{id: id, epoch: -1, offsets: map[int32]int64{1: 1}, replica: -1})
	wantAnswer(t, "fetch closing the session", resp, 0, "1:1")
	resp = c2.fetch(sessionFetch{id: id, epoch: 9, replica: -1})
	wantSessionError(t, "incremental fetch of the closed session", resp, kerr.FetchSessionIDNotFound)
	resp = c2.fetch(sessionFetch{id: id ^ 0x5a5a, epoch: 1, replica: -1})
	wantSessionError(t, "incremental fetch of an id never given", resp, kerr.FetchSessionIDNotFound)
	if got, want := sessionMetrics(b), "ringbroker_incremental_fetch_partitions_cached 0\n"+
		"ringbroker_incremental_fetch_session_evictions_total 0\nringbroker_incremental_fetch_sessions 0"; got != want {
		t.Errorf("metrics after closing:\n%s\nwant\n%s", got, want)
	}

	// Forgetting every partition closes the session too, and is answered without one.
	id = c2.fetch(sessionFetch{epoch: 0, offsets: map[int32]int64{3: 0}, replica: -1}).SessionID
	if id <= 0 {
		t.Fatalf("new session: id %d; want one", id)
	}
	resp = c2.fetch(sessionFetch{id: id, epoch: 1, forget: []int32{3}, replica: -1})
	wantAnswer(t, "incremental fetch forgetting every partition", resp, 0)
	resp = c2.fetch(sessionFetch{id: id, epoch: 2, replica: -1})
	wantSessionError(t, "incremental fetch of the emptied session", resp, kerr.FetchSessionIDNotFound)
}

// TestFetchSessionIncrementalLongPoll parks an incremental fetch with nothing new on every
// partition of its session: an append answers it with that partition alone.
func TestFetchSessionIncrementalLongPoll(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		const topic = "sesslp"
		b := startSessionBroker(t, io, topic, 3)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		producer := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
		c := newSessionClient(t, b, topic, 18)
		resp := c.fetch(sessionFetch{epoch: 0, offsets: map[int32]int64{0: 0, 1: 0, 2: 0}, replica: -1})
		id := resp.SessionID
		wantAnswer(t, "full fetch", resp, id, "0:0", "1:0", "2:0")

		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 20_000, 1, 1<<20
		req.SessionID, req.SessionEpoch = id, 1
		done := make(chan *kmsg.FetchResponse, 1)
		errs := make(chan error, 1)
		go func() {
			resp, err := req.RequestWith(ctx, c.cl)
			if err != nil {
				errs <- err
				return
			}
			done <- resp
		}()
		waitParked(t, b, topic, 1)
		produceTo(ctx, t, producer, topic, 1, 10)
		wantAnswer(t, "parked incremental fetch", awaitFetch(t, done, errs), id, "1:1+records")
		waitParked(t, b, topic, 0)
	})
}

// TestFetchSessionCacheFull fills a cache of one slot: a consumer's new session is refused
// (session id 0) while the session there is young, a follower's evicts it, and a consumer's
// then cannot evict the follower's.
func TestFetchSessionCacheFull(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		const topic = "sessfull"
		b := startSessionBroker(t, io, topic, 2, "max.incremental.fetch.session.cache.slots=1")
		c := newSessionClient(t, b, topic, 18)
		all := map[int32]int64{0: 0, 1: 0}

		first := c.fetch(sessionFetch{epoch: 0, offsets: all, replica: -1}).SessionID
		if first <= 0 {
			t.Fatalf("first session: id %d; want one", first)
		}
		resp := c.fetch(sessionFetch{epoch: 0, offsets: all, replica: -1})
		wantAnswer(t, "second consumer session, cache full", resp, 0, "0:0", "1:0")
		wantAnswer(t, "first session still there", c.fetch(sessionFetch{id: first, epoch: 1, replica: -1}), first)

		// Broker 7 is no replica, so its partitions answer NOT_LEADER, but it is a follower
		// fetch: its session is privileged.
		follower := c.fetch(sessionFetch{epoch: 0, offsets: all, replica: 7}).SessionID
		if follower <= 0 {
			t.Fatalf("follower session in a full cache: id %d; want one, evicting the consumer's", follower)
		}
		wantSessionError(t, "evicted consumer session", c.fetch(sessionFetch{id: first, epoch: 2, replica: -1}), kerr.FetchSessionIDNotFound)
		if id := c.fetch(sessionFetch{epoch: 0, offsets: all, replica: -1}).SessionID; id != 0 {
			t.Fatalf("consumer session against a young follower session: id %d; want 0", id)
		}
		if got := sessionMetrics(b); !strings.Contains(got, "ringbroker_incremental_fetch_session_evictions_total 1\n") {
			t.Errorf("metrics after one eviction:\n%s", got)
		}
	})
}

// TestFetchSessionStaleEviction: with min.incremental.fetch.session.eviction.ms=2000 and one
// slot, a consumer session takes the place of one unused for longer than that, not before.
func TestFetchSessionStaleEviction(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, io string) {
		const topic = "sessstale"
		b := startSessionBroker(t, io, topic, 2, "max.incremental.fetch.session.cache.slots=1",
			"min.incremental.fetch.session.eviction.ms=2000")
		c := newSessionClient(t, b, topic, 18)
		big := map[int32]int64{0: 0, 1: 0}
		// The broker stamps the session's last use while it handles the fetch, after start:
		// counted from the response instead, a correct eviction may look a few ms early.
		start := time.Now()
		first := c.fetch(sessionFetch{epoch: 0, offsets: map[int32]int64{0: 0}, replica: -1}).SessionID
		if id := c.fetch(sessionFetch{epoch: 0, offsets: big, replica: -1}).SessionID; id != 0 && time.Since(start) < 2*time.Second {
			t.Fatalf("session with more partitions while the first is young: id %d; want 0", id)
		}
		testutil.WaitFor(t, 10*time.Second, func() error {
			if id := c.fetch(sessionFetch{epoch: 0, offsets: big, replica: -1}).SessionID; id == 0 {
				return fmt.Errorf("no session %v after the first was last used", time.Since(start))
			}
			return nil
		})
		if d := time.Since(start); d < 2*time.Second {
			t.Fatalf("stale session evicted %v after its last use; want at least 2s", d)
		}
		wantSessionError(t, "stale session", c.fetch(sessionFetch{id: first, epoch: 1, replica: -1}), kerr.FetchSessionIDNotFound)
	})
}

// TestFetchSessionEvictionOrder holds the cache to Kafka's eviction rules, on its own clock.
func TestFetchSessionEvictionOrder(t *testing.T) {
	const evictAfter = 100 // ms
	type sess struct {
		privileged       bool
		size             int
		created, lastUse int64
	}
	cases := []struct {
		name       string
		have       []sess
		now        int64
		privileged bool
		size       int
		wEvicted   int // index into have, or -1 for none (and no new session)
	}{
		{"young sessions keep their place", []sess{{false, 1, 0, 50}}, 100, false, 10, -1},
		{"a follower evicts a young consumer", []sess{{true, 1, 0, 50}, {false, 5, 0, 50}}, 100, true, 1, 1},
		{"a follower does not evict a young follower", []sess{{true, 1, 0, 50}}, 100, true, 10, -1},
		{"stale first, whatever its size", []sess{{false, 1, 0, 150}, {false, 9, 0, 120}}, 230, false, 1, 1},
		{"the smallest old one for a bigger one", []sess{{false, 5, 0, 150}, {false, 2, 0, 150}, {false, 3, 0, 150}}, 200, false, 3, 1},
		{"no old one smaller than the new one", []sess{{false, 5, 0, 150}, {false, 2, 0, 150}}, 200, false, 2, -1},
		{"an old consumer before an old follower", []sess{{true, 1, 0, 150}, {false, 8, 0, 150}}, 200, false, 9, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newFetchSessionCache(len(tc.have), evictAfter*time.Millisecond)
			var ids []int32
			for _, h := range tc.have {
				parts := newSessionPartitions(h.size)
				for p := range h.size {
					parts.upsert(sessionKey{topic: "t", partition: int32(p)}, partitionFetch{})
				}
				s := c.create(h.created, h.privileged, false, parts)
				if s == nil {
					t.Fatalf("session %+v not created in a cache with room", h)
				}
				c.touch(s, h.size, h.lastUse)
				ids = append(ids, s.id)
			}
			parts := newSessionPartitions(tc.size)
			for p := range tc.size {
				parts.upsert(sessionKey{topic: "u", partition: int32(p)}, partitionFetch{})
			}
			s := c.create(tc.now, tc.privileged, false, parts)
			if (s != nil) != (tc.wEvicted >= 0) {
				t.Fatalf("new session created: %v; want %v", s != nil, tc.wEvicted >= 0)
			}
			for i, id := range ids {
				if gone := c.get(id) == nil; gone != (i == tc.wEvicted) {
					t.Errorf("session %d (%+v) evicted: %v; want %v", i, tc.have[i], gone, i == tc.wEvicted)
				}
			}
		})
	}
}

// TestFetchSessionSteadyStateAllocs: the session's share of an incremental fetch (finding
// the session, applying the request's changed partitions, marking it used, recording what the
// response told and rotating the partitions that returned records) allocates nothing once the
// session holds its partitions, with topics by name (v12) and by id (v13+).
func TestFetchSessionSteadyStateAllocs(t *testing.T) {
	for _, version := range []int16{12, 13} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			c := newFetchSessionCache(10, time.Minute)
			req := kmsg.NewPtrFetchRequest()
			req.Version = version
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "steady", [16]byte{1, 2, 3}
			parts := newSessionPartitions(1000)
			for p := range int32(1000) {
				parts.upsert(requestKey(version, &rt, p), partitionFetch{})
			}
			for p := range int32(10) {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset = p*100, 5
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			s := c.create(0, false, version >= 13, parts)
			step := func() {
				got := c.get(s.id)
				got.mu.Lock()
				got.update(req)
				c.touch(got, got.parts.len(), 1)
				for i := range req.Topics[0].Partitions {
					at := got.parts.index[requestKey(version, &req.Topics[0], req.Topics[0].Partitions[i].Partition)]
					got.sent = append(got.sent, sentPartition{at: at, hw: 6, logStart: 0, records: true})
				}
				got.commitSent()
				got.mu.Unlock()
			}
			step() // sent grows once
			if n := testing.AllocsPerRun(100, step); n != 0 {
				t.Fatalf("%v allocations per incremental fetch; want 0", n)
			}
			if s.parts.len() != 1000 || s.parts.items[s.parts.tail].key.partition != 900 {
				t.Fatalf("session of %d partitions ending with %d; want 1000 ending with 900", s.parts.len(), s.parts.items[s.parts.tail].key.partition)
			}
		})
	}
}
