package broker

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/mpsc"
	"ringbroker/quota"
	"ringbroker/ring"
	"ringbroker/wire"
)

// fillMinBytes is the smallest rest of a frame received straight into its buffer (Next.Fill)
// instead of through the event loop's receive buffers.
const fillMinBytes = 16 << 10

// requestBudget is how many requests of one connection a worker runs before it lets the
// other connections queued on it have a turn.
const requestBudget = 16

// connHandler adapts the broker to ring.Handler. On the event loop it splits the stream into
// frames, each received into a buffer of its own from the request memory pool, and queues them;
// handler workers decode and run them, one request of a connection at a time, and responses go
// out in request order. On an io_uring thread (io.inline.requests) a request of an API that
// cannot block there runs at once on the loop, when nothing of its connection is queued.
type connHandler struct {
	b        *Broker
	listener *listenerSec
	// apis are the APIs served on the listener; controller marks the controller listener's
	// Kafka clients (controllerlistener.go).
	apis       *apiTable
	controller bool
}

// connState is the per-connection state kept in ring.Conn's context.
type connState struct {
	b      *Broker
	c      ring.Conn
	frames *wire.FrameReader
	// follower is the node id + 1 of the follower that fetched over this connection, 0 for a
	// client's: its close makes the leader check whether the follower died.
	follower atomic.Int32
	// listener is the listener the connection came in on; auth is who its requests run as.
	listener *listenerSec
	auth     *connAuth
	// apis are the APIs the listener serves; controller is set on the controller listener.
	apis       *apiTable
	controller bool
	// inline: requests of inline APIs may run on the event loop that read them
	// (io.inline.requests on a thread shared by connections).
	inline bool
	// loopYielded is set by reqCtx.handOff while the event loop runs the connection's turn;
	// only the loop reads and clears it.
	loopYielded bool
	// woken are the fetches that appends of the request the event loop runs woke, for the loop
	// to run once the request is answered (runWoken). Only the loop touches it.
	woken []*fetchOp
	// software is the client's name and version from its ApiVersions (KIP-511), which client
	// metrics subscriptions may match on; nil until a valid one of v3 or later.
	software atomic.Pointer[clientSoftware]
	// mutedUntil (Unix nanoseconds; mutedForever while waiting for a connection slot) stops
	// reading while the connection is throttled by a quota, as Kafka mutes a throttled channel.
	mutedUntil atomic.Int64
	// counted: the connection holds a place in the connection quotas, at quotaIP (set on the
	// event loop before any other goroutine sees the connection).
	counted atomic.Bool
	quotaIP netip.Addr
	// alloc and resume are FrameAlloc and a pool wake-up bound once, so feeding allocates
	// nothing.
	alloc  wire.FrameAlloc
	resume func()

	// nextSeq numbers requests as they arrive; it is touched only by the event loop.
	nextSeq uint64
	// inflight counts requests read whose response is not yet written to the socket (or
	// dropped, for requests without one). At maxInflight the connection stops reading until a
	// response goes out (Kafka mutes a channel until its response is sent), so a client that
	// pipelines without reading its responses holds at most maxInflight of them.
	inflight    atomic.Int32
	maxInflight int32

	// The run queue: frames read, in order, that a worker has not yet started.
	qmu sync.Mutex
	// reqs[reqHead:] are the queued frames (guarded by qmu); the slice is reused from its start
	// once empty, so queueing allocates nothing at steady state.
	reqs      []queuedFrame
	reqHead   int
	scheduled bool // guarded by qmu: the connection is queued on a worker or running
	node      mpsc.Node[task]

	mu sync.Mutex
	// sendSeq is the sequence number of the next response to send; responses that finish early
	// wait in pending until every earlier one is sent, so clients see request order.
	sendSeq uint64
	pending map[uint64]outgoing
	closed  bool
	// corked holds responses that are next in order while a worker runs more requests of this
	// connection that were already queued (guarded by mu): they go out together in one write
	// when the run ends, instead of one system call each.
	corked      []outgoing
	corkedBytes int
	cork        bool
}

// queuedFrame is one request frame waiting for a worker, owned by the connection until it is
// answered; the frame's memory returns to the pool then.
type queuedFrame struct {
	seq   uint64
	frame []byte
}

// outgoing is one finished response waiting for its turn.
type outgoing struct {
	pieces []ring.Piece // nil: the request has no response (acks=0)
	done   func()
	close  bool // close the connection once this response (if any) is written
}

