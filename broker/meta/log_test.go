package meta

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

func strp(s string) *string { return &s }

func TestLogCommitReplayAndTornTail(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir, "cid", slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	id := NewUUID()
	if _, err := l.Commit([]Record{
		{Type: TypeTopic, TopicName: "a", TopicID: id},
		{Type: TypePartition, TopicID: id, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		{Type: TypePartition, TopicID: id, Partition: 1, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Commit([]Record{{Type: TypeConfig, TopicID: id, ConfigKey: "retention.ms", ConfigValue: strp("1000")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Commit([]Record{{Type: TypeTopic, TopicName: "a", TopicID: NewUUID()}}); err == nil {
		t.Fatal("duplicate topic committed")
	}
	l.Close()

	// A torn entry at the tail is dropped on reopen; the committed ones stay.
	path := filepath.Join(dir, LogFileName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 0, 50, 1, 2, 3, 4, '[', '{'})
	f.Close()

	l, err = OpenLog(dir, "cid", slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	im := l.Image()
	tp := im.Topics["a"]
	if tp == nil || len(tp.Partitions) != 2 || tp.Configs["retention.ms"] != "1000" || im.Offset != 1 {
		t.Fatalf("replayed image wrong: %+v offset %d", tp, im.Offset)
	}
	if _, err := l.Commit([]Record{{Type: TypeRemoveTopic, TopicID: id}}); err != nil {
		t.Fatal(err)
	}
	if len(l.Image().Topics) != 0 || len(tp.Partitions) != 2 {
		t.Fatal("remove topic did not apply, or mutated the old image")
	}
}
