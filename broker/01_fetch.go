package broker

// Fetch (key 1), versions 4-18.
//
// Consumer fetches with isolation read_uncommitted read up to the high watermark, read_committed
// up to the last stable offset (the first offset of the oldest transaction not yet decided and
// replicated, at most the high watermark), with the aborted transactions overlapping the range
// (producer id, first offset; from the .txnindex) for the consumer to drop; every response
// carries the last stable offset. Each partition is read up
// to its partition max bytes and the response up to max bytes, except that the first partition
// with data returns at least one whole batch (KIP-74). When fewer than min bytes are ready the
// fetch parks on its partitions and is answered on the next append that brings enough, or when
// max wait elapses (a deadline in the purgatory; retries run on handler workers, or on the ring
// thread whose append woke them, see runWoken). On io_uring a consumer's fetch runs on the ring
// thread that read it as long as it reads only what is in the page cache (log.ReadCached) and
// sends at most loopFetchMaxBytes of records; otherwise on a worker. Record bytes
// are never copied in user space: the response is small encoded pieces plus slices of the
// mapped segments, written with sendmsg, whose pages are unmapped again once the kernel has
// them (or, with io.fetch.sendfile, ranges of the segment files written with sendfile); the
// segments are held until the kernel is done with them.
// Fetch sessions (KIP-227, v7+, fetchsession.go) as Kafka's: session epoch -1 is a full fetch
// without a session, 0 a full fetch that opens one (answered with its id, or 0 when the cache
// of max.incremental.fetch.session.cache.slots is full and nothing may be evicted), and a
// higher epoch an incremental fetch: it names only the partitions added or changed, and
// forgotten topics to drop; the broker reads every partition of the session and answers only
// those with records, an error or a new high watermark or log start offset. An unknown session
// is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH (top-level errors,
// no partitions); a session named with epoch -1 or 0 is closed. Sessions belong to the broker,
// not the connection. v13+ names topics by id (and keys its sessions by id). A follower's fetch (a replica id,
// v15+ in ReplicaState) reads up to the log end instead of the high watermark, records how far
// the follower has come (which moves the high watermark and may add it to the ISR), and, with
// its last fetched epoch (v12+), is told of a divergence (DivergingEpoch) to truncate to. A
// replica fetch from a broker that is not one of the partition's replicas is
// NOT_LEADER_OR_FOLLOWER, as Kafka answers an unknown follower. A follower fetch of a replica
// listed in leader.replication.throttled.replicas is held to leader.replication.throttled.rate
// while the follower is out of the ISR: over the rate, the partition returns no records. A
// partition whose log dir is offline is KAFKA_STORAGE_ERROR (logdirs.go).
// Authorization, as Kafka's: a consumer's partitions of a topic it may not READ, and every
// partition of a follower without CLUSTER_ACTION on the cluster, are TOPIC_AUTHORIZATION_FAILED
// (after UNKNOWN_TOPIC_ID); they stay in a session like any partition with an error.

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
	"ringbroker/internal/mpsc"
	"ringbroker/internal/timingwheel"
	rlog "ringbroker/log"
	"ringbroker/quota"
	"ringbroker/ring"
	"ringbroker/wire"
)

var fetchAPI = &api{key: kmsg.Fetch, minVersion: 4, maxVersion: 18, handle: handleFetch, inline: true}

// noRecords is an empty, non-null record set: Kafka sends a zero length rather than null for a
// partition without data, and librdkafka refuses null.
var noRecords = [][]byte{}

// loopFetchMaxBytes bounds the record bytes of a response the event loop answers a fetch with:
// their copy into the socket, about 120 µs per MiB here, holds up the loop's other
// connections, so larger responses go to a handler worker. At max-throughput (responses of
// ~830 KiB) a 1 MiB bound raised the end-to-end p99 in three runs of three; 256 KiB did not.
const loopFetchMaxBytes = 256 << 10

// maxFetchWait bounds how long a fetch may park, whatever the client asks.
const maxFetchWait = 5 * time.Minute

