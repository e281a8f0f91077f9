package e2e

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
	"github.com/twmb/franz-go/pkg/kversion"

	"ringbroker/internal/brokertest"
	"ringbroker/internal/testutil"
)

// replicaDirs asks broker 1 which of its log dirs hold topic's partitions, current replicas
// only: partition -> dir. A partition with a future replica too is left out.
func replicaDirs(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) (map[int32]string, error) {
	t.Helper()
	described, err := kadm.NewClient(cl).DescribeBrokerLogDirs(ctx, 1, nil)
	if err != nil {
		return nil, err
	}
	out, futures := map[int32]string{}, map[int32]bool{}
	for dir, d := range described {
		for _, p := range d.Topics[topic] {
			if p.IsFuture {
				futures[p.Partition] = true
				continue
			}
			out[p.Partition] = dir
		}
	}
	for p := range futures {
		delete(out, p)
	}
	return out, nil
}

// TestLogDirsMove runs one broker with two log dirs and moves a partition from its dir to the
// other with kafka-reassign-partitions (a reassignment JSON with log_dirs) while an idempotent
// acks=all producer keeps writing to it: the move finishes (kafka-log-dirs lists the partition
// in the target dir only, without a future replica, and --verify says so), the producer goes on,
// and every acknowledged record is read back once, in order.
func TestLogDirsMove(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		root := t.TempDir()
		dirs := []string{filepath.Join(root, "d1"), filepath.Join(root, "d2")}
		b := tg.start(t, "log.dirs="+strings.Join(dirs, ","))
		const topic = "jbod-move"
		b.CreateTopic(t, topic, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cl := b.Client(t)
		var from string
		testutil.WaitFor(t, clusterTimeout, func() error {
			where, err := replicaDirs(ctx, t, cl, topic)
			from = where[0]
			if err == nil && from == "" {
				err = fmt.Errorf("%s-0 in no log dir: %v", topic, where)
			}
			return err
		})
		to := dirs[0]
		if from == to {
			to = dirs[1]
		}
		prod := startAckedProducer(ctx, t, []string{b.Addr()}, topic)
		prod.waitAcks(t, "before the move", 1000)

		plan := filepath.Join(t.TempDir(), "reassign.json")
		writeFile(t, plan, fmt.Sprintf(`{"version":1,"partitions":[{"topic":%q,"partition":0,"replicas":[1],"log_dirs":[%q]}]}`, topic, to))
		reassign := func(args ...string) string {
			t.Helper()
			return runJava(t, "org.apache.kafka.tools.reassign.ReassignPartitionsCommand", append([]string{"--bootstrap-server", b.Addr()}, args...)...).stdout
		}
		if out := reassign("--reassignment-json-file", plan, "--execute"); !strings.Contains(out, "Successfully started moving log directory to "+to) {
			t.Fatalf("--execute: unexpected output:\n%s", out)
		}
		testutil.WaitFor(t, clusterTimeout, func() error {
			where, err := replicaDirs(ctx, t, cl, topic)
			if err == nil && where[0] != to {
				err = fmt.Errorf("%s-0 in %q; want %s with no future replica", topic, where[0], to)
			}
			return err
		})
		if out := reassign("--reassignment-json-file", plan, "--verify"); !strings.Contains(out, "Reassignment of replica ") || !strings.Contains(out, " completed successfully.") {
			t.Fatalf("--verify after the move: unexpected output:\n%s", out)
		}
		sizes, err := describeLogDirs(t, b.Addr(), topic).replicaSizes()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := sizes[1][to][topic+"-0"]; !ok || len(sizes[1][from]) != 0 {
			t.Fatalf("kafka-log-dirs after the move: %v; want %s-0 in %s only", sizes, topic, to)
		}
		prod.waitAcks(t, "after the move", 1000)
		n := len(prod.finish(t))
		checkReadBackInOrder(ctx, t, []string{b.Addr()}, topic, n)
	})
}

// startWithSmallDir starts the target's broker with two log dirs, the second a tmpfs of size
// bytes mounted in a mount namespace of the broker's own (unshare), so that the test can fill it
// without touching the machine's mounts; an Apache Kafka broker is formatted inside the
// namespace, where the tmpfs is. It returns the broker and its dirs.
func startWithSmallDir(t *testing.T, tg target, size int) (*Broker, string, string) {
	t.Helper()
	dir := t.TempDir()
	good, small := filepath.Join(dir, "good"), filepath.Join(dir, "small")
	if err := os.Mkdir(small, 0o755); err != nil {
		t.Fatal(err)
	}
	dirs := "log.dirs=" + good + "," + small
	script := fmt.Sprintf("mount -t tmpfs -o size=%d tmpfs '%s' && ", size, small)
	port := brokertest.FreePort(t)
	var b *Broker
	var argv []string
	if tg.name == "kafka" {
		props, log4j := writeKafkaConfig(t, dir, port, brokertest.FreePort(t), dirs)
		script += fmt.Sprintf("java -cp '%s' kafka.tools.StorageTool format -t %s -c '%s' && ", kafkaClasspath(t), newClusterID(t), props)
		argv = kafkaArgv(t, props, log4j)
		b = newKafkaBroker(t, dir, port, nil)
	} else {
		argv = ringbrokerArgv(t, dir, tg.name, port, dirs)
		b = newRingbroker(t, dir, port, nil)
	}
	// sh execs the broker, so that its process is the one started and signalled.
	b.argv = append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script + `exec "$@"`, "broker"}, argv...)
	b.launch()
	return b, good, small
}

// splitAcrossDirs waits until broker 1 holds topic's two partitions in two different log dirs,
// and returns the one in dir and the other.
func splitAcrossDirs(ctx context.Context, t *testing.T, cl *kgo.Client, topic, dir string) (in, other int32) {
	t.Helper()
	var where map[int32]string
	testutil.WaitFor(t, clusterTimeout, func() error {
		var err error
		where, err = replicaDirs(ctx, t, cl, topic)
		if err == nil && (len(where) != 2 || where[0] == where[1]) {
			err = fmt.Errorf("partitions in %v; want one in each dir", where)
		}
		return err
	})
	if where[1] == dir {
		return 1, 0
	}
	return 0, 1
}

// produceDirect sends one batch of a value of n bytes to topic's partition with acks=1, straight to
// broker 1 (no retries), and returns the partition's answer. cl must name topics by name
// (kversion.V3_0_0).
func produceDirect(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partition int32, n int) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = 1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = testutil.SealBatch(testutil.NewBatch(time.Now().UnixMilli(), kmsg.Record{Value: make([]byte, n)}))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kr, err := cl.Broker(1).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return kr.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// fetchDirect fetches topic's partition from offset 0 by name, straight from broker 1; cl must
// name topics by name (kversion.V3_0_0).
func fetchDirect(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partition int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes = -1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = partition, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kr, err := cl.Broker(1).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return kr.(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// TestLogDirFailure runs one broker with two log dirs, the second a 16 MiB tmpfs, and a topic
// with a partition in each, then fills the tmpfs by producing to its partition: the produce that
// does not fit is KAFKA_STORAGE_ERROR and the dir goes offline. From then on that partition
// answers produce and fetch with KAFKA_STORAGE_ERROR, Metadata lists the broker as its offline
// replica, with no leader, as kafka-topics --describe (DescribeTopicPartitions) does;
// kafka-log-dirs reports the dir's error; and the other partition takes
// and serves records throughout, every acknowledged one of them read back in order.
func TestLogDirFailure(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b, good, small := startWithSmallDir(t, tg, 16<<20)
		const topic = "jbod-fail"
		b.CreateTopic(t, topic, 2)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// Produce and Fetch by topic name, as Kafka 3.0's.
		cl := b.Client(t, kgo.MaxVersions(kversion.V3_0_0()))
		doomed, healthy := splitAcrossDirs(ctx, t, cl, topic, small)
		var healthyAcked int64
		failed := false
		for i := 0; i < 400 && !failed; i++ {
			switch sp := produceDirect(ctx, t, cl, topic, doomed, 64<<10); sp.ErrorCode {
			case 0:
			case kerr.KafkaStorageError.Code:
				failed = true
			default:
				t.Fatalf("produce %d to the filling dir: error %d; want none, then KAFKA_STORAGE_ERROR (56)", i, sp.ErrorCode)
			}
			if sp := produceDirect(ctx, t, cl, topic, healthy, 100); sp.ErrorCode != 0 || sp.BaseOffset != healthyAcked {
				t.Fatalf("produce to the healthy dir: error %d at %d; want success at %d", sp.ErrorCode, sp.BaseOffset, healthyAcked)
			}
			healthyAcked++
		}
		if !failed {
			t.Fatalf("400 batches of 64 KiB fit a 16 MiB dir")
		}
		// Kafka answers NOT_LEADER_OR_FOLLOWER too once its controller has made the partition
		// leaderless; ringbroker keeps answering KAFKA_STORAGE_ERROR.
		offlineCode := func(code int16) bool {
			return code == kerr.KafkaStorageError.Code || tg.name == "kafka" && code == kerr.NotLeaderForPartition.Code
		}
		if sp := produceDirect(ctx, t, cl, topic, doomed, 10); !offlineCode(sp.ErrorCode) {
			t.Errorf("produce to the offline dir: error %d; want KAFKA_STORAGE_ERROR (56)", sp.ErrorCode)
		}
		if fp := fetchDirect(ctx, t, cl, topic, doomed); !offlineCode(fp.ErrorCode) {
			t.Errorf("fetch from the offline dir: error %d; want KAFKA_STORAGE_ERROR (56)", fp.ErrorCode)
		}
		if fp := fetchDirect(ctx, t, cl, topic, healthy); fp.ErrorCode != 0 || fp.HighWatermark != healthyAcked {
			t.Errorf("fetch from the healthy dir: error %d, high watermark %d; want none, %d", fp.ErrorCode, fp.HighWatermark, healthyAcked)
		}
		testutil.WaitFor(t, clusterTimeout, func() error {
			p, err := metadataPartition(ctx, cl, topic, doomed)
			if err == nil && (p.Leader != -1 || !slices.Contains(p.OfflineReplicas, 1)) {
				err = fmt.Errorf("offline partition %d: leader %d, offline replicas %v; want -1 and broker 1", p.Partition, p.Leader, p.OfflineReplicas)
			}
			if err != nil {
				return err
			}
			p, err = metadataPartition(ctx, cl, topic, healthy)
			if err == nil && (p.Leader != 1 || len(p.OfflineReplicas) != 0) {
				err = fmt.Errorf("healthy partition %d: leader %d, offline replicas %v; want 1, none", p.Partition, p.Leader, p.OfflineReplicas)
			}
			return err
		})
		out := runJava(t, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", b.Addr(), "--describe", "--topic", topic).stdout
		for _, tc := range []struct {
			p      int32
			leader string
		}{{doomed, "Leader: none"}, {healthy, "Leader: 1\t"}} {
			if !strings.Contains(out, fmt.Sprintf("Partition: %d\t%s", tc.p, tc.leader)) {
				t.Errorf("kafka-topics --describe: want partition %d with %q:\n%s", tc.p, tc.leader, out)
			}
		}
		report := describeLogDirs(t, b.Addr(), topic)
		for _, d := range report.Brokers[0].LogDirs {
			switch {
			case d.LogDir == small && (d.Error == nil || !strings.Contains(*d.Error, "Storage")):
				t.Errorf("kafka-log-dirs: the full dir %s has error %v; want a storage error", small, d.Error)
			case d.LogDir == good && (d.Error != nil || len(d.Partitions) != 1):
				t.Errorf("kafka-log-dirs: the healthy dir %s has error %v, partitions %v; want none, one", good, d.Error, d.Partitions)
			}
		}
		// A producer of the healthy partition goes on, and everything is read back.
		for range 100 {
			if sp := produceDirect(ctx, t, cl, topic, healthy, 100); sp.ErrorCode != 0 || sp.BaseOffset != healthyAcked {
				t.Fatalf("produce to the healthy dir after the failure: error %d at %d; want success at %d", sp.ErrorCode, sp.BaseOffset, healthyAcked)
			}
			healthyAcked++
		}
		cons := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {healthy: kgo.NewOffset().At(0)}}))
		var next int64
		for next < healthyAcked {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read back the healthy partition: %d of %d records", next, healthyAcked)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != next {
					t.Fatalf("healthy partition: offset %d after %d", r.Offset, next)
				}
				next++
			})
		}
	})
}

