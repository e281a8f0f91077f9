package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// The connection limits of TestConnectionLimits. Clients bind loopback addresses of their
// own (all of 127.0.0.0/8 reaches the broker's 127.0.0.1 listener) so that each limit is
// counted apart from the harness's and the other clients' connections.
const (
	// perIPLimit is max.connections.per.ip, which limitedIP is held to.
	perIPLimit = 4
	limitedIP  = "127.0.0.3"
	// overrideLimit is overriddenIP's entry in max.connections.per.ip.overrides.
	overrideLimit = 8
	overriddenIP  = "127.0.0.2"
	// harnessLimit is 127.0.0.1's override, where the harness, the tools and (on Kafka) the
	// broker's own connections to its controller come from.
	harnessLimit = 1000
	// floodWorkers connect and disconnect in a loop from limitedIP; floodMin is how many
	// connections they make at least, and floodMax at most.
	floodWorkers = 8
	floodMin     = 500
	floodMax     = 20000
	// wellBehavedRounds is how many times the well-behaved client connects anew and produces
	// while the flood goes on; each round must finish within wellBehavedTimeout.
	wellBehavedRounds  = 3
	wellBehavedRecords = 100
	wellBehavedTimeout = 10 * time.Second
)

// TestConnectionLimits checks max.connections.per.ip and max.connections.per.ip.overrides as
// Kafka enforces them: an address may hold its limit of connections, each answered, while
// the next one is closed at once; a connection closed gives its slot back. Then eight
// goroutines flood the broker from one address with connections opened and closed in a loop
// (hundreds of them, most refused), and a well-behaved franz-go client on another address
// still connects and produces, again and again, while the flood goes on. Once the flood
// stops, the flooding address gets exactly its limit again: no slot leaked.
func TestConnectionLimits(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t,
			fmt.Sprintf("max.connections.per.ip=%d", perIPLimit),
			fmt.Sprintf("max.connections.per.ip.overrides=127.0.0.1:%d,%s:%d", harnessLimit, overriddenIP, overrideLimit))

		t.Run("max.connections.per.ip", func(t *testing.T) { checkConnLimit(t, b.Addr(), limitedIP, perIPLimit) })
		t.Run("override", func(t *testing.T) { checkConnLimit(t, b.Addr(), overriddenIP, overrideLimit) })

		t.Run("flood", func(t *testing.T) {
			const topic = "conn-flood"
			b.CreateTopic(t, topic, 1)
			f := startFlood(b.Addr(), limitedIP)
			defer f.stop()
			testutil.WaitFor(t, 30*time.Second, func() error {
				if n := f.connects.Load(); n < floodWorkers*10 {
					return fmt.Errorf("the flood has made %d connections", n)
				}
				return nil
			})
			before := f.connects.Load()
			for round := range wellBehavedRounds {
				start := time.Now()
				if err := produceFrom(b.Addr(), overriddenIP, topic, round); err != nil {
					t.Fatalf("round %d of the well-behaved client during the flood (%d connections so far): %v", round, f.connects.Load(), err)
				}
				t.Logf("round %d: connected and produced %d records in %v", round, wellBehavedRecords, time.Since(start).Round(time.Millisecond))
			}
			during := f.connects.Load() - before
			testutil.WaitFor(t, 30*time.Second, func() error {
				if n := f.connects.Load(); n < floodMin {
					return fmt.Errorf("the flood has made %d connections, want %d", n, floodMin)
				}
				return nil
			})
			f.stop()
			t.Logf("flood: %d connections (%d while the well-behaved client ran), %d answered, %d closed by the broker, %d other errors (last: %v)",
				f.connects.Load(), during, f.served.Load(), f.refused.Load(), f.failed.Load(), f.lastErr())
			if during == 0 {
				t.Fatalf("the flood made no connection while the well-behaved client ran")
			}
			if f.refused.Load() == 0 {
				t.Fatalf("none of the flood's %d connections from %s was refused; want those past max.connections.per.ip=%d closed", f.connects.Load(), limitedIP, perIPLimit)
			}
			if got := b.EndOffsets(t, topic)[0]; got != wellBehavedRounds*wellBehavedRecords {
				t.Fatalf("%s ends at %d; want the well-behaved client's %d records", topic, got, wellBehavedRounds*wellBehavedRecords)
			}
			checkConnLimit(t, b.Addr(), limitedIP, perIPLimit)
		})
	})
}