func handleFetch(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.FetchRequest)
	replica := req.ReplicaID
	if req.Version >= 15 {
		replica = req.ReplicaState.ID
	}
	if rc.onLoop && replica >= 0 {
		// A follower's fetch moves the high watermark and the ISR, which may wait for locks.
		rc.handOff(func() { handleFetch(b, rc, r) })
		return
	}
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if wait > maxFetchWait {
		wait = maxFetchWait
	}
	f := &fetchOp{b: b, rc: rc, cs: rc.cs, req: req, replica: replica}
	z := rc.authorizer()
	if replica >= 0 {
		// As Kafka: a follower needs CLUSTER_ACTION on the cluster, else every partition is
		// TOPIC_AUTHORIZATION_FAILED; only an authorized one is taken for that broker (whose
		// disconnection hints at its death, liveness.go).
		f.followerDenied = !z.mayCluster(acl.OpClusterAction)
		if !f.followerDenied && rc.cs.follower.Load() != replica+1 {
			rc.cs.follower.Store(replica + 1)
		}
	} else {
		// A consumer needs READ on each topic.
		f.readable = z.topicChecks(acl.OpRead)
	}
	if req.Version >= 7 {
		code, busy := f.openSession(time.Now().UnixMilli(), rc.onLoop)
		if busy {
			rc.handOff(func() { handleFetch(b, rc, r) })
			return
		}
		if code != nil {
			// As Kafka: a session error answers with no partitions and no session.
			resp := kmsg.NewPtrFetchResponse()
			resp.ErrorCode = code.Code
			rc.respond(resp)
			return
		}
	}
	if f.begin(wait, rc.onLoop) {
		rc.handOff(func() { f.begin(wait, false) })
	}
}

// begin is the fetch's first attempt, which parks it until its deadline when too little is
// ready. On the event loop (onLoop) it reports blocked, having answered nothing and parked
// nowhere, where the attempt would have to wait for the disk or a lock.
func (f *fetchOp) begin(wait time.Duration, onLoop bool) (blocked bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	answered, blocked := f.attemptLocked(wait <= 0, onLoop)
	if !answered && !blocked {
		f.timer = f.b.purgatory.after(time.Now().Add(wait), f.expire)
	}
	return blocked
}

// openSession sets f up with its fetch session (KIP-227), as Kafka's FetchManager does: epoch
// -1 is a full fetch without a session and 0 a full fetch that opens one, either closing the
// session it names; a higher epoch is the next request of an existing session, whose
// partitions it updates, and which it must name with the epoch the session expects. An
// incremental request that leaves its session empty closes it and is answered sessionless.
// With noWait (the event loop) it reports busy, having changed nothing, when another fetch
// holds the session.
func (f *fetchOp) openSession(now int64, noWait bool) (code *kerr.Error, busy bool) {
	req, cache := f.req, f.b.fetchSessions
	if req.SessionEpoch == sessionFinalEpoch || req.SessionEpoch == sessionInitialEpoch {
		if req.SessionID != 0 {
			cache.remove(req.SessionID)
		}
		f.newSession = req.SessionEpoch == sessionInitialEpoch
		return nil, false
	}
	s := cache.get(req.SessionID)
	if s == nil {
		return kerr.FetchSessionIDNotFound, false
	}
	if !lockOrTry(&s.mu, noWait) {
		return nil, true
	}
	defer s.mu.Unlock()
	switch {
	case s.epoch != req.SessionEpoch:
		return kerr.InvalidFetchSessionEpoch, false
	case s.topicIDs != (req.Version >= 13):
		return kerr.FetchSessionTopicIDError, false
	}
	s.update(req)
	if s.parts.len() == 0 {
		cache.removeSession(s)
		return nil, false
	}
	cache.touch(s, s.parts.len(), now)
	s.epoch = nextSessionEpoch(s.epoch)
	f.session, f.sessionEpoch = s, s.epoch
	return nil, false
}

// lockOrTry locks mu, or with noWait only tries to, and reports whether it holds it.
func lockOrTry(mu *sync.Mutex, noWait bool) bool {
	if noWait {
		return mu.TryLock()
	}
	mu.Lock()
	return true
}

