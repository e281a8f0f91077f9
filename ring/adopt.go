package ring

import (
	"context"
	"net"
	"sync/atomic"
	"time"
)

// Adopted serves TCP connections accepted by someone else: a port shared with another
// protocol, whose acceptor tells the protocols apart by their first bytes and hands over the
// connections that speak the Handler's. Each connection runs on goroutines of its own, as the
// netpoll backend runs its connections, TLS included when Config.TLS is set.
type Adopted struct {
	g      *connGroup
	st     ringCounters
	nextID atomic.Uint64
}

// Adopt starts serving connections handed over with Serve; cfg.Addr and the io_uring settings
// are not used.
func Adopt(cfg Config, h Handler) (*Adopted, error) {
	if h == nil {
		return nil, errNilHandler
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Adopted{g: newConnGroup(cfg, h), st: ringCounters{start: time.Now()}}, nil
}

// Serve serves nc until it closes; head are the bytes the acceptor already read from it, which
// the Handler receives first. After Shutdown began nc is closed at once.
func (a *Adopted) Serve(nc *net.TCPConn, head []byte) {
	a.st.accepted.Add(1)
	a.g.serve(nc, head, a.nextID.Add(1), 0, &a.st)
}

// Stats are the counters of the connections served.
func (a *Adopted) Stats() Stats { return a.st.goroutineSnapshot() }

// Shutdown closes every connection after its queued sends, as Server.Shutdown, and refuses
// connections handed over later.
func (a *Adopted) Shutdown(ctx context.Context) error { return a.g.shutdown(ctx) }

// headConn is a connection whose first bytes were read before it was handed over: reads
// return head first. Only the connection's reader reads it.
type headConn struct {
	*net.TCPConn
	head []byte
}

// Read reads what is left of head, then from the connection.
func (h *headConn) Read(b []byte) (int, error) {
	if len(h.head) > 0 {
		n := copy(b, h.head)
		h.head = h.head[n:]
		return n, nil
	}
	return h.TCPConn.Read(b)
}