// errNotReady closes a client connection that sends before the broker caught up with the
// metadata log.
var errNotReady = errors.New("broker is catching up with the metadata log")

func (h *connHandler) OnOpen(c ring.Conn) {
	b := h.b
	cs := &connState{b: b, c: c, pending: map[uint64]outgoing{}, maxInflight: int32(b.cfg.MaxInflightPerConn), listener: h.listener,
		apis: h.apis, controller: h.controller}
	cs.resume = c.Resume
	cs.inline = b.cfg.InlineRequests && c.Shared()
	cs.alloc = func(n int) []byte { return b.reqPool.GetOrWait(n, cs.resume) }
	cs.auth = newConnAuth(h.listener, h.listener.tlsPrincipal(c.TLS()))
	maxFrame := int32(b.cfg.SocketRequestMax)
	if h.listener.authenticates() {
		// Small frames until the client has authenticated: no large allocation on the word
		// of an unknown peer (Kafka's sasl.server.max.receive.size).
		maxFrame = min(maxFrame, b.cfg.Security.SaslMaxReceive)
	}
	cs.frames = wire.NewFrameReader(maxFrame, cs.alloc)
	c.SetContext(cs)
	b.metrics.connOpened()
	if h.listener.authenticates() {
		time.AfterFunc(b.cfg.Security.AuthTimeout, func() {
			if !cs.auth.authenticated() {
				b.logger.Info("closing a connection that did not authenticate in time", "listener", h.listener.name,
					"remote", c.RemoteAddr().String(), "timeout", b.cfg.Security.AuthTimeout)
				c.Close()
			}
		})
	}
	b.clientQuotas.admit(cs)
}

// mutedForever mutes a connection until unmuteAfter.
const mutedForever = math.MaxInt64

// muted reports whether the connection is held unread by a quota now.
func (cs *connState) muted() bool {
	u := cs.mutedUntil.Load()
	return u != 0 && (u == mutedForever || time.Now().UnixNano() < u)
}

// mute holds the connection unread until unmuteAfter.
func (cs *connState) mute() { cs.mutedUntil.Store(mutedForever) }

// muteFor holds the connection unread for d (a throttle time), or longer if already muted
// for longer.
func (cs *connState) muteFor(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := cs.mutedUntil.Load()
		if cur >= until || cs.mutedUntil.CompareAndSwap(cur, until) {
			break
		}
	}
	time.AfterFunc(d, cs.c.Resume)
}

// unmuteAfter lets a connection muted for good read again after d.
func (cs *connState) unmuteAfter(d time.Duration) {
	cs.mutedUntil.Store(time.Now().Add(d).UnixNano())
	time.AfterFunc(d, cs.c.Resume)
}

func (h *connHandler) OnData(c ring.Conn, data []byte) (ring.Next, error) {
	if !h.b.ready.Load() {
		return ring.Next{}, errNotReady
	}
	cs := c.Context().(*connState)
	if cs.muted() {
		// Held by a quota (a connection waiting for a slot, a creation-rate delay, a
		// throttle): its bytes stay unread until Resume, as Kafka leaves a muted channel.
		cs.b.metrics.connPaused()
		return ring.Next{Pause: true}, nil
	}
	n, err := cs.frames.Feed(data, cs.onFrame)
	if err != nil {
		return ring.Next{}, err
	}
	return cs.next(n, len(data)), nil
}

func (h *connHandler) OnFilled(c ring.Conn) (ring.Next, error) {
	cs := c.Context().(*connState)
	if err := cs.frames.Filled(len(cs.frames.Tail()), cs.onFrame); err != nil {
		return ring.Next{}, err
	}
	return cs.next(0, 0), nil
}

// next says how reading goes on after n of m bytes were fed: paused while the connection is
// at its in-flight limit or waits for memory, with the rest of a large frame received straight
// into its buffer, or as usual.
func (cs *connState) next(n, m int) ring.Next {
	switch {
	case n < m || cs.frames.Stalled() || cs.inflight.Load() >= cs.maxInflight || cs.muted():
		cs.b.metrics.connPaused()
		return ring.Next{Consumed: n, Pause: true}
	case len(cs.frames.Tail()) >= fillMinBytes:
		return ring.Next{Consumed: n, Fill: cs.frames.Tail()}
	}
	return ring.Next{Consumed: n}
}

