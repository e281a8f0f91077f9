package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	rlog "ringbroker/log"
)

// readProps parses a Java properties file of key=value lines.
func readProps(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			props[k] = v
		}
	}
	return props
}

// dirOf returns which of dirs holds the directory of topic's partition index, failing unless
// exactly one does.
func dirOf(t *testing.T, dirs []string, topic string, index int32) string {
	t.Helper()
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(partitionDir(d, topic, index)); err == nil {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s-%d has its directory in %v; want exactly one of %v", topic, index, found, dirs)
	}
	return found[0]
}

// readAcked reads partition 0 of topic from offset 0 up to end and returns the record values.
func readAcked(t *testing.T, b *Broker, topic string, end int64) []string {
	t.Helper()
	cl := newClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for int64(len(got)) < end {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: %d of %d records before %v", topic, len(got), end, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(len(got)) {
				t.Fatalf("consume %s: record at offset %d after %d records", topic, r.Offset, len(got))
			}
			got = append(got, string(r.Value))
		})
	}
	return got
}

// TestLogDirsFormatAndRestart runs a broker with two log dirs: both are formatted with the same
// cluster id and different directory ids, the partitions of two topics spread over them, each
// dir keeps the checkpoints of its own partitions and its clean-shutdown marker, and after a
// restart every partition is opened where it is, with its records.
func TestLogDirsFormatAndRestart(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		root := t.TempDir()
		dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
		override := "log.dirs=" + strings.Join(dirs, ",")
		b := startBroker(t, io, dirs[0], override)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cl := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 4, 1, nil, "spread"); err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			r := &kgo.Record{Topic: "spread", Partition: int32(i % 4), Value: fmt.Appendf(nil, "v%d", i)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		where := map[int32]string{}
		for i := range int32(4) {
			where[i] = dirOf(t, dirs, "spread", i)
		}
		a, c := readProps(t, filepath.Join(dirs[0], "meta.properties")), readProps(t, filepath.Join(dirs[1], "meta.properties"))
		if a["cluster.id"] == "" || a["cluster.id"] != c["cluster.id"] || a["node.id"] != "1" || c["node.id"] != "1" {
			t.Fatalf("meta.properties: %v and %v; want one cluster.id and node.id 1 in both", a, c)
		}
		if a["directory.id"] == "" || c["directory.id"] == "" || a["directory.id"] == c["directory.id"] {
			t.Fatalf("directory.id %q and %q; want two different ones", a["directory.id"], c["directory.id"])
		}
		if _, err := os.Stat(filepath.Join(dirs[1], metadataDirName)); err == nil {
			t.Fatalf("the metadata log is in the second dir; want it in the first only")
		}
		b.Shutdown(context.Background())

		for _, d := range dirs {
			if ok, err := rlog.HasCleanShutdownMarker(d); err != nil || !ok {
				t.Fatalf("%s: clean-shutdown marker %v (%v); want one after a clean shutdown", d, ok, err)
			}
			for _, file := range []string{rlog.RecoveryPointFile, highWatermarkFile, rlog.LogStartOffsetFile} {
				cp, err := rlog.ReadOffsetCheckpoint(filepath.Join(d, file))
				if err != nil {
					t.Fatalf("%s/%s: %v", d, file, err)
				}
				for i, in := range where {
					tp := rlog.TopicPartition{Topic: "spread", Partition: i}
					if _, ok := cp[tp]; ok != (in == d) {
						t.Errorf("%s/%s lists spread-%d: %v; its directory is in %s", d, file, i, ok, in)
					}
				}
				if file == rlog.RecoveryPointFile {
					for tp, off := range cp {
						if off != 10 {
							t.Errorf("%s/%s: %v at %d; want 10, its log end", d, file, tp, off)
						}
					}
				}
			}
		}

		b = startBroker(t, io, dirs[0], override)
		for i, in := range where {
			p := b.parts.Load().lookup("spread", i)
			if p == nil || p.dir.Load().path != in || p.log().LogEndOffset() != 10 {
				t.Fatalf("after a restart spread-%d: %+v; want it opened in %s with 10 records", i, p, in)
			}
			if got := dirOf(t, dirs, "spread", i); got != in {
				t.Fatalf("after a restart spread-%d is in %s; want %s", i, got, in)
			}
		}
	})
}

