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
	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/broker/meta"
	"ringbroker/internal/testutil"
)

// logDirEntries lists the names in dir that start with prefix.
func logDirEntries(t *testing.T, dir, prefix string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestDeleteTopicRemovesLogsInBackground deletes a topic with data: by the time DeleteTopics
// answers, no partition directory is left under its name, the renamed directories are removed
// after, and the topic can be created again at once, empty.
func TestDeleteTopicRemovesLogsInBackground(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, "netpoll", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.DefaultProduceTopic("gone"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "gone"); err != nil {
		t.Fatal(err)
	}
	produceValues(ctx, t, cl, 0, 300)
	if got := logDirEntries(t, dir, "gone-"); len(got) != 3 {
		t.Fatalf("log dir holds %v before the delete; want three partition dirs", got)
	}
	dr, err := adm.DeleteTopics(ctx, "gone")
	if err != nil || dr["gone"].Err != nil {
		t.Fatalf("delete: %v %+v", err, dr)
	}
	for _, name := range logDirEntries(t, dir, "gone-") {
		if !strings.HasSuffix(name, deleteDirSuffix) || movedDirPartition(name, deleteDirSuffix) == "" {
			t.Errorf("%s left under a partition's name after DeleteTopics answered", name)
		}
	}
	testutil.WaitFor(t, 10*time.Second, func() error {
		if left := logDirEntries(t, dir, "gone-"); len(left) > 0 {
			return fmt.Errorf("deleted partitions' directories not removed: %v", left)
		}
		return nil
	})
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "gone"); err != nil {
		t.Fatal(err)
	}
	offs, err := kadm.NewClient(newClient(t, b)).ListEndOffsets(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 0 {
			t.Errorf("recreated topic partition %d: end offset %d, err %v; want 0", o.Partition, o.Offset, o.Err)
		}
	})
}

// TestDeleteAndRecreateInOneImage has a follower apply a topic's deletion and its creation
// again in one image change: the old logs must leave the directories before the new logs open
// them, or closing and removing the old ones would take the new ones' files with them.
func TestDeleteAndRecreateInOneImage(t *testing.T) {
	t.Parallel()
	// The follower's heartbeats wait while its partitions are held below: a session long
	// enough that it is not fenced meanwhile, however slow the machine.
	bs, ctx, adm := replicatedCluster(t, "again", 2, nil, func(c *Config) { c.BrokerSessionTimeout = 30 * time.Second })
	cl := newClient(t, bs[0], clusterSeeds(bs), kgo.DefaultProduceTopic("again"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceValues(ctx, t, cl, 0, 100)
	oldID := bs[0].meta.Image().Topics["again"].ID
	var f *Broker
	for _, b := range bs {
		if b.cfg.NodeID != b.meta.Leader() {
			f = b
			break
		}
	}
	f.partsMu.Lock()
	held := true
	defer func() {
		if held {
			f.partsMu.Unlock()
		}
	}()
	dr, err := adm.DeleteTopics(ctx, "again")
	if err != nil || dr["again"].Err != nil {
		t.Fatalf("delete: %v %+v", err, dr)
	}
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, "again"); err != nil {
		t.Fatal(err)
	}
	var newID meta.UUID
	testutil.WaitFor(t, 10*time.Second, func() error {
		tp := f.meta.Image().Topics["again"]
		if tp == nil || tp.ID == oldID {
			return fmt.Errorf("node %d has not applied the new topic yet", f.cfg.NodeID)
		}
		newID = tp.ID
		return nil
	})
	f.partsMu.Unlock()
	held = false
	testutil.WaitFor(t, 10*time.Second, func() error {
		ps := f.parts.Load().byID[newID]
		if len(ps) != 2 || ps[0] == nil || ps[1] == nil {
			return fmt.Errorf("node %d has not opened the new topic's logs", f.cfg.NodeID)
		}
		return nil
	})
	logDir := f.cfg.LogDirs[0]
	for i := range int32(2) {
		if id, ok := readPartitionTopicID(partitionDir(logDir, "again", i)); !ok || id != newID {
			t.Fatalf("node %d: again-%d holds topic id %v (found %v); want the new topic's %v", f.cfg.NodeID, i, id, ok, newID)
		}
	}
	cl2 := newClient(t, bs[0], clusterSeeds(bs), kgo.DefaultProduceTopic("again"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceValues(ctx, t, cl2, 0, 10)
	waitReplicasEqual(t, bs, "again", 3)
	for i := range int32(2) {
		p := f.parts.Load().lookup("again", i)
		if end := p.log().LogEndOffset(); end != 5 {
			t.Errorf("node %d: again-%d ends at %d; want 5, the new topic's records only", f.cfg.NodeID, i, end)
		}
		if _, err := os.Stat(filepath.Join(p.log().Dir(), "partition.metadata")); err != nil {
			t.Errorf("node %d: the new log's directory lost its files: %v", f.cfg.NodeID, err)
		}
	}
	testutil.WaitFor(t, 10*time.Second, func() error {
		for _, name := range logDirEntries(t, logDir, "again-") {
			if strings.HasSuffix(name, deleteDirSuffix) {
				return fmt.Errorf("node %d: %s not removed", f.cfg.NodeID, name)
			}
		}
		return nil
	})
}

// TestDeletedLogsRemovedAtStart starts a broker on a log dir holding a deleted partition's
// directory that a crash left before its removal: the broker removes it in the background.
func TestDeletedLogsRemovedAtStart(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, movedDirName(partitionDir(dir, "old", 0), deleteDirSuffix))
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "00000000000000000000.log"), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	startBroker(t, "netpoll", dir)
	testutil.WaitFor(t, 10*time.Second, func() error {
		if _, err := os.Stat(left); !os.IsNotExist(err) {
			return fmt.Errorf("%s still there after start: %v", left, err)
		}
		return nil
	})
}

// TestStalePartitionDirSetAside starts a broker on a log dir that holds a partition directory
// of an earlier topic of the same name (another topic id, as one deleted while the broker was
// down would leave): creating the topic sets the old directory aside and removes it, and the
// new partition starts empty.
func TestStalePartitionDirSetAside(t *testing.T) {
	dir := t.TempDir()
	stale := partitionDir(dir, "reborn", 0)
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	staleMeta := "version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA\n"
	if err := os.WriteFile(filepath.Join(stale, "partition.metadata"), []byte(staleMeta), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "stale-data.log"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, "netpoll", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.DefaultProduceTopic("reborn"))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "reborn"); err != nil {
		t.Fatal(err)
	}
	produceValues(ctx, t, cl, 0, 3)
	offs, err := adm.ListEndOffsets(ctx, "reborn")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("reborn", 0); o.Err != nil || o.Offset != 3 {
		t.Fatalf("end offset %d, err %v; want 3, a new log", o.Offset, o.Err)
	}
	if _, err := os.Stat(filepath.Join(stale, "stale-data.log")); !os.IsNotExist(err) {
		t.Errorf("the earlier topic's file is still in the partition directory: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(stale, "partition.metadata")); err != nil || string(data) == staleMeta {
		t.Errorf("partition.metadata %q, err %v; want the new topic's id", data, err)
	}
	testutil.WaitFor(t, 10*time.Second, func() error {
		if left := logDirEntries(t, dir, "reborn-0."); len(left) > 0 {
			return fmt.Errorf("the set-aside directory is not removed: %v", left)
		}
		return nil
	})
}
