package broker

// Fetch (key 1), versions 4-18.
//
// Consumer fetches with isolation read_uncommitted and read_committed (the same until
// transactions land: the last stable offset equals the high watermark). Each partition is read up
// to its partition max bytes and the response up to max bytes, except that the first partition
// with data returns at least one whole batch (KIP-74). When fewer than min bytes are ready the
// fetch parks on its partitions and is answered on the next append that brings enough, or when
// max wait elapses (a deadline in the purgatory; retries run on handler workers). Record bytes
// are never copied in user space: the response is small encoded pieces plus slices of the
// mapped segments, written with sendmsg, whose pages are unmapped again once the kernel has
// them (or, with io.fetch.sendfile, ranges of the segment files written with sendfile); the
// segments are held until the kernel is done with them.
// Fetch sessions (KIP-227) are not created: every response carries session id 0, which clients
// treat as "full fetch each time". v13+ names topics by id. A follower's fetch (a replica id,
// v15+ in ReplicaState) reads up to the log end instead of the high watermark, records how far
// the follower has come (which moves the high watermark and may add it to the ISR), and, with
// its last fetched epoch (v12+), is told of a divergence (DivergingEpoch) to truncate to. A
// replica fetch from a broker that is not one of the partition's replicas is
// NOT_LEADER_OR_FOLLOWER, as Kafka answers an unknown follower. A follower fetch of a replica
// listed in leader.replication.throttled.replicas is held to leader.replication.throttled.rate
// while the follower is out of the ISR: over the rate, the partition returns no records.

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
	"ringbroker/internal/mpsc"
	"ringbroker/internal/timingwheel"
	rlog "ringbroker/log"
	"ringbroker/ring"
	"ringbroker/wire"
)

var fetchAPI = &api{key: kmsg.Fetch, minVersion: 4, maxVersion: 18, handle: handleFetch}

// noRecords is an empty, non-null record set: Kafka sends a zero length rather than null for a
// partition without data, and librdkafka refuses null.
var noRecords = [][]byte{}

// maxFetchWait bounds how long a fetch may park, whatever the client asks.
const maxFetchWait = 5 * time.Minute

func handleFetch(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.FetchRequest)
	replica := req.ReplicaID
	if req.Version >= 15 {
		replica = req.ReplicaState.ID
	}
	if req.SessionID != 0 {
		// We never hand out sessions, so any id is unknown.
		resp := kmsg.NewPtrFetchResponse()
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		rc.respond(resp)
		return
	}
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if wait > maxFetchWait {
		wait = maxFetchWait
	}
	if replica >= 0 && rc.cs.follower.Load() != replica+1 {
		rc.cs.follower.Store(replica + 1)
	}
	f := &fetchOp{b: b, rc: rc, cs: rc.cs, req: req, replica: replica}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.attemptLocked(wait <= 0) {
		return
	}
	f.timer = b.purgatory.after(time.Now().Add(wait), f.expire)
}

// fetchOp is one Fetch request, possibly parked on its partitions. Retries run on handler
// workers: it is a task.
type fetchOp struct {
	b  *Broker
	rc *reqCtx // until the response goes out (done), when it is recycled
	// cs is rc's connection, which wake-ups that come after the response still name.
	cs  *connState
	req *kmsg.FetchRequest
	// replica is the fetching follower's node id, or -1 for a consumer. A follower reads up to
	// the log end, a consumer up to the high watermark.
	replica int32

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
	timer  *timingwheel.Timer // guarded by mu
}

func (f *fetchOp) queueNode() *mpsc.Node[task] { return &f.node }

// wake queues a retry of f on a worker unless one is queued already.
func (f *fetchOp) wake() {
	if f.queued.CompareAndSwap(false, true) {
		f.b.handlers.dispatch(f.cs.c.Loop(), f.cs.c.ID(), f)
	}
}

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
	f.attemptLocked(final)
}

// readLimit is the offset f reads up to in p: the log end for a follower, the high watermark
// for a consumer.
func (f *fetchOp) readLimit(p *partition) int64 {
	if f.replica >= 0 {
		return p.log.LogEndOffset()
	}
	return p.highWatermark()
}

