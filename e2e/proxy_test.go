package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// maxProxyFrame bounds the frames the proxy reads; Kafka's default socket.request.max.bytes.
const maxProxyFrame = 100 << 20

// cutProxy is a TCP proxy between a client and a broker that understands Kafka framing.
// It forwards every request, and after every cutEvery-th Produce request (up to maxCuts
// times) it cuts the client's connection before the client sees that request's response:
// either right after forwarding the request, or once the broker's response has arrived
// (and is dropped), so the broker surely appended the batch. The idempotent producer must
// then retry, and the broker must not store the retried batch twice.
type cutProxy struct {
	ln       net.Listener
	upstream string
	cutEvery int
	maxCuts  int

	mu       sync.Mutex
	produces int                   // Produce requests seen
	cuts     int                   // connections cut
	conns    map[net.Conn]struct{} // open connections on both sides, closed at cleanup
	wg       sync.WaitGroup
}

// startCutProxy listens on a free loopback port and proxies to upstream until the test ends.
func startCutProxy(t *testing.T, upstream string, cutEvery, maxCuts int) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &cutProxy{ln: ln, upstream: upstream, cutEvery: cutEvery, maxCuts: maxCuts, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is where clients connect.
func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

// Cuts is how many connections the proxy has cut.
func (p *cutProxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

func (p *cutProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[client] = struct{}{}
		p.conns[server] = struct{}{}
		p.mu.Unlock()
		pc := &proxyConn{p: p, client: client, server: server, cutCorr: -1}
		p.wg.Add(2)
		go pc.requests()
		go pc.responses()
	}
}

// decideCut counts a Produce request and says whether to cut after it, and how:
// afterResponse is true when the broker's response should be awaited and dropped.
func (p *cutProxy) decideCut() (cut, afterResponse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.produces++
	if p.cuts >= p.maxCuts || p.produces%p.cutEvery != 0 {
		return false, false
	}
	p.cuts++
	return true, p.cuts%2 == 0
}

// proxyConn is one proxied client connection.
type proxyConn struct {
	p              *cutProxy
	client, server net.Conn

	mu      sync.Mutex
	cutCorr int32 // correlation id whose response ends the connection; -1 for none
}

func (c *proxyConn) shut() {
	c.client.Close()
	c.server.Close()
	c.p.mu.Lock()
	delete(c.p.conns, c.client)
	delete(c.p.conns, c.server)
	c.p.mu.Unlock()
}

// requests forwards client frames to the broker, cutting after chosen Produce requests.
func (c *proxyConn) requests() {
	defer c.p.wg.Done()
	defer c.shut()
	for {
		frame, err := readFrame(c.client)
		if err != nil {
			return
		}
		if len(frame) < 12 {
			return // not a request header
		}
		apiKey := int16(binary.BigEndian.Uint16(frame[4:]))
		corr := int32(binary.BigEndian.Uint32(frame[8:]))
		cut, afterResponse := false, false
		if apiKey == 0 {
			cut, afterResponse = c.p.decideCut()
		}
		if cut && afterResponse {
			c.mu.Lock()
			c.cutCorr = corr
			c.mu.Unlock()
		}
		if _, err := c.server.Write(frame); err != nil {
			return
		}
		if cut && !afterResponse {
			return
		}
	}
}

// responses forwards broker frames to the client, dropping the chosen response and
// cutting the connection there.
func (c *proxyConn) responses() {
	defer c.p.wg.Done()
	defer c.shut()
	for {
		frame, err := readFrame(c.server)
		if err != nil {
			return
		}
		if len(frame) < 8 {
			return
		}
		corr := int32(binary.BigEndian.Uint32(frame[4:]))
		c.mu.Lock()
		drop := corr == c.cutCorr
		c.mu.Unlock()
		if drop {
			return
		}
		if _, err := c.client.Write(frame); err != nil {
			return
		}
	}
}

// readFrame reads one size-prefixed Kafka frame, size included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > maxProxyFrame {
		return nil, fmt.Errorf("frame size %d out of range [0, %d]", n, maxProxyFrame)
	}
	frame := make([]byte, 4+int(n))
	copy(frame, size[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("frame of %d bytes: %w", n, err)
	}
	return frame, nil
}