// fetchOp is one Fetch request, possibly parked on its partitions. Retries run on handler
// workers (it is a task) or on the ring thread whose append woke them.
type fetchOp struct {
	b  *Broker
	rc *reqCtx // until the response goes out (done), when it is recycled
	// cs is rc's connection, which wake-ups that come after the response still name.
	cs  *connState
	req *kmsg.FetchRequest
	// replica is the fetching follower's node id, or -1 for a consumer. A follower reads up to
	// the log end, a consumer up to the high watermark.
	replica int32
	// session is the fetch session of an incremental request, whose partitions it reads, and
	// sessionEpoch the session's epoch after it: a later request of the session changes it, and
	// this one then answers INVALID_FETCH_SESSION_EPOCH, as Kafka answers a duplicate.
	// newSession is set for a full fetch that asks for a session (epoch 0).
	session      *fetchSession
	sessionEpoch int32
	newSession   bool
	// followerDenied is set for a follower without CLUSTER_ACTION; readable decides a
	// consumer's READ on each topic, once per topic for all the fetch's attempts (guarded by mu).
	followerDenied bool
	readable       topicNames

	// queued is set while the fetch waits on a worker's queue, so a burst of appends costs one
	// retry, not one per append, and the task is never queued twice.
	queued atomic.Bool
	// final is set by the deadline: the next attempt answers whatever it finds.
	final atomic.Bool
	node  mpsc.Node[task]

	mu   sync.Mutex
	done bool // guarded by mu: the response went out
	// parked lists the partitions the fetch is registered on (guarded by mu): all of the
	// request's partitions from its first park until it is done, whatever the number of retries.
	parked []*partition
	// parkedBy is the attempt whose touched list parked is (guarded by mu), back to the pool
	// when the fetch leaves its partitions.
	parkedBy *fetchAttempt
	timer    *timingwheel.Timer // guarded by mu
}

func (f *fetchOp) queueNode() *mpsc.Node[task] { return &f.node }

// replicaEpoch is the broker epoch a follower's fetch gives (ReplicaState, v15+), or -1.
func (f *fetchOp) replicaEpoch() int64 {
	if f.req.Version >= 15 {
		return f.req.ReplicaState.Epoch
	}
	return -1
}

// wake queues a retry of f on a worker unless one is queued already.
func (f *fetchOp) wake() {
	if f.queued.CompareAndSwap(false, true) {
		f.dispatch()
	}
}

// dispatch hands f's retry, marked queued, to a handler worker.
func (f *fetchOp) dispatch() { f.b.handlers.dispatch(f.cs.c.Loop(), f.cs.c.ID(), f) }

// expire is the deadline: retry one last time.
func (f *fetchOp) expire() {
	f.final.Store(true)
	f.wake()
}

// run is the retry, after an append or at the deadline.
func (f *fetchOp) run() {
	// Appends from now on need another look: they may land after this attempt read.
	f.queued.Store(false)
	final := f.final.Load()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	f.attemptLocked(final, false)
}

// wakeWaitersInto is wakeWaiters for the event loop: the retries it queues go to woken, for the
// caller to run them (runWoken), instead of to workers; with woken nil, to workers.
func (p *partition) wakeWaitersInto(woken *[]*fetchOp) {
	p.waitMu.Lock()
	for f := range p.waiters {
		switch {
		case !f.queued.CompareAndSwap(false, true):
		case woken != nil:
			*woken = append(*woken, f)
		default:
			f.dispatch()
		}
	}
	p.waitMu.Unlock()
}

// runWoken runs on the event loop the fetches that appends of this connection's request woke
// (wakeWaitersInto), so a consumer waiting at the end of the log is answered without a
// handler worker's wake-up in between. A fetch whose lock is taken, or whose attempt would
// block there, goes to a worker as wake queues it.
func (cs *connState) runWoken() {
	for i, f := range cs.woken {
		cs.woken[i] = nil
		if !f.mu.TryLock() {
			f.dispatch()
			continue
		}
		// As in run: appends from now on need another look.
		f.queued.Store(false)
		blocked := false
		if !f.done {
			f.b.metrics.fetchRetriesInline.Inc()
			_, blocked = f.attemptLocked(f.final.Load(), true)
		}
		f.mu.Unlock()
		if blocked {
			f.b.metrics.inlineHandedOff[kmsg.Fetch].Inc()
			f.wake()
		}
	}
	cs.woken = cs.woken[:0]
}

