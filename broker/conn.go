package broker

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/ring"
	"ringbroker/wire"
)

// connHandler adapts the broker to ring.Handler: it assembles frames, decodes requests, runs
// their handlers and writes responses back in request order.
type connHandler struct{ b *Broker }

// connState is the per-connection state kept in ring.Conn's context.
type connState struct {
	b      *Broker
	c      ring.Conn
	frames *wire.FrameReader

	// nextSeq numbers requests as they arrive; it is touched only by the connection's reader.
	nextSeq uint64

	mu sync.Mutex
	// sendSeq is the sequence number of the next response to send; responses that finish early
	// wait in pending until every earlier one is sent, so clients see request order.
	sendSeq uint64
	pending map[uint64]outgoing
	closed  bool
}

// outgoing is one finished response waiting for its turn.
type outgoing struct {
	bufs [][]byte // nil: the request has no response (acks=0)
	done func()
}

func (h *connHandler) OnOpen(c ring.Conn) {
	cs := &connState{b: h.b, c: c, pending: map[uint64]outgoing{}, frames: wire.NewFrameReader(int32(h.b.cfg.SocketRequestMax))}
	c.SetContext(cs)
	h.b.metrics.connOpened()
}

func (h *connHandler) OnData(c ring.Conn, data []byte) error {
	cs := c.Context().(*connState)
	return cs.frames.Feed(data, cs.onFrame)
}

func (h *connHandler) OnClose(c ring.Conn, err error) {
	cs := c.Context().(*connState)
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
	h.b.metrics.connClosed()
}

// reqCtx is one request in flight: where and in which order its response goes.
type reqCtx struct {
	cs    *connState
	seq   uint64
	hdr   wire.RequestHeader
	api   *api
	start time.Time
}

// onFrame handles one complete request frame. frame is valid only during the call. An error
// closes the connection, as Kafka does for requests it cannot parse.
func (cs *connState) onFrame(frame []byte) error {
	hdr, body, err := wire.ParseRequestHeader(frame)
	if err != nil {
		var unk *wire.UnsupportedRequestError
		if errors.As(err, &unk) && unk.APIKey == kmsg.ApiVersions.Int16() {
			// An ApiVersions version we do not know: answer with UNSUPPORTED_VERSION in a v0
			// body listing what we serve, so the client can downgrade.
			seq := cs.nextSeq
			cs.nextSeq++
			cs.deliver(seq, [][]byte{cs.b.apiVersionsUnsupported(unk.CorrelationID)}, nil)
			return nil
		}
		return fmt.Errorf("request header: %w", err)
	}
	a := cs.b.lookupAPI(hdr.APIKey)
	if a == nil || hdr.APIVersion < a.minVersion || hdr.APIVersion > a.maxVersion {
		if hdr.APIKey == kmsg.ApiVersions.Int16() {
			seq := cs.nextSeq
			cs.nextSeq++
			cs.deliver(seq, [][]byte{cs.b.apiVersionsUnsupported(hdr.CorrelationID)}, nil)
			return nil
		}
		return fmt.Errorf("unsupported api key %d version %d", hdr.APIKey, hdr.APIVersion)
	}
	req := kmsg.RequestForKey(hdr.APIKey)
	req.SetVersion(hdr.APIVersion)
	rc := &reqCtx{cs: cs, seq: cs.nextSeq, hdr: hdr, api: a, start: time.Now()}
	cs.nextSeq++
	if a.inline {
		// Inline handlers finish with the frame before returning, so the body may alias it,
		// unless the handler keeps the request.
		decode := req.(interface{ UnsafeReadFrom([]byte) error }).UnsafeReadFrom
		if a.copyRequest {
			decode = req.ReadFrom
			rc.hdr.ClientID = strings.Clone(hdr.ClientID)
		}
		if err := decode(body); err != nil {
			return fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, err)
		}
		a.handle(cs.b, rc, req)
		return nil
	}
	rc.hdr.ClientID = strings.Clone(hdr.ClientID)
	owned := append([]byte(nil), body...)
	if err := req.ReadFrom(owned); err != nil {
		return fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, err)
	}
	go a.handle(cs.b, rc, req)
	return nil
}

// respond encodes resp at the request's version and queues it in order.
func (rc *reqCtx) respond(resp kmsg.Response) {
	resp.SetVersion(rc.hdr.APIVersion)
	buf := wire.AppendResponse(nil, rc.hdr, resp)
	rc.finish([][]byte{buf}, nil)
}

// respondBuffers queues an already-framed response given as iovecs; done runs once the kernel
// no longer references them.
func (rc *reqCtx) respondBuffers(bufs [][]byte, done func()) { rc.finish(bufs, done) }

// noResponse completes a request that Kafka does not answer (Produce with acks=0).
func (rc *reqCtx) noResponse() { rc.finish(nil, nil) }

func (rc *reqCtx) finish(bufs [][]byte, done func()) {
	rc.cs.b.metrics.observe(rc.hdr.APIKey, time.Since(rc.start))
	rc.cs.deliver(rc.seq, bufs, done)
}

// closeConn closes the connection after a request that Kafka answers by disconnecting.
func (rc *reqCtx) closeConn() {
	rc.finish(nil, nil)
	rc.cs.c.Close()
}

// deliver records response seq and sends every response that is now next in order.
func (cs *connState) deliver(seq uint64, bufs [][]byte, done func()) {
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		if done != nil {
			done()
		}
		return
	}
	// In order with nothing waiting, the common case, the response skips the map.
	direct := seq == cs.sendSeq && len(cs.pending) == 0
	if !direct {
		cs.pending[seq] = outgoing{bufs: bufs, done: done}
	}
	for {
		o := outgoing{bufs: bufs, done: done}
		if !direct {
			var ok bool
			if o, ok = cs.pending[cs.sendSeq]; !ok {
				break
			}
			delete(cs.pending, cs.sendSeq)
		}
		direct = false
		cs.sendSeq++
		if o.bufs == nil {
			if o.done != nil {
				o.done()
			}
			continue
		}
		n := 0
		for _, b := range o.bufs {
			n += len(b)
		}
		cs.b.metrics.bytesOut(n)
		if err := cs.c.Send(o.bufs, o.done); err != nil {
			// The connection is closing; Send has released the buffers.
			break
		}
	}
	cs.mu.Unlock()
}