func (h *connHandler) OnClose(c ring.Conn, err error) {
	cs := c.Context().(*connState)
	h.b.clientQuotas.release(cs)
	if id := cs.follower.Load(); id > 0 {
		h.b.followerDisconnected(id - 1)
	}
	cs.frames.Release(h.b.reqPool.Put)
	cs.mu.Lock()
	cs.closed = true
	pending := cs.pending
	cs.pending = nil
	cs.mu.Unlock()
	for _, o := range pending {
		if o.done != nil {
			o.done()
		}
	}
	cs.qmu.Lock()
	if !cs.scheduled {
		// No worker will look at the queue again: give its frames back here.
		for _, q := range cs.reqs[cs.reqHead:] {
			h.b.reqPool.Put(q.frame)
		}
		cs.reqs, cs.reqHead = nil, 0
	}
	cs.qmu.Unlock()
	h.b.metrics.connClosed()
}

// onFrame queues one complete request frame (owned from here) for a worker. At the in-flight
// limit it stops the frame reader, which leaves the rest of the data for after Resume.
func (cs *connState) onFrame(frame []byte) error {
	seq := cs.nextSeq
	cs.nextSeq++
	cs.qmu.Lock()
	cs.reqs = append(cs.reqs, queuedFrame{seq: seq, frame: frame})
	schedule := !cs.scheduled
	cs.scheduled = true
	cs.qmu.Unlock()
	// Counted before it runs: an inline request may be answered before this returns.
	cs.inflight.Add(1)
	if schedule {
		if a := cs.inlineAPI(frame); a != nil {
			cs.b.metrics.inlineRequests[a.key].Inc()
			cs.runTurn(true)
		} else {
			cs.b.handlers.dispatch(cs.c.Loop(), cs.c.ID(), cs)
		}
	}
	if cs.inflight.Load() >= cs.maxInflight {
		return wire.ErrStopFeed
	}
	return nil
}

// inlineAPI is the API of the request in frame when the connection runs it on the event loop.
func (cs *connState) inlineAPI(frame []byte) *api {
	if !cs.inline {
		return nil
	}
	return cs.apis.inlineAPI(frame)
}

// handOff moves the rest of request rc, which the event loop is running, to a handler worker,
// where rest runs it (no longer onLoop) and the connection's turn goes on: for a request that
// finds it would block after all. Only a handler running on the loop (rc.onLoop) calls it.
func (rc *reqCtx) handOff(rest func()) {
	rc.onLoop = false
	cs := rc.cs
	cs.loopYielded = true
	cs.b.metrics.inlineHandedOff[rc.hdr.APIKey].Inc()
	cs.b.handlers.dispatch(cs.c.Loop(), cs.c.ID(), &resumeTask{cs: cs, rest: rest})
}

// resumeTask is a request handed off by the event loop and the rest of its connection's turn.
type resumeTask struct {
	node mpsc.Node[task]
	cs   *connState
	rest func()
}

func (t *resumeTask) queueNode() *mpsc.Node[task] { return &t.node }

func (t *resumeTask) run() {
	t.rest()
	t.cs.run()
}

func (cs *connState) queueNode() *mpsc.Node[task] { return &cs.node }

// run is the worker's turn with this connection: its queued requests in order, up to a
// budget, then back in line if more are left.
func (cs *connState) run() { cs.runTurn(false) }

// runTurn runs the connection's queued requests, on a worker or (onLoop) on the event loop,
// where the turn ends early if a request hands itself off.
func (cs *connState) runTurn(onLoop bool) {
	for range requestBudget {
		cs.qmu.Lock()
		if cs.reqHead == len(cs.reqs) {
			cs.scheduled = false
			cs.reqs, cs.reqHead = cs.reqs[:0], 0
			cs.qmu.Unlock()
			return
		}
		q := cs.reqs[cs.reqHead]
		cs.reqs[cs.reqHead] = queuedFrame{}
		cs.reqHead++
		more := cs.reqHead < len(cs.reqs)
		cs.qmu.Unlock()
		cs.mu.Lock()
		closed := cs.closed
		// While more requests are queued behind this one, its response waits for theirs.
		cs.cork = more
		cs.mu.Unlock()
		if closed {
			cs.b.reqPool.Put(q.frame)
			continue
		}
		cs.handleFrame(q.seq, q.frame, onLoop)
		if onLoop && cs.loopYielded {
			// The worker that took the request over owns the turn now.
			cs.loopYielded = false
			cs.runWoken()
			return
		}
		if !more {
			cs.uncork()
		}
		if onLoop {
			cs.runWoken()
		}
	}
	cs.uncork()
	cs.b.handlers.dispatch(cs.c.Loop(), cs.c.ID(), cs)
}