// readLimit is the offset f reads up to in p: the log end for a follower, the high watermark
// for a read_uncommitted consumer, the last stable offset for a read_committed one.
func (f *fetchOp) readLimit(p *partition) int64 {
	switch {
	case f.replica >= 0:
		return p.log().LogEndOffset()
	case f.req.IsolationLevel == 1:
		return p.log().LastStableOffset(p.highWatermark())
	}
	return p.highWatermark()
}

// park registers f on its partitions, once, and reports whether it took touched for its list;
// later attempts that park again keep it there.
// seen[i] is the read limit touched[i] had when the attempt read it: an append (or a move of
// the high watermark) that came between that read and the registration would find no waiter,
// so it is checked for here.
func (f *fetchOp) park(touched []*partition, seen []int64) (took bool) {
	if f.parked != nil {
		return false
	}
	f.parked = touched
	for _, p := range touched {
		p.waitMu.Lock()
		if p.waiters == nil {
			p.waiters = make(map[*fetchOp]struct{})
		}
		p.waiters[f] = struct{}{}
		p.waitMu.Unlock()
	}
	for i, p := range touched {
		if f.readLimit(p) != seen[i] {
			f.wake()
			return true
		}
	}
	return true
}

// unpark removes f from the partitions it was parked on.
func (f *fetchOp) unpark() {
	for _, p := range f.parked {
		p.waitMu.Lock()
		delete(p.waiters, f)
		p.waitMu.Unlock()
	}
	f.parked = nil
	if f.parkedBy != nil {
		f.b.putFetchAttempt(f.parkedBy)
		f.parkedBy = nil
	}
}

// wakeWaiters makes every fetch parked on p look again; Produce calls it after each append and
// the high watermark's moves call it too. A
// fetch stays registered until it completes, so waking costs nothing when no fetch waits and
// does not pile up stale registrations when one does.
func (p *partition) wakeWaiters() { p.wakeWaitersInto(nil) }

// fetchAttempt is what one attempt of a fetch gathers while it reads its partitions, and the
// response it builds. Attempts come from Broker.fetchAttempts (getFetchAttempt) and go back
// once nothing refers to their lists: at once for an attempt that answers nothing, after the
// response is sent for one that answers, when the fetch leaves its partitions for the one
// it parked with.
type fetchAttempt struct {
	f        *fetchOp
	tbl      *partitionTable
	im       *meta.Image
	now      time.Time
	maxBytes int
	total    int
	anyErr   bool
	reads    []rlog.ReadResult
	readFrom []*partition // the partition of each of reads
	touched  []*partition
	seen     []int64 // read limits of touched, as read
	// full lists, for a full fetch that opens a session, what each partition was told.
	full []sentPartition
	// w builds the response and pieces are its iovecs as sent, both until the send completes.
	w      wire.FetchWriter
	pieces []ring.Piece
	// onLoop says the attempt runs on the event loop, where it reads only what is in the page
	// cache and at most loopFetchMaxBytes; blocked, that it stopped at a partition whose read
	// would wait for the disk or take it over that.
	onLoop, blocked bool
}

// release gives back the reads' hold on their segments and forgets the reads, so a second
// call (putFetchAttempt's, after an early one) releases nothing twice.
func (a *fetchAttempt) release() {
	for _, rr := range a.reads {
		rr.Release()
	}
	clear(a.reads)
	a.reads = a.reads[:0]
}

// getFetchAttempt returns an empty attempt of f from the pool.
func (b *Broker) getFetchAttempt(f *fetchOp, onLoop bool) *fetchAttempt {
	a, _ := b.fetchAttempts.Get().(*fetchAttempt)
	if a == nil {
		a = new(fetchAttempt)
	}
	a.f, a.tbl, a.im, a.now, a.onLoop = f, b.parts.Load(), b.meta.Image(), time.Now(), onLoop
	a.maxBytes = int(f.req.MaxBytes)
	return a
}

