package broker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"ringbroker/broker/meta"
	"ringbroker/internal/testutil"
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

// twoDirs says where startTwoDirs put things: the log dirs, the log.dirs override naming them,
// the dir holding the topic's partition and the other.
type twoDirs struct {
	dirs     []string
	override string
	from, to string
}

// startTwoDirs starts a broker with two log dirs (and overrides) and a topic of one partition.
func startTwoDirs(t *testing.T, io, topic string, overrides ...string) (*Broker, twoDirs) {
	t.Helper()
	root := t.TempDir()
	td := twoDirs{dirs: []string{filepath.Join(root, "a"), filepath.Join(root, "b")}}
	td.override = "log.dirs=" + strings.Join(td.dirs, ",")
	b := startBroker(t, io, td.dirs[0], append([]string{td.override}, overrides...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(newClient(t, b)).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	td.from, td.to = dirOf(t, td.dirs, topic, 0), td.dirs[0]
	if td.from == td.to {
		td.to = td.dirs[1]
	}
	return b, td
}

// alterLogDir asks broker 1 to move its replica of partition 0 of topic to dir and returns the
// partition's error.
func alterLogDir(t *testing.T, cl *kgo.Client, dir, topic string) int16 {
	t.Helper()
	return alterLogDirOn(t, cl, 1, dir, topic)
}

// alterLogDirOn is alterLogDir sent to broker node.
func alterLogDirOn(t *testing.T, cl *kgo.Client, node int32, dir, topic string) int16 {
	t.Helper()
	req := kmsg.NewPtrAlterReplicaLogDirsRequest()
	rd := kmsg.NewAlterReplicaLogDirsRequestDir()
	rd.Dir = dir
	rt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	rd.Topics = append(rd.Topics, rt)
	req.Dirs = append(req.Dirs, rd)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// To the broker itself: the client would route each partition to its leader.
	kr, err := cl.Broker(int(node)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kr.(*kmsg.AlterReplicaLogDirsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("AlterReplicaLogDirs answered %+v; want one partition", resp.Topics)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestAlterReplicaLogDirs moves a partition to the other log dir while a producer keeps
// producing with acks=all: the move finishes, the partition's directory is in the target dir
// only, DescribeLogDirs lists it there, and every acknowledged record is readable in order,
// also after a restart. It also checks the errors: an unknown dir is LOG_DIR_NOT_FOUND, an
// unknown partition UNKNOWN_TOPIC_OR_PARTITION, and naming the current dir is a no-op.
func TestAlterReplicaLogDirs(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		// Small segments, so the copy crosses rolls.
		b, td := startTwoDirs(t, io, "mv", "log.segment.bytes=65536")
		dirs, override, from, to := td.dirs, td.override, td.from, td.to
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cl := newClient(t, b)
		if code := alterLogDir(t, cl, filepath.Join(filepath.Dir(from), "nowhere"), "mv"); code != kerr.LogDirNotFound.Code {
			t.Errorf("move to a dir not in log.dirs: error %d; want LOG_DIR_NOT_FOUND (57)", code)
		}
		if code := alterLogDir(t, cl, to, "no-such-topic"); code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("move of an unknown topic: error %d; want UNKNOWN_TOPIC_OR_PARTITION (3)", code)
		}
		if code := alterLogDir(t, cl, from, "mv"); code != 0 || dirOf(t, dirs, "mv", 0) != from {
			t.Errorf("move to the dir it is in: error %d; want none, and the partition left there", code)
		}

		prod := newClient(t, b, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
		var mu sync.Mutex
		var acked []string
		stop := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				v := fmt.Sprintf("record-%06d-%s", i, strings.Repeat("x", 200))
				if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "mv", Value: []byte(v)}).FirstErr(); err != nil {
					done <- fmt.Errorf("produce %d: %w", i, err)
					return
				}
				mu.Lock()
				acked = append(acked, v)
				mu.Unlock()
			}
		}()
		testutil.WaitFor(t, 20*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(acked) < 2000 {
				return fmt.Errorf("%d records acknowledged before the move; want 2000", len(acked))
			}
			return nil
		})
		if code := alterLogDir(t, cl, to, "mv"); code != 0 {
			t.Fatalf("move mv-0 from %s to %s: error %d", from, to, code)
		}
		testutil.WaitFor(t, 20*time.Second, func() error {
			p := b.parts.Load().lookup("mv", 0)
			if p.dir.Load().path != to || p.move.Load() != nil {
				return fmt.Errorf("mv-0 in %s, move in progress %v", p.dir.Load().path, p.move.Load() != nil)
			}
			return nil
		})
		// The producer goes on into the moved log before it stops.
		mu.Lock()
		atSwap := len(acked)
		mu.Unlock()
		testutil.WaitFor(t, 20*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(acked) < atSwap+500 {
				return fmt.Errorf("%d records acknowledged after the move; want 500", len(acked)-atSwap)
			}
			return nil
		})
		close(stop)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := dirOf(t, dirs, "mv", 0); got != to {
			t.Fatalf("after the move mv-0 is in %s; want %s", got, to)
		}
		// The old directory was renamed -delete at the swap; the background remover takes it.
		testutil.WaitFor(t, 20*time.Second, func() error {
			for _, d := range dirs {
				ents, _ := os.ReadDir(d)
				for _, e := range ents {
					if strings.HasSuffix(e.Name(), futureDirSuffix) || strings.HasSuffix(e.Name(), deleteDirSuffix) {
						return fmt.Errorf("%s left in %s after the move", e.Name(), d)
					}
				}
			}
			return nil
		})
		described, err := kadm.NewClient(cl).DescribeBrokerLogDirs(ctx, b.cfg.NodeID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := described[to].Topics["mv"][0]; !ok || len(described[from].Topics) != 0 {
			t.Fatalf("DescribeLogDirs: %v in %s, %v in %s; want mv-0 in %s only", described[to].Topics.Sorted(), to,
				described[from].Topics.Sorted(), from, to)
		}
		mu.Lock()
		want := slices.Clone(acked)
		mu.Unlock()
		if got := readAcked(t, b, "mv", int64(len(want))); !slices.Equal(got[:len(want)], want) {
			t.Fatalf("after the move: the %d records read differ from the %d acknowledged", len(got), len(want))
		}
		b.Shutdown(context.Background())
		b = startBroker(t, io, dirs[0], override)
		if p := b.parts.Load().lookup("mv", 0); p.dir.Load().path != to || p.log().LogEndOffset() < int64(len(want)) {
			t.Fatalf("after a restart mv-0 in %s with log end %d; want %s and at least %d", p.dir.Load().path, p.log().LogEndOffset(), to, len(want))
		}
		if got := readAcked(t, b, "mv", int64(len(want))); !slices.Equal(got[:len(want)], want) {
			t.Fatalf("after a restart: the records read differ from the %d acknowledged", len(want))
		}
	})
}

