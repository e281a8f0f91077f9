package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// TestInlineProduce: with io.inline.requests on and off, idempotent acks=all producers write
// records to partitions whose small segments roll every few batches, and a consumer reads every
// record back once, in order. On io_uring with it on, Produce runs on the ring thread and hands
// the requests whose append would roll over to a worker (both counted); otherwise nothing runs
// inline.
func TestInlineProduce(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, io string) {
		for _, inline := range []bool{true, false} {
			t.Run(fmt.Sprintf("io.inline.requests=%v", inline), func(t *testing.T) {
				dir := t.TempDir()
				b := startBroker(t, io, dir, fmt.Sprintf("io.inline.requests=%v", inline))
				testInlineProduce(t, b, dir, io == "uring" && inline)
			})
		}
	})
}

func testInlineProduce(t *testing.T, b *Broker, dir string, wantInline bool) {
	const topic, partitions, producers, perProducer = "inline", 4, 3, 4000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.CreateTopic(ctx, partitions, 1, map[string]*string{
		"segment.bytes": kmsg.StringPtr("16384")}, topic); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 100)
	errs := make(chan error, producers)
	for p := range producers {
		cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.ProducerBatchMaxBytes(8192))
		go func() {
			var first error
			for i := range perProducer {
				r := &kgo.Record{Partition: int32(i % partitions), Value: fmt.Appendf(nil, "%d-%06d-%s", p, i, pad)}
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil && first == nil {
						first = err
					}
				})
			}
			if err := cl.Flush(ctx); err != nil && first == nil {
				first = err
			}
			errs <- first
		}()
	}
	for range producers {
		if err := <-errs; err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	cons := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	// next[p][q] is the index of producer q's next record in partition p.
	var next [partitions][producers]int
	read := 0
	for read < producers*perProducer {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", read, producers*perProducer, err)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			var q, i int
			if _, err := fmt.Sscanf(string(r.Value), "%d-%d", &q, &i); err != nil {
				t.Fatalf("record %q: %v", r.Value, err)
			}
			if want := next[r.Partition][q]*partitions + int(r.Partition); i != want {
				t.Fatalf("partition %d: producer %d's record %d; want %d", r.Partition, q, i, want)
			}
			next[r.Partition][q]++
			read++
		})
	}
	segments, err := filepath.Glob(filepath.Join(dir, topic+"-*", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(segments) < 8*partitions {
		t.Fatalf("%d segments over %d partitions; want rolls every few batches", len(segments), partitions)
	}
	inline, handedOff := b.metrics.inlineRequests[kmsg.Produce].Get(), b.metrics.inlineHandedOff[kmsg.Produce].Get()
	if wantInline && (inline == 0 || handedOff == 0) {
		t.Fatalf("%d Produce requests ran on the ring, %d handed off; want both", inline, handedOff)
	}
	if !wantInline && inline != 0 {
		t.Fatalf("%d Produce requests ran on the event loop; want none", inline)
	}
}

// TestInlineCoordinators: with io.inline.requests on and off, a GroupTransactSession copies
// records from one topic to another in transactions of at most 25 that commit the group's offsets, and a
// transaction of another producer aborts; a read_committed reader sees every copy once and
// nothing aborted. On io_uring with it on, the group and transaction coordinator requests run on
// the ring thread (EndTxn, JoinGroup, SyncGroup and an admin client's OffsetFetch of the
// committed offsets counted), except TxnOffsetCommit,
// which waits for the transaction coordinator's verification on a worker; otherwise nothing
// runs inline.
func TestInlineCoordinators(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		for _, inline := range []bool{true, false} {
			t.Run(fmt.Sprintf("io.inline.requests=%v", inline), func(t *testing.T) {
				b := startBroker(t, io, t.TempDir(), fmt.Sprintf("io.inline.requests=%v", inline),
					"group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=4", "transaction.state.log.num.partitions=4")
				testInlineCoordinators(t, b, io == "uring" && inline)
			})
		}
	})
}