// metadataPartition asks broker 1 for topic's partition in Metadata.
func metadataPartition(ctx context.Context, cl *kgo.Client, topic string, partition int32) (kmsg.MetadataResponseTopicPartition, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	kr, err := cl.Broker(1).Request(ctx, req)
	if err != nil {
		return kmsg.MetadataResponseTopicPartition{}, err
	}
	for _, p := range kr.(*kmsg.MetadataResponse).Topics[0].Partitions {
		if p.Partition == partition {
			return p, nil
		}
	}
	return kmsg.MetadataResponseTopicPartition{}, fmt.Errorf("%s-%d not in Metadata", topic, partition)
}

// readPartitionBack consumes topic's partition from its start and fails unless it holds
// offsets 0 to n-1, in order, each with a value of size bytes.
func readPartitionBack(ctx context.Context, t *testing.T, b *Broker, topic string, partition int32, n int64, size int) {
	t.Helper()
	cons := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(0)}}))
	defer cons.Close()
	var next int64
	for next < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %s-%d: %d of %d acknowledged records", topic, partition, next, n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next || len(r.Value) != size {
				t.Fatalf("%s-%d: offset %d of %d bytes after %d; want offset %d of %d bytes", topic, partition, r.Offset, len(r.Value), next-1, next, size)
			}
			next++
		})
	}
}

