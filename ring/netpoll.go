package ring

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Accept backoff after a failure such as EMFILE, like net/http's.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// npServer is the netpoll backend: one listener and an accept goroutine handing each
// connection to its connGroup.
type npServer struct {
	log    *slog.Logger
	ln     *net.TCPListener
	g      *connGroup
	nextID atomic.Uint64
	st     ringCounters

	stop     chan struct{} // closed when Shutdown starts
	acceptWG sync.WaitGroup
}

func listenNetpoll(cfg Config, h Handler) (*npServer, error) {
	var capped []string
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		capped, err = cfg.SocketBuffers.Apply(rc)
		return err
	}}
	ln, err := lc.Listen(context.Background(), "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %q: %w", cfg.Addr, err)
	}
	for _, c := range capped {
		cfg.Logger.Warn("ring: socket buffer capped", "addr", ln.Addr(), "detail", c)
	}
	s := &npServer{
		st:   ringCounters{start: time.Now()},
		log:  cfg.Logger,
		ln:   ln.(*net.TCPListener),
		g:    newConnGroup(cfg, h),
		stop: make(chan struct{}),
	}
	s.acceptWG.Add(1)
	go s.acceptLoop()
	return s, nil
}

func (s *npServer) addr() net.Addr { return s.ln.Addr() }

// setWait has nothing to change: netpoll's goroutines block in the Go scheduler.
func (s *npServer) setWait(WaitMode) {}

func (s *npServer) ringStats() []Stats {
	return []Stats{s.st.goroutineSnapshot()}
}

func (s *npServer) acceptLoop() {
	defer s.acceptWG.Done()
	backoff := acceptBackoffMin
	for {
		nc, err := s.ln.AcceptTCP()
		if err != nil {
			select {
			case <-s.stop:
				return
			default:
			}
			s.log.Warn("ring: accept failed, retrying", "err", err.Error(), "retry_in", backoff.String())
			t := time.NewTimer(backoff)
			select {
			case <-s.stop:
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, acceptBackoffMax)
			continue
		}
		backoff = acceptBackoffMin
		s.st.accepted.Add(1)
		s.g.serve(nc, nil, s.nextID.Add(1), 0, &s.st)
	}
}

func (s *npServer) shutdown(ctx context.Context) error {
	close(s.stop)
	s.ln.Close()
	s.acceptWG.Wait()
	return s.g.shutdown(ctx)
}

// connGroup serves connections on goroutines, two per connection: a reader that makes every
// Handler call and a writer that drains the send queue. It holds the netpoll backend's
// connections and the TLS connections of either backend (see tls.go), and drains or aborts
// them all on Shutdown.
type connGroup struct {
	h       Handler
	log     *slog.Logger
	bufSize int
	tls     *tlsSetup // nil: plaintext connections
	items   outItems

	wg       sync.WaitGroup // one count per connection from serve or adopt until its OnClose
	mu       sync.Mutex
	conns    map[*npConn]struct{} // guarded by mu
	draining bool                 // guarded by mu: new connections are closed at once
}

func newConnGroup(cfg Config, h Handler) *connGroup {
	g := &connGroup{h: h, log: cfg.Logger, bufSize: cfg.RecvBufferSize, conns: make(map[*npConn]struct{})}
	if cfg.TLS != nil {
		g.tls = newTLSSetup(cfg)
	}
	return g
}

// serve starts a connection on its goroutines, counting it in st as event loop loop's; head
// are bytes already read from it, delivered first.
func (g *connGroup) serve(nc *net.TCPConn, head []byte, id uint64, loop int, st *ringCounters) {
	if !g.admit() {
		nc.Close()
		return
	}
	go g.run(nc, head, id, loop, st)
}

// admit counts a new connection in wg, or reports false once Shutdown began.
func (g *connGroup) admit() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining {
		return false
	}
	g.wg.Add(1)
	return true
}

// run serves an admitted connection, head first, on the calling goroutine until it ends.
func (g *connGroup) run(nc *net.TCPConn, head []byte, id uint64, loop int, st *ringCounters) {
	c, err := g.newConn(nc, head, id, loop, st)
	if err != nil {
		g.log.Warn("ring: cannot serve connection", "ring", loop, "err", err.Error())
		nc.Close()
		g.wg.Done()
		return
	}
	g.mu.Lock()
	draining := g.draining
	if !draining {
		g.conns[c] = struct{}{}
	}
	g.mu.Unlock()
	if draining {
		nc.Close()
		g.wg.Done()
		return
	}
	c.readLoop()
}

