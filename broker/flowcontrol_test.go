package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// dialT opens a plain TCP connection to the broker, closed at cleanup.
func dialT(t *testing.T, b *Broker) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", b.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", b.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// metadataOK checks that a fresh client still gets a Metadata answer within d.
func metadataOK(t *testing.T, b *Broker, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := kadm.NewClient(newClient(t, b)).BrokerMetadata(ctx)
	return err
}

// TestRequestMemoryBound: peers that announce huge frames and then stall get memory only
// within queued.max.request.bytes (plus one frame, Kafka's soft limit), the pages of what they
// did not send are never touched, and once they leave, every connection that waited for memory
// goes on. Then many peers at once send frames that do not all fit: all are answered, and the
// memory in use never passes the bound.
func TestRequestMemoryBound(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		const limit = 4 << 20
		b := startBroker(t, backend, t.TempDir(), fmt.Sprintf("queued.max.request.bytes=%d", limit))
		// The topic's client leaves before the stalled peers come, so that "no connection
		// open" below means every stalled peer is gone (a client that stayed could close
		// its seed connection at any time and make one stalled peer look closed).
		cl := newClient(t, b)
		createTopicWith(context.Background(), t, cl, "mem", 1)
		cl.Close()
		testutil.WaitFor(t, 10*time.Second, func() error {
			if n := ringStats(b).Open; n != 0 {
				return fmt.Errorf("%d connections still open after the topic's client closed", n)
			}
			return nil
		})

		// 20 peers announce a 50 MiB frame each and send 10 KiB of it.
		const announced = 50 << 20
		gets := b.reqPool.Stats().Gets
		accepted := ringStats(b).Accepted
		var stalled []net.Conn
		for range 20 {
			c := dialT(t, b)
			hdr := binary.BigEndian.AppendUint32(nil, announced)
			if _, err := c.Write(append(hdr, make([]byte, 10<<10)...)); err != nil {
				t.Fatal(err)
			}
			stalled = append(stalled, c)
		}
		// Every stalled peer is accepted before they leave: one still in the kernel's accept
		// queue would be read, and take memory for its frame, after "no connection open".
		testutil.WaitFor(t, 10*time.Second, func() error {
			if n := ringStats(b).Accepted - accepted; n != 20 {
				return fmt.Errorf("%d of 20 stalled peers accepted", n)
			}
			if st := b.reqPool.Stats(); st.InUse == 0 || st.Waiting == 0 {
				return fmt.Errorf("want one stalled frame holding memory and the others waiting: %+v", st)
			}
			return nil
		})
		st := b.reqPool.Stats()
		if st.InUse > limit+64<<20 {
			t.Fatalf("%d bytes in use for stalled frames; the bound is %d plus one frame", st.InUse, limit)
		}
		if n := st.Gets - gets; n != 1 {
			t.Fatalf("%d frame buffers handed out to 20 stalled peers; want 1 (the rest wait)", n)
		}
		// The pool is full: a new client waits too, as on Kafka, until memory returns.
		for _, c := range stalled {
			c.Close()
		}
		// A peer whose close the broker has not seen yet may still take memory for its frame:
		// it is all back once the broker has closed every stalled connection.
		testutil.WaitFor(t, 10*time.Second, func() error {
			if st := b.reqPool.Stats(); st.InUse != 0 || ringStats(b).Open != 0 {
				return fmt.Errorf("request memory still in use after the stalled peers left: %+v", st)
			}
			return nil
		})
		if err := metadataOK(t, b, 10*time.Second); err != nil {
			t.Fatalf("metadata after the stalled peers left: %v", err)
		}

		// 16 peers at once, 8 produce requests of 768 KiB each, with 4 MiB for all.
		req := rawProduceRequest(t, "mem", rawShape{partitions: 1, records: 12, valueSize: 64 << 10})
		refused := b.reqPool.Stats().Refused
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		var peak atomic.Int64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				if n := b.reqPool.Stats().InUse; n > peak.Load() {
					peak.Store(n)
				}
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Microsecond):
				}
			}
		}()
		for range 16 {
			c := dialT(t, b)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- produceAndRead(c, req, 8)
			}()
		}
		wg.Wait()
		close(stop)
		<-sampled
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		st = b.reqPool.Stats()
		if p := peak.Load(); p > limit+1<<20 {
			t.Fatalf("request memory in use reached %d; bound %d plus one 1 MiB class", p, limit)
		}
		if st.Refused == refused {
			t.Fatalf("no request waited for memory (stats %+v): the test did not exercise the bound", st)
		}
		t.Logf("pool: %+v", st)
	})
}