// park registers f on its partitions, once; later attempts that park again keep it there.
// seen[i] is the read limit touched[i] had when the attempt read it: an append (or a move of
// the high watermark) that came between that read and the registration would find no waiter,
// so it is checked for here.
func (f *fetchOp) park(touched []*partition, seen []int64) {
	if f.parked != nil {
		return
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
			return
		}
	}
}

// unpark removes f from the partitions it was parked on.
func (f *fetchOp) unpark() {
	for _, p := range f.parked {
		p.waitMu.Lock()
		delete(p.waiters, f)
		p.waitMu.Unlock()
	}
	f.parked = nil
}

// wakeWaiters makes every fetch parked on p look again; Produce calls it after each append and
// the high watermark's moves call it too. A
// fetch stays registered until it completes, so waking costs nothing when no fetch waits and
// does not pile up stale registrations when one does.
func (p *partition) wakeWaiters() {
	p.waitMu.Lock()
	for f := range p.waiters {
		f.wake()
	}
	p.waitMu.Unlock()
}

// attemptLocked reads every partition; it responds and returns true when min bytes are ready,
// an error must be reported, the broker is closing or final is set. Otherwise it parks the
// fetch on its partitions and returns false.
func (f *fetchOp) attemptLocked(final bool) bool {
	b, req := f.b, f.req
	tbl := b.parts.Load()
	im := b.meta.Image()
	var reads []rlog.ReadResult
	release := func() {
		for _, rr := range reads {
			rr.Release()
		}
	}
	w := &wire.FetchWriter{}
	if err := w.Reset(f.rc.hdr, 0, 0, 0); err != nil {
		// The version range is checked before dispatch, so this is a programming error.
		panic(err)
	}
	total := 0
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	anyErr := false
	var touched []*partition
	var seen []int64 // read limits of touched, as read
	now := time.Now()
	for i := range req.Topics {
		rt := &req.Topics[i]
		var topic *meta.Topic
		if req.Version >= 13 {
			topic = im.TopicsByID[meta.UUID(rt.TopicID)]
		} else {
			topic = im.Topics[rt.Topic]
		}
		w.AddTopic(rt.Topic, rt.TopicID)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			fp := wire.NewFetchPartition(rp.Partition)
			if req.IsolationLevel == 1 {
				fp.AbortedTxns = []wire.FetchAbortedTxn{}
			}
			var p *partition
			switch {
			case topic == nil && req.Version >= 13:
				fp.ErrorCode = kerr.UnknownTopicID.Code
			case topic == nil:
				fp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				p = tbl.leaderID(topic.ID, rp.Partition)
				if p == nil {
					fp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					if rp.Partition >= 0 && int(rp.Partition) < len(topic.Partitions) {
						fp.ErrorCode = kerr.NotLeaderForPartition.Code
					}
				} else if code := checkLeaderEpoch(topic, rp.Partition, rp.CurrentLeaderEpoch); code != nil {
					fp.ErrorCode = code.Code
					p = nil
				} else if f.replica >= 0 && !slices.Contains(p.state().replicas, f.replica) {
					// As Kafka's leader: a replica fetch from a broker that is not a replica
					// (one a reassignment removed, say) is not a known follower.
					fp.ErrorCode = kerr.NotLeaderForPartition.Code
					p = nil
				}
			}
			if p == nil {
				anyErr = true
				w.AddPartition(fp, noRecords)
				continue
			}
			hw, leo := p.highWatermark(), p.log.LogEndOffset()
			upto := hw
			if f.replica >= 0 {
				upto = leo
			}
			touched = append(touched, p)
			seen = append(seen, upto)
			fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset = hw, hw, p.log.LogStartOffset()
			if rp.FetchOffset < fp.LogStartOffset || rp.FetchOffset > leo {
				fp.ErrorCode = kerr.OffsetOutOfRange.Code
				anyErr = true
				w.AddPartition(fp, noRecords)
				continue
			}
			if req.Version >= 12 && rp.LastFetchedEpoch >= 0 {
				// KIP-595/KIP-320: a fetcher whose last fetched epoch ends earlier here, or is
				// not known here, diverged and is told where to truncate to.
				ep, end := p.log.EndOffsetForEpoch(rp.LastFetchedEpoch)
				if ep < rp.LastFetchedEpoch || end < rp.FetchOffset {
					fp.DivergingEpoch = &wire.FetchDivergingEpoch{Epoch: ep, EndOffset: end}
					anyErr = true
					w.AddPartition(fp, noRecords)
					continue
				}
			}
			throttled := false
			if f.replica >= 0 {
				b.followerFetched(p, f.replica, rp.FetchOffset, now)
				fp.HighWatermark, fp.LastStableOffset = p.highWatermark(), p.highWatermark()
				// A throttled replica's bytes count against the leader's throttle; a follower
				// out of the ISR gets none while the throttle is exceeded (quota.go).
				throttled = b.quotas.leader.bounded() && p.throttledReplica(im, leaderThrottledReplicas, b.cfg.NodeID)
				if throttled && !slices.Contains(p.state().isr, f.replica) && b.quotas.leader.exceeded(now) {
					w.AddPartition(fp, noRecords)
					continue
				}
			}
			limit := int(rp.PartitionMaxBytes)
			if room := maxBytes - total; room < limit {
				limit = room
			}
			if rp.FetchOffset >= upto || limit <= 0 && total > 0 {
				w.AddPartition(fp, noRecords)
				continue
			}
			rr, err := p.log.Read(rp.FetchOffset, max(limit, 0), upto, total == 0)
			if err != nil {
				if errors.Is(err, rlog.ErrOffsetOutOfRange) {
					fp.ErrorCode = kerr.OffsetOutOfRange.Code
				} else {
					b.logger.Error("fetch read", "topic", p.topic, "partition", p.index, "offset", rp.FetchOffset, "err", err)
					fp.ErrorCode = kerr.KafkaStorageError.Code
				}
				anyErr = true
				w.AddPartition(fp, noRecords)
				continue
			}
			reads = append(reads, rr)
			total += len(rr.Data)
			if throttled {
				b.quotas.leader.record(now, len(rr.Data))
			}
			b.metrics.topicBytesOut(p.topic, len(rr.Data))
			w.AddPartition(fp, [][]byte{rr.Data})
		}
	}
	if !final && !anyErr && total < int(req.MinBytes) && len(touched) > 0 && !b.closing.Load() {
		release()
		f.park(touched, seen)
		return false
	}
	f.done = true
	f.unpark()
	if f.timer != nil {
		b.purgatory.cancel(f.timer)
	}
	if b.cfg.FetchSendfile {
		f.rc.respondPieces(fetchFilePieces(w.Finish(), reads), release)
		return true
	}
	f.rc.respondPieces(fetchPieces(w.Finish()), func() {
		// The kernel has copied the record bytes out of the mapping: give its pages back, so
		// the process's resident memory does not grow with what it serves.
		for _, rr := range reads {
			rlog.DropMapped(rr.Data)
		}
		release()
	})
	return true
}

