package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
	"ringbroker/ring"
)

// The raw data-path benchmarks drive the broker with pre-encoded requests over plain TCP
// connections, so nearly all CPU time measured is the broker's: the client only writes fixed
// bytes and reads length-prefixed responses. Compare backends and changes within one run.

// rawShape is one request shape of the raw benchmarks.
type rawShape struct {
	name       string
	partitions int // partitions of the topic, one batch each per request
	records    int // records per batch
	valueSize  int // bytes per record value
}

var rawShapes = []rawShape{
	// Large frames that span many receive buffers: frame assembly and append dominate.
	{name: "256KiB", partitions: 16, records: 16, valueSize: 1024},
	// Small requests: per-request overhead (decode, dispatch, response, wake-ups) dominates.
	{name: "small", partitions: 4, records: 1, valueSize: 100},
}

// BenchmarkProduceRaw pipelines acks=all Produce requests over 4 connections, 8 in flight on
// each; bytes/s counts record values.
func BenchmarkProduceRaw(b *testing.B) {
	const conns, window = 4, 8
	for _, sh := range rawShapes {
		for _, io := range backends {
			b.Run(sh.name+"/"+io, func(b *testing.B) {
				br := startBenchBroker(b, io, memDir(b))
				createBenchTopic(b, br, "raw", sh.partitions)
				req := rawProduceRequest(b, "raw", sh)
				b.SetBytes(int64(sh.partitions * sh.records * sh.valueSize))
				cs := dialRaw(b, br, conns)
				b.ResetTimer()
				cpu, st := testutil.ProcessCPU(b), ringStats(br)
				pipelineRaw(b, cs, req, b.N, window)
				reportCPU(b, cpu)
				reportRing(b, br, st)
			})
		}
	}
}

// memDir is a temporary log directory on tmpfs when the machine has /dev/shm, so that disk
// writeback, shared with whatever else runs here, does not set the pace; otherwise b.TempDir.
func memDir(b *testing.B) string {
	b.Helper()
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "ringbroker-bench-")
	if err != nil {
		b.Fatalf("log dir on tmpfs: %v", err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// reportCPU reports the process CPU time per op since start (from testutil.ProcessCPU): on a
// machine shared with other work it is steadier than wall time, and the raw client adds little
// to it.
func reportCPU(b *testing.B, start time.Duration) {
	b.Helper()
	b.ReportMetric(float64(testutil.ProcessCPU(b)-start)/float64(b.N), "cpu-ns/op")
}

// ringStats sums, over the broker's listeners, the counters that tests read (connections
// accepted and open; sends, loop enters and wake-ups); the other fields stay zero.
func ringStats(br *Broker) ring.Stats {
	var t ring.Stats
	for _, s := range br.servers {
		st := s.Stats()
		t.Accepted += st.Accepted
		t.Open += st.Open
		t.Sends += st.Sends
		t.Enters += st.Enters
		t.Wakeups += st.Wakeups
	}
	return t
}

// reportRing reports kernel round trips per op since start: event-loop enters and cross-thread
// wake-ups (io_uring only), and send operations.
func reportRing(b *testing.B, br *Broker, start ring.Stats) {
	b.Helper()
	end := ringStats(br)
	n := float64(b.N)
	b.ReportMetric(float64(end.Sends-start.Sends)/n, "sends/op")
	if end.Enters > 0 {
		b.ReportMetric(float64(end.Enters-start.Enters)/n, "enters/op")
		b.ReportMetric(float64(end.Wakeups-start.Wakeups)/n, "wakeups/op")
	}
}

// createBenchTopic creates topic with the given partition count through a real client.
func createBenchTopic(b *testing.B, br *Broker, topic string, partitions int) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr().String()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.Fatalf("create topic %s with %d partitions: %v", topic, partitions, err)
	}
}

// rawProduceRequest encodes one framed Produce v9 request (acks=all) with one uncompressed,
// non-idempotent batch per partition.
func rawProduceRequest(b testing.TB, topic string, sh rawShape) []byte {
	b.Helper()
	value := make([]byte, sh.valueSize)
	for i := range value {
		value[i] = byte(i)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p := range sh.partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Records = rawBatch(sh.records, value, time.Now().UnixMilli())
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("rawbench")).AppendRequest(nil, req, 1)
}

// rawBatch builds a magic-2 record batch of n records with the given value, no key and no
// producer id, CRC32C filled in.
func rawBatch(n int, value []byte, ts int64) []byte {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i].Value = value
	}
	return testutil.SealBatch(testutil.NewBatch(ts, recs...))
}