// produceAndRead pipelines n copies of the framed Produce request req on c (up to the
// broker's in-flight limit at a time) and checks each response.
func produceAndRead(c net.Conn, req []byte, n int) error {
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	werr := make(chan error, 1)
	go func() {
		for range n {
			if _, err := c.Write(req); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	r := bufio.NewReader(c)
	for i := range n {
		body, err := readResponse(r)
		if err != nil {
			return fmt.Errorf("response %d: %w", i, err)
		}
		if err := checkProduceResponse(body); err != nil {
			return fmt.Errorf("response %d: %w", i, err)
		}
	}
	return <-werr
}

// readResponse reads one response frame and returns it, correlation id first.
func readResponse(r *bufio.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, err
	}
	if len(frame) < 4 {
		return nil, errors.New("response frame without correlation id")
	}
	return frame, nil
}

// TestInflightCap: a client that pipelines requests and never reads its responses gets at most
// max.inflight.requests.per.connection of them handled beyond what the socket buffers take; the
// broker stops reading from it, other clients are served meanwhile, and once the client reads,
// every response arrives, in order.
func TestInflightCap(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		b := startBroker(t, backend, t.TempDir(), "max.inflight.requests.per.connection=3")
		createTestTopic(context.Background(), t, b, "cap", 1)
		// 7.5 MiB of data: each fetch below answers with a 768 KiB batch of it.
		prod := rawProduceRequest(t, "cap", rawShape{partitions: 1, records: 12, valueSize: 64 << 10})
		pc := dialT(t, b)
		if err := produceAndRead(pc, prod, 10); err != nil {
			t.Fatal(err)
		}
		fetches := func() uint64 { return b.metrics.requests[kmsg.Fetch].Get() }
		before := fetches()
		const sent = 200
		c := dialT(t, b)
		req := rawFetchFrame(t, "cap", 1<<20)
		wrote := make(chan error, 1)
		go func() {
			for i := range sent {
				binary.BigEndian.PutUint32(req[8:], uint32(i)) // correlation id
				if _, err := c.Write(req); err != nil {
					wrote <- err
					return
				}
			}
			wrote <- nil
		}()
		// Responses fill the socket buffers (a few MiB), then the broker stops reading.
		var last uint64
		testutil.WaitFor(t, 20*time.Second, func() error {
			n := fetches()
			stable := n == last && n > before
			last = n
			if stable {
				time.Sleep(200 * time.Millisecond)
				if fetches() == n {
					return nil
				}
			}
			return fmt.Errorf("fetch handling goes on (%d handled) while the client reads nothing", n-before)
		})
		handled := fetches() - before
		if handled >= sent {
			t.Fatalf("all %d pipelined fetches were handled though the client read none", sent)
		}
		if err := metadataOK(t, b, 10*time.Second); err != nil {
			t.Fatalf("another client while one is muted: %v", err)
		}
		r := bufio.NewReader(c)
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		for i := range sent {
			var size [4]byte
			if _, err := io.ReadFull(r, size[:]); err != nil {
				t.Fatalf("response %d: %v", i, err)
			}
			frame := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(r, frame); err != nil {
				t.Fatalf("response %d: %v", i, err)
			}
			if got := binary.BigEndian.Uint32(frame); got != uint32(i) {
				t.Fatalf("response %d has correlation id %d", i, got)
			}
		}
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		t.Logf("%d of %d fetches handled before the client read", handled, sent)
	})
}

// rawFetchFrame encodes a framed Fetch v11 request for partition 0 of topic from offset 0 with
// partition max bytes max.
func rawFetchFrame(t *testing.T, topic string, max int32) []byte {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = max
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = 0
	fp.PartitionMaxBytes = max
	fp.CurrentLeaderEpoch = -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("captest")).AppendRequest(nil, req, 0)
}