// putFetchAttempt releases a's reads, empties it and returns it to the pool, its lists kept
// for their capacity.
func (b *Broker) putFetchAttempt(a *fetchAttempt) {
	a.release()
	clear(a.readFrom)
	clear(a.touched)
	clear(a.pieces)
	a.readFrom, a.touched, a.seen = a.readFrom[:0], a.touched[:0], a.seen[:0]
	a.full, a.pieces = a.full[:0], a.pieces[:0]
	a.f, a.tbl, a.im = nil, nil, nil
	a.total, a.anyErr, a.blocked = 0, false, false
	b.fetchAttempts.Put(a)
}

// attemptLocked reads every partition; it responds and reports answered when min bytes are
// ready, an error must be reported, the broker is closing or final is set. Otherwise it parks
// the fetch on its partitions. On the event loop (onLoop) it reports blocked instead, having
// answered nothing and parked nowhere, where a read would wait for the disk or the session's
// lock is taken.
func (f *fetchOp) attemptLocked(final, onLoop bool) (answered, blocked bool) {
	b, req := f.b, f.req
	a := b.getFetchAttempt(f, onLoop)
	if a.maxBytes <= 0 {
		a.maxBytes = 1<<31 - 1
	}
	minBytes := int(req.MinBytes)
	if f.replica < 0 {
		// A consumer with a fetch quota reads at most what its quota allows in one window, or
		// a response over it would be answered empty every time (Kafka's
		// getMaxValueInQuotaWindow bound).
		if v, ok := f.rc.quotaWindowMax(quota.Fetch); ok && v < float64(a.maxBytes) {
			a.maxBytes = max(int(v), 1)
			minBytes = min(minBytes, a.maxBytes)
		}
	}
	w := &a.w
	var sessionID int32
	if s := f.session; s != nil {
		sessionID = s.id
	}
	if err := w.Reset(f.rc.hdr, 0, 0, sessionID); err != nil {
		// The version range is checked before dispatch, so this is a programming error.
		panic(err)
	}
	if s := f.session; s != nil {
		if !lockOrTry(&s.mu, onLoop) {
			b.putFetchAttempt(a)
			return false, true
		}
		defer s.mu.Unlock()
		if s.epoch != f.sessionEpoch {
			b.putFetchAttempt(a)
			f.finishLocked()
			resp := kmsg.NewPtrFetchResponse()
			resp.ErrorCode, resp.SessionID = kerr.InvalidFetchSessionEpoch.Code, s.id
			f.rc.respond(resp)
			return true, false
		}
		f.readSession(a, w)
	} else {
		f.readRequest(a, w)
	}
	if a.blocked || !final && !a.anyErr && a.total < minBytes && len(a.touched) > 0 && !b.closing.Load() {
		a.release()
		if f.session != nil {
			f.session.sent = f.session.sent[:0]
		}
		if a.blocked {
			b.putFetchAttempt(a)
			return false, true
		}
		if f.park(a.touched, a.seen) {
			f.parkedBy = a
		} else {
			b.putFetchAttempt(a)
		}
		return false, false
	}
	f.finishLocked()
	for i, rr := range a.reads {
		a.readFrom[i].countOut(len(rr.Data), f.replica >= 0)
	}
	b.metrics.fetchServed(f.replica >= 0, f.rc.start)
	if f.replica < 0 {
		// A consumer over its fetch quota is answered empty with the time it is held for, and
		// what it would have read is not counted, as Kafka's KafkaApis (KIP-219). The session
		// keeps what it last sent, so the next fetch sends the same partitions again.
		if d := f.rc.recordQuota(quota.Fetch, float64(a.total)); d > 0 {
			f.rc.unrecordQuota(quota.Fetch, float64(a.total))
			b.putFetchAttempt(a)
			f.respondThrottled(d)
			return true, false
		}
	}
	switch {
	case f.session != nil:
		f.session.commitSent()
	case f.newSession:
		if s := b.fetchSessions.create(a.now.UnixMilli(), f.replica >= 0, req.Version >= 13, f.sessionPartitions(a.full)); s != nil {
			w.SetSessionID(s.id)
		}
	}
	if b.cfg.FetchSendfile {
		a.pieces = fetchFilePieces(a.pieces, w.Finish(), a.reads)
		f.rc.respondPieces(a.pieces, func() { b.putFetchAttempt(a) })
		return true, false
	}
	a.pieces = fetchPieces(a.pieces, w.Finish())
	f.rc.respondPieces(a.pieces, func() {
		// The kernel has copied the record bytes out of the mapping: give its pages back, so
		// the process's resident memory does not grow with what it serves.
		for _, rr := range a.reads {
			rr.DropMapped()
		}
		b.putFetchAttempt(a)
	})
	return true, false
}