// newConn wraps nc, whose stream starts with head; for a TLS group the handshake is left to
// readLoop.
func (g *connGroup) newConn(nc *net.TCPConn, head []byte, id uint64, loop int, st *ringCounters) (*npConn, error) {
	_ = nc.SetNoDelay(true)
	var conn net.Conn = nc
	if len(head) > 0 {
		conn = &headConn{TCPConn: nc, head: head}
	}
	c := &npConn{g: g, st: st, id: id, loop: loop, nc: nc, rd: conn, wake: make(chan struct{}, 1),
		resume: make(chan struct{}, 1), quit: make(chan struct{}), writerDone: make(chan struct{})}
	if g.tls != nil {
		c.tc = tls.Server(conn, g.tls.config)
		c.rd = c.tc
		return c, nil
	}
	raw, err := nc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("raw conn of %s: %w", nc.RemoteAddr(), err)
	}
	c.raw = raw
	c.rw.fn = c.rw.write
	return c, nil
}

// shutdown drains every connection (queued sends written, then closed) and waits until ctx is
// done; then it aborts the rest and returns ctx's error.
func (g *connGroup) shutdown(ctx context.Context) error {
	conns := g.beginDrain()
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	for _, c := range conns {
		c.abort(nil)
	}
	<-done
	return ctx.Err()
}