// uncork writes the corked responses.
func (cs *connState) uncork() {
	cs.mu.Lock()
	cs.cork = false
	cs.flushLocked()
	cs.mu.Unlock()
}

// reqCtx is one request in flight: where and in which order its response goes. It owns the
// request frame: everything decoded from it may alias the frame, which returns to the pool only
// once the request is answered, whenever that is. An API whose code keeps request data after
// answering declares keepsRequest and gets a decoded copy instead. A reqCtx is recycled once
// its response is written (reqCtxPool), so nothing may keep it after answering.
type reqCtx struct {
	cs  *connState
	seq uint64
	// onLoop says the handler runs on the event loop: it must not block, and hands the
	// request off (handOff) where it would.
	onLoop   bool
	hdr      wire.RequestHeader
	api      *api
	start    time.Time
	frame    []byte
	answered atomic.Bool
	// reqBytes is the size of the request frame, which a produce quota counts.
	reqBytes int

	// piece holds a response encoded by respond, in respBuf when that came from the request
	// memory pool; done is what the API asked to run once the response is written.
	piece   [1]ring.Piece
	respBuf []byte
	done    func()
	// sentFn is rc.sent, bound once so that handing it to the connection allocates nothing.
	sentFn func()
	// produce and produceResp are the Produce request decoded into and the response built,
	// kept with their slices from one request to the next.
	produce     kmsg.ProduceRequest
	produceResp kmsg.ProduceResponse
	produceRun  produceRun
}

// reqCtxPool recycles request contexts with the decoding and response memory they keep, so
// that a request of a steady shape allocates nothing.
type reqCtxPool struct{ pool sync.Pool }

// get is a context for request seq of cs, received in frame.
func (p *reqCtxPool) get(cs *connState, seq uint64, frame []byte) *reqCtx {
	rc, _ := p.pool.Get().(*reqCtx)
	if rc == nil {
		rc = &reqCtx{}
		rc.sentFn = rc.sent
	}
	rc.cs, rc.seq, rc.start, rc.frame = cs, seq, time.Now(), frame
	return rc
}

// put takes back a context whose response is written or dropped.
func (p *reqCtxPool) put(rc *reqCtx) {
	rc.cs, rc.hdr, rc.api, rc.frame, rc.respBuf, rc.done, rc.onLoop = nil, wire.RequestHeader{}, nil, nil, nil, nil, false
	rc.piece[0] = ring.Piece{}
	waits := rc.produceRun.waits
	clear(waits)
	rc.produceRun = produceRun{waits: waits[:0]}
	rc.answered.Store(false)
	p.pool.Put(rc)
}

// handleFrame parses, decodes and runs one request. A request Kafka cannot parse closes the
// connection after the responses before it.
func (cs *connState) handleFrame(seq uint64, frame []byte, onLoop bool) {
	b := cs.b
	rc := b.reqCtxs.get(cs, seq, frame)
	rc.onLoop = onLoop
	hdr, body, err := wire.ParseRequestHeader(frame)
	if err != nil {
		var unk *wire.UnsupportedRequestError
		if errors.As(err, &unk) && unk.APIKey == kmsg.ApiVersions.Int16() {
			// An ApiVersions version we do not know: answer with UNSUPPORTED_VERSION in a v0
			// body listing what we serve, so the client can downgrade.
			rc.finish(ring.Bytes(cs.apis.apiVersionsUnsupported(unk.CorrelationID)), nil, false)
			return
		}
		rc.reject(fmt.Errorf("request header: %w", err))
		return
	}
	rc.hdr = hdr
	a := cs.apis.lookup(hdr.APIKey)
	if a == nil || hdr.APIVersion < a.minVersion || hdr.APIVersion > a.maxVersion {
		if hdr.APIKey == kmsg.ApiVersions.Int16() {
			rc.finish(ring.Bytes(cs.apis.apiVersionsUnsupported(hdr.CorrelationID)), nil, false)
			return
		}
		rc.reject(fmt.Errorf("unsupported api key %d version %d", hdr.APIKey, hdr.APIVersion))
		return
	}
	rc.api = a
	rc.reqBytes = len(frame)
	if !cs.auth.admits(hdr.APIKey, rc.start) {
		rc.reject(fmt.Errorf("%s before the connection authenticated, or after its session expired", kmsg.NameForKey(hdr.APIKey)))
		return
	}
	var req kmsg.Request
	if a.decode != nil {
		req, err = a.decode(rc, body)
	} else {
		req = kmsg.RequestForKey(hdr.APIKey)
		req.SetVersion(hdr.APIVersion)
		if a.keepsRequest {
			rc.hdr.ClientID = strings.Clone(hdr.ClientID)
			err = req.ReadFrom(body)
		} else {
			err = req.(interface{ UnsafeReadFrom([]byte) error }).UnsafeReadFrom(body)
		}
	}
	if err != nil {
		rc.reject(fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, err))
		return
	}
	// rc, and the header that aliases the frame, may be gone once the handler has answered.
	measure, user, clientID := b.clientQuotas.measuresRequests(cs, hdr)
	switch {
	case !measure:
		a.handle(b, rc, req)
	case onLoop:
		// A request time quota measures the whole handler: on a worker, where all of it runs.
		rc.handOff(func() { cs.handleMeasured(a, rc, req, user, clientID) })
	default:
		cs.handleMeasured(a, rc, req, user, clientID)
	}
}