// TestAlterReplicaLogDirsNotHeld runs two brokers with two log dirs each and a partition on
// broker 1 only: AlterReplicaLogDirs to broker 2 for it is REPLICA_NOT_AVAILABLE, and once a
// reassignment adds broker 2, broker 2 creates its replica in the dir asked for, not in its
// first dir, where the fewest-partitions rule (a tie) would put it.
func TestAlterReplicaLogDirsNotHeld(t *testing.T) {
	t.Parallel()
	bs := startInProcessCluster(t, 2, fastReplication, func(c *Config) {
		c.LogDirs = append(c.LogDirs, filepath.Join(c.LogDirs[0], "second"))
	})
	var b2 *Broker
	for _, b := range bs {
		if b.cfg.NodeID == 2 {
			b2 = b
		}
	}
	second := b2.dirs[1].path
	cl := newClient(t, bs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createAssigned(ctx, t, cl, "held", []int32{1}, nil)
	testutil.WaitFor(t, 10*time.Second, func() error {
		if b2.meta.Image().Topics["held"] == nil {
			return fmt.Errorf("broker 2 has not seen topic held yet")
		}
		return nil
	})
	if code := alterLogDirOn(t, cl, 2, second, "held"); code != kerr.ReplicaNotAvailable.Code {
		t.Fatalf("move of a replica broker 2 does not hold: error %d; want REPLICA_NOT_AVAILABLE (9)", code)
	}
	if _, err := kadm.NewClient(cl).AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{"held": {0: {1, 2}}}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		p := b2.parts.Load().lookup("held", 0)
		if p == nil {
			return fmt.Errorf("broker 2 holds no replica of held-0 yet")
		}
		if got := p.dir.Load().path; got != second {
			return fmt.Errorf("broker 2 created held-0 in %s; want %s, where AlterReplicaLogDirs asked for it", got, second)
		}
		return nil
	})
}

