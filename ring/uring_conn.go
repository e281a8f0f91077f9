package ring

import (
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
// with Send/Close on other goroutines; the rest belong to the ring's loop.
type uconn struct {
	r      *uring
	id     uint64
	fd     int
	slot   uint32
	remote *net.TCPAddr
	noZC   bool // plain sends only: a loopback peer (see Config.SendZCLoopback)

	mu         sync.Mutex
	queue      []*sendItem // guarded by mu: sent by Send, not yet taken by the loop
	closed     bool        // guarded by mu: Send fails from now on
	closeReq   bool        // guarded by mu: Close was called
	queued     bool        // guarded by mu: c is in r.pending
	handlerCtx any         // guarded by mu

	// loop-owned
	queueSpare    []*sendItem
	outq          []*sendItem // in write order; outq[0] is being written
	inflight      *sendOp     // at most one send op in flight keeps the byte order
	zcPending     int         // SEND_ZC ops awaiting their notification CQE
	recvArmed     bool        // a multishot recv is in flight
	cancelPending bool        // a cancel of the fd's ops is in flight
	closing       bool        // close once outq is written (Close or Shutdown)
	torn          bool        // closed for the handler: OnClose was called
	fdClosed      bool
	freed         bool // slot returned
}

// ID implements Conn.
func (c *uconn) ID() uint64 { return c.id }

// RemoteAddr implements Conn.
func (c *uconn) RemoteAddr() net.Addr { return c.remote }

// SetContext implements Conn.
func (c *uconn) SetContext(v any) {
	c.mu.Lock()
	c.handlerCtx = v
	c.mu.Unlock()
}

// Context implements Conn.
func (c *uconn) Context() any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handlerCtx
}

// Send implements Conn: it queues bufs and hands c to the loop.
func (c *uconn) Send(bufs [][]byte, done func()) error {
	it := &sendItem{bufs: bufs, done: done, refs: 1}
	for _, b := range bufs {
		it.left += len(b)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("send %d bytes on conn %d: %w", it.left, c.id, ErrClosed)
	}
	c.queue = append(c.queue, it)
	notify := !c.queued
	c.queued = true
	c.mu.Unlock()
	if notify {
		c.r.post(c)
	}
	return nil
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

// sendItem is one Send call.
type sendItem struct {
	bufs   [][]byte
	done   func()
	left   int // bytes not yet written
	bufIdx int // write cursor: bufs[bufIdx][bufOff:] is next
	bufOff int
	// refs counts holders: 1 while in the queue plus one per send op that covers it.
	// done runs when it drops to zero, which happens exactly once.
	refs int
}

func (it *sendItem) release() {
	it.refs--
	if it.refs == 0 && it.done != nil {
		it.done()
	}
}

// advance moves the write cursor n bytes (n <= it.left).
func (it *sendItem) advance(n int) {
	it.left -= n
	for n > 0 {
		rem := len(it.bufs[it.bufIdx]) - it.bufOff
		if n < rem {
			it.bufOff += n
			return
		}
		n -= rem
		it.bufIdx++
		it.bufOff = 0
	}
}

// sendOp is one send submitted to the kernel. Its msghdr and iovecs live
// off-heap in mem; the Go-heap payloads it points at are pinned until the
// kernel is done (completion, or for SEND_ZC the notification).
type sendOp struct {
	idx   uint32
	mem   []byte
	conn  *uconn // nil while the op is free
	items []*sendItem
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

// pump starts the next send on c if none is in flight, and completes a
// requested close once everything queued is written.
func (r *uring) pump(c *uconn) {
	if c.torn || c.inflight != nil {
		return
	}
	for len(c.outq) > 0 && c.outq[0].left == 0 {
		c.outq[0].release()
		c.outq[0] = nil
		c.outq = c.outq[1:]
	}
	if len(c.outq) == 0 {
		c.outq = nil
		if c.closing {
			c.mu.Lock()
			more := len(c.queue) > 0 // posted, processPending will pump again
			c.mu.Unlock()
			if !more {
				r.closeConn(c, nil, false)
			}
		}
		return
	}
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
	for i, it := range c.outq {
		if i > 0 && (op.zc || zcOn && it.left >= r.zcThreshold) {
			break
		}
		covered := false
		off := it.bufOff
		for bi := it.bufIdx; bi < len(it.bufs) && n < maxIov; bi++ {
			b := it.bufs[bi][off:]
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
	case res >= 0 || errno == unix.EAGAIN || errno == unix.EINTR:
		r.pump(c)
	case errno == unix.ECANCELED:
	default:
		r.closeConn(c, fmt.Errorf("send %d bytes on conn %d to %s: %w", op.total, c.id, c.remote, errno), true)
	}
	r.maybeFree(c)
}