// respondThrottled answers a consumer's fetch that is over its quota: no partitions, the
// session's id for an incremental fetch (whose cached state stays as it was) and none for a
// full one (no session is created, so the client's next fetch is full again, as Kafka's
// FullFetchContext.getThrottledResponse).
func (f *fetchOp) respondThrottled(d time.Duration) {
	resp := kmsg.NewPtrFetchResponse()
	if s := f.session; s != nil {
		s.sent = s.sent[:0]
		resp.SessionID = s.id
	}
	f.rc.throttle(resp, d)
	f.rc.respond(resp)
}

// finishLocked marks f answered: it leaves its partitions and the purgatory.
func (f *fetchOp) finishLocked() {
	f.done = true
	f.unpark()
	if f.timer != nil {
		f.b.purgatory.cancel(f.timer)
	}
}

// readRequest reads the partitions the request names, each into the response: a sessionless
// or full fetch.
func (f *fetchOp) readRequest(a *fetchAttempt, w *wire.FetchWriter) {
	req := f.req
	for i := range req.Topics {
		rt := &req.Topics[i]
		var topic *meta.Topic
		if req.Version >= 13 {
			topic = a.im.TopicsByID[meta.UUID(rt.TopicID)]
		} else {
			topic = a.im.Topics[rt.Topic]
		}
		w.AddTopic(rt.Topic, rt.TopicID)
		for j := range rt.Partitions {
			if a.blocked {
				return
			}
			rp := &rt.Partitions[j]
			fp, data := a.read(topic, rt.Topic, rp.Partition, requestPartitionFetch(rp))
			if f.newSession {
				a.full = append(a.full, sentPartition{hw: fp.HighWatermark, logStart: fp.LogStartOffset, err: fp.ErrorCode != 0})
			}
			w.AddPartition(fp, recordsOf(data))
		}
	}
}

// readSession reads the partitions of f's session in the session's order and puts into the
// response those Kafka's rule sends (mustSend), noting them in the session's sent list. The
// caller holds the session's lock.
func (f *fetchOp) readSession(a *fetchAttempt, w *wire.FetchWriter) {
	s := f.session
	var (
		topic *meta.Topic
		run   sessionKey // the topic of the partitions read last
		added bool       // whether the response has run's topic at its end
	)
	for i := s.parts.head; i >= 0 && !a.blocked; i = s.parts.items[i].next {
		cp := &s.parts.items[i]
		if i == s.parts.head || cp.key.id != run.id || cp.key.topic != run.topic {
			run, added = cp.key, false
			topic = sessionTopic(a.im, cp.key, s.topicIDs)
		}
		fp, data := a.read(topic, cp.key.topic, cp.key.partition, cp.pf)
		sp := sentPartition{at: i, hw: fp.HighWatermark, logStart: fp.LogStartOffset, err: fp.ErrorCode != 0, records: len(data) > 0}
		if !cp.mustSend(sp.hw, sp.logStart, sp.err, sp.records, fp.DivergingEpoch != nil) {
			continue
		}
		if !added {
			w.AddTopic(cp.key.topic, cp.key.id)
			added = true
		}
		w.AddPartition(fp, recordsOf(data))
		s.sent = append(s.sent, sp)
	}
}

// sessionPartitions are the partitions of f's full request for the session it opens, told
// what full says each was told.
func (f *fetchOp) sessionPartitions(full []sentPartition) sessionPartitions {
	req := f.req
	parts := newSessionPartitions(len(full))
	n := 0
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			k := requestKey(req.Version, rt, rp.Partition)
			parts.upsert(k, requestPartitionFetch(rp))
			cp := &parts.items[parts.index[k]]
			cp.hw, cp.logStart = full[n].hw, full[n].logStart
			if full[n].err {
				cp.hw = -1
			}
			n++
		}
	}
	return parts
}

