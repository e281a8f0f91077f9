package meta

import (
	"errors"
	"maps"
	"testing"
)

func clientMetricsRecord(name, key string, val *string) Record {
	return Record{Type: TypeClientMetricsConfig, ConfigResource: name, ConfigKey: key, ConfigValue: val}
}

// TestApplyClientMetricsConfig: records set and remove subscription keys, a subscription
// without keys disappears, every record moves the epoch on, earlier images stay as they were,
// and a record without a subscription name is refused.
func TestApplyClientMetricsConfig(t *testing.T) {
	im0 := EmptyImage("cid")
	im1, err := im0.Apply(0, []Record{
		clientMetricsRecord("producers", "metrics", strp("org.apache.kafka.producer.")),
		clientMetricsRecord("producers", "interval.ms", strp("1000")),
		clientMetricsRecord("all", "metrics", strp("*")),
	})
	if err != nil {
		t.Fatal(err)
	}
	want1 := map[string]map[string]string{
		"producers": {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"},
		"all":       {"metrics": "*"},
	}
	if !maps.EqualFunc(im1.ClientMetrics, want1, maps.Equal) || im1.ClientMetricsEpoch != 3 {
		t.Fatalf("subscriptions %v at epoch %d, want %v at 3", im1.ClientMetrics, im1.ClientMetricsEpoch, want1)
	}
	im2, err := im1.Apply(1, []Record{clientMetricsRecord("all", "metrics", nil), clientMetricsRecord("producers", "interval.ms", nil)})
	if err != nil {
		t.Fatal(err)
	}
	want2 := map[string]map[string]string{"producers": {"metrics": "org.apache.kafka.producer."}}
	if !maps.EqualFunc(im2.ClientMetrics, want2, maps.Equal) || im2.ClientMetricsEpoch != 5 {
		t.Fatalf("after deletes: %v at epoch %d, want %v at 5", im2.ClientMetrics, im2.ClientMetricsEpoch, want2)
	}
	if !maps.EqualFunc(im1.ClientMetrics, want1, maps.Equal) || im0.ClientMetrics != nil {
		t.Fatalf("Apply modified earlier images: %v, %v", im0.ClientMetrics, im1.ClientMetrics)
	}
	if _, err := im2.Apply(2, []Record{clientMetricsRecord("", "metrics", strp("*"))}); !errors.Is(err, errNoSubscriptionName) {
		t.Fatalf("record without a name: %v, want %v", err, errNoSubscriptionName)
	}
}

// TestClientMetricsSurvivesSnapshotAndReplay reopens a sole voter whose subscriptions are
// partly in a snapshot and partly in the log after it.
func TestClientMetricsSurvivesSnapshotAndReplay(t *testing.T) {
	want := map[string]map[string]string{"a": {"metrics": "*", "match": "client_id=x.*"}, "c": {"metrics": "org.apache.kafka.consumer."}}
	checkSnapshotReplay(t, [][]Record{
		{clientMetricsRecord("a", "metrics", strp("*"))},
		{clientMetricsRecord("b", "interval.ms", strp("100"))},
		{clientMetricsRecord("a", "match", strp("client_id=x.*"))},
		{clientMetricsRecord("b", "interval.ms", nil)},
		{clientMetricsRecord("c", "metrics", strp("org.apache.kafka.consumer."))},
	}, func(when string, im *Image) {
		if !maps.EqualFunc(im.ClientMetrics, want, maps.Equal) || im.ClientMetricsEpoch != 5 {
			t.Fatalf("%s: %v at epoch %d, want %v at 5", when, im.ClientMetrics, im.ClientMetricsEpoch, want)
		}
	})
}