func testInlineCoordinators(t *testing.T, b *Broker, wantInline bool) {
	const in, out, records = "inline-in", "inline-out", 300
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.CreateTopics(ctx, 2, 1, nil, in, out); err != nil {
		t.Fatal(err)
	}
	seed := newClient(t, b, kgo.DefaultProduceTopic(in))
	for i := range records {
		seed.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%04d", i)}, nil)
	}
	if err := seed.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	aborter := newClient(t, b, kgo.DefaultProduceTopic(out), kgo.TransactionalID("inline-aborter"))
	if err := aborter.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := aborter.ProduceSync(ctx, &kgo.Record{Value: []byte("aborted")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := aborter.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(b.Addr().String()), kgo.TransactionalID("inline-copier"),
		kgo.ConsumerGroup("inline-copiers"), kgo.ConsumeTopics(in), kgo.DefaultProduceTopic(out),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	copied, commits := 0, 0
	for copied < records {
		fs := sess.PollRecords(ctx, 25)
		if err := ctx.Err(); err != nil {
			t.Fatalf("copied %d of %d records: %v", copied, records, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: append([]byte("copy-"), r.Value...)}, nil)
			n++
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("end transaction: %v", err)
		}
		if committed {
			copied += n
			commits++
		}
	}

	reader := newClient(t, b, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]bool{}
	for len(seen) < records {
		fs := reader.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d copies: %v", len(seen), records, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if !strings.HasPrefix(v, "copy-") || seen[v] {
				t.Fatalf("read_committed reader got %q; want each copy once and nothing aborted", v)
			}
			seen[v] = true
		})
	}

	m := b.metrics
	count := func(key kmsg.Key) uint64 {
		if c := m.inlineRequests[key]; c != nil {
			return c.Get()
		}
		return 0
	}
	if !wantInline {
		for k := range m.inlineRequests {
			if n := count(kmsg.Key(k)); n != 0 {
				t.Fatalf("%d %s requests ran on the event loop; want none", n, kmsg.Key(k).Name())
			}
		}
		return
	}
	t.Logf("%d transactions committed; on the ring: %d EndTxn, %d JoinGroup, %d SyncGroup, %d OffsetFetch, %d Heartbeat",
		commits, count(kmsg.EndTxn), count(kmsg.JoinGroup), count(kmsg.SyncGroup), count(kmsg.OffsetFetch), count(kmsg.Heartbeat))
	// A request that arrives while a worker still holds its connection's turn (after a
	// TxnOffsetCommit or a FindCoordinator there) runs on that worker, in order: so not every
	// EndTxn runs on the ring, and the session's one OffsetFetch may not. An admin client's
	// OffsetFetch on an idle connection (adm's, idle since it created the topics) does, and
	// reads the offsets the transactions committed.
	for _, k := range []kmsg.Key{kmsg.EndTxn, kmsg.JoinGroup, kmsg.SyncGroup} {
		if count(k) == 0 {
			t.Fatalf("no %s request ran on the ring", k.Name())
		}
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		before := count(kmsg.OffsetFetch)
		offs, err := adm.FetchOffsets(ctx, "inline-copiers")
		if err != nil {
			return fmt.Errorf("fetch the group's offsets: %w", err)
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		if sum != records {
			// The last commit's marker may still be on its way to the offsets partition.
			return fmt.Errorf("the group's committed offsets sum to %d; want %d", sum, records)
		}
		if count(kmsg.OffsetFetch) == before {
			return errors.New("no OffsetFetch request ran on the ring")
		}
		return nil
	})
	if m.inlineRequests[kmsg.TxnOffsetCommit] != nil {
		t.Fatal("TxnOffsetCommit may run on the ring; it waits for the transaction coordinator")
	}
}

// TestInlineFetch: with io.inline.requests on and off, a consumer at the end of the log reads
// every record once and in order while a producer writes them one by one, then a record larger
// than a ring thread may send, to another topic; after a restart, when none of the log is known
// to be in the page cache, a new consumer reads the first topic again from the start. On
// io_uring with it on, the live consumer's fetches and the retries that appends woke run on the
// ring thread, the large record's fetch and the fetches after the restart go on on a worker;
// otherwise nothing runs inline.
func TestInlineFetch(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, io string) {
		for _, inline := range []bool{true, false} {
			t.Run(fmt.Sprintf("io.inline.requests=%v", inline), func(t *testing.T) {
				testInlineFetch(t, io, inline)
			})
		}
	})
}

