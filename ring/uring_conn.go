package ring

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

// uconn is a connection of the io_uring backend. Fields under mu are shared
// with Send, Resume and Close on other goroutines; the rest belong to the
// ring's loop.
type uconn struct {
	r      *uring
	id     uint64
	fd     int
	slot   uint32
	remote *net.TCPAddr
	noZC   bool // plain sends only: a loopback peer (see Config.SendZCLoopback)
	handlerContext

	mu       sync.Mutex
	queue    []*outItem // guarded by mu: sent, not yet taken by the loop, in write order
	closed   bool       // guarded by mu: Send fails from now on
	closeReq bool       // guarded by mu: Close was called
	queued   bool       // guarded by mu: c is in r.pending
	// resumeReq is set by Resume, guarded by mu; the loop consumes it.
	resumeReq bool
	// direct is set while a Send writes to the socket from its own goroutine (guarded by mu);
	// the loop neither writes nor closes the fd meanwhile.
	direct bool
	// ringOwned says the loop writes this connection's output (guarded by mu): it holds items
	// or has an op in flight, so a Send queues behind instead of writing directly.
	ringOwned bool
	// failErr is a write error a direct Send met (guarded by mu); the loop closes with it.
	failErr error

	// loop-owned
	queueSpare    []*outItem
	outq          []*outItem // in write order; outq[0] is being written
	inflight      *sendOp    // at most one send op in flight keeps the byte order
	pollArmed     bool       // a POLLOUT poll is in flight: a file range waits for socket room
	zcPending     int        // SEND_ZC ops awaiting their notification CQE
	recvArmed     bool       // a recv (into a provided buffer, or a fill) is in flight
	fill          []byte     // Next.Fill being received into; fill[fillOff:] is still to come
	fillOff       int
	fillPin       runtime.Pinner
	paused        bool      // reading stopped until Resume
	held          heldBytes // unconsumed data of a paused connection, still in its provided buffer
	wantBuf       bool      // waiting in r.bufWaiters for a provided buffer (ENOBUFS)
	cancelPending bool      // a cancel of the fd's ops is in flight
	closing       bool      // close once outq is written (Close or Shutdown)
	torn          bool      // closed for the handler: no more OnData
	closeErr      error     // what OnClose reports
	notified      bool      // OnClose was called
	fdClosed      bool
	freed         bool // slot returned
}

// heldBytes is data a paused connection left unconsumed in provided buffer bid.
type heldBytes struct {
	ok     bool
	bid    uint16
	off, n int
}

// ID implements Conn.
func (c *uconn) ID() uint64 { return c.id }

// RemoteAddr implements Conn.
func (c *uconn) RemoteAddr() net.Addr { return c.remote }

// Loop implements Conn.
func (c *uconn) Loop() int { return c.r.idx }

// Shared implements Conn: the ring's thread serves all of its connections.
func (c *uconn) Shared() bool { return true }

// TLS implements Conn: connections on the ring itself are plaintext.
func (c *uconn) TLS() *tls.ConnectionState { return nil }

// Send implements Conn. With nothing queued for the socket it writes at once from the calling
// goroutine with non-blocking calls; the rest, and every Send meanwhile, goes to the loop.
func (c *uconn) Send(pieces []Piece, done func()) error {
	it := c.r.items.get(pieces, done)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		left := it.left
		c.r.items.put(it)
		return fmt.Errorf("send %d bytes on conn %d: %w", left, c.id, ErrClosed)
	}
	// Large memory sends to peers that get SEND_ZC go through the loop, which submits them.
	zc := c.r.zcThreshold > 0 && !c.noZC && it.left >= c.r.zcThreshold && !it.atFile()
	if zc && !c.direct {
		c.ringOwned = true
	}
	if c.ringOwned || c.direct {
		c.queue = append(c.queue, it)
		notify := c.ringOwned && !c.queued
		if notify {
			c.queued = true
		}
		c.mu.Unlock()
		if notify {
			c.r.post(c)
		}
		return nil
	}
	c.direct = true
	c.mu.Unlock()
	c.r.st.directSends.Add(1)
	n, err := writeNonblock(c.fd, it)
	c.r.st.bytesOut.Add(uint64(n))
	c.mu.Lock()
	c.direct = false
	switch {
	case err == nil:
	case errors.Is(err, unix.EAGAIN):
		c.r.st.directBlocked.Add(1)
		c.queue = append(c.queue, nil)
		copy(c.queue[1:], c.queue)
		c.queue[0] = it
		it = nil
	default:
		if c.failErr == nil {
			c.failErr = fmt.Errorf("send %d bytes on conn %d to %s: %w", it.left, c.id, c.remote, err)
		}
	}
	// A Shutdown drain that looked at c while this send ran left its close to the loop's next
	// look at c: hand c over then too.
	handOver := len(c.queue) > 0 || c.closeReq || c.closed || c.failErr != nil || c.r.drainReq.Load()
	if len(c.queue) > 0 {
		c.ringOwned = true
	}
	notify := handOver && !c.queued
	if notify {
		c.queued = true
	}
	c.mu.Unlock()
	if notify {
		c.r.post(c)
	}
	if it != nil {
		it.release()
	}
	return nil
}

