package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/brokertest"
	"ringbroker/internal/recordbatch"
	"ringbroker/internal/testutil"
)

const (
	// badMaxRequest is the socket.request.max.bytes the bad-input broker runs with.
	badMaxRequest = 1 << 20
	// closeTimeout bounds how long the broker may take to close a bad connection.
	closeTimeout = 10 * time.Second
)

// TestBadInput sends malformed and hostile input on raw TCP connections: an oversized
// frame, a truncated frame, garbage, an unknown API key, an ApiVersions version from the
// future and a Produce batch with a wrong CRC. Each gets Kafka's answer (the connection
// closed, or an error code), while a second, well-behaved client keeps producing and
// consuming throughout, and the broker is still alive at the end.
func TestBadInput(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t, fmt.Sprintf("socket.request.max.bytes=%d", badMaxRequest))
		good := startGoodClient(t, b)
		// Each case runs while the bystander client works, and the bystander must have
		// completed a round after it.
		run := func(name string, fn func(t *testing.T)) {
			t.Run(name, fn)
			good.progress(t)
		}

		run("oversized frame", func(t *testing.T) {
			c := dialRaw(t, b)
			writeRaw(t, c, binary.BigEndian.AppendUint32(nil, badMaxRequest+1))
			expectClosed(t, c)
		})

		run("truncated frame", func(t *testing.T) {
			c := dialRaw(t, b)
			frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e")).
				AppendRequest(nil, kmsg.NewPtrMetadataRequest(), 1)
			writeRaw(t, c, frame[:len(frame)/2])
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatalf("half-close: %v", err)
			}
			expectClosed(t, c)
		})

		run("garbage", func(t *testing.T) {
			for _, garbage := range [][]byte{
				[]byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),          // size field far above the limit
				{0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, // API key -1
				{0, 0, 0, 3, 0, 18, 0},                                                           // header shorter than its fields
				{0, 0, 0, 10, 0, 3, 0, 12, 0, 0, 0, 1, 0x7f, 0xff},                               // Metadata with a client id running past the frame
				{0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 0},                                             // negative size
				{0, 0, 0, 16, 0, 18, 0, 3, 0, 0, 0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, // ApiVersions v3 with a broken body
			} {
				c := dialRaw(t, b)
				writeRaw(t, c, garbage)
				expectClosed(t, c)
			}
		})

		run("unknown API key", func(t *testing.T) {
			c := dialRaw(t, b)
			req := binary.BigEndian.AppendUint16(nil, 32000) // api key
			req = binary.BigEndian.AppendUint16(req, 0)      // api version
			req = binary.BigEndian.AppendUint32(req, 7)      // correlation id
			req = binary.BigEndian.AppendUint16(req, 3)      // client id length
			req = append(req, "e2e"...)
			writeRaw(t, c, append(binary.BigEndian.AppendUint32(nil, uint32(len(req))), req...))
			expectClosed(t, c)
		})

		run("ApiVersions too new", func(t *testing.T) {
			c := dialRaw(t, b)
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version = 127
			req.ClientSoftwareName = "e2e"
			req.ClientSoftwareVersion = "1.0"
			body := roundTrip(t, c, req, 11)
			// Whatever the request version, the answer is a v0 body: the error and the
			// ApiVersions range, so the client can retry with a version the broker has.
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.Version = 0
			if err := resp.ReadFrom(body); err != nil {
				t.Fatalf("decode ApiVersions v0 response %x: %v", body, err)
			}
			if resp.ErrorCode != kerr.UnsupportedVersion.Code {
				t.Fatalf("ApiVersions v127: error code %d, want %d (UNSUPPORTED_VERSION)", resp.ErrorCode, kerr.UnsupportedVersion.Code)
			}
			i := slices.IndexFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == 18 })
			if i < 0 || resp.ApiKeys[i].MinVersion > 0 || resp.ApiKeys[i].MaxVersion < 3 {
				t.Fatalf("ApiVersions v127: response lists %+v, want ApiVersions (18) with versions 0..>=3", resp.ApiKeys)
			}
		})

		run("Produce with bad CRC", func(t *testing.T) {
			const topic = "bad-crc"
			b.CreateTopic(t, topic, 1)
			c := dialRaw(t, b)
			produce := func(corrupt bool, corr int32) int16 {
				req := kmsg.NewPtrProduceRequest()
				req.Version = 7
				req.Acks = -1
				req.TimeoutMillis = 10_000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = recordBatch([]byte("key"), []byte("crc-check"), corrupt)
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				body := roundTrip(t, c, req, corr)
				resp := kmsg.NewPtrProduceResponse()
				resp.Version = req.Version
				if err := resp.ReadFrom(body); err != nil {
					t.Fatalf("decode Produce v7 response %x: %v", body, err)
				}
				if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
					t.Fatalf("Produce response %+v: want one topic with one partition", resp.Topics)
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			}
			if code := produce(true, 21); code != kerr.CorruptMessage.Code {
				t.Fatalf("batch with a wrong CRC: error code %d, want %d (CORRUPT_MESSAGE)", code, kerr.CorruptMessage.Code)
			}
			// The same batch with its CRC right is taken on the same connection, so the
			// CRC alone was the reason.
			if code := produce(false, 22); code != 0 {
				t.Fatalf("batch with a right CRC: error code %d (%v), want 0", code, kerr.ErrorForCode(code))
			}
			if ends := b.EndOffsets(t, topic); ends[0] != 1 {
				t.Fatalf("%s/0 end offset %d, want 1: only the good batch is stored", topic, ends[0])
			}
		})

		good.stop(t)
		if !b.Alive() {
			t.Fatalf("broker process died")
		}
		if err := brokertest.MetadataOK(b.Addr()); err != nil {
			t.Fatalf("broker does not answer after the bad input: %v", err)
		}
	})
}