// commitSent records what the response just built told the fetcher, and moves the partitions
// that returned records to the end of the session, so the others come first next time.
func (s *fetchSession) commitSent() {
	for _, sp := range s.sent {
		cp := &s.parts.items[sp.at]
		cp.hw, cp.logStart = sp.hw, sp.logStart
		if sp.err {
			cp.hw = -1
		}
	}
	for _, sp := range s.sent {
		if sp.records {
			s.parts.moveLast(sp.at)
		}
	}
	s.sent = s.sent[:0]
}

// recordsOf is the record set of a partition in a response: data, or empty.
func recordsOf(data []byte) [][]byte {
	if data == nil {
		return noRecords
	}
	return [][]byte{data}
}

// read reads one partition of topic (nil: unknown; name is the name the fetcher gave, for
// topics it names by name) as pf asks, within what is left of max bytes, and returns its part
// of the response and its records (nil for none). A partition that can be read is added to
// touched, so the fetch parks on it.
func (a *fetchAttempt) read(topic *meta.Topic, name string, index int32, pf partitionFetch) (wire.FetchPartition, []byte) {
	f, b, req := a.f, a.f.b, a.f.req
	fp := wire.NewFetchPartition(index)
	if req.IsolationLevel == 1 {
		fp.AbortedTxns = []wire.FetchAbortedTxn{}
	}
	if topic != nil {
		name = topic.Name
	}
	var p *partition
	switch {
	case topic == nil && req.Version >= 13:
		fp.ErrorCode = kerr.UnknownTopicID.Code
	case f.followerDenied || f.replica < 0 && !f.readable.may(name):
		// As Kafka's KafkaApis, after an unknown topic id and before anything else.
		fp.ErrorCode = kerr.TopicAuthorizationFailed.Code
	case topic == nil:
		fp.ErrorCode = kerr.UnknownTopicOrPartition.Code
	default:
		p = a.tbl.leaderID(topic.ID, index)
		if p == nil {
			switch {
			case a.tbl.offlineAt(topic.ID, index):
				fp.ErrorCode = kerr.KafkaStorageError.Code
			case index >= 0 && int(index) < len(topic.Partitions):
				fp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				fp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
		} else if code := checkLeaderEpoch(topic, index, pf.leaderEpoch); code != nil {
			fp.ErrorCode = code.Code
			p = nil
		} else if f.replica >= 0 && !slices.Contains(p.state().replicas, f.replica) {
			// As Kafka's leader: a replica fetch from a broker that is not a replica
			// (one a reassignment removed, say) is not a known follower.
			fp.ErrorCode = kerr.NotLeaderForPartition.Code
			p = nil
		} else if p.offline() {
			fp.ErrorCode = kerr.KafkaStorageError.Code
			p = nil
		}
	}
	if p == nil {
		a.anyErr = true
		return fp, nil
	}
	hw, leo := p.highWatermark(), p.log().LogEndOffset()
	lso := p.log().LastStableOffset(hw)
	upto := hw
	if f.replica >= 0 {
		upto = leo
	} else if req.IsolationLevel == 1 {
		upto = lso
	}
	a.touched = append(a.touched, p)
	a.seen = append(a.seen, upto)
	fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset = hw, lso, p.log().LogStartOffset()
	if pf.fetchOffset < fp.LogStartOffset || pf.fetchOffset > leo {
		fp.ErrorCode = kerr.OffsetOutOfRange.Code
		a.anyErr = true
		return fp, nil
	}
	if req.Version >= 12 && pf.lastFetchedEpoch >= 0 {
		// KIP-595/KIP-320: a fetcher whose last fetched epoch ends earlier here, or is
		// not known here, diverged and is told where to truncate to.
		ep, end := p.log().EndOffsetForEpoch(pf.lastFetchedEpoch)
		if ep < pf.lastFetchedEpoch || end < pf.fetchOffset {
			fp.DivergingEpoch = &wire.FetchDivergingEpoch{Epoch: ep, EndOffset: end}
			a.anyErr = true
			return fp, nil
		}
	}
	throttled := false
	if f.replica >= 0 {
		b.followerFetched(p, f.replica, f.replicaEpoch(), pf.fetchOffset, a.now)
		fp.HighWatermark = p.highWatermark()
		fp.LastStableOffset = p.log().LastStableOffset(fp.HighWatermark)
		// A throttled replica's bytes count against the leader's throttle; a follower out of
		// the ISR gets none while the throttle is exceeded (quota.go).
		throttled = b.quotas.leader.bounded() && p.throttledReplica(a.im, leaderThrottledReplicas, b.cfg.NodeID)
		if throttled && !slices.Contains(p.state().isr, f.replica) && b.quotas.leader.exceeded(a.now) {
			return fp, nil
		}
	} else {
		p.log().NoteReader(pf.fetchOffset, a.now)
	}
	limit := int(pf.maxBytes)
	if room := a.maxBytes - a.total; room < limit {
		limit = room
	}
	if pf.fetchOffset >= upto || limit <= 0 && a.total > 0 {
		return fp, nil
	}
	rr, err := p.read(pf.fetchOffset, max(limit, 0), upto, a.total == 0, a.onLoop)
	if err != nil {
		if errors.Is(err, rlog.ErrWouldBlock) {
			a.blocked = true
			return fp, nil
		}
		if errors.Is(err, rlog.ErrOffsetOutOfRange) {
			fp.ErrorCode = kerr.OffsetOutOfRange.Code
		} else {
			b.logger.Error("fetch read", "topic", p.topic, "partition", p.index, "offset", pf.fetchOffset, "err", err)
			fp.ErrorCode = kerr.KafkaStorageError.Code
		}
		a.anyErr = true
		return fp, nil
	}
	if req.IsolationLevel == 1 && len(rr.Data) > 0 {
		fp.AbortedTxns = p.abortedTxns(pf.fetchOffset, upto)
	}
	a.reads = append(a.reads, rr)
	a.readFrom = append(a.readFrom, p)
	a.total += len(rr.Data)
	if a.onLoop && a.total > loopFetchMaxBytes {
		// Its copy into the socket would hold up the loop's other connections: the partitions
		// left are not read.
		a.blocked = true
	}
	if throttled {
		b.quotas.leader.record(a.now, len(rr.Data))
	}
	return fp, rr.Data
}

// fetchPieces appends to dst the response's iovecs as pieces to send, the record data as slices of
// the mapped segments (io.fetch.sendfile=false, the default: on loopback, sendmsg from the
// mapping and dropping the pages after costs 0.65x the CPU per MiB of sendfile on io_uring and
// 0.85x on netpoll, medians of 3 runs of BenchmarkSendFileVsMmap in ring/ below load 1).
func fetchPieces(dst []ring.Piece, iov [][]byte) []ring.Piece {
	for _, b := range iov {
		dst = append(dst, ring.Bytes(b))
	}
	return dst
}

// fetchFilePieces appends to dst the response's iovecs as pieces to send with
// io.fetch.sendfile=true: the record data of each read as a range of its segment file,
// written with sendfile from the page cache (zero-copy to a NIC), so the broker never maps
// served data in; the encoded metadata as bytes.
func fetchFilePieces(dst []ring.Piece, iov [][]byte, reads []rlog.ReadResult) []ring.Piece {
	next := 0
	for _, b := range iov {
		if next < len(reads) && len(b) > 0 && len(b) == len(reads[next].Data) && &b[0] == &reads[next].Data[0] {
			rr := &reads[next]
			dst = append(dst, ring.FileRange(rr.FD, rr.Pos, len(rr.Data)))
			next++
			continue
		}
		dst = append(dst, ring.Bytes(b))
	}
	return dst
}

// checkLeaderEpoch compares the client's current leader epoch with ours: a newer one means our
// metadata is behind (UNKNOWN_LEADER_EPOCH), an older one that the client's is stale
// (FENCED_LEADER_EPOCH); -1 skips the check.
func checkLeaderEpoch(t *meta.Topic, index, clientEpoch int32) *kerr.Error {
	if clientEpoch < 0 || index < 0 || int(index) >= len(t.Partitions) {
		return nil
	}
	ours := t.Partitions[index].LeaderEpoch
	switch {
	case clientEpoch > ours:
		return kerr.UnknownLeaderEpoch
	case clientEpoch < ours:
		return kerr.FencedLeaderEpoch
	}
	return nil
}