// handleMeasured runs a request whose handler time counts against the client's request quota.
func (cs *connState) handleMeasured(a *api, rc *reqCtx, req kmsg.Request, user, clientID string) {
	start := time.Now()
	a.handle(cs.b, rc, req)
	if d := cs.b.clientQuotas.client.RecordRequestTime(user, clientID, time.Since(start)); d > 0 {
		cs.muteFor(d)
	}
}

// reject answers a request Kafka cannot parse by closing the connection after the responses
// before it.
func (rc *reqCtx) reject(err error) {
	rc.cs.b.logger.Debug("closing connection after a bad request", "remote", rc.cs.c.RemoteAddr().String(), "err", err)
	rc.finishWith(nil, nil, true)
}

// responseBufBytes is the pool buffer a response is first encoded into; a larger response
// grows out of it onto the heap.
const responseBufBytes = 4 << 10

// respond encodes resp at the request's version and queues it in order.
func (rc *reqCtx) respond(resp kmsg.Response) { rc.respondAndMaybeClose(resp, false) }

// respondAndClose answers the request and closes the connection once the answer is written,
// as Kafka does after a failed authentication.
func (rc *reqCtx) respondAndClose(resp kmsg.Response) { rc.respondAndMaybeClose(resp, true) }

func (rc *reqCtx) respondAndMaybeClose(resp kmsg.Response, close bool) {
	resp.SetVersion(rc.hdr.APIVersion)
	if rc.hdr.APIKey == kmsg.Produce.Int16() {
		rc.throttle(resp, rc.recordQuota(quota.Produce, float64(rc.reqBytes)))
	}
	pool := rc.cs.b.reqPool
	start := pool.Get(responseBufBytes)
	buf := wire.AppendResponse(start[:0], rc.hdr, resp)
	if start == nil || &buf[:1][0] != &start[:1][0] {
		// Outgrown (or the pool was full): the heap copy is the response.
		pool.Put(start)
		start = nil
	}
	rc.respBuf = start
	rc.piece[0] = ring.Bytes(buf)
	rc.finishWith(rc.piece[:], nil, close)
}

// respondPieces queues an already-framed response; done runs once the kernel no longer
// references the pieces.
func (rc *reqCtx) respondPieces(pieces []ring.Piece, done func()) { rc.finishWith(pieces, done, false) }

// noResponse completes a request that Kafka does not answer (Produce with acks=0).
func (rc *reqCtx) noResponse() { rc.finishWith(nil, nil, false) }

// closeConn closes the connection after a request that Kafka answers by disconnecting.
func (rc *reqCtx) closeConn() { rc.finishWith(nil, nil, true) }

func (rc *reqCtx) finish(p ring.Piece, done func(), close bool) {
	rc.piece[0] = p
	rc.finishWith(rc.piece[:], done, close)
}

// finishWith answers the request exactly once: it gives the frame back and queues the response
// in order; sent completes it once the response is written.
func (rc *reqCtx) finishWith(pieces []ring.Piece, done func(), close bool) {
	if !rc.answered.CompareAndSwap(false, true) {
		panic(fmt.Sprintf("request %d of conn %d answered twice", rc.seq, rc.cs.c.ID()))
	}
	cs := rc.cs
	if rc.api != nil {
		cs.b.metrics.observe(rc.hdr.APIKey, time.Since(rc.start))
	}
	cs.b.reqPool.Put(rc.frame)
	rc.frame = nil
	rc.done = done
	cs.deliver(rc.seq, outgoing{pieces: pieces, done: rc.sentFn, close: close})
}