// beginDrain refuses new connections and asks every open one to close after its queue; it
// returns the connections it asked.
func (g *connGroup) beginDrain() []*npConn {
	g.mu.Lock()
	g.draining = true
	conns := make([]*npConn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, c := range conns {
		c.drain()
	}
	return conns
}

// remove forgets c once it is closed.
func (g *connGroup) remove(c *npConn) {
	g.mu.Lock()
	delete(g.conns, c)
	g.mu.Unlock()
}

// npConn is a connection served by goroutines: every connection of the netpoll backend, and
// every TLS connection (tc set) of either backend.
type npConn struct {
	g    *connGroup
	st   *ringCounters // the counters of the event loop the connection counts in
	id   uint64
	loop int
	nc   *net.TCPConn
	rd   io.Reader       // what the reader reads: nc, or tc
	raw  syscall.RawConn // plaintext only
	rw   rawWrite        // plaintext only; used by whoever holds writing
	tc   *tls.Conn       // nil on plaintext
	// state is the TLS connection state, set once before OnOpen (nil on plaintext).
	state *tls.ConnectionState
	handlerContext
	wake       chan struct{} // capacity 1: the writer has something to look at
	resume     chan struct{} // capacity 1: Resume was called
	quit       chan struct{} // closed by abort: a paused reader gives up
	writerDone chan struct{}

	mu        sync.Mutex
	queue     []*outItem // guarded by mu: in write order
	writing   bool       // guarded by mu: a Send or the writer goroutine is writing to the socket
	closed    bool       // guarded by mu: Send fails from now on
	closeReq  bool       // guarded by mu: the writer closes the socket after the queue
	aborted   bool       // guarded by mu: the socket is closed, drop the queue
	stopRead  bool       // guarded by mu: received data is no longer delivered
	opened    bool       // guarded by mu: TLS only: the handshake is done, the handler has c
	reason    error      // guarded by mu: what OnClose reports
	reasonSet bool       // guarded by mu
}

// ID implements Conn.
func (c *npConn) ID() uint64 { return c.id }

// RemoteAddr implements Conn.
func (c *npConn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Loop implements Conn: 0 with netpoll, which has one; the accepting ring for TLS on io_uring.
func (c *npConn) Loop() int { return c.loop }

// Shared implements Conn: each connection has its own reading goroutine.
func (c *npConn) Shared() bool { return false }

// TLS implements Conn.
func (c *npConn) TLS() *tls.ConnectionState { return c.state }

// Send implements Conn: on plaintext, with nothing queued, it writes at once from the calling
// goroutine, without blocking; the rest goes to the writer goroutine. A TLS connection's
// writes are all the writer's: a crypto/tls write cannot stop half-way without blocking.
func (c *npConn) Send(pieces []Piece, done func()) error {
	it := c.g.items.get(pieces, done)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		left := it.left
		c.g.items.put(it)
		return fmt.Errorf("send %d bytes on conn %d: %w", left, c.id, ErrClosed)
	}
	if c.writing || len(c.queue) > 0 || c.tc != nil {
		c.queue = append(c.queue, it)
		c.mu.Unlock()
		c.notify()
		return nil
	}
	c.writing = true
	c.mu.Unlock()
	c.st.directSends.Add(1)
	n, err := c.writeOnce(it)
	c.st.bytesOut.Add(uint64(n))
	c.mu.Lock()
	c.writing = false
	switch {
	case err == nil:
		more := len(c.queue) > 0 || c.closeReq
		c.mu.Unlock()
		if more {
			c.notify()
		}
		it.release()
		return nil
	case errors.Is(err, unix.EAGAIN):
		c.st.directBlocked.Add(1)
		c.queue = append(c.queue, nil)
		copy(c.queue[1:], c.queue)
		c.queue[0] = it
		c.mu.Unlock()
		c.notify()
		return nil
	default:
		c.mu.Unlock()
		left := it.left
		it.release()
		c.abort(fmt.Errorf("send %d bytes on conn %d to %s: %w", left, c.id, c.nc.RemoteAddr(), err))
		return nil
	}
}

// rawWrite is the state of one write through syscall.RawConn.Write: a callback bound once
// per connection (a fresh closure would allocate on every Send) and what it reports. Only the
// goroutine that set npConn.writing uses it.
type rawWrite struct {
	it    *outItem
	wait  bool // wait in the netpoller while the socket is full
	total int
	err   error
	fn    func(fd uintptr) bool
}

func (w *rawWrite) write(fd uintptr) bool {
	n, err := writeNonblock(int(fd), w.it)
	w.total += n
	w.err = err
	return !w.wait || !errors.Is(err, unix.EAGAIN)
}

// writeOnce writes what the socket takes now, without waiting for it.
func (c *npConn) writeOnce(it *outItem) (int, error) { return c.rawWrite(it, false) }

// writeAll writes it whole, waiting in the netpoller while the socket is full.
func (c *npConn) writeAll(it *outItem) (int, error) { return c.rawWrite(it, true) }

func (c *npConn) rawWrite(it *outItem, wait bool) (int, error) {
	w := &c.rw
	w.it, w.wait, w.total, w.err = it, wait, 0, nil
	cerr := c.raw.Write(w.fn)
	w.it = nil
	if cerr != nil {
		return w.total, cerr
	}
	return w.total, w.err
}

// Resume implements Conn.
func (c *npConn) Resume() {
	select {
	case c.resume <- struct{}{}:
	default:
	}
}

// Close implements Conn: the writer closes c once its queue is written.
func (c *npConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.closeReq = true
	c.stopRead = true
	c.mu.Unlock()
	c.notify()
	c.Resume()
	return nil
}

func (c *npConn) notify() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// setReason records why c closed; the first reason wins.
func (c *npConn) setReason(err error) {
	if !c.reasonSet {
		c.reason, c.reasonSet = err, true
	}
}

// drain is Shutdown's graceful close: stop delivering data, write the queue, close. A TLS
// connection still in its handshake is closed at once.
func (c *npConn) drain() {
	c.mu.Lock()
	c.closed = true
	c.closeReq = true
	c.stopRead = true
	opened := c.opened
	c.mu.Unlock()
	if !opened && c.tc != nil {
		c.nc.Close()
	}
	c.notify()
	c.Resume()
}

// abort closes the socket now with an RST, dropping the queue.
func (c *npConn) abort(err error) {
	c.mu.Lock()
	c.setReason(err)
	c.closed = true
	first := !c.aborted
	c.aborted = true
	c.stopRead = true
	c.mu.Unlock()
	if first {
		close(c.quit)
	}
	_ = c.nc.SetLinger(0)
	c.nc.Close()
	c.notify()
}

// delivering reports whether received data still goes to the handler.
func (c *npConn) delivering() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.stopRead
}

// waitResume blocks a paused reader until Resume, or reports false when the connection ends.
func (c *npConn) waitResume() bool {
	select {
	case <-c.resume:
		return c.delivering()
	case <-c.quit:
		return false
	case <-c.writerDone:
		return false
	}
}