// dialRaw opens n plain TCP connections to the broker.
func dialRaw(b *testing.B, br *Broker, n int) []net.Conn {
	b.Helper()
	cs := make([]net.Conn, n)
	for i := range cs {
		c, err := net.DialTimeout("tcp", br.Addr().String(), 5*time.Second)
		if err != nil {
			b.Fatalf("dial %s: %v", br.Addr(), err)
		}
		b.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	return cs
}

// pipelineRaw sends total copies of the framed request req spread over cs, keeping up to window
// requests in flight per connection, and reads every response. A response that is not a
// well-formed frame fails the benchmark; the first one's body is checked for errors.
func pipelineRaw(b *testing.B, cs []net.Conn, req []byte, total, window int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(cs))
	for i, c := range cs {
		n := total / len(cs)
		if i < total%len(cs) {
			n++
		}
		slots := make(chan struct{}, window)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range n {
				slots <- struct{}{}
				if _, err := c.Write(req); err != nil {
					errs <- fmt.Errorf("write request: %w", err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			r := bufio.NewReaderSize(c, 64<<10)
			var size [4]byte
			var body []byte
			for j := range n {
				if _, err := io.ReadFull(r, size[:]); err != nil {
					errs <- fmt.Errorf("read response %d of %d: %w", j, n, err)
					return
				}
				body = append(body[:0], make([]byte, binary.BigEndian.Uint32(size[:]))...)
				if _, err := io.ReadFull(r, body); err != nil {
					errs <- fmt.Errorf("read response %d of %d: %w", j, n, err)
					return
				}
				if j == 0 {
					if err := checkProduceResponse(body); err != nil {
						errs <- err
						return
					}
				}
				<-slots
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// checkProduceResponse decodes a Produce v9 response body (after the size prefix) and returns an
// error naming the first partition that failed.
func checkProduceResponse(body []byte) error {
	if len(body) < 5 {
		return fmt.Errorf("produce response of %d bytes; want at least 5", len(body))
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	// v9 is flexible: the response header is the correlation id and an empty tag buffer.
	if err := resp.ReadFrom(body[5:]); err != nil {
		return fmt.Errorf("decode produce response: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("produce to %s-%d: error code %d", t.Topic, p.Partition, p.ErrorCode)
			}
		}
	}
	return nil
}

// BenchmarkFetchWakeLatency measures how long a parked Fetch (min bytes 1) takes to answer
// after a Produce lands on its partition: the Produce is written, then the time until the
// Fetch response arrives is recorded. The p50 and p99 of that latency are reported; it covers
// the long-poll wake-up and the cross-goroutine send path of the I/O backend. The Fetch names
// every partition of the topic (1, or 100 as a consumer of the 100-partitions workload does)
// and the Produce writes to the first; the allocations reported are the process's, nearly all
// the broker's, per fetch answered.
func BenchmarkFetchWakeLatency(b *testing.B) {
	sh := rawShape{name: "wake", partitions: 1, records: 1, valueSize: 100}
	for _, partitions := range []int{1, 100} {
		for _, io := range backends {
			b.Run(fmt.Sprintf("partitions=%d/%s", partitions, io), func(b *testing.B) {
				br := startBenchBroker(b, io, memDir(b))
				createBenchTopic(b, br, "wake", partitions)
				produce := rawProduceRequest(b, "wake", sh)
				cs := dialRaw(b, br, 2)
				pc, fc := cs[0], bufio.NewReader(cs[1])
				pr := bufio.NewReader(pc)
				part := br.parts.Load().byName["wake"][0]
				lat := make([]time.Duration, 0, b.N)
				fetches := make([][]byte, b.N)
				for i := range fetches {
					fetches[i] = rawFetchRequest("wake", partitions, int64(i))
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if _, err := cs[1].Write(fetches[i]); err != nil {
						b.Fatal(err)
					}
					for deadline := time.Now().Add(5 * time.Second); ; {
						part.waitMu.Lock()
						parked := len(part.waiters)
						part.waitMu.Unlock()
						if parked == 1 {
							break
						}
						if time.Now().After(deadline) {
							b.Fatalf("fetch %d not parked within 5s", i)
						}
						runtime.Gosched()
					}
					start := time.Now()
					if _, err := pc.Write(produce); err != nil {
						b.Fatal(err)
					}
					if err := readFrame(fc); err != nil {
						b.Fatalf("fetch response %d: %v", i, err)
					}
					lat = append(lat, time.Since(start))
					if err := readFrame(pr); err != nil {
						b.Fatalf("produce response %d: %v", i, err)
					}
				}
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			})
		}
	}
}

// rawFetchRequest encodes one framed Fetch v12 request for partitions 0..partitions-1 of
// topic, partition 0 from offset and the others from 0, waiting up to 5 s for 1 byte.
func rawFetchRequest(topic string, partitions int, offset int64) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = -1
	req.MaxWaitMillis = 5000
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(p)
		if p == 0 {
			rp.FetchOffset = offset
		}
		rp.PartitionMaxBytes = 1 << 20
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("rawbench")).AppendRequest(nil, req, 1)
}

// readFrame reads and discards one size-prefixed response.
func readFrame(r *bufio.Reader) error {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return err
	}
	_, err := r.Discard(int(binary.BigEndian.Uint32(size[:])))
	return err
}