// recordBatch encodes a v2 record batch with one record; corrupt flips a bit of the CRC.
func recordBatch(key, value []byte, corrupt bool) []byte {
	raw := testutil.SealBatch(testutil.NewBatch(time.Now().UnixMilli(), kmsg.Record{Key: key, Value: value}))
	if corrupt {
		raw[recordbatch.OffCRC+3] ^= 1
	}
	return raw
}

// dialRaw opens a plain TCP connection to the broker, closed when the test ends.
func dialRaw(t *testing.T, b *Broker) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", b.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func writeRaw(t *testing.T, c net.Conn, p []byte) {
	t.Helper()
	if err := c.SetWriteDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatalf("set write deadline: %v", err)
	}
	if _, err := c.Write(p); err != nil {
		t.Fatalf("write %d bytes: %v", len(p), err)
	}
}

// expectClosed fails unless the broker closes c without sending anything.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(closeTimeout)); err != nil {
		t.Fatalf("set read deadline: %v", err)
	}
	var buf [64]byte
	n, err := c.Read(buf[:])
	switch {
	case n > 0:
		t.Fatalf("broker answered %x; want the connection closed", buf[:n])
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	case errors.Is(err, syscall.ECONNRESET):
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open %v after the bad input", closeTimeout)
		}
		t.Fatalf("read after bad input: %v; want EOF or reset", err)
	}
}

// roundTrip sends req with correlation id corr and returns the response body after the
// v0 response header (the correlation id, checked here).
func roundTrip(t *testing.T, c net.Conn, req kmsg.Request, corr int32) []byte {
	t.Helper()
	writeRaw(t, c, kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e")).AppendRequest(nil, req, corr))
	if err := c.SetReadDeadline(time.Now().Add(closeTimeout)); err != nil {
		t.Fatalf("set read deadline: %v", err)
	}
	frame, err := readFrame(c)
	if err != nil {
		t.Fatalf("read response to api key %d v%d: %v", req.Key(), req.GetVersion(), err)
	}
	if len(frame) < 8 {
		t.Fatalf("response frame of %d bytes has no correlation id", len(frame))
	}
	if got := int32(binary.BigEndian.Uint32(frame[4:])); got != corr {
		t.Fatalf("response correlation id %d, want %d", got, corr)
	}
	return frame[8:]
}

// goodClient is a well-behaved client that, on its own connections, produces a record
// and reads it back, again and again while the bad input goes on, to show the broker
// keeps serving everyone else.
type goodClient struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	rounds int   // records produced and read back
	err    error // first failure
}

func startGoodClient(t *testing.T, b *Broker) *goodClient {
	t.Helper()
	const topic = "bad-input-bystander"
	b.CreateTopic(t, topic, 1)
	producer := b.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()))
	consumer := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()},
	}))
	ctx, cancel := context.WithCancel(context.Background())
	g := &goodClient{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		for i := 0; ctx.Err() == nil; i++ {
			err := g.round(ctx, producer, consumer, topic, i)
			g.mu.Lock()
			if err != nil && ctx.Err() == nil {
				g.err = err
			}
			if err == nil {
				g.rounds++
			}
			g.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-g.done
	})
	return g
}

// round produces record i and reads until it comes back as the next record.
func (g *goodClient) round(ctx context.Context, producer, consumer *kgo.Client, topic string, i int) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	want := fmt.Sprintf("bystander-%d", i)
	r := &kgo.Record{Topic: topic, Value: []byte(want)}
	if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("produce %s: %w", want, err)
	}
	for {
		fs := consumer.PollRecords(ctx, 1)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("consume %s: %w", want, err)
		}
		if err := fs.Err(); err != nil {
			return fmt.Errorf("consume %s: %w", want, err)
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if got := string(recs[0].Value); got != want || recs[0].Offset != int64(i) {
			return fmt.Errorf("consumed %q at offset %d, want %q at offset %d", got, recs[0].Offset, want, i)
		}
		return nil
	}
}

// progress waits until the client completes one more round, failing on an error.
func (g *goodClient) progress(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	from := g.rounds
	g.mu.Unlock()
	testutil.WaitFor(t, 30*time.Second, func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.err != nil {
			t.Fatalf("bystander client after %d rounds: %v", g.rounds, g.err)
		}
		if g.rounds == from {
			return fmt.Errorf("bystander client still at %d rounds", from)
		}
		return nil
	})
}

// stop ends the loop and fails the test if any round failed or none completed.
func (g *goodClient) stop(t *testing.T) {
	t.Helper()
	g.cancel()
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		t.Fatalf("bystander client after %d rounds: %v", g.rounds, g.err)
	}
	if g.rounds == 0 {
		t.Fatalf("bystander client completed no round")
	}
	t.Logf("bystander client produced and read back %d records", g.rounds)
}
