package meta

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net"
	"sync"
	"time"

	"ringbroker/raft"
)

// classifyTimeout bounds how long a new connection may take to send its first 4 bytes.
const classifyTimeout = 10 * time.Second

// accept classifies each connection to the controller listener by its first four bytes:
// forwarded requests (forwardMagic) are served here, Raft's (raft.Preamble) go to its
// transport, and the rest, Kafka clients of the controller (admin clients with
// bootstrap.controllers, KIP-919), to the handler ServeClients installed.
func (s *RaftStore) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.lnClosed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.classify(c)
	}
}

func (s *RaftStore) classify(c net.Conn) {
	defer s.wg.Done()
	untrack := func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}
	br := bufio.NewReaderSize(c, 64<<10)
	c.SetReadDeadline(time.Now().Add(classifyTimeout))
	head, err := br.Peek(len(forwardMagic))
	c.SetReadDeadline(time.Time{})
	if err != nil {
		untrack()
		c.Close()
		return
	}
	switch string(head) {
	case forwardMagic:
	case raft.Preamble:
		untrack() // Raft's transport owns and closes it from here on
		if !s.mux.deliver(&peekedConn{Conn: c, r: br}) {
			c.Close()
		}
		return
	default:
		untrack()
		s.serveClient(c, br)
		return
	}
	defer func() {
		untrack()
		c.Close()
	}()
	br.Discard(len(forwardMagic))
	body, err := readForwardFrame(br)
	if err != nil {
		s.logger.Debug("controller listener: bad forwarded request", "remote", c.RemoteAddr(), "err", err)
		return
	}
	resp := s.serveForward(body)
	out, _ := json.Marshal(resp)
	c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(out))))
	c.Write(out)
}

// ClientConnHandler serves a Kafka client's connection to the controller listener: head are
// the bytes already read from it, the start of its first request.
type ClientConnHandler func(c *net.TCPConn, head []byte)

// ServeClients installs h for the controller listener's Kafka clients; until then they are
// closed, as a listener not yet open would refuse them.
func (s *RaftStore) ServeClients(h ClientConnHandler) { s.clients.Store(&h) }

// serveClient hands a Kafka client's connection, whose first bytes br holds, to the installed
// handler.
func (s *RaftStore) serveClient(c net.Conn, br *bufio.Reader) {
	h := s.clients.Load()
	tc, ok := c.(*net.TCPConn)
	if h == nil || !ok {
		c.Close()
		return
	}
	head, _ := br.Peek(br.Buffered())
	(*h)(tc, bytes.Clone(head))
}

// muxListener is the net.Listener Raft's transport accepts from: the controller listener's
// connections that are not forwarded requests. A quorum of this node alone has no controller
// listener: its muxListener accepts nothing until closed.
type muxListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// Accept returns the next Raft connection.
func (m *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; the underlying listener is the store's to close.
func (m *muxListener) Close() error {
	m.once.Do(func() { close(m.done) })
	return nil
}

// Addr is the controller listener's address.
func (m *muxListener) Addr() net.Addr { return m.addr }

func (m *muxListener) deliver(c net.Conn) bool {
	select {
	case m.conns <- c:
		return true
	case <-m.done:
		return false
	}
}

// soleVoterAddr is the address of a quorum of this node alone, which has no controller
// listener.
type soleVoterAddr struct{}

// Network names the address kind: no network.
func (soleVoterAddr) Network() string { return "none" }

// String says why there is no address.
func (soleVoterAddr) String() string { return "sole voter, no controller listener" }

// peekedConn is a connection whose first bytes were read into r; reads come from r first.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

// Read reads through the buffer that holds the peeked bytes.
func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }
