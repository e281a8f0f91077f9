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
// third dir and checks what DescribeLogDirs reports: the four partitions spread over the dirs by
// Kafka's rule (each new one to the dir with the fewest), each described in the dir holding its
// directory with its size equal to its segment files on disk, the removed dir
// KAFKA_STORAGE_ERROR, and requested topics and partitions filtering the answer.
func TestDescribeLogDirs(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		root := t.TempDir()
		dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "gone")}
		b := startBroker(t, io, dirs[0], "log.dirs="+strings.Join(dirs, ","))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cl := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		adm := kadm.NewClient(cl)
		for _, tc := range []struct {
			topic string
			n     int32
		}{{"ld", 3}, {"other", 1}} {
			if _, err := adm.CreateTopic(ctx, tc.n, 1, nil, tc.topic); err != nil {
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
		// Where each partition's directory is, and the bytes of its segments, before the third
		// dir goes.
		wantParts := map[string][]int32{"ld": {0, 1, 2}, "other": {0}}
		where, sizes, perDir := map[string]string{}, map[string]int64{}, map[string]int{}
		for topic, idxs := range wantParts {
			for _, i := range idxs {
				name := fmt.Sprintf("%s-%d", topic, i)
				for _, d := range dirs {
					if _, err := os.Stat(partitionDir(d, topic, i)); err == nil {
						if where[name] != "" {
							t.Fatalf("%s has a directory in %s and in %s", name, where[name], d)
						}
						where[name] = d
						sizes[name] = brokertest.SegmentBytes(t, partitionDir(d, topic, i))
						perDir[d]++
					}
				}
				if where[name] == "" {
					t.Fatalf("%s has no directory in any log dir", name)
				}
			}
		}
		if perDir[dirs[0]] != 2 || perDir[dirs[1]] != 1 || perDir[dirs[2]] != 1 {
			t.Fatalf("partitions per dir %v; want 2 in the first (ties go to the first) and 1 in each other", perDir)
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
		for _, d := range dirs[:2] {
			ld := all[d]
			if ld.Err != nil || ld.TotalBytes <= 0 || ld.UsableBytes < 0 || ld.UsableBytes > ld.TotalBytes {
				t.Fatalf("dir %s: err %v, total %d, usable %d", d, ld.Err, ld.TotalBytes, ld.UsableBytes)
			}
			described := 0
			for topic, ps := range ld.Topics {
				for i, p := range ps {
					name := fmt.Sprintf("%s-%d", topic, i)
					described++
					if where[name] != d {
						t.Errorf("%s described in %s; its directory is in %s", name, d, where[name])
					}
					if p.Size != sizes[name] || p.OffsetLag != 0 || p.IsFuture {
						t.Errorf("%s: size %d, lag %d, future %v; want size %d (the .log files), lag 0, not future",
							name, p.Size, p.OffsetLag, p.IsFuture, sizes[name])
					}
					if empty := name == "ld-2"; (p.Size == 0) != empty {
						t.Errorf("%s: size %d", name, p.Size)
					}
				}
			}
			if described != perDir[d] {
				t.Errorf("dir %s: %d partitions described; %d have their directory there", d, described, perDir[d])
			}
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
		got := filtered[where["ld-1"]].Topics
		if _, ok := got["ld"][1]; len(got) != 1 || len(got["ld"]) != 1 || !ok {
			t.Errorf("asked for ld-1, ld-7 and missing-0: got %+v in %s, want ld-1 only", got, where["ld-1"])
		}
		for _, d := range dirs {
			if d != where["ld-1"] && len(filtered[d].Topics) != 0 {
				t.Errorf("asked for ld-1, ld-7 and missing-0: got %+v in %s, which does not hold ld-1", filtered[d].Topics, d)
			}
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
