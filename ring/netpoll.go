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
	"time"
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
		c := &npConn{s: s, id: s.nextID.Add(1), nc: nc, wake: make(chan struct{}, 1), writerDone: make(chan struct{})}
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
	s          *npServer
	id         uint64
	nc         *net.TCPConn
	wake       chan struct{} // capacity 1: the writer has something to look at
	writerDone chan struct{}

	mu         sync.Mutex
	queue      []*npItem // guarded by mu
	closed     bool      // guarded by mu: Send fails from now on
	closeReq   bool      // guarded by mu: the writer closes the socket after the queue
	aborted    bool      // guarded by mu: the socket is closed, drop the queue
	stopRead   bool      // guarded by mu: received data is no longer delivered
	reason     error     // guarded by mu: what OnClose reports
	reasonSet  bool      // guarded by mu
	handlerCtx any       // guarded by mu
}

type npItem struct {
	bufs [][]byte
	done func()
}

// ID implements Conn.
func (c *npConn) ID() uint64 { return c.id }

// RemoteAddr implements Conn.
func (c *npConn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// SetContext implements Conn.
func (c *npConn) SetContext(v any) {
	c.mu.Lock()
	c.handlerCtx = v
	c.mu.Unlock()
}

// Context implements Conn.
func (c *npConn) Context() any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handlerCtx
}

// Send implements Conn: it queues bufs for the writer goroutine.
func (c *npConn) Send(bufs [][]byte, done func()) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		n := 0
		for _, b := range bufs {
			n += len(b)
		}
		return fmt.Errorf("send %d bytes on conn %d: %w", n, c.id, ErrClosed)
	}
	c.queue = append(c.queue, &npItem{bufs: bufs, done: done})
	c.mu.Unlock()
	c.notify()
	return nil
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
}

// abort closes the socket now with an RST, dropping the queue.
func (c *npConn) abort(err error) {
	c.mu.Lock()
	c.setReason(err)
	c.closed = true
	c.aborted = true
	c.stopRead = true
	c.mu.Unlock()
	_ = c.nc.SetLinger(0)
	c.nc.Close()
	c.notify()
}

// readLoop makes every Handler call of c: OnOpen, OnData per read, and,
// after the writer is done, OnClose.
func (c *npConn) readLoop() {
	s := c.s
	defer s.connWG.Done()
	s.h.OnOpen(c)
	buf := make([]byte, s.bufSize)
	for {
		n, err := c.nc.Read(buf)
		if n > 0 {
			s.st.bytesIn.Add(uint64(n))
			c.mu.Lock()
			deliver := !c.stopRead
			c.mu.Unlock()
			if deliver {
				if herr := s.h.OnData(c, buf[:n]); herr != nil {
					c.abort(herr)
					break
				}
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

// writeLoop writes queued sends in order with writev, calling done after
// each, until the connection is aborted or closed after its queue.
func (c *npConn) writeLoop() {
	defer close(c.writerDone)
	var bufs net.Buffers
	for {
		c.mu.Lock()
		q := c.queue
		c.queue = nil
		aborted, closeReq := c.aborted, c.closeReq
		if !aborted && closeReq && len(q) == 0 {
			c.setReason(nil)
			c.aborted = true
		}
		c.mu.Unlock()
		switch {
		case aborted:
			for _, it := range q {
				if it.done != nil {
					it.done()
				}
			}
			return
		case len(q) == 0 && closeReq:
			c.nc.Close()
			return
		case len(q) == 0:
			<-c.wake
			continue
		}
		bufs = bufs[:0]
		total := 0
		for _, it := range q {
			for _, b := range it.bufs {
				if len(b) > 0 {
					bufs = append(bufs, b)
					total += len(b)
				}
			}
		}
		wb := bufs
		n, err := wb.WriteTo(c.nc)
		clear(bufs)
		c.s.st.bytesOut.Add(uint64(n))
		c.s.st.sends.Add(1)
		for _, it := range q {
			if it.done != nil {
				it.done()
			}
		}
		if err != nil {
			c.abort(fmt.Errorf("send %d bytes on conn %d to %s: %w", total, c.id, c.nc.RemoteAddr(), err))
		}
	}
}
