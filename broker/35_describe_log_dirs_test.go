package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"ringbroker/internal/brokertest"
)

// TestDescribeLogDirs runs a broker with three log dirs, produces to some partitions, removes the
// third dir and checks what DescribeLogDirs reports: every partition in the first dir with its
// size equal to its segment files on disk, the second dir empty, the third KAFKA_STORAGE_ERROR,
// and requested topics and partitions filtering the answer.
func TestDescribeLogDirs(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		root := t.TempDir()
		dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "gone")}
		b := startBroker(t, io, dirs[0], "log.dirs="+strings.Join(dirs, ","))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cl := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		adm := kadm.NewClient(cl)
		for topic, n := range map[string]int32{"ld": 3, "other": 1} {
			if _, err := adm.CreateTopic(ctx, n, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
		}
		// ld-2 stays empty.
		for i := range 50 {
			for _, r := range []*kgo.Record{{Topic: "ld", Partition: 0}, {Topic: "ld", Partition: 1}, {Topic: "other"}} {
				r.Value = fmt.Appendf(nil, "record %d of %s-%d", i, r.Topic, r.Partition)
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatalf("produce to %s-%d: %v", r.Topic, r.Partition, err)
				}
			}
		}
		if err := os.RemoveAll(dirs[2]); err != nil {
			t.Fatal(err)
		}

		all, err := adm.DescribeBrokerLogDirs(ctx, b.cfg.NodeID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 3 {
			t.Fatalf("described %d dirs, want 3: %+v", len(all), all)
		}
		first := all[dirs[0]]
		if first.Err != nil || first.TotalBytes <= 0 || first.UsableBytes < 0 || first.UsableBytes > first.TotalBytes {
			t.Fatalf("first dir: err %v, total %d, usable %d", first.Err, first.TotalBytes, first.UsableBytes)
		}
		wantParts := map[string][]int32{"ld": {0, 1, 2}, "other": {0}}
		if len(first.Topics) != len(wantParts) {
			t.Fatalf("first dir holds topics %v, want ld and other", first.Topics.Sorted())
		}
		for topic, idxs := range wantParts {
			if len(first.Topics[topic]) != len(idxs) {
				t.Fatalf("%s: %d partitions described, want %d", topic, len(first.Topics[topic]), len(idxs))
			}
			for _, i := range idxs {
				p, ok := first.Topics[topic][i]
				if !ok {
					t.Fatalf("%s-%d not described", topic, i)
				}
				want := brokertest.SegmentBytes(t, partitionDir(dirs[0], topic, i))
				if p.Size != want || p.OffsetLag != 0 || p.IsFuture {
					t.Errorf("%s-%d: size %d, lag %d, future %v; want size %d (the .log files), lag 0, not future",
						topic, i, p.Size, p.OffsetLag, p.IsFuture, want)
				}
				if empty := topic == "ld" && i == 2; (p.Size == 0) != empty {
					t.Errorf("%s-%d: size %d", topic, i, p.Size)
				}
			}
		}
		if second := all[dirs[1]]; second.Err != nil || len(second.Topics) != 0 || second.TotalBytes <= 0 {
			t.Errorf("unused dir: err %v, topics %v, total %d; want no error, no topics, its file system's size",
				second.Err, second.Topics.Sorted(), second.TotalBytes)
		}
		if gone := all[dirs[2]]; !errorIs(gone.Err, kerr.KafkaStorageError) || len(gone.Topics) != 0 || gone.TotalBytes != -1 {
			t.Errorf("removed dir: err %v, topics %v, total %d; want KAFKA_STORAGE_ERROR, no topics, -1",
				gone.Err, gone.Topics.Sorted(), gone.TotalBytes)
		}

		filtered, err := adm.DescribeBrokerLogDirs(ctx, b.cfg.NodeID, kadm.TopicsSet{
			"ld": {1: {}, 7: {}}, "missing": {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		got := filtered[dirs[0]].Topics
		if _, ok := got["ld"][1]; len(got) != 1 || len(got["ld"]) != 1 || !ok {
			t.Errorf("asked for ld-1, ld-7 and missing-0: got %+v, want ld-1 only", got)
		}

		// Every served version, with an empty (not null) topic list: no partitions.
		for v := int16(0); v <= describeLogDirsAPI.maxVersion; v++ {
			vs := kversion.Stable()
			vs.SetMaxKeyVersion(kmsg.DescribeLogDirs.Int16(), v)
			vcl := newClient(t, b, kgo.MaxVersions(vs))
			req := kmsg.NewPtrDescribeLogDirsRequest()
			req.Topics = []kmsg.DescribeLogDirsRequestTopic{}
			// To the broker itself: the client would merge a sharded request's dirs.
			kr, err := vcl.Broker(int(b.cfg.NodeID)).Request(ctx, req)
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			resp := kr.(*kmsg.DescribeLogDirsResponse)
			if resp.Version != v || len(resp.Dirs) != 3 || resp.Dirs[0].Dir != dirs[0] || len(resp.Dirs[0].Topics) != 0 {
				t.Fatalf("v%d: got version %d, dirs %+v; want 3 dirs, the first %s, no topics", v, resp.Version, resp.Dirs, dirs[0])
			}
			if space := resp.Dirs[0].TotalBytes > 0; space != (v >= 4) {
				t.Errorf("v%d: TotalBytes %d", v, resp.Dirs[0].TotalBytes)
			}
		}
	})
}

// TestDescribeLogDirsSpace checks TotalBytes and UsableBytes against a file system of known
// size: an 8 MiB tmpfs.
func TestDescribeLogDirsSpace(t *testing.T) {
	mnt := mountTmpfs(t, 8<<20)
	b := startBroker(t, "netpoll", filepath.Join(mnt, "data"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dirs, err := kadm.NewClient(newClient(t, b)).DescribeBrokerLogDirs(ctx, b.cfg.NodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := dirs[filepath.Join(mnt, "data")]
	if d.Err != nil || d.TotalBytes != 8<<20 || d.UsableBytes <= 0 || d.UsableBytes >= d.TotalBytes {
		t.Fatalf("log dir on an 8 MiB tmpfs: err %v, total %d, usable %d; want total %d and usable below it",
			d.Err, d.TotalBytes, d.UsableBytes, 8<<20)
	}
}
