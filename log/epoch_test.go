package log

import (
	"fmt"
	"testing"
)

func TestEpochCacheAssign(t *testing.T) {
	var c epochCache
	steps := []struct {
		epoch    int32
		start    int64
		wChanged bool
		wEntries string
	}{
		{-1, 0, false, "[]"},
		{0, 0, true, "[{0 0}]"},
		{0, 5, false, "[{0 0}]"},
		{2, 10, true, "[{0 0} {2 10}]"},
		{3, 10, true, "[{0 0} {3 10}]"},  // same start: the newer epoch replaces it
		{1, 20, true, "[{0 0} {1 20}]"},  // an older epoch drops the conflicting newer ones
		{4, 15, true, "[{0 0} {4 15}]"},  // an earlier start drops the later entries
		{4, 30, false, "[{0 0} {4 15}]"}, // already covered
		{5, 40, true, "[{0 0} {4 15} {5 40}]"},
	}
	for i, s := range steps {
		if got := c.assign(s.epoch, s.start); got != s.wChanged || fmt.Sprint(c.entries) != s.wEntries {
			t.Fatalf("step %d: assign(%d, %d) = %v, %v; want %v, %s", i, s.epoch, s.start, got, c.entries, s.wChanged, s.wEntries)
		}
	}
	if c.assignIfNewer(4, 50) || !c.assignIfNewer(6, 50) {
		t.Fatal("assignIfNewer must only add newer epochs")
	}
	if !c.truncateFromEnd(45) || fmt.Sprint(c.entries) != "[{0 0} {4 15} {5 40}]" {
		t.Fatalf("truncateFromEnd(45): %v", c.entries)
	}
	parsed, err := parseEpochCheckpoint(c.marshal())
	if err != nil || fmt.Sprint(parsed.entries) != fmt.Sprint(c.entries) {
		t.Fatalf("checkpoint round trip: %v, %v", parsed.entries, err)
	}
	for _, bad := range []string{"", "0\n1\n", "0\n1\n1\n", "0\n2\n1 5\n1 6\n", "0\n2\n2 5\n3 4\n", "0\n1\n-1 0\n", "0\nx\n"} {
		if _, err := parseEpochCheckpoint([]byte(bad)); err == nil {
			t.Errorf("parseEpochCheckpoint(%q) succeeded", bad)
		}
	}
}
