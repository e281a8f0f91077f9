package meta

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// oneFileFixture is a one-file metadata log written by ringbroker before a single node became a
// one-voter quorum (commit 5156026): a single node that registered, created "orders" with 3
// partitions and retention.ms, created and deleted "gone", added a fourth partition to
// "orders", set its cleanup.policy to compact and handed out a producer id block. It sits in
// the whole data dir that run left, which the broker's upgrade test opens.
var oneFileFixture = filepath.Join("..", "testdata", "v0-single-node", "__cluster_metadata-0", oneFileLogName)

// fixtureDir copies the one-file log into a new metadata dir, followed by extra bytes.
func fixtureDir(t *testing.T, extra []byte) string {
	t.Helper()
	data, err := os.ReadFile(oneFileFixture)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, oneFileLogName), append(data, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func openSoleVoter(t *testing.T, dir string) (*RaftStore, error) {
	t.Helper()
	s, err := OpenRaft(RaftConfig{NodeID: 1, Dir: dir, ClusterID: "cid", Voters: map[int32]string{1: ""},
		Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

// checkFixtureImage checks that im holds what the fixture's log says.
func checkFixtureImage(t *testing.T, im *Image) {
	t.Helper()
	orders := im.Topics["orders"]
	if orders == nil || len(orders.Partitions) != 4 || orders.Configs["retention.ms"] != "3600000" || orders.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("topic orders after the upgrade: %+v", orders)
	}
	if im.Topics["gone"] != nil {
		t.Fatalf("topics after the upgrade: %v, want the deleted topic gone", im.SortedTopicNames())
	}
	if br, ok := im.Brokers[1]; !ok || br.Host != "127.0.0.1" || im.NextProducerID != 1000 {
		t.Fatalf("brokers %v, next producer id %d after the upgrade", im.Brokers, im.NextProducerID)
	}
}

// TestUpgradeOneFileLog opens a dir holding a one-file log as a sole voter: the records become
// the Raft log, the old file goes, and the upgraded log reopens and takes new commits.
func TestUpgradeOneFileLog(t *testing.T) {
	dir := fixtureDir(t, nil)
	s, err := openSoleVoter(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	checkFixtureImage(t, s.Image())
	if _, err := os.Stat(filepath.Join(dir, oneFileLogName)); !os.IsNotExist(err) {
		t.Fatalf("the one-file log is still there after the upgrade: %v", err)
	}
	if _, err := s.Commit(topicRecords("after", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = openSoleVoter(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Image().Topics["after"] == nil {
		t.Fatal("a commit after the upgrade did not survive a restart")
	}
	checkFixtureImage(t, s.Image())
}

// TestUpgradeOneFileLogTornTailAndUnfinished upgrades a log whose last append was torn by a
// crash, in a dir where an earlier upgrade stopped half way: the intact entries are upgraded
// and what the unfinished upgrade left is replaced.
func TestUpgradeOneFileLogTornTailAndUnfinished(t *testing.T) {
	dir := fixtureDir(t, []byte{0, 0, 0, 50, 1, 2, 3, 4, '[', '{'})
	if err := os.WriteFile(filepath.Join(dir, "wal-0000000000000001.log"), []byte("half an upgrade"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := openSoleVoter(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	checkFixtureImage(t, s.Image())
}

// TestUpgradeOneFileLogRefusedInAQuorum refuses to upgrade a single node's log into a quorum of
// several voters, whose other members never saw it, and says what to do.
func TestUpgradeOneFileLogRefusedInAQuorum(t *testing.T) {
	dir := fixtureDir(t, nil)
	addrs := freeAddrs(t, 3)
	_, err := OpenRaft(RaftConfig{NodeID: 1, Dir: dir, ClusterID: "cid", Listen: addrs[0],
		Voters: map[int32]string{1: addrs[0], 2: addrs[1], 3: addrs[2]}, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "without controller.quorum.voters") {
		t.Fatalf("opening a one-file log as one of 3 voters: err %v, want a refusal naming %s and the way out", err, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, oneFileLogName)); err != nil {
		t.Fatalf("the refused upgrade touched the one-file log: %v", err)
	}
}