// checkConnLimit opens limit connections to addr from ip, each answering ApiVersions, then
// checks that one more is closed by the broker and that, once one of the first is closed, a
// new connection is served again. It closes every connection it opened.
func checkConnLimit(t *testing.T, addr, ip string, limit int) {
	t.Helper()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// Slots freed a moment ago (by an earlier check, or the flood) may not be released by the
	// broker yet: the limit's worth of connections is retried until all are served.
	testutil.WaitFor(t, 10*time.Second, func() error {
		for len(conns) < limit {
			c, err := dialFrom(ip, addr)
			if err == nil {
				conns = append(conns, c)
				err = apiVersions(c, 1)
			}
			if err != nil {
				n := len(conns)
				for _, c := range conns {
					c.Close()
				}
				conns = nil
				return fmt.Errorf("connection %d of the %d allowed from %s: %w", n, limit, ip, err)
			}
		}
		return nil
	})
	extra, err := dialFrom(ip, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if err := apiVersions(extra, 1); !isClosed(err) {
		t.Fatalf("connection %d from %s, past its limit of %d: %v; want it closed by the broker", limit+1, ip, limit, err)
	}
	// The slot of a closed connection is free again.
	conns[0].Close()
	conns = conns[1:]
	testutil.WaitFor(t, 10*time.Second, func() error {
		c, err := dialFrom(ip, addr)
		if err != nil {
			return err
		}
		if err := apiVersions(c, 1); err != nil {
			c.Close()
			return fmt.Errorf("a connection from %s after one of its %d closed: %w", ip, limit, err)
		}
		conns = append(conns, c)
		return nil
	})
	// Every connection kept is still served.
	for i, c := range conns {
		if err := apiVersions(c, 2); err != nil {
			t.Fatalf("connection %d of %d from %s, after the refused one: %v", i+1, len(conns), ip, err)
		}
	}
}

// dialFrom opens a TCP connection to addr from the local address ip.
func dialFrom(ip, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s from %s: %w", addr, ip, err)
	}
	return c, nil
}

// apiVersions sends ApiVersions v0 with correlation id corr on c and reads the answer: nil
// when it came, the read error (io.EOF, a reset) when the broker closed c instead.
func apiVersions(c net.Conn, corr int32) error {
	if err := c.SetDeadline(time.Now().Add(closeTimeout)); err != nil {
		return fmt.Errorf("set deadline: %w", err)
	}
	req := kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e")).AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), corr)
	// A write to a connection the broker already closed may fail or not; the read says.
	_, werr := c.Write(req)
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return errors.Join(err, werr)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return fmt.Errorf("ApiVersions response of %d bytes: %w", len(body), err)
	}
	if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != corr {
		return fmt.Errorf("ApiVersions response %x: want correlation id %d", head(body), corr)
	}
	return nil
}

// isClosed reports whether err is the broker closing the connection: EOF or a reset, not a
// timeout.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// flood connects to a broker from one address in a loop on floodWorkers goroutines: each
// connection sends ApiVersions, reads the answer or the close, and is closed.
type flood struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// connects counts connections made; served those answered, refused those the broker
	// closed, failed the other outcomes (dial errors, timeouts).
	connects, served, refused, failed atomic.Int64
	mu                                sync.Mutex
	err                               error // the last failure
}

// startFlood starts the flood of addr from ip; stop ends it.
func startFlood(addr, ip string) *flood {
	ctx, cancel := context.WithCancel(context.Background())
	f := &flood{cancel: cancel}
	for range floodWorkers {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for ctx.Err() == nil && f.connects.Load() < floodMax {
				f.once(addr, ip)
			}
		}()
	}
	return f
}

func (f *flood) once(addr, ip string) {
	c, err := dialFrom(ip, addr)
	if err != nil {
		f.fail(err)
		return
	}
	defer c.Close()
	f.connects.Add(1)
	switch err := apiVersions(c, 1); {
	case err == nil:
		f.served.Add(1)
	case isClosed(err):
		f.refused.Add(1)
	default:
		f.fail(err)
	}
}

func (f *flood) fail(err error) {
	f.failed.Add(1)
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *flood) lastErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// stop ends the flood and waits for its goroutines; calling it again does nothing.
func (f *flood) stop() {
	f.cancel()
	f.wg.Wait()
}

// produceFrom connects a new franz-go client to addr from the local address ip, produces
// wellBehavedRecords records to partition 0 of topic and closes the client, within
// wellBehavedTimeout.
func produceFrom(addr, ip, topic string, round int) error {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.Dialer(dialer.DialContext), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return fmt.Errorf("new client for %s from %s: %w", addr, ip, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wellBehavedTimeout)
	defer cancel()
	recs := make([]*kgo.Record, wellBehavedRecords)
	for i := range recs {
		recs[i] = &kgo.Record{Value: fmt.Appendf(nil, "round-%d-%d", round, i)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce %d records to %s from %s: %w", len(recs), topic, ip, err)
	}
	return nil
}