func testInlineFetch(t *testing.T, io string, inline bool) {
	const topic, largeTopic, records = "inline-fetch", "inline-fetch-large", 2000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir, opt := t.TempDir(), fmt.Sprintf("io.inline.requests=%v", inline)
	wantInline := io == "uring" && inline
	b := startBroker(t, io, dir, opt)
	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": kmsg.StringPtr("4194304")}, largeTopic); err != nil {
		t.Fatal(err)
	}
	large := strings.Repeat("L", 2<<20)
	// consume reads through cl records 0..n-1 of topic, each once and in order, and, with
	// wantLarge, the large record.
	consume := func(cl *kgo.Client, n int, wantLarge bool) error {
		read, gotLarge := 0, false
		for read < n || wantLarge && !gotLarge {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("read %d of %d records (the large one: %v): %w", read, n, gotLarge, err)
			}
			var bad error
			fs.EachError(func(topic string, p int32, err error) { bad = fmt.Errorf("fetch %s-%d: %w", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				switch {
				case bad != nil:
				case r.Topic == largeTopic && string(r.Value) == "first":
				case r.Topic == largeTopic:
					if gotLarge || string(r.Value) != large {
						bad = fmt.Errorf("%s: %d-byte record at offset %d; want one of %d", r.Topic, len(r.Value), r.Offset, len(large))
					}
					gotLarge = true
				case string(r.Value) != fmt.Sprintf("%06d", read):
					bad = fmt.Errorf("record %d at offset %d: %q", read, r.Offset, r.Value)
				default:
					read++
				}
			})
			if bad != nil {
				return bad
			}
		}
		return nil
	}
	cons := newClient(t, b, kgo.ConsumeTopics(topic, largeTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(5*time.Second), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(64<<20))
	done := make(chan error, 1)
	go func() { done <- consume(cons, records, true) }()
	prod := newClient(t, b, kgo.ProducerBatchMaxBytes(4<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	// The first append to a partition writes its leader-epoch checkpoint, on a worker.
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: largeTopic, Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", largeTopic, err)
	}
	for i := range records {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%06d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce record %d: %v", i, err)
		}
	}
	// The large record's fetch reads it whole (KIP-74), over what a ring thread sends: the
	// consumer's fetch, parked by now, is woken by the append on the ring thread and goes on
	// on a worker.
	time.Sleep(200 * time.Millisecond)
	before := b.metrics.inlineHandedOff[kmsg.Fetch].Get()
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: largeTopic, Value: []byte(large)}).FirstErr(); err != nil {
		t.Fatalf("produce the large record: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("consumer at the end of the log: %v", err)
	}
	onRing, retries, handedOff := b.metrics.inlineRequests[kmsg.Fetch].Get(), b.metrics.fetchRetriesInline.Get(), b.metrics.inlineHandedOff[kmsg.Fetch].Get()
	if wantInline && (onRing == 0 || retries == 0 || handedOff == before) {
		t.Fatalf("%d Fetch requests and %d woken retries ran on the ring, %d handed off, %d of them since the large record; want all of them",
			onRing, retries, handedOff, handedOff-before)
	}
	if !wantInline && onRing+retries+handedOff != 0 {
		t.Fatalf("%d Fetch requests and %d woken retries ran on the event loop; want none", onRing, retries)
	}

	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	b = startBroker(t, io, dir, opt)
	// Small fetches, so that many of them read the log.
	cl := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(4096), kgo.FetchMaxPartitionBytes(4096))
	if err := consume(cl, records, false); err != nil {
		t.Fatalf("consumer after a restart: %v", err)
	}
	handedOff = b.metrics.inlineHandedOff[kmsg.Fetch].Get()
	if wantInline && handedOff == 0 {
		t.Fatal("no Fetch of the log written before the restart was handed off to a worker")
	}
	if !wantInline && handedOff != 0 {
		t.Fatalf("%d Fetch requests handed off from the event loop; want none", handedOff)
	}
}