// TestLogDirOffline runs a broker with two log dirs, the second a small tmpfs, and fills the
// tmpfs: the produce that does not fit is KAFKA_STORAGE_ERROR and takes that dir offline, so its
// partition answers KAFKA_STORAGE_ERROR to produce and fetch and has no leader in Metadata,
// DescribeLogDirs reports the dir KAFKA_STORAGE_ERROR, while the partition of the first dir keeps taking and serving records; after a restart with
// space freed, every acknowledged record of both is readable.
func TestLogDirOffline(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		good := filepath.Join(t.TempDir(), "good")
		small := filepath.Join(mountTmpfs(t, 4<<20), "data")
		override := "log.dirs=" + good + "," + small
		b := startBroker(t, io, good, override)
		cl := newClient(t, b, kgo.RequestRetries(0))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// The first topic goes to the first dir (a tie), the second to the other.
		for _, topic := range []string{"healthy", "doomed"} {
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
				"segment.bytes": kmsg.StringPtr("1048576"), "segment.index.bytes": kmsg.StringPtr("65536")}, topic); err != nil {
				t.Fatal(err)
			}
		}
		if dirOf(t, []string{good, small}, "doomed", 0) != small {
			t.Fatalf("doomed-0 not in the tmpfs dir")
		}
		var st unix.Statfs_t
		if err := unix.Statfs(small, &st); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(small), "filler"), make([]byte, int64(st.Bavail)*st.Bsize-300<<10), 0o644); err != nil {
			t.Fatal(err)
		}
		var acked, healthy int64
		failed := false
		for i := 0; i < 64 && !failed; i++ {
			sp := rawProduce(t, b, cl, "doomed", storageBatch(32<<10, time.Now().UnixMilli()))
			switch sp.ErrorCode {
			case 0:
				acked++
			case kerr.KafkaStorageError.Code:
				failed = true
			default:
				t.Fatalf("produce %d on a full dir: error %d; want KAFKA_STORAGE_ERROR (56)", i, sp.ErrorCode)
			}
			if sp := rawProduce(t, b, cl, "healthy", storageBatch(1<<10, time.Now().UnixMilli())); sp.ErrorCode != 0 || sp.BaseOffset != healthy {
				t.Fatalf("produce to the healthy dir: error %d at %d; want success at %d", sp.ErrorCode, sp.BaseOffset, healthy)
			}
			healthy++
		}
		if !failed || acked == 0 {
			t.Fatalf("%d batches acknowledged, storage error %v; want some, then KAFKA_STORAGE_ERROR", acked, failed)
		}
		if sp := rawProduce(t, b, cl, "doomed", storageBatch(10, time.Now().UnixMilli())); sp.ErrorCode != kerr.KafkaStorageError.Code {
			t.Errorf("a small produce to the offline dir: error %d; want KAFKA_STORAGE_ERROR (56)", sp.ErrorCode)
		}
		if fp := rawFetch(t, b, cl, "doomed", 0); fp.ErrorCode != kerr.KafkaStorageError.Code {
			t.Errorf("fetch from the offline dir: error %d; want KAFKA_STORAGE_ERROR (56)", fp.ErrorCode)
		}
		if fp := rawFetch(t, b, cl, "healthy", 0); fp.ErrorCode != 0 || fp.HighWatermark != healthy || len(fp.RecordBatches) == 0 {
			t.Errorf("fetch from the healthy dir: error %d, high watermark %d, %d bytes; want %d records", fp.ErrorCode, fp.HighWatermark, len(fp.RecordBatches), healthy)
		}
		mreq := kmsg.NewPtrMetadataRequest()
		for _, topic := range []string{"doomed", "healthy"} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			mreq.Topics = append(mreq.Topics, rt)
		}
		kr, err := cl.Broker(1).Request(ctx, mreq)
		if err != nil {
			t.Fatal(err)
		}
		for _, mt := range kr.(*kmsg.MetadataResponse).Topics {
			p := mt.Partitions[0]
			switch *mt.Topic {
			case "doomed":
				if p.Leader != -1 || p.ErrorCode != kerr.LeaderNotAvailable.Code || !slices.Equal(p.OfflineReplicas, []int32{1}) {
					t.Errorf("Metadata of doomed-0: leader %d, error %d, offline replicas %v; want -1, LEADER_NOT_AVAILABLE (5), [1]", p.Leader, p.ErrorCode, p.OfflineReplicas)
				}
			case "healthy":
				if p.Leader != 1 || p.ErrorCode != 0 || len(p.OfflineReplicas) != 0 {
					t.Errorf("Metadata of healthy-0: leader %d, error %d, offline replicas %v; want 1, none, none", p.Leader, p.ErrorCode, p.OfflineReplicas)
				}
			}
		}
		described, err := kadm.NewClient(cl).DescribeBrokerLogDirs(ctx, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := described[small]; !errorIs(d.Err, kerr.KafkaStorageError) || len(d.Topics) != 0 {
			t.Errorf("DescribeLogDirs of the offline dir: err %v, topics %v; want KAFKA_STORAGE_ERROR, none", d.Err, d.Topics.Sorted())
		}
		if d := described[good]; d.Err != nil || len(d.Topics["healthy"]) != 1 {
			t.Errorf("DescribeLogDirs of the healthy dir: err %v, topics %v; want healthy-0", d.Err, d.Topics.Sorted())
		}

		b.Shutdown(context.Background())
		if err := os.Remove(filepath.Join(filepath.Dir(small), "filler")); err != nil {
			t.Fatal(err)
		}
		b = startBroker(t, io, good, override)
		if got := readAcked(t, b, "doomed", acked); len(got) < int(acked) {
			t.Fatalf("doomed after a restart: %d records; want the %d acknowledged", len(got), acked)
		}
		if got := readAcked(t, b, "healthy", healthy); len(got) < int(healthy) {
			t.Fatalf("healthy after a restart: %d records; want the %d acknowledged", len(got), healthy)
		}
	})
}