// fetchPieces turns the response's iovecs into pieces to send, the record data as slices of
// the mapped segments (io.fetch.sendfile=false, the default: on loopback, sendmsg from the
// mapping and dropping the pages after costs 0.65x the CPU per MiB of sendfile on io_uring and
// 0.85x on netpoll, medians of 3 runs of BenchmarkSendFileVsMmap in ring/ below load 1).
func fetchPieces(iov [][]byte) []ring.Piece {
	pieces := make([]ring.Piece, len(iov))
	for i, b := range iov {
		pieces[i] = ring.Bytes(b)
	}
	return pieces
}

// fetchFilePieces turns the response's iovecs into pieces to send with
// io.fetch.sendfile=true: the record data of each read as a range of its segment file,
// written with sendfile from the page cache (zero-copy to a NIC), so the broker never maps
// served data in; the encoded metadata as bytes.
func fetchFilePieces(iov [][]byte, reads []rlog.ReadResult) []ring.Piece {
	pieces := make([]ring.Piece, len(iov))
	next := 0
	for i, b := range iov {
		pieces[i] = ring.Bytes(b)
		if next < len(reads) && len(b) > 0 && len(b) == len(reads[next].Data) && &b[0] == &reads[next].Data[0] {
			rr := &reads[next]
			pieces[i] = ring.FileRange(rr.FD, rr.Pos, len(rr.Data))
			next++
		}
	}
	return pieces
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