// TestLogDirOffline runs a broker with two log dirs, the second a small tmpfs, and fills the
// tmpfs: the produce that does not fit is KAFKA_STORAGE_ERROR and takes that dir offline, so
// its partition answers KAFKA_STORAGE_ERROR to produce and fetch and has no leader in Metadata
// and DescribeTopicPartitions, DescribeLogDirs reports the dir KAFKA_STORAGE_ERROR, the
// LogManager gauges count it offline, and a move to it is KAFKA_STORAGE_ERROR, while the
// partition of the first dir keeps taking and serving records; after a restart with space
// freed, every acknowledged record of both is readable.
func TestLogDirOffline(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		good := filepath.Join(t.TempDir(), "good")
		small := filepath.Join(mountTmpfs(t, 4<<20), "data")
		override := "log.dirs=" + good + "," + small
		b := startBroker(t, io, good, override, "metrics.listen=127.0.0.1:0")
		cl := newClient(t, b, kgo.RequestRetries(0))
		if s := scrapeMetrics(t, b); s.must(t, "kafka_log_logmanager_offlinelogdirectorycount") != 0 ||
			s.must(t, "kafka_log_logmanager_logdirectoryoffline", "logDirectory", small) != 0 {
			t.Fatalf("before the failure: offline log dir gauges not 0")
		}
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
		dreq := kmsg.NewPtrDescribeTopicPartitionsRequest()
		dt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		dt.Topic = "doomed"
		dreq.Topics = append(dreq.Topics, dt)
		dkr, err := cl.Broker(1).Request(ctx, dreq)
		if err != nil {
			t.Fatal(err)
		}
		if dp := dkr.(*kmsg.DescribeTopicPartitionsResponse).Topics[0].Partitions[0]; dp.LeaderID != -1 || len(dp.OfflineReplicas) != 0 {
			t.Errorf("DescribeTopicPartitions of doomed-0: leader %d, offline replicas %v; want -1 and none listed, as Kafka's", dp.LeaderID, dp.OfflineReplicas)
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
		s := scrapeMetrics(t, b)
		if n, dirOff, goodOff := s.must(t, "kafka_log_logmanager_offlinelogdirectorycount"),
			s.must(t, "kafka_log_logmanager_logdirectoryoffline", "logDirectory", small),
			s.must(t, "kafka_log_logmanager_logdirectoryoffline", "logDirectory", good); n != 1 || dirOff != 1 || goodOff != 0 {
			t.Errorf("offline log dirs %v, the full dir offline %v, the healthy one %v; want 1, 1, 0", n, dirOff, goodOff)
		}
		if code := alterLogDir(t, cl, small, "healthy"); code != kerr.KafkaStorageError.Code {
			t.Errorf("move to the offline dir: error %d; want KAFKA_STORAGE_ERROR (56)", code)
		}
		if code := alterLogDir(t, cl, good, "doomed"); code != kerr.KafkaStorageError.Code {
			t.Errorf("move of an offline replica: error %d; want KAFKA_STORAGE_ERROR (56)", code)
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

// TestFinishMoves checks what a start does with the directories of moves a crash interrupted:
// a copy whose partition has no current directory (the crash came between the two renames of
// the swap) becomes the partition's directory; a copy beside a current directory is returned
// to be resumed, a second copy of the same partition removed, and replaced logs left to be
// removed later.
func TestFinishMoves(t *testing.T) {
	root := t.TempDir()
	a, c := &logDir{path: filepath.Join(root, "a")}, &logDir{path: filepath.Join(root, "b")}
	mk := func(d *logDir, name string) {
		if err := os.MkdirAll(filepath.Join(d.path, name, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const id = "0123456789abcdef0123456789abcdef"
	mk(a, "swapped.t-0."+id+deleteDirSuffix)
	mk(c, "swapped.t-0."+id+futureDirSuffix)
	mk(a, "kept-1")
	mk(c, "kept-1."+id+futureDirSuffix)
	mk(c, "kept-1.fedcba9876543210fedcba9876543210"+futureDirSuffix)
	mk(c, "not-a-move-2.future")
	var later []string
	resume, _, err := finishMoves([]*logDir{a, c}, slog.New(slog.DiscardHandler), func(dir string) { later = append(later, dir) })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(a.path, "swapped.t-0."+id+deleteDirSuffix)}; !slices.Equal(later, want) {
		t.Errorf("left to be removed: %v; want %v", later, want)
	}
	want := []futureLog{{dir: c, path: filepath.Join(c.path, "kept-1."+id+futureDirSuffix), part: "kept-1"}}
	if !slices.Equal(resume, want) {
		t.Errorf("moves to resume: %+v; want %+v", resume, want)
	}
	names := func(d *logDir) []string {
		ents, err := os.ReadDir(d.path)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	if got, want := names(a), []string{"kept-1", "swapped.t-0." + id + deleteDirSuffix}; !slices.Equal(got, want) {
		t.Errorf("first dir holds %v; want %v", got, want)
	}
	if got, want := names(c), []string{"kept-1." + id + futureDirSuffix, "not-a-move-2.future", "swapped.t-0"}; !slices.Equal(got, want) {
		t.Errorf("second dir holds %v; want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(c.path, "swapped.t-0", "x")); err != nil {
		t.Errorf("the promoted copy lost its contents: %v", err)
	}
}

// TestMovedDirName checks that the names moves and deletions give directories are the ones a
// start recognises: Kafka's, 32 hex digits between the dot and the suffix.
func TestMovedDirName(t *testing.T) {
	for range 100 {
		for _, suffix := range []string{futureDirSuffix, deleteDirSuffix} {
			name := movedDirName("/data/my.topic-12", suffix)
			if got := movedDirPartition(name, suffix); got != "my.topic-12" {
				t.Fatalf("movedDirName gave %q, which a start reads as partition %q", name, got)
			}
		}
	}
}

// TestLogDirOfflineMovesLeadership runs three brokers and an RF 3 partition whose leader's log
// dir goes offline (failDir, where every I/O error of a dir leads, with the error an I/O error
// would bring): the active controller takes the broker out of the ISR and elects another
// in-sync replica, acks=all produce goes on through the new leader, and every record
// acknowledged before and after is read back, in order.
func TestLogDirOfflineMovesLeadership(t *testing.T) {
	t.Parallel()
	bs, ctx, _ := replicatedCluster(t, "fo", 1, nil)
	cl := newClient(t, bs[0], clusterSeeds(bs), kgo.DefaultProduceTopic("fo"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	var oldLeader *Broker
	testutil.WaitFor(t, 20*time.Second, func() error {
		pm := bs[0].meta.Image().Topics["fo"].Partitions[0]
		if len(pm.ISR) != 3 {
			return fmt.Errorf("ISR %v; want all three replicas", pm.ISR)
		}
		for _, b := range bs {
			if b.cfg.NodeID == pm.Leader {
				oldLeader = b
			}
		}
		return nil
	})
	produceValues(ctx, t, cl, 0, 100)
	p := oldLeader.parts.Load().lookup("fo", 0)
	oldLeader.failDir(p.dir.Load(), fmt.Errorf("write %s: %w", p.log().Dir(), unix.EIO))
	var newLeader *Broker
	testutil.WaitFor(t, 20*time.Second, func() error {
		for _, b := range bs {
			pm := b.meta.Image().Topics["fo"].Partitions[0]
			if pm.Leader == oldLeader.cfg.NodeID || pm.Leader < 0 || slices.Contains(pm.ISR, oldLeader.cfg.NodeID) || len(pm.ISR) != 2 {
				return fmt.Errorf("node %d sees leader %d, ISR %v; want another leader and broker %d out of the ISR",
					b.cfg.NodeID, pm.Leader, pm.ISR, oldLeader.cfg.NodeID)
			}
			if b.cfg.NodeID == pm.Leader {
				newLeader = b
			}
		}
		return nil
	})
	produceValues(ctx, t, cl, 100, 200)
	got := readAcked(t, newLeader, "fo", 200)
	for i, v := range got[:200] {
		if v != strconv.Itoa(i) {
			t.Fatalf("offset %d holds %q; want %d", i, v, i)
		}
	}
}

// TestLogDirOfflineLastISR fails the dir of the only replica of a partition in a cluster of
// three: the controller marks the replica offline and leaves the partition without a leader,
// its ISR kept, and every broker answers Metadata for it with leader -1, LEADER_NOT_AVAILABLE
// and the replica offline, as Kafka's controller and metadata cache do.
func TestLogDirOfflineLastISR(t *testing.T) {
	t.Parallel()
	bs, ctx, adm := replicatedCluster(t, "fo", 1, nil)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "solo"); err != nil {
		t.Fatal(err)
	}
	var owner *Broker
	testutil.WaitFor(t, 20*time.Second, func() error {
		for _, b := range bs {
			if p := b.parts.Load().leader("solo", 0); p != nil {
				owner = b
				return nil
			}
		}
		return fmt.Errorf("nobody leads solo-0 yet")
	})
	cl := newClient(t, bs[0], clusterSeeds(bs), kgo.DefaultProduceTopic("solo"))
	produceValues(ctx, t, cl, 0, 10)
	id := owner.cfg.NodeID
	p := owner.parts.Load().lookup("solo", 0)
	owner.failDir(p.dir.Load(), fmt.Errorf("write %s: %w", p.log().Dir(), unix.EIO))
	testutil.WaitFor(t, 20*time.Second, func() error {
		for _, b := range bs {
			pm := b.meta.Image().Topics["solo"].Partitions[0]
			if pm.Leader != -1 || !slices.Equal(pm.ISR, []int32{id}) || !slices.Equal(pm.Offline, []int32{id}) {
				return fmt.Errorf("node %d sees leader %d, ISR %v, offline %v; want -1, [%d], [%d]", b.cfg.NodeID, pm.Leader, pm.ISR, pm.Offline, id, id)
			}
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("solo")
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, newClient(t, b))
			if err != nil {
				return err
			}
			mp := resp.Topics[0].Partitions[0]
			if mp.Leader != -1 || mp.ErrorCode != kerr.LeaderNotAvailable.Code || !slices.Equal(mp.OfflineReplicas, []int32{id}) {
				return fmt.Errorf("node %d answers leader %d, error %d, offline replicas %v; want -1, LEADER_NOT_AVAILABLE, [%d]", b.cfg.NodeID, mp.Leader, mp.ErrorCode, mp.OfflineReplicas, id)
			}
		}
		return nil
	})
}

// TestElectLeaderOfflineReplica checks that no election picks a replica marked offline: the
// last in-sync replica stays in the ISR of a partition without a leader, an unclean election
// takes another live replica, and a preferred election does not move leadership to it.
func TestElectLeaderOfflineReplica(t *testing.T) {
	never := func(*meta.Topic) bool { return false }
	always := func(*meta.Topic) bool { return true }
	live := map[int32]bool{1: true, 2: true}
	top := &meta.Topic{Name: "t", ID: meta.NewUUID()}
	p := meta.Partition{Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3, Offline: []int32{1}}
	rec, ok := electLeader(top, p, live, never)
	if !ok || rec.Leader != -1 || !slices.Equal(rec.ISR, []int32{1}) || rec.LeaderEpoch != 4 || !slices.Equal(rec.Offline, []int32{1}) {
		t.Errorf("clean: %v %+v; want leader -1 at epoch 4, ISR [1], offline [1]", ok, rec)
	}
	p.Leader = -1
	if rec, ok := electLeader(top, p, live, never); ok {
		t.Errorf("clean, leaderless: %+v; want no change", rec)
	}
	if rec, ok := electLeader(top, p, live, always); !ok || rec.Leader != 2 || !slices.Equal(rec.ISR, []int32{2}) {
		t.Errorf("unclean: %v %+v; want leader 2, ISR [2]", ok, rec)
	}
	im := &meta.Image{Topics: map[string]*meta.Topic{"t": top}, TopicsByID: map[meta.UUID]*meta.Topic{top.ID: top}}
	p.ISR, p.Leader = []int32{1, 2}, 2
	top.Partitions = []meta.Partition{p}
	if o := electPartition(im, live, "t", 0, electionPreferred); o.code != kerr.PreferredLeaderNotAvailable {
		t.Errorf("preferred election to an offline replica: %+v; want PREFERRED_LEADER_NOT_AVAILABLE", o)
	}
}

// epochBatch is one record at offset with leader epoch, as a leader stamps it.
func epochBatch(offset int64, epoch int32) []byte {
	rb := testutil.NewBatch(time.Now().UnixMilli(), kmsg.Record{Value: fmt.Appendf(nil, "%d@%d", offset, epoch)})
	rb.FirstOffset, rb.PartitionLeaderEpoch = offset, epoch
	return testutil.SealBatch(rb)
}

// TestFollowCurrent checks how a move's copy follows what happens to the log being copied
// between two steps: a truncation and new batches of a later epoch cut the copy where the
// epochs part, a log start moved by DeleteRecords moves the copy's, and a start-over past
// the copy's end starts the copy over there.
func TestFollowCurrent(t *testing.T) {
	open := func(name string) *rlog.Log {
		l, err := rlog.Open(filepath.Join(t.TempDir(), name), rlog.DefaultConfig(), rlog.Options{Topic: "t", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	cur, f := open("t-0"), open("t-0.future")
	appendBoth := func(ls []*rlog.Log, from, to int64, epoch int32) {
		t.Helper()
		for o := from; o < to; o++ {
			for _, l := range ls {
				if _, err := l.AppendAsFollower(epochBatch(o, epoch)); err != nil {
					t.Fatalf("append %d at epoch %d: %v", o, epoch, err)
				}
			}
		}
	}
	appendBoth([]*rlog.Log{cur, f}, 0, 10, 1)
	if err := followCurrent(cur, f); err != nil || f.LogEndOffset() != 10 {
		t.Fatalf("copy in step: %v, log end %d; want nothing cut, 10", err, f.LogEndOffset())
	}
	// The current log diverged: cut at 5, then epoch 2 from there.
	if err := cur.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	appendBoth([]*rlog.Log{cur}, 5, 12, 2)
	if err := followCurrent(cur, f); err != nil || f.LogEndOffset() != 5 {
		t.Fatalf("after the current log diverged at 5: %v, copy's log end %d; want 5", err, f.LogEndOffset())
	}
	appendBoth([]*rlog.Log{f}, 5, 12, 2)
	if _, err := cur.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	if err := followCurrent(cur, f); err != nil || f.LogStartOffset() != 3 || f.LogEndOffset() != 12 {
		t.Fatalf("after DeleteRecords to 3: %v, copy's log start %d, end %d; want 3, 12", err, f.LogStartOffset(), f.LogEndOffset())
	}
	if err := cur.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if err := followCurrent(cur, f); err != nil || f.LogStartOffset() != 100 || f.LogEndOffset() != 100 {
		t.Fatalf("after the current log started over at 100: %v, copy's log start %d, end %d; want 100, 100", err, f.LogStartOffset(), f.LogEndOffset())
	}
}

// TestFormatStorageEveryDir checks the format step (ringbroker format, as kafka-storage format)
// writes meta.properties into every log dir: the cluster id and node id in each, a directory.id
// of each dir's own; formatting again changes nothing, and a dir of another cluster is refused.
func TestFormatStorageEveryDir(t *testing.T) {
	root := t.TempDir()
	cfg := DefaultConfig()
	cfg.LogDirs = []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
	cid := meta.NewUUID().String()
	if err := FormatStorage(cfg, cid); err != nil {
		t.Fatal(err)
	}
	a, c := readProps(t, filepath.Join(cfg.LogDirs[0], "meta.properties")), readProps(t, filepath.Join(cfg.LogDirs[1], "meta.properties"))
	if a["cluster.id"] != cid || c["cluster.id"] != cid || a["node.id"] != "1" || c["node.id"] != "1" ||
		a["directory.id"] == "" || a["directory.id"] == c["directory.id"] {
		t.Fatalf("meta.properties %v and %v; want cluster.id %s, node.id 1 and two directory ids", a, c, cid)
	}
	if err := FormatStorage(cfg, cid); err != nil {
		t.Fatalf("format again: %v", err)
	}
	if again := readProps(t, filepath.Join(cfg.LogDirs[1], "meta.properties")); again["directory.id"] != c["directory.id"] {
		t.Fatalf("format again changed directory.id from %s to %s", c["directory.id"], again["directory.id"])
	}
	cfg.LogDirs = append(cfg.LogDirs, filepath.Join(root, "other"))
	if err := FormatStorage(cfg, meta.NewUUID().String()); err == nil {
		t.Fatalf("format with another cluster id: no error; want the formatted dirs refused")
	}
}

// TestAlterReplicaLogDirsResumes restarts a broker with the copy of a move in progress (a
// copy of the partition's directory taken while it was written to, then left behind by 100
// more records) in the other dir: the move goes on from the copy and finishes, and every
// acknowledged record is read back in order from the target dir.
func TestAlterReplicaLogDirsResumes(t *testing.T) {
	b, td := startTwoDirs(t, "netpoll", "rs")
	dirs, override, from, to := td.dirs, td.override, td.from, td.to
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.DefaultProduceTopic("rs"))
	produceValues(ctx, t, cl, 0, 100)
	future := filepath.Join(to, "rs-0.0123456789abcdef0123456789abcdef"+futureDirSuffix)
	if err := os.CopyFS(future, os.DirFS(partitionDir(from, "rs", 0))); err != nil {
		t.Fatal(err)
	}
	produceValues(ctx, t, cl, 100, 200)
	b.Shutdown(context.Background())

	b = startBroker(t, "netpoll", dirs[0], override)
	testutil.WaitFor(t, 20*time.Second, func() error {
		p := b.parts.Load().lookup("rs", 0)
		if p.dir.Load().path != to || p.move.Load() != nil {
			return fmt.Errorf("rs-0 in %s, move in progress %v; want it moved to %s", p.dir.Load().path, p.move.Load() != nil, to)
		}
		return nil
	})
	if got := dirOf(t, dirs, "rs", 0); got != to {
		t.Fatalf("rs-0 is in %s after the resumed move; want %s", got, to)
	}
	if _, err := os.Stat(future); err == nil {
		t.Fatalf("the copy %s is left after the move", future)
	}
	got := readAcked(t, b, "rs", 200)
	for i, v := range got[:200] {
		if v != strconv.Itoa(i) {
			t.Fatalf("offset %d holds %q; want %d", i, v, i)
		}
	}
}

// TestAlterReplicaLogDirsThrottle: with replica.alter.log.dirs.io.max.bytes.per.second a move
// copies its first megabyte and then waits for the rate to fall (Kafka's quota windows let
// about ten seconds' worth through, then hold the rate), so 3 MiB are still being moved a
// second later; lifting the bound (a dynamic broker config, as Kafka's) lets it finish.
func TestAlterReplicaLogDirsThrottle(t *testing.T) {
	t.Parallel()
	b, td := startTwoDirs(t, "netpoll", "thr", "replica.alter.log.dirs.io.max.bytes.per.second=16384")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := []byte(strings.Repeat("y", 64<<10))
	for i := range 48 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "thr", Value: value}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	if code := alterLogDir(t, cl, td.to, "thr"); code != 0 {
		t.Fatalf("move thr-0 to %s: error %d", td.to, code)
	}
	time.Sleep(time.Second)
	p := b.parts.Load().lookup("thr", 0)
	if p.dir.Load().path == td.to || p.move.Load() == nil {
		t.Fatalf("3 MiB moved within a second at 16 KiB/s; want the move held back")
	}
	if err := alterBroker(t, cl, "1", "replica.alter.log.dirs.io.max.bytes.per.second", "9223372036854775807"); err != nil {
		t.Fatalf("remove the move throttle: %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, func() error {
		if p := b.parts.Load().lookup("thr", 0); p.dir.Load().path != td.to || p.move.Load() != nil {
			return fmt.Errorf("thr-0 in %s, move in progress %v", p.dir.Load().path, p.move.Load() != nil)
		}
		return nil
	})
	if got := readAcked(t, b, "thr", 48); len(got) != 48 {
		t.Fatalf("read %d records after the move; want 48", len(got))
	}
}
