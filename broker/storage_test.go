package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"ringbroker/internal/testutil"
	"ringbroker/wire"
)

// produceN produces n records of size random (incompressible) bytes to partition 0 of topic
// with acks=all.
func produceN(t *testing.T, cl *kgo.Client, topic string, n, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(rand.Uint32())
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: v}).FirstErr(); err != nil {
			t.Fatalf("produce record %d to %s: %v", i, topic, err)
		}
	}
}

// startOffset returns the log start offset of partition 0 of topic as ListOffsets reports it.
func startOffset(t *testing.T, adm *kadm.Client, topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok || o.Err != nil {
		return 0, fmt.Errorf("start offset of %s/0: %v", topic, o.Err)
	}
	return o.Offset, nil
}

// topicID returns the id of topic from the broker's metadata image.
func topicID(t *testing.T, b *Broker, topic string) [16]byte {
	t.Helper()
	tp := b.meta.Image().Topics[topic]
	if tp == nil {
		t.Fatalf("topic %s not in the metadata image", topic)
	}
	return [16]byte(tp.ID)
}

// rawFetch fetches partition 0 of topic at offset and returns the partition's answer. kgo
// picks the newest version both sides know, so the topic goes by name and by id.
func rawFetch(t *testing.T, b *Broker, cl *kgo.Client, topic string, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = topicID(t, b, topic)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch %s/0 at %d: %v", topic, offset, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch %s/0 at %d: malformed response %+v", topic, offset, resp)
	}
	return resp.Topics[0].Partitions[0]
}

// TestDeleteRecords deletes records through kadm: the low watermark moves, fetches below it get
// OFFSET_OUT_OF_RANGE, offsets past the high watermark are refused, and the start offset
// survives a restart.
func TestDeleteRecords(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		dir := t.TempDir()
		b := startBroker(t, io, dir)
		cl := newClient(t, b)
		adm := kadm.NewClient(cl)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kmsg.StringPtr("16384")}, "dr"); err != nil {
			t.Fatal(err)
		}
		produceN(t, cl, "dr", 200, 200)
		res, err := adm.DeleteRecords(ctx, kadm.Offsets{"dr": {0: {At: 100}}})
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := res.Lookup("dr", 0); !ok || r.Err != nil || r.LowWatermark != 100 {
			t.Fatalf("DeleteRecords(dr/0 before 100) = %+v; want low watermark 100", r)
		}
		fp := rawFetch(t, b, cl, "dr", 50)
		if fp.ErrorCode != kerr.OffsetOutOfRange.Code || fp.LogStartOffset != 100 {
			t.Fatalf("fetch at 50: error %d log start %d; want OFFSET_OUT_OF_RANGE and 100", fp.ErrorCode, fp.LogStartOffset)
		}
		if fp := rawFetch(t, b, cl, "dr", 100); fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
			t.Fatalf("fetch at 100: error %d, %d bytes", fp.ErrorCode, len(fp.RecordBatches))
		}
		res, err = adm.DeleteRecords(ctx, kadm.Offsets{"dr": {0: {At: 1000}}})
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := res.Lookup("dr", 0); r.Err != kerr.OffsetOutOfRange {
			t.Fatalf("DeleteRecords past the high watermark: %v; want OFFSET_OUT_OF_RANGE", r.Err)
		}
		if err := b.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		b = startBroker(t, io, dir)
		adm = kadm.NewClient(newClient(t, b))
		if start, err := startOffset(t, adm, "dr"); err != nil || start != 100 {
			t.Fatalf("start offset after restart = %d, %v; want 100", start, err)
		}
	})
}

