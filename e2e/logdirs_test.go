package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ringbroker/internal/brokertest"
	"ringbroker/internal/testutil"
)

// logDirsReport is the JSON kafka-log-dirs (LogDirsCommand --describe) prints.
type logDirsReport struct {
	Version int `json:"version"`
	Brokers []struct {
		Broker  int32 `json:"broker"`
		LogDirs []struct {
			LogDir     string  `json:"logDir"`
			Error      *string `json:"error"`
			Partitions []struct {
				Partition string `json:"partition"` // topic-index
				Size      int64  `json:"size"`
				OffsetLag int64  `json:"offsetLag"`
				IsFuture  bool   `json:"isFuture"`
			} `json:"partitions"`
		} `json:"logDirs"`
	} `json:"brokers"`
}

// replicaSizes flattens the report: broker -> log dir -> partition ("topic-index") -> size. It
// fails on a dir with an error, a future replica or a nonzero offset lag, none of which a test
// cluster at rest has.
func (r *logDirsReport) replicaSizes() (map[int32]map[string]map[string]int64, error) {
	if r.Version != 1 {
		return nil, fmt.Errorf("report version %d, want 1", r.Version)
	}
	out := map[int32]map[string]map[string]int64{}
	for _, b := range r.Brokers {
		out[b.Broker] = map[string]map[string]int64{}
		for _, d := range b.LogDirs {
			if d.Error != nil {
				return nil, fmt.Errorf("broker %d dir %s: error %s", b.Broker, d.LogDir, *d.Error)
			}
			parts := map[string]int64{}
			for _, p := range d.Partitions {
				if p.IsFuture || p.OffsetLag != 0 {
					return nil, fmt.Errorf("broker %d %s: offset lag %d, future %v; want 0, false", b.Broker, p.Partition, p.OffsetLag, p.IsFuture)
				}
				parts[p.Partition] = p.Size
			}
			out[b.Broker][d.LogDir] = parts
		}
	}
	return out, nil
}

// describeLogDirs runs kafka-log-dirs --describe for topic and parses the JSON it prints.
func describeLogDirs(t *testing.T, bootstrap, topic string) *logDirsReport {
	t.Helper()
	out := runJava(t, "org.apache.kafka.tools.LogDirsCommand", "--describe", "--bootstrap-server", bootstrap, "--topic-list", topic).stdout
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "{") {
			var r logDirsReport
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("parse kafka-log-dirs output: %v\n%s", err, out)
			}
			return &r
		}
	}
	t.Fatalf("no JSON in kafka-log-dirs output:\n%s", out)
	return nil
}

// TestLogDirsSingle runs kafka-log-dirs against one broker after producing to two of a topic's
// three partitions: the broker's one log dir is listed with all three partitions, sizes equal
// to their segment files on disk (0 for the empty one), no lag, no future replicas.
func TestLogDirsSingle(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t)
		const topic = "logdirs"
		b.CreateTopic(t, topic, 3)
		produceAcross(t, b, topic, 2, 20)
		sizes, err := describeLogDirs(t, b.Addr(), topic).replicaSizes()
		if err != nil {
			t.Fatal(err)
		}
		dataDir := filepath.Join(b.dir, "data")
		if len(sizes) != 1 || len(sizes[1]) != 1 || sizes[1][dataDir] == nil {
			t.Fatalf("report %v; want broker 1 with the one log dir %s", sizes, dataDir)
		}
		got := sizes[1][dataDir]
		if len(got) != 3 {
			t.Fatalf("partitions %v; want %s-0, -1 and -2 only", got, topic)
		}
		for p := range 3 {
			name := fmt.Sprintf("%s-%d", topic, p)
			size, ok := got[name]
			want := brokertest.SegmentBytes(t, filepath.Join(dataDir, name))
			if !ok || size != want || (size == 0) != (p == 2) {
				t.Errorf("%s: size %d (listed %v); want %d, the bytes of its .log files, nonzero once produced to", name, size, ok, want)
			}
		}
	})
}

// TestLogDirsCluster runs kafka-log-dirs against a 3-node cluster (Apache Kafka with
// E2E_BROKER=kafka) with an RF 3 topic: every broker is listed, each holding every partition
// of the topic with the bytes of its own segment files, which are the same on all three once
// replicated.
func TestLogDirsCluster(t *testing.T) {
	nodes := startCluster(t, 3)
	const topic, partitions = "logdirs-rf3", 3
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if resp, err := nodes[0].Admin(t).CreateTopic(ctx, partitions, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s with RF 3: %v %v", topic, err, resp.Err)
	}
	waitLeaders(t, nodes, topic, partitions, 0)
	produceAcross(t, nodes[0], topic, partitions, 20)
	var bootstrap []string
	for _, n := range nodes {
		bootstrap = append(bootstrap, n.Addr())
	}
	testutil.WaitFor(t, clusterTimeout, func() error {
		sizes, err := describeLogDirs(t, strings.Join(bootstrap, ","), topic).replicaSizes()
		if err != nil {
			return err
		}
		if ids := slices.Sorted(maps.Keys(sizes)); fmt.Sprint(ids) != "[1 2 3]" {
			return fmt.Errorf("brokers %v in the report; want 1, 2 and 3", ids)
		}
		for p := range partitions {
			name := fmt.Sprintf("%s-%d", topic, p)
			var first int64
			for i, n := range nodes {
				id := int32(i + 1)
				dataDir := filepath.Join(n.dir, "data")
				size, ok := sizes[id][dataDir][name]
				switch onDisk := brokertest.SegmentBytes(t, filepath.Join(dataDir, name)); {
				case !ok:
					return fmt.Errorf("broker %d: %s not listed in %s: %v", id, name, dataDir, sizes[id])
				case size <= 0 || size != onDisk:
					return fmt.Errorf("broker %d: %s size %d; want %d, its .log files, above 0", id, name, size, onDisk)
				case i > 0 && size != first:
					return fmt.Errorf("%s: broker %d holds %d bytes, broker 1 %d", name, id, size, first)
				}
				if i == 0 {
					first = size
				}
			}
		}
		return nil
	})
}
