package meta

import (
	"errors"
	"maps"
	"testing"
)

// TestGroupConfigs: GroupConfig records set and remove a group's keys, a group left without
// keys disappears, a record without a group id is refused, and the configs come back after
// a restart from a snapshot and the log after it.
func TestGroupConfigs(t *testing.T) {
	rec := func(group, key string, val *string) []Record {
		return []Record{{Type: TypeGroupConfig, ConfigResource: group, ConfigKey: key, ConfigValue: val}}
	}
	if _, err := EmptyImage("cid").Apply(0, rec("", "consumer.session.timeout.ms", strp("1"))); !errors.Is(err, errNoGroupName) {
		t.Fatalf("record without a group id: %v; want %v", err, errNoGroupName)
	}
	want := map[string]map[string]string{"g1": {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "7000"}}
	checkSnapshotReplay(t, [][]Record{
		rec("g1", "consumer.session.timeout.ms", strp("50000")),
		rec("g2", "consumer.heartbeat.interval.ms", strp("6000")),
		rec("g1", "consumer.heartbeat.interval.ms", strp("7000")),
		rec("g2", "consumer.heartbeat.interval.ms", nil),
	}, func(when string, im *Image) {
		if !maps.EqualFunc(im.GroupConfigs, want, maps.Equal) {
			t.Fatalf("%s: group configs %v; want %v", when, im.GroupConfigs, want)
		}
	})
}
