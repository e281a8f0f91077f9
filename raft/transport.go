package raft

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"ringbroker/internal/crc32c"
)

// Preamble opens every connection a Transport dials, so that an application sharing the port
// with another protocol can tell Raft's connections apart by their first four bytes. Its first
// byte has the high bit set: read as a big-endian int32 it is negative, so it is never the size
// prefix of a Kafka request.
const Preamble = "\xffRFT"

// Transport framing: a connection opens with Preamble, then each message is a frame of length
// (4 bytes, of the payload), CRC32C of the payload (4 bytes), payload (AppendMessage's
// encoding). A connection that does not open with Preamble, or a frame that fails its CRC or
// does not decode, closes the connection: the stream can no longer be trusted.
const (
	frameHeader = 8
	// maxFrameBytes bounds one frame; a snapshot larger than this cannot be sent.
	maxFrameBytes = 512 << 20
	// defaultQueue is the number of messages queued per peer before new ones are dropped.
	defaultQueue = 4096
	dialTimeout  = time.Second
	// maxBackoff caps the wait between failed dials of one peer.
	maxBackoff = time.Second
)

// TransportConfig configures a Transport.
type TransportConfig struct {
	// ID is the local node id; messages addressed to other ids are dropped on receipt.
	ID uint64
	// Listen is the TCP address to accept peers on ("127.0.0.1:0" picks a port).
	Listen string
	// Listener, when set, is used instead of listening on Listen, so that an application can
	// share the port with its own protocol (it hands over only the connections for Raft).
	Listener net.Listener
	// QueueLen bounds the messages queued per peer (4096); when full, new ones are dropped,
	// which Raft tolerates like any message loss.
	QueueLen int
	// Recv is called with every message received, from the connection's goroutine; it must
	// not block for long.
	Recv func(Message)
	// Logger receives connection errors; nil discards them.
	Logger *slog.Logger
}

// Transport carries messages between nodes over TCP: one outbound connection per peer,
// redialled with backoff when it breaks, fed by a bounded queue.
type Transport struct {
	cfg    TransportConfig
	ln     net.Listener
	logger *slog.Logger
	done   chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex
	peers map[uint64]*peer      // guarded by mu
	conns map[net.Conn]struct{} // accepted connections, guarded by mu
}

type peer struct {
	id   uint64
	addr string
	q    chan Message
	stop chan struct{}
}

// NewTransport listens on cfg.Listen and starts accepting peers.
func NewTransport(cfg TransportConfig) (*Transport, error) {
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = defaultQueue
	}
	if cfg.Recv == nil {
		return nil, errors.New("raft transport: Recv is required")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("raft transport: listen on %s: %w", cfg.Listen, err)
		}
	}
	t := &Transport{cfg: cfg, ln: ln, logger: logger, done: make(chan struct{}),
		peers: map[uint64]*peer{}, conns: map[net.Conn]struct{}{}}
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

// Addr returns the address the transport listens on.
func (t *Transport) Addr() string { return t.ln.Addr().String() }

// AddPeer sets the address of node id, starting its sender; a new address replaces the old.
func (t *Transport) AddPeer(id uint64, addr string) {
	if id == t.cfg.ID {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.done:
		return
	default:
	}
	if p := t.peers[id]; p != nil {
		if p.addr == addr {
			return
		}
		close(p.stop)
	}
	p := &peer{id: id, addr: addr, q: make(chan Message, t.cfg.QueueLen), stop: make(chan struct{})}
	t.peers[id] = p
	t.wg.Add(1)
	go t.send(p)
}

// RemovePeer stops sending to node id.
func (t *Transport) RemovePeer(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[id]; p != nil {
		close(p.stop)
		delete(t.peers, id)
	}
}

// Send queues msgs to their peers without blocking. Messages to unknown peers, or to peers
// whose queue is full, are dropped.
func (t *Transport) Send(msgs []Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		p := t.peers[m.To]
		if p == nil {
			continue
		}
		select {
		case p.q <- m:
		default:
		}
	}
}