// readLoop makes every Handler call of c: OnOpen, OnData and OnFilled as the stream asks,
// and, after the writer is done, OnClose. A TLS connection first completes its handshake; one
// that fails is closed without any Handler call.
func (c *npConn) readLoop() {
	g := c.g
	defer g.wg.Done()
	if c.tc != nil && !c.handshake() {
		g.remove(c)
		return
	}
	go c.writeLoop()
	c.st.open.Add(1)
	g.h.OnOpen(c)
	buf := make([]byte, g.bufSize)
	for {
		n, err := c.rd.Read(buf)
		if n > 0 {
			c.st.bytesIn.Add(uint64(n))
			// Once delivery stopped (Close, Shutdown) the rest is read and dropped until the
			// writer, done with the queue, closes the socket.
			if herr := c.deliver(buf[:n]); herr != nil && herr != errStopped {
				c.abort(herr)
				break
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				err = fmt.Errorf("recv on conn %d from %s: %w", c.id, c.nc.RemoteAddr(), err)
			}
			c.abort(err)
			break
		}
	}
	<-c.writerDone
	c.mu.Lock()
	reason := c.reason
	c.mu.Unlock()
	g.remove(c)
	c.st.open.Add(^uint64(0))
	g.h.OnClose(c, reason)
}

// errStopped ends a reader whose connection stopped delivering (Close, Shutdown, abort).
var errStopped = errors.New("reading stopped")

// deliver hands data to the handler and carries out what it asks: pauses, direct fills.
func (c *npConn) deliver(data []byte) error {
	h := c.g.h
	for {
		if !c.delivering() {
			return errStopped
		}
		began := time.Now()
		next, err := h.OnData(c, data)
		c.st.busyNanos.Add(int64(time.Since(began)))
		if err != nil {
			return err
		}
		data = data[min(max(next.Consumed, 0), len(data)):]
		if len(next.Fill) > 0 && len(data) > 0 {
			return fmt.Errorf("conn %d: handler asked for a fill with %d bytes of data not consumed", c.id, len(data))
		}
		for {
			switch {
			case len(next.Fill) > 0:
				c.st.fills.Add(1)
				n, err := io.ReadFull(c.rd, next.Fill)
				c.st.bytesIn.Add(uint64(n))
				if err != nil {
					if errors.Is(err, io.ErrUnexpectedEOF) {
						err = io.EOF
					}
					if !errors.Is(err, io.EOF) {
						err = fmt.Errorf("recv on conn %d from %s: %w", c.id, c.nc.RemoteAddr(), err)
					}
					return err
				}
				if !c.delivering() {
					return errStopped
				}
				if next, err = h.OnFilled(c); err != nil {
					return err
				}
				continue
			case next.Pause || len(data) > 0:
				c.st.pauses.Add(1)
				if !c.waitResume() {
					return errStopped
				}
			}
			break
		}
		if len(data) == 0 {
			return nil
		}
	}
}

// writeLoop writes what Send left queued, in order, calling each done, until the connection
// is aborted or closed after its queue.
func (c *npConn) writeLoop() {
	defer close(c.writerDone)
	for {
		c.mu.Lock()
		aborted, closeReq := c.aborted, c.closeReq
		var q []*outItem
		if !c.writing {
			q = c.queue
			c.queue = nil
		}
		busy := c.writing
		if !aborted && closeReq && len(q) == 0 && !busy {
			c.setReason(nil)
			c.aborted = true
		}
		if len(q) > 0 && !aborted {
			c.writing = true
		}
		c.mu.Unlock()
		switch {
		case aborted:
			for _, it := range q {
				it.release()
			}
			c.dropQueue()
			return
		case len(q) == 0 && closeReq && !busy:
			c.closeSocket()
			return
		case len(q) == 0:
			<-c.wake
			continue
		}
		err := c.writeQueue(q)
		c.mu.Lock()
		c.writing = false
		c.mu.Unlock()
		if err != nil {
			c.abort(err)
		}
	}
}

// writeQueue writes q in order, waiting while the socket is full, and releases every item
// (all of them also when it fails).
func (c *npConn) writeQueue(q []*outItem) error {
	if c.tc != nil {
		return c.writeTLS(q)
	}
	for i, it := range q {
		n, err := c.writeAll(it)
		c.st.bytesOut.Add(uint64(n))
		c.st.sends.Add(1)
		left := it.left
		it.release()
		if err != nil {
			for _, rest := range q[i+1:] {
				rest.release()
			}
			return fmt.Errorf("send %d bytes on conn %d to %s: %w", left, c.id, c.nc.RemoteAddr(), err)
		}
	}
	return nil
}

// closeSocket ends a connection whose queue is written: on TLS with a close_notify alert first.
func (c *npConn) closeSocket() {
	if c.tc != nil {
		_ = c.tc.Close()
		return
	}
	c.nc.Close()
}

// dropQueue calls done for everything still queued after an abort.
func (c *npConn) dropQueue() {
	c.mu.Lock()
	q := c.queue
	c.queue = nil
	c.mu.Unlock()
	for _, it := range q {
		it.release()
	}
}