// sent runs once the response is written, or dropped with the connection (at once for a
// request without one): it gives back the response buffer, runs the API's done, lets the
// connection read again if it waited for this and recycles rc.
func (rc *reqCtx) sent() {
	cs := rc.cs
	if rc.respBuf != nil {
		cs.b.reqPool.Put(rc.respBuf)
	}
	if rc.done != nil {
		rc.done()
	}
	cs.responseGone()
	cs.b.reqCtxs.put(rc)
}

// responseGone counts one response written (or dropped) and lets the connection read again
// if it waited for that.
func (cs *connState) responseGone() {
	if cs.inflight.Add(-1) == cs.maxInflight-1 {
		cs.c.Resume()
	}
}

// deliver records response seq and sends every response that is now next in order.
func (cs *connState) deliver(seq uint64, o outgoing) {
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		if o.done != nil {
			o.done()
		}
		return
	}
	// In order with nothing waiting, the common case, the response skips the map.
	direct := seq == cs.sendSeq && len(cs.pending) == 0
	if !direct {
		cs.pending[seq] = o
	}
	for {
		if !direct {
			var ok bool
			if o, ok = cs.pending[cs.sendSeq]; !ok {
				break
			}
			delete(cs.pending, cs.sendSeq)
		}
		direct = false
		cs.sendSeq++
		if o.pieces == nil && len(cs.corked) == 0 {
			if o.done != nil {
				o.done()
			}
		} else {
			for i := range o.pieces {
				cs.corkedBytes += pieceSize(&o.pieces[i])
			}
			cs.corked = append(cs.corked, o)
			if cs.cork && !o.close && cs.corkedBytes < corkMaxBytes {
				continue
			}
			if !cs.flushLocked() {
				break
			}
		}
		if o.close {
			cs.c.Close()
		}
	}
	cs.mu.Unlock()
}

// corkMaxBytes bounds what corking holds back before writing anyway.
const corkMaxBytes = 256 << 10

// flushLocked writes the corked responses in one Send; it reports false when the connection
// is closing (what is pending then is released by OnClose). Called with mu held.
func (cs *connState) flushLocked() bool {
	corked := cs.corked
	if len(corked) == 0 {
		return true
	}
	cs.corked, cs.corkedBytes = cs.corked[:0], 0
	var pieces []ring.Piece
	var done func()
	if len(corked) == 1 {
		pieces, done = corked[0].pieces, corked[0].done
	} else {
		sb := cs.b.sendBatches.get()
		for _, o := range corked {
			sb.pieces = append(sb.pieces, o.pieces...)
			if o.done != nil {
				sb.dones = append(sb.dones, o.done)
			}
		}
		pieces, done = sb.pieces, sb.doneFn
	}
	clear(corked)
	if len(pieces) == 0 {
		if done != nil {
			done()
		}
		return true
	}
	n := 0
	for i := range pieces {
		n += pieceSize(&pieces[i])
	}
	cs.b.metrics.bytesOut(n)
	if err := cs.c.Send(pieces, done); err != nil {
		if done != nil {
			done()
		}
		return false
	}
	return true
}

// sendBatch is the corked responses of one connection written with one Send: their pieces
// end to end and their dones, run together once the write is done.
type sendBatch struct {
	pieces []ring.Piece
	dones  []func()
	doneFn func() // sb.done, bound once
	home   *sendBatchPool
}

// done runs the responses' dones and recycles the batch.
func (sb *sendBatch) done() {
	for _, d := range sb.dones {
		d()
	}
	clear(sb.pieces)
	clear(sb.dones)
	sb.pieces, sb.dones = sb.pieces[:0], sb.dones[:0]
	sb.home.pool.Put(sb)
}

// sendBatchPool recycles send batches, so that corked responses go out without allocating.
type sendBatchPool struct{ pool sync.Pool }

func (p *sendBatchPool) get() *sendBatch {
	sb, _ := p.pool.Get().(*sendBatch)
	if sb == nil {
		sb = &sendBatch{home: p}
		sb.doneFn = sb.done
	}
	return sb
}

// pieceSize is the length of a response piece.
func pieceSize(p *ring.Piece) int {
	if p.FileLen > 0 {
		return p.FileLen
	}
	return len(p.Buf)
}