// TestLogDirOfflineAtStart runs one broker with two log dirs and a topic with a partition in
// each, with acknowledged records in both, then replaces the second dir by a file and restarts
// the broker: it starts, with the partition of the good dir served (every record read back, more
// taken), kafka-log-dirs reporting the second dir with a storage error, and the other partition
// answering produce and fetch with KAFKA_STORAGE_ERROR and without a leader in Metadata and in
// kafka-topics --describe; it is not recreated empty in the good dir. Once the dir is back and
// the broker restarted, the partition leads again and every acknowledged record of both is read
// back.
func TestLogDirOfflineAtStart(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		root := t.TempDir()
		good, bad := filepath.Join(root, "good"), filepath.Join(root, "bad")
		b := tg.start(t, "log.dirs="+good+","+bad)
		const topic, size = "jbod-start", 100
		b.CreateTopic(t, topic, 2)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cl := b.Client(t, kgo.MaxVersions(kversion.V3_0_0()))
		doomed, healthy := splitAcrossDirs(ctx, t, cl, topic, bad)
		acked := map[int32]int64{}
		produce := func(p int32, n int) {
			t.Helper()
			for range n {
				if sp := produceDirect(ctx, t, cl, topic, p, size); sp.ErrorCode != 0 || sp.BaseOffset != acked[p] {
					t.Fatalf("produce to %s-%d: error %d at %d; want success at %d", topic, p, sp.ErrorCode, sp.BaseOffset, acked[p])
				}
				acked[p]++
			}
		}
		produce(doomed, 50)
		produce(healthy, 50)
		cl.Close()

		b.Stop()
		if err := os.Rename(bad, bad+".away"); err != nil {
			t.Fatal(err)
		}
		writeFile(t, bad, "not a log dir\n")
		b.Restart()
		cl = b.Client(t, kgo.MaxVersions(kversion.V3_0_0()))
		// Kafka answers NOT_LEADER_OR_FOLLOWER too for a replica of an offline dir it did
		// not open; ringbroker answers KAFKA_STORAGE_ERROR.
		offlineCode := func(code int16) bool {
			return code == kerr.KafkaStorageError.Code || tg.name == "kafka" && code == kerr.NotLeaderForPartition.Code
		}
		if sp := produceDirect(ctx, t, cl, topic, doomed, size); !offlineCode(sp.ErrorCode) {
			t.Errorf("produce to the partition of the offline dir: error %d; want KAFKA_STORAGE_ERROR (56)", sp.ErrorCode)
		}
		if fp := fetchDirect(ctx, t, cl, topic, doomed); !offlineCode(fp.ErrorCode) {
			t.Errorf("fetch from the partition of the offline dir: error %d; want KAFKA_STORAGE_ERROR (56)", fp.ErrorCode)
		}
		testutil.WaitFor(t, clusterTimeout, func() error {
			p, err := metadataPartition(ctx, cl, topic, doomed)
			if err == nil && (p.Leader != -1 || p.ErrorCode != kerr.LeaderNotAvailable.Code || !slices.Contains(p.OfflineReplicas, 1)) {
				err = fmt.Errorf("partition of the offline dir: leader %d, error %d, offline replicas %v; want -1, LEADER_NOT_AVAILABLE, broker 1", p.Leader, p.ErrorCode, p.OfflineReplicas)
			}
			return err
		})
		out := runJava(t, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", b.Addr(), "--describe", "--topic", topic).stdout
		if !strings.Contains(out, fmt.Sprintf("Partition: %d\tLeader: none", doomed)) || !strings.Contains(out, fmt.Sprintf("Partition: %d\tLeader: 1\t", healthy)) {
			t.Errorf("kafka-topics --describe: want partition %d without a leader, %d led by 1:\n%s", doomed, healthy, out)
		}
		report := describeLogDirs(t, b.Addr(), topic)
		for _, d := range report.Brokers[0].LogDirs {
			switch {
			case d.LogDir == bad && (d.Error == nil || !strings.Contains(*d.Error, "Storage")):
				t.Errorf("kafka-log-dirs: the unusable dir %s has error %v; want a storage error", bad, d.Error)
			case d.LogDir == good && (d.Error != nil || len(d.Partitions) != 1 || d.Partitions[0].Partition != fmt.Sprintf("%s-%d", topic, healthy)):
				t.Errorf("kafka-log-dirs: the good dir %s has error %v, partitions %v; want none, %s-%d alone", good, d.Error, d.Partitions, topic, healthy)
			}
		}
		readPartitionBack(ctx, t, b, topic, healthy, acked[healthy], size)
		produce(healthy, 50)
		cl.Close()

		b.Stop()
		if err := os.Remove(bad); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(bad+".away", bad); err != nil {
			t.Fatal(err)
		}
		b.Restart()
		cl = b.Client(t, kgo.MaxVersions(kversion.V3_0_0()))
		testutil.WaitFor(t, clusterTimeout, func() error {
			p, err := metadataPartition(ctx, cl, topic, doomed)
			if err == nil && (p.Leader != 1 || len(p.OfflineReplicas) != 0) {
				err = fmt.Errorf("partition of the repaired dir: leader %d, offline replicas %v; want 1, none", p.Leader, p.OfflineReplicas)
			}
			return err
		})
		readPartitionBack(ctx, t, b, topic, doomed, acked[doomed], size)
		readPartitionBack(ctx, t, b, topic, healthy, acked[healthy], size)
		produce(doomed, 10)
	})
}