// TestRetentionAndLiveConfig lowers retention.ms and retention.bytes of a running topic with
// IncrementalAlterConfigs and waits, in real time, for the retention check to delete segments;
// segment.bytes changes reach the open log too.
func TestRetentionAndLiveConfig(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, io string) {
		b := startBroker(t, io, t.TempDir(), "log.retention.check.interval.ms=50")
		cl := newClient(t, b)
		adm := kadm.NewClient(cl)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, topic := range []string{"by-bytes", "by-time"} {
			if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kmsg.StringPtr("16384")}, topic); err != nil {
				t.Fatal(err)
			}
			produceN(t, cl, topic, 300, 200)
			if start, err := startOffset(t, adm, topic); err != nil || start != 0 {
				t.Fatalf("%s start offset %d (%v) before retention; want 0", topic, start, err)
			}
		}
		alter := func(topic string, kv ...string) {
			t.Helper()
			var cs []kadm.AlterConfig
			for i := 0; i < len(kv); i += 2 {
				cs = append(cs, kadm.AlterConfig{Name: kv[i], Value: kmsg.StringPtr(kv[i+1])})
			}
			res, err := adm.AlterTopicConfigs(ctx, cs, topic)
			if err == nil {
				_, err = res.On(topic, nil)
			}
			if err != nil {
				t.Fatalf("alter %s %v: %v", topic, kv, err)
			}
		}
		alter("by-bytes", "retention.bytes", "40000", "segment.bytes", "32768")
		p := b.parts.Load().lookup("by-bytes", 0)
		if got := p.log().Config(); got.RetentionBytes != 40000 || got.SegmentBytes != 32768 {
			t.Fatalf("open log config retention.bytes=%d segment.bytes=%d; want the altered values", got.RetentionBytes, got.SegmentBytes)
		}
		testutil.WaitFor(t, 10*time.Second, func() error {
			if size := p.log().Size(); size >= 40000+16384 || p.log().LogStartOffset() == 0 {
				return fmt.Errorf("by-bytes holds %d bytes from offset %d", size, p.log().LogStartOffset())
			}
			return nil
		})
		if size := p.log().Size(); size < 40000 {
			t.Fatalf("by-bytes holds %d bytes; retention.bytes keeps at least 40000", size)
		}
		start, err := startOffset(t, adm, "by-bytes")
		if err != nil || start != p.log().LogStartOffset() {
			t.Fatalf("ListOffsets start %d (%v); want %d", start, err, p.log().LogStartOffset())
		}
		if fp := rawFetch(t, b, cl, "by-bytes", start-1); fp.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Fatalf("fetch below the start after retention: error %d; want OFFSET_OUT_OF_RANGE", fp.ErrorCode)
		}

		alter("by-time", "retention.ms", "300")
		end := b.parts.Load().lookup("by-time", 0).log().LogEndOffset()
		testutil.WaitFor(t, 10*time.Second, func() error {
			if start, err := startOffset(t, adm, "by-time"); err != nil || start != end {
				return fmt.Errorf("by-time start offset %d (%v); want every record expired up to %d", start, err, end)
			}
			return nil
		})
		produceN(t, cl, "by-time", 1, 10)
		if fp := rawFetch(t, b, cl, "by-time", end); fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
			t.Fatalf("fetch of a new record after full expiry: error %d, %d bytes", fp.ErrorCode, len(fp.RecordBatches))
		}
	})
}