// Close stops listening, closes every connection and waits for the goroutines.
func (t *Transport) Close() error {
	t.mu.Lock()
	select {
	case <-t.done:
		t.mu.Unlock()
		return nil
	default:
	}
	close(t.done)
	for id, p := range t.peers {
		close(p.stop)
		delete(t.peers, id)
	}
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	err := t.ln.Close()
	t.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("raft transport: close listener: %w", err)
	}
	return nil
}

func (t *Transport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.done:
			default:
				t.logger.Warn("raft transport: accept failed", "err", err)
			}
			return
		}
		t.mu.Lock()
		select {
		case <-t.done:
			t.mu.Unlock()
			c.Close()
			return
		default:
		}
		t.conns[c] = struct{}{}
		t.mu.Unlock()
		t.wg.Add(1)
		go t.read(c)
	}
}

func (t *Transport) read(c net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.conns, c)
		t.mu.Unlock()
		c.Close()
	}()
	br := bufio.NewReaderSize(c, 64<<10)
	var hdr [frameHeader]byte
	if _, err := io.ReadFull(br, hdr[:len(Preamble)]); err != nil {
		return
	}
	if string(hdr[:len(Preamble)]) != Preamble {
		t.logger.Warn("raft transport: connection without the Raft preamble", "remote", c.RemoteAddr(), "head", fmt.Sprintf("%x", hdr[:len(Preamble)]))
		return
	}
	var buf []byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[0:4])
		if n > maxFrameBytes {
			t.logger.Warn("raft transport: frame too large", "remote", c.RemoteAddr(), "bytes", n, "max", maxFrameBytes)
			return
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return
		}
		if crc32c.Checksum(buf) != binary.BigEndian.Uint32(hdr[4:8]) {
			t.logger.Warn("raft transport: frame CRC mismatch", "remote", c.RemoteAddr(), "bytes", n)
			return
		}
		m, err := DecodeMessage(buf)
		if err != nil {
			t.logger.Warn("raft transport: bad message", "remote", c.RemoteAddr(), "err", err)
			return
		}
		if m.To != t.cfg.ID {
			continue
		}
		t.cfg.Recv(m)
	}
}

// send is a peer's sender: it dials, writes queued messages, flushes when the queue runs
// dry, and redials with backoff after an error. Messages that cannot be written are dropped.
func (t *Transport) send(p *peer) {
	defer t.wg.Done()
	var c net.Conn
	var bw *bufio.Writer
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	backoff := 10 * time.Millisecond
	var frame []byte
	for {
		var m Message
		select {
		case <-p.stop:
			return
		case m = <-p.q:
		}
		if c == nil {
			var err error
			c, err = net.DialTimeout("tcp", p.addr, dialTimeout)
			if err != nil {
				t.logger.Debug("raft transport: dial failed", "peer", p.id, "addr", p.addr, "err", err)
				timer := time.NewTimer(backoff)
				select {
				case <-p.stop:
					timer.Stop()
					return
				case <-timer.C:
				}
				backoff = min(2*backoff, maxBackoff)
				continue
			}
			backoff = 10 * time.Millisecond
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetNoDelay(true)
			}
			bw = bufio.NewWriterSize(c, 64<<10)
			// Into the empty buffer: a broken connection shows when the buffer is written.
			bw.WriteString(Preamble)
		}
		frame = appendFrame(frame[:0], m)
		_, err := bw.Write(frame)
		if err == nil && len(p.q) == 0 {
			err = bw.Flush()
		}
		if err != nil {
			t.logger.Debug("raft transport: write failed", "peer", p.id, "addr", p.addr, "err", err)
			c.Close()
			c, bw = nil, nil
		}
	}
}

func appendFrame(b []byte, m Message) []byte {
	b = append(b, make([]byte, frameHeader)...)
	b = AppendMessage(b, m)
	payload := b[frameHeader:]
	binary.BigEndian.PutUint32(b[0:4], uint32(len(payload)))
	binary.BigEndian.PutUint32(b[4:8], crc32c.Checksum(payload))
	return b
}
