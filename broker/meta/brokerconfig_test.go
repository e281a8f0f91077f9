package meta

import (
	"maps"
	"testing"
)

func brokerConfigRecord(resource, key string, val *string) Record {
	return Record{Type: TypeBrokerConfig, ConfigResource: resource, ConfigKey: key, ConfigValue: val}
}

func strp(s string) *string { return &s }

func TestApplyBrokerConfig(t *testing.T) {
	im0 := EmptyImage("cid")
	im1, err := im0.Apply(0, []Record{
		brokerConfigRecord("", "log.retention.ms", strp("1000")),
		brokerConfigRecord("1", "log.retention.ms", strp("2000")),
		brokerConfigRecord("1", "message.max.bytes", strp("4096")),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{"": {"log.retention.ms": "1000"}, "1": {"log.retention.ms": "2000", "message.max.bytes": "4096"}}
	if !maps.EqualFunc(im1.BrokerConfigs, want, maps.Equal) {
		t.Fatalf("broker configs %v, want %v", im1.BrokerConfigs, want)
	}
	im2, err := im1.Apply(1, []Record{brokerConfigRecord("1", "log.retention.ms", nil), brokerConfigRecord("", "log.retention.ms", nil)})
	if err != nil {
		t.Fatal(err)
	}
	want2 := map[string]map[string]string{"1": {"message.max.bytes": "4096"}}
	if !maps.EqualFunc(im2.BrokerConfigs, want2, maps.Equal) {
		t.Fatalf("after deletes: broker configs %v, want %v", im2.BrokerConfigs, want2)
	}
	// A published image never changes.
	if !maps.EqualFunc(im1.BrokerConfigs, want, maps.Equal) || im0.BrokerConfigs != nil {
		t.Fatalf("Apply modified earlier images: %v, %v", im0.BrokerConfigs, im1.BrokerConfigs)
	}
}

// TestBrokerConfigSurvivesSnapshotAndReplay reopens a sole voter whose dynamic broker configs
// are partly in a snapshot and partly in the log after it.
func TestBrokerConfigSurvivesSnapshotAndReplay(t *testing.T) {
	want := map[string]map[string]string{"": {"log.segment.bytes": "2097152"}, "2": {"leader.replication.throttled.rate": "200"}}
	checkSnapshotReplay(t, [][]Record{
		{brokerConfigRecord("", "log.segment.bytes", strp("1048576"))},
		{brokerConfigRecord("2", "follower.replication.throttled.rate", strp("100"))},
		{brokerConfigRecord("", "log.segment.bytes", strp("2097152"))},
		{brokerConfigRecord("2", "leader.replication.throttled.rate", strp("200"))},
		{brokerConfigRecord("2", "follower.replication.throttled.rate", nil)},
	}, func(when string, im *Image) {
		if !maps.EqualFunc(im.BrokerConfigs, want, maps.Equal) {
			t.Fatalf("%s: %v, want %v", when, im.BrokerConfigs, want)
		}
	})
}