// TestGroupCommitProduce produces with acks=all in group-commit mode: every acknowledgement
// arrives only after the recovery point passed the record, and many records share fsyncs.
func TestGroupCommitProduce(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		b := startBroker(t, io, t.TempDir(), "log.flush.group.commit=true")
		cl := newClient(t, b, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("gc"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "gc"); err != nil {
			t.Fatal(err)
		}
		const n = 2000
		errs := make(chan error, n)
		for i := range n {
			r := &kgo.Record{Partition: int32(i % 2), Value: []byte(fmt.Sprintf("record-%d", i))}
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err == nil {
					if rp := b.parts.Load().lookup("gc", r.Partition).log().RecoveryPoint(); rp <= r.Offset {
						err = fmt.Errorf("record at %d/%d acknowledged with the recovery point at %d", r.Partition, r.Offset, rp)
					}
				}
				errs <- err
			})
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		for i := range int32(2) {
			l := b.parts.Load().lookup("gc", i).log()
			if !l.GroupCommit() || l.GroupCommitRounds() == 0 || l.GroupCommitRounds() >= n/2 {
				t.Fatalf("partition %d: group commit %v with %d fsync rounds for %d records", i, l.GroupCommit(), l.GroupCommitRounds(), n/2)
			}
		}
		// acks=0 does not wait, but the group fsync still runs.
		cl0 := newClient(t, b, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("gc"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err := cl0.ProduceSync(ctx, &kgo.Record{Value: []byte("fire and forget")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		l := b.parts.Load().lookup("gc", 0).log()
		testutil.WaitFor(t, 10*time.Second, func() error {
			if l.LogEndOffset() != n/2+1 || l.RecoveryPoint() != l.LogEndOffset() {
				return fmt.Errorf("log end %d, recovery point %d; want both %d", l.LogEndOffset(), l.RecoveryPoint(), n/2+1)
			}
			return nil
		})
	})
}

// storageBatch is an uncompressed record batch of one record with a value of size bytes.
func storageBatch(size int, ts int64) []byte {
	return testutil.SealBatch(testutil.NewBatch(ts, kmsg.Record{Value: bytes.Repeat([]byte{'x'}, size)}))
}

// rawProduce sends one batch to partition 0 of topic with acks=1 and returns the partition's
// answer.
func rawProduce(t *testing.T, b *Broker, cl *kgo.Client, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = 1
	req.TimeoutMillis = 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rt.TopicID = topicID(t, b, topic)
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return resp.Topics[0].Partitions[0]
}

// mountTmpfs mounts a tmpfs of size bytes in a temp dir for the test and returns its path; it
// needs root, as `make test` has.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("mount a %d-byte tmpfs at %s (needs root, as `make test` does): %v", size, mnt, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}

// TestDiskFull runs the broker on a small tmpfs and fills it: the produce that does not fit
// fails with KAFKA_STORAGE_ERROR and takes the log dir offline, as Kafka's: produce and fetch
// keep answering KAFKA_STORAGE_ERROR even once space is freed; after a restart everything
// acknowledged before is readable and CRC-valid, and produce continues at the next offset.
func TestDiskFull(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		mnt := mountTmpfs(t, 8<<20)
		b := startBroker(t, io, filepath.Join(mnt, "data"))
		cl := newClient(t, b, kgo.RequestRetries(0))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
			"segment.bytes": kmsg.StringPtr("1048576"), "segment.index.bytes": kmsg.StringPtr("65536")}, "full"); err != nil {
			t.Fatal(err)
		}
		var st unix.Statfs_t
		if err := unix.Statfs(mnt, &st); err != nil {
			t.Fatal(err)
		}
		filler := filepath.Join(mnt, "filler")
		if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize-300<<10), 0o644); err != nil {
			t.Fatal(err)
		}
		var acked int64
		failed := false
		for i := 0; i < 64 && !failed; i++ {
			sp := rawProduce(t, b, cl, "full", storageBatch(32<<10, time.Now().UnixMilli()))
			switch sp.ErrorCode {
			case 0:
				if sp.BaseOffset != acked {
					t.Fatalf("batch %d at offset %d; want %d", i, sp.BaseOffset, acked)
				}
				acked++
			case kerr.KafkaStorageError.Code:
				failed = true
			default:
				t.Fatalf("produce %d on a full disk: error %d; want KAFKA_STORAGE_ERROR (56)", i, sp.ErrorCode)
			}
		}
		if !failed || acked == 0 {
			t.Fatalf("%d batches acknowledged, storage error %v; want some, then KAFKA_STORAGE_ERROR", acked, failed)
		}
		checkReadable := func(want int64) {
			t.Helper()
			var got int64
			for got < want {
				fp := rawFetch(t, b, cl, "full", got)
				if fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
					t.Fatalf("fetch at %d: error %d, %d bytes", got, fp.ErrorCode, len(fp.RecordBatches))
				}
				for rest := fp.RecordBatches; len(rest) > 0; {
					n := 12 + int(binary.BigEndian.Uint32(rest[8:]))
					if _, err := wire.ValidateBatches(rest[:n]); err != nil {
						t.Fatalf("batch at offset %d fails validation: %v", got, err)
					}
					got++
					rest = rest[n:]
				}
			}
			if hw := rawFetch(t, b, cl, "full", 0).HighWatermark; hw != want {
				t.Fatalf("high watermark %d; want %d", hw, want)
			}
		}
		if fp := rawFetch(t, b, cl, "full", 0); fp.ErrorCode != kerr.KafkaStorageError.Code {
			t.Fatalf("fetch from the offline dir: error %d; want KAFKA_STORAGE_ERROR (56)", fp.ErrorCode)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		if sp := rawProduce(t, b, cl, "full", storageBatch(32<<10, time.Now().UnixMilli())); sp.ErrorCode != kerr.KafkaStorageError.Code {
			t.Fatalf("produce to the offline dir after freeing space: error %d; want KAFKA_STORAGE_ERROR (56) until a restart", sp.ErrorCode)
		}
		b.Shutdown(context.Background())
		b = startBroker(t, io, filepath.Join(mnt, "data"))
		cl = newClient(t, b, kgo.RequestRetries(0))
		checkReadable(acked)
		if sp := rawProduce(t, b, cl, "full", storageBatch(32<<10, time.Now().UnixMilli())); sp.ErrorCode != 0 || sp.BaseOffset != acked {
			t.Fatalf("produce after freeing space and a restart: error %d at %d; want success at %d", sp.ErrorCode, sp.BaseOffset, acked)
		}
		checkReadable(acked + 1)
	})
}