// Resume implements Conn.
func (c *uconn) Resume() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.resumeReq = true
	notify := !c.queued
	c.queued = true
	c.mu.Unlock()
	if notify {
		c.r.post(c)
	}
}

// Close implements Conn: the loop closes c once its queue is written.
func (c *uconn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.closeReq = true
	notify := !c.queued
	c.queued = true
	c.mu.Unlock()
	if notify {
		c.r.post(c)
	}
	return nil
}

// readable reports whether received data still goes to the handler.
func (c *uconn) readable() bool { return !c.torn && !c.closing && !c.r.draining }

// sendOp is one send submitted to the kernel. Its msghdr and iovecs live
// off-heap in mem; the Go-heap payloads it points at are pinned until the
// kernel is done (completion, or for SEND_ZC the notification).
type sendOp struct {
	idx   uint32
	mem   []byte
	conn  *uconn // nil while the op is free
	items []*outItem
	pin   runtime.Pinner
	total int
	zc    bool
}

func (r *uring) allocOp() (*sendOp, error) {
	if n := len(r.freeOps); n > 0 {
		op := r.ops[r.freeOps[n-1]]
		r.freeOps = r.freeOps[:n-1]
		return op, nil
	}
	chunk, err := offHeap(opsPerChunk * opMemSize)
	if err != nil {
		return nil, fmt.Errorf("ring %d: send op memory: %w", r.idx, err)
	}
	r.opMem = append(r.opMem, chunk)
	base := uint32(len(r.ops))
	for i := range opsPerChunk {
		r.ops = append(r.ops, &sendOp{idx: base + uint32(i), mem: chunk[i*opMemSize : (i+1)*opMemSize]})
	}
	for i := opsPerChunk - 1; i > 0; i-- {
		r.freeOps = append(r.freeOps, base+uint32(i))
	}
	return r.ops[base], nil
}

// releaseOp drops the op's hold on its items (running done where it was the
// last), unpins their buffers and returns the op to the free list.
func (r *uring) releaseOp(op *sendOp) {
	op.pin.Unpin()
	for i, it := range op.items {
		it.release()
		op.items[i] = nil
	}
	op.items = op.items[:0]
	op.conn = nil
	r.freeOps = append(r.freeOps, op.idx)
}

// pump starts the next write on c if none is in flight, and completes a
// requested close once everything queued is written. Memory goes out in
// send ops (SEND_ZC for large ones to non-loopback peers); a file range is
// written with sendfile from the loop once the socket has room.
func (r *uring) pump(c *uconn) {
	for {
		if c.torn || c.inflight != nil || c.pollArmed {
			return
		}
		for len(c.outq) > 0 && c.outq[0].left == 0 {
			c.outq[0].release()
			c.outq[0] = nil
			c.outq = c.outq[1:]
		}
		if len(c.outq) == 0 {
			c.outq = nil
			c.mu.Lock()
			more := len(c.queue) > 0 // posted: processPending pumps again
			if !more {
				c.ringOwned = false
			}
			busy := c.direct
			c.mu.Unlock()
			if c.closing && !more && !busy {
				r.closeConn(c, nil, false)
			}
			return
		}
		if !c.outq[0].atFile() {
			r.startSend(c)
			return
		}
		n, err := writeNonblock(c.fd, c.outq[0])
		r.st.bytesOut.Add(uint64(n))
		switch {
		case err == nil:
			continue
		case errors.Is(err, unix.EAGAIN):
			r.armPollOut(c)
			return
		default:
			r.closeConn(c, fmt.Errorf("sendfile on conn %d to %s: %w", c.id, c.remote, err), true)
			return
		}
	}
}

// armPollOut waits for room in c's socket send buffer.
func (r *uring) armPollOut(c *uconn) {
	e := r.sqe()
	e.OpCode = giouring.OpPollAdd
	e.Fd = int32(c.fd)
	e.OpcodeFlags = unix.POLLOUT
	e.UserData = userData(kindPollOut, c.slot)
	c.pollArmed = true
}

