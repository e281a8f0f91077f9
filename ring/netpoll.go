package ring

import (
	"context"
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

// npServer is the netpoll backend: one listener, an accept goroutine, and per
// connection a reader goroutine (which makes every Handler call) and a writer
// goroutine draining the send queue with writev.
type npServer struct {
	h       Handler
	log     *slog.Logger
	ln      *net.TCPListener
	bufSize int
	nextID  atomic.Uint64
	st      ringCounters
	items   outItems

	stop     chan struct{} // closed when Shutdown starts
	acceptWG sync.WaitGroup
	connWG   sync.WaitGroup

	mu       sync.Mutex
	conns    map[*npConn]struct{} // guarded by mu
	draining bool                 // guarded by mu: new connections are closed at once
}

func listenNetpoll(cfg Config, h Handler) (*npServer, error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %q: %w", cfg.Addr, err)
	}
	s := &npServer{
		h:       h,
		log:     cfg.Logger,
		ln:      ln.(*net.TCPListener),
		bufSize: cfg.RecvBufferSize,
		stop:    make(chan struct{}),
		conns:   make(map[*npConn]struct{}),
	}
	s.acceptWG.Add(1)
	go s.acceptLoop()
	return s, nil
}

func (s *npServer) addr() net.Addr { return s.ln.Addr() }

func (s *npServer) ringStats() []Stats { return []Stats{s.st.snapshot()} }

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
		_ = nc.SetNoDelay(true)
		raw, err := nc.SyscallConn()
		if err != nil {
			nc.Close()
			continue
		}
		c := &npConn{s: s, id: s.nextID.Add(1), nc: nc, raw: raw, wake: make(chan struct{}, 1),
			resume: make(chan struct{}, 1), quit: make(chan struct{}), writerDone: make(chan struct{})}
		c.rw.fn = c.rw.write
		s.mu.Lock()
		if s.draining {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.connWG.Add(1)
		s.mu.Unlock()
		s.st.accepted.Add(1)
		s.st.open.Add(1)
		go c.writeLoop()
		go c.readLoop()
	}
}

func (s *npServer) shutdown(ctx context.Context) error {
	close(s.stop)
	s.ln.Close()
	s.acceptWG.Wait()
	s.mu.Lock()
	s.draining = true
	conns := make([]*npConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.drain()
	}
	done := make(chan struct{})
	go func() {
		s.connWG.Wait()
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

// npConn is a connection of the netpoll backend.
type npConn struct {
	s   *npServer
	id  uint64
	nc  *net.TCPConn
	raw syscall.RawConn
	rw  rawWrite // used by whoever holds writing
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
	reason    error      // guarded by mu: what OnClose reports
	reasonSet bool       // guarded by mu
}

// ID implements Conn.
func (c *npConn) ID() uint64 { return c.id }

// RemoteAddr implements Conn.
func (c *npConn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Loop implements Conn: netpoll has one.
func (c *npConn) Loop() int { return 0 }

// Send implements Conn: with nothing queued it writes at once from the calling goroutine,
// without blocking; the rest goes to the writer goroutine.
func (c *npConn) Send(pieces []Piece, done func()) error {
	it := c.s.items.get(pieces, done)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		left := it.left
		c.s.items.put(it)
		return fmt.Errorf("send %d bytes on conn %d: %w", left, c.id, ErrClosed)
	}
	if c.writing || len(c.queue) > 0 {
		c.queue = append(c.queue, it)
		c.mu.Unlock()
		c.notify()
		return nil
	}
	c.writing = true
	c.mu.Unlock()
	c.s.st.directSends.Add(1)
	n, err := c.writeOnce(it)
	c.s.st.bytesOut.Add(uint64(n))
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
		c.s.st.directBlocked.Add(1)
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

// drain is Shutdown's graceful close: stop delivering data, write the queue, close.
func (c *npConn) drain() {
	c.mu.Lock()
	c.closed = true
	c.closeReq = true
	c.stopRead = true
	c.mu.Unlock()
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
// and, after the writer is done, OnClose.
func (c *npConn) readLoop() {
	s := c.s
	defer s.connWG.Done()
	s.h.OnOpen(c)
	buf := make([]byte, s.bufSize)
	for {
		n, err := c.nc.Read(buf)
		if n > 0 {
			s.st.bytesIn.Add(uint64(n))
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
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.st.open.Add(^uint64(0))
	s.h.OnClose(c, reason)
}

// errStopped ends a reader whose connection stopped delivering (Close, Shutdown, abort).
var errStopped = errors.New("reading stopped")

// deliver hands data to the handler and carries out what it asks: pauses, direct fills.
func (c *npConn) deliver(data []byte) error {
	s := c.s
	for {
		if !c.delivering() {
			return errStopped
		}
		next, err := s.h.OnData(c, data)
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
				s.st.fills.Add(1)
				n, err := io.ReadFull(c.nc, next.Fill)
				s.st.bytesIn.Add(uint64(n))
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
				if next, err = s.h.OnFilled(c); err != nil {
					return err
				}
				continue
			case next.Pause || len(data) > 0:
				s.st.pauses.Add(1)
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
			c.nc.Close()
			return
		case len(q) == 0:
			<-c.wake
			continue
		}
		for i, it := range q {
			n, err := c.writeAll(it)
			c.s.st.bytesOut.Add(uint64(n))
			c.s.st.sends.Add(1)
			left := it.left
			it.release()
			if err != nil {
				for _, rest := range q[i+1:] {
					rest.release()
				}
				c.mu.Lock()
				c.writing = false
				c.mu.Unlock()
				c.abort(fmt.Errorf("send %d bytes on conn %d to %s: %w", left, c.id, c.nc.RemoteAddr(), err))
				break
			}
		}
		c.mu.Lock()
		c.writing = false
		c.mu.Unlock()
	}
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
