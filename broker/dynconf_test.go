package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterBroker sets (value non-empty) or deletes configs of broker resource id ("" is the
// cluster default) with IncrementalAlterConfigs and returns the resource's error.
func alterBroker(t *testing.T, cl *kgo.Client, id string, kv ...string) error {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, id
	for i := 0; i < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = kv[i], kmsg.IncrementalAlterConfigOpDelete
		if kv[i+1] != "" {
			c.Op, c.Value = kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[i+1])
		}
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Resources[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return errors.Join(err, errors.New(deref(r.ErrorMessage)))
	}
	return nil
}

// describeBroker returns broker resource id's configs by name, with synonyms.
func describeBroker(t *testing.T, cl *kgo.Client, id string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, id
	req.Resources = append(req.Resources, res)
	req.IncludeSynonyms = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("describe broker %q: %v", id, err)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

// synonymSources renders a config's synonyms as SOURCE:name=value, in order.
func synonymSources(c kmsg.DescribeConfigsResponseResourceConfig) string {
	var s []string
	for _, y := range c.ConfigSynonyms {
		s = append(s, y.Source.String()+":"+y.Name+"="+deref(y.Value))
	}
	return strings.Join(s, ", ")
}

// TestDynamicBrokerConfigs alters broker configs per broker and cluster-wide, checks that they
// are described with their sources, take effect live (topic log defaults, message.max.bytes),
// that read-only and bad values are refused as Kafka refuses them, that AlterConfigs replaces
// the whole set, that all of it survives a restart, and that keys Kafka changes live but
// ringbroker does not, or Kafka does not either (log.retention.hours), are refused.
func TestDynamicBrokerConfigs(t *testing.T) {
	for _, io := range backends {
		t.Run(io, func(t *testing.T) {
			dir := t.TempDir()
			b := startBroker(t, io, dir, "log.retention.bytes=5000000")
			cl := newClient(t, b)
			adm := kadm.NewClient(cl)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := adm.CreateTopic(ctx, 1, 1, nil, "dyn"); err != nil {
				t.Fatal(err)
			}
			if err := alterBroker(t, cl, "", "log.retention.ms", "7200000", "log.retention.bytes", "4000000"); err != nil {
				t.Fatalf("set cluster defaults: %v", err)
			}
			if err := alterBroker(t, cl, "1", "log.retention.ms", "3600000", "message.max.bytes", "2000"); err != nil {
				t.Fatalf("set broker 1: %v", err)
			}
			check := func(when string) {
				t.Helper()
				got := describeBroker(t, cl, "1")
				if c := got["log.retention.ms"]; deref(c.Value) != "3600000" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig || c.ReadOnly ||
					synonymSources(c) != "DYNAMIC_BROKER_CONFIG:log.retention.ms=3600000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000, DEFAULT_CONFIG:log.retention.hours=168" {
					t.Errorf("%s: log.retention.ms described as %s (%v) read-only %v, synonyms %s", when, deref(c.Value), c.Source, c.ReadOnly, synonymSources(c))
				}
				if c := got["log.retention.bytes"]; deref(c.Value) != "4000000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig ||
					synonymSources(c) != "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=4000000, STATIC_BROKER_CONFIG:log.retention.bytes=5000000, DEFAULT_CONFIG:log.retention.bytes=-1" {
					t.Errorf("%s: log.retention.bytes described as %s (%v), synonyms %s", when, deref(c.Value), c.Source, synonymSources(c))
				}
				if c := got["node.id"]; !c.ReadOnly || c.Source != kmsg.ConfigSourceDefaultConfig {
					t.Errorf("%s: node.id described as read-only %v, source %v", when, c.ReadOnly, c.Source)
				}
				def := describeBroker(t, cl, "")
				if len(def) != 2 || def["log.retention.ms"].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || deref(def["log.retention.bytes"].Value) != "4000000" {
					t.Errorf("%s: cluster default resource described as %v", when, def)
				}
				rcs, err := adm.DescribeTopicConfigs(ctx, "dyn")
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range rcs[0].Configs {
					if c.Key == "retention.ms" && (c.MaybeValue() != "3600000" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig) {
						t.Errorf("%s: topic retention.ms described as %s (%v)", when, c.MaybeValue(), c.Source)
					}
					if c.Key == "retention.bytes" && (c.MaybeValue() != "4000000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig) {
						t.Errorf("%s: topic retention.bytes described as %s (%v)", when, c.MaybeValue(), c.Source)
					}
				}
				// Live: the open log has the new defaults, and Produce the new batch limit.
				p := b.parts.Load().byName["dyn"][0]
				if lc := p.log().Config(); lc.RetentionMs != 3600000 || lc.RetentionBytes != 4000000 || lc.MaxMessageBytes != 2000 {
					t.Errorf("%s: open log config retention.ms %d retention.bytes %d max message bytes %d", when, lc.RetentionMs, lc.RetentionBytes, lc.MaxMessageBytes)
				}
				err = newClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression())).ProduceSync(ctx, &kgo.Record{Topic: "dyn", Value: make([]byte, 4000)}).FirstErr()
				if !errors.Is(err, kerr.MessageTooLarge) {
					t.Errorf("%s: a 4000-byte record under message.max.bytes=2000: %v", when, err)
				}
			}
			check("after alter")

			for _, tc := range []struct{ kv, want string }{
				{"node.id=2", "Cannot update these configs dynamically: Set(node.id)"},
				{"log.dirs=/tmp/x", "Cannot update these configs dynamically: Set(log.dirs)"},
				{"num.io.threads=4", "Cannot update num.io.threads dynamically"},
				{"log.retention.ms=soon", "Invalid value soon for configuration log.retention.ms"},
				{"leader.replication.throttled.rate=-5", "Invalid value -5 for configuration leader.replication.throttled.rate"},
			} {
				k, v, _ := strings.Cut(tc.kv, "=")
				err := alterBroker(t, cl, "1", k, v)
				if !errors.Is(err, kerr.InvalidRequest) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("set %s: %v, want INVALID_REQUEST %q", tc.kv, err, tc.want)
				}
			}

			// validate_only checks without committing.
			vr, err := adm.ValidateAlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kmsg.StringPtr("1")}}, 1)
			if err != nil || vr[0].Err != nil {
				t.Fatalf("validate only: %v %v", err, vr)
			}
			check("after a validate-only alter")

			// A restart replays the records.
			b.Shutdown(context.Background())
			b = startBroker(t, io, dir, "log.retention.bytes=5000000")
			cl = newClient(t, b)
			adm = kadm.NewClient(cl)
			check("after restart")

			// AlterConfigs replaces the broker's set: log.retention.ms goes, the rate comes.
			resps, err := adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "message.max.bytes", Value: kmsg.StringPtr("2000")},
				{Name: "leader.replication.throttled.rate", Value: kmsg.StringPtr("1000")}}, 1)
			if err == nil {
				err = resps[0].Err
			}
			if err != nil {
				t.Fatalf("AlterConfigs: %v", err)
			}
			got := describeBroker(t, cl, "1")
			if c := got["log.retention.ms"]; deref(c.Value) != "7200000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
				t.Errorf("after AlterConfigs: log.retention.ms described as %s (%v)", deref(c.Value), c.Source)
			}
			if c := got["leader.replication.throttled.rate"]; deref(c.Value) != "1000" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
				t.Errorf("after AlterConfigs: leader.replication.throttled.rate described as %s (%v)", deref(c.Value), c.Source)
			}
			if !b.quotas.leader.bounded() || b.quotas.follower.bounded() {
				t.Errorf("after AlterConfigs: leader throttle bounded %v, follower %v; want true, false", b.quotas.leader.bounded(), b.quotas.follower.bounded())
			}
			// As in Kafka, log.retention.hours is read-only; a key Kafka changes live and ringbroker
			// does not act on is refused as such.
			if err := alterBroker(t, cl, "1", "log.retention.hours", "3"); err == nil || !strings.Contains(err.Error(), "Cannot update these configs dynamically: Set(log.retention.hours)") {
				t.Errorf("set log.retention.hours: %v; want Kafka's refusal", err)
			}
			if err := alterBroker(t, cl, "", "log.cleaner.threads", "2"); err == nil || !strings.Contains(err.Error(), "ringbroker does not support changing log.cleaner.threads") {
				t.Errorf("set log.cleaner.threads: %v; want ringbroker's refusal", err)
			}
			if err := alterBroker(t, cl, "1", "max.connections", "20"); err == nil || !strings.Contains(err.Error(), "ringbroker does not support changing max.connections dynamically") {
				t.Errorf("set max.connections: %v; want ringbroker's refusal", err)
			}
			if err := alterBroker(t, cl, "1", "leader.replication.throttled.rate", "", "message.max.bytes", ""); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if b.quotas.leader.bounded() || b.live().MessageMaxBytes != 1048588 {
				t.Errorf("after delete: leader throttle bounded %v, message.max.bytes %d", b.quotas.leader.bounded(), b.live().MessageMaxBytes)
			}
		})
	}
}