// onPollOut: c's socket has room again.
func (r *uring) onPollOut(c *uconn, res int32) {
	c.pollArmed = false
	if res < 0 && res != -int32(unix.ECANCELED) && !c.torn {
		r.closeConn(c, fmt.Errorf("poll conn %d to %s: %w", c.id, c.remote, syscall.Errno(-res)), true)
	}
	r.pump(c)
	r.maybeFree(c)
}

// startSend submits one send op for the memory at the head of c.outq: up to maxIov buffers,
// stopping at a file range.
func (r *uring) startSend(c *uconn) {
	op, err := r.allocOp()
	if err != nil {
		r.closeConn(c, err, true)
		return
	}
	op.conn = c
	op.total = 0
	msg, iov := opMem(op.mem)
	// A Send of at least zcThreshold bytes goes alone as SEND_ZC; smaller ones
	// are gathered into one sendmsg, up to the next large one.
	zcOn := r.zcThreshold > 0 && !c.noZC
	op.zc = zcOn && c.outq[0].left >= r.zcThreshold
	n := 0
gather:
	for i, it := range c.outq {
		if i > 0 && (op.zc || zcOn && it.left >= r.zcThreshold) {
			break
		}
		covered := false
		off := it.off
		for pi := it.idx; pi < len(it.pieces) && n < maxIov; pi++ {
			p := &it.pieces[pi]
			if p.FileLen > 0 {
				if covered {
					it.refs++
					op.items = append(op.items, it)
				}
				break gather
			}
			b := p.Buf[off:]
			off = 0
			if len(b) == 0 {
				continue
			}
			op.pin.Pin(&b[0])
			iov[n] = rawIovec{base: uintptr(unsafe.Pointer(&b[0])), len: uint64(len(b))}
			n++
			op.total += len(b)
			covered = true
		}
		if covered {
			it.refs++
			op.items = append(op.items, it)
		}
		if n == maxIov {
			break
		}
	}
	e := r.sqe()
	e.Fd = int32(c.fd)
	e.OpcodeFlags = unix.MSG_NOSIGNAL
	e.UserData = userData(kindSend, op.idx)
	switch {
	case n == 1 && op.zc:
		e.OpCode = giouring.OpSendZC
		e.Addr = uint64(iov[0].base)
		e.Len = uint32(iov[0].len)
	case n == 1:
		e.OpCode = giouring.OpSend
		e.Addr = uint64(iov[0].base)
		e.Len = uint32(iov[0].len)
	default:
		*msg = rawMsghdr{iov: uintptr(unsafe.Pointer(&iov[0])), iovlen: uint64(n)}
		e.OpCode = giouring.OpSendmsg
		if op.zc {
			e.OpCode = giouring.OpSendMsgZC
		}
		e.Addr = uint64(uintptr(unsafe.Pointer(msg)))
		e.Len = 1
	}
	if op.zc {
		e.IoPrio = r.zcFlags
	}
	c.inflight = op
	r.st.sends.Add(1)
	if op.zc {
		r.st.zcSends.Add(1)
	}
}

// onSend handles a send completion, or a SEND_ZC notification.
func (r *uring) onSend(op *sendOp, res int32, flags uint32) {
	c := op.conn
	if c == nil {
		return // the op was force-released at exit; a late notification
	}
	if flags&giouring.CQEFNotif != 0 {
		if uint32(res)&giouring.NotifUsageZCCopied != 0 {
			r.st.zcCopied.Add(1)
		}
		c.zcPending--
		r.releaseOp(op)
		r.maybeFree(c)
		return
	}
	c.inflight = nil
	if res > 0 {
		n := int(res)
		r.st.bytesOut.Add(uint64(n))
		if n < op.total {
			r.st.partialSends.Add(1)
		}
		for n > 0 && len(c.outq) > 0 {
			it := c.outq[0]
			take := min(n, it.left)
			it.advance(take)
			n -= take
			if it.left == 0 {
				it.release()
				c.outq[0] = nil
				c.outq = c.outq[1:]
			}
		}
	}
	if flags&giouring.CQEFMore != 0 {
		c.zcPending++ // buffers stay pinned until the notification
	} else {
		r.releaseOp(op)
	}
	errno := syscall.Errno(-res)
	switch {
	case errno == unix.EAGAIN:
		// The socket is non-blocking; wait for room before sending again.
		if !c.torn {
			r.armPollOut(c)
		}
	case res >= 0 || errno == unix.EINTR:
		r.pump(c)
	case errno == unix.ECANCELED:
	default:
		r.closeConn(c, fmt.Errorf("send %d bytes on conn %d to %s: %w", op.total, c.id, c.remote, errno), true)
	}
	r.maybeFree(c)
}
