package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// TestGroupConfigs: a group's consumer.heartbeat.interval.ms set with IncrementalAlterConfigs
// reaches its KIP-848 members in their heartbeat responses while other groups keep the
// broker's; DescribeConfigs shows the value as GROUP_CONFIG and the rest at their defaults;
// values Kafka refuses are refused with INVALID_CONFIG and its messages, and nothing is kept
// of them.
func TestGroupConfigs(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b := startBroker(t, backend, t.TempDir())
		cl := newClient(t, b)
		adm := kadm.NewClient(cl)
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, "gc"); err != nil {
			t.Fatal(err)
		}
		alter := func(group string, kv ...string) (*kerr.Error, string) {
			t.Helper()
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			res := kmsg.NewIncrementalAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
			for i := 0; i+1 < len(kv); i += 2 {
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
				res.Configs = append(res.Configs, c)
			}
			req.Resources = append(req.Resources, res)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			code, _ := kerr.ErrorForCode(resp.Resources[0].ErrorCode).(*kerr.Error)
			return code, deref(resp.Resources[0].ErrorMessage)
		}
		for _, c := range []struct {
			kv   []string
			code *kerr.Error
			msg  string
		}{
			{[]string{"consumer.heartbeat.interval.ms", "6000"}, nil, ""},
			{[]string{"consumer.heartbeat.interval.ms", "50000"}, kerr.InvalidConfig, "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"},
			{[]string{"consumer.session.timeout.ms", "1000"}, kerr.InvalidConfig, "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"},
			{[]string{"consumer.session.timeout.ms", "soon"}, kerr.InvalidConfig, "Invalid value soon for configuration consumer.session.timeout.ms: Not a number of type INT"},
			{[]string{"share.isolation.level", "dirty"}, kerr.InvalidConfig, "Invalid value dirty for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"},
			{[]string{"share.auto.offset.reset", "by_duration:PT1H30M"}, nil, ""},
			{[]string{"share.auto.offset.reset", "by_duration:yesterday"}, kerr.InvalidConfig, "Invalid value by_duration:yesterday for configuration share.auto.offset.reset: [latest, earliest, by_duration:PnDTnHnMn.nS]"},
			{[]string{"group.protocol", "consumer"}, kerr.InvalidConfig, "Unknown group config name: group.protocol"},
		} {
			if code, msg := alter("tuned", c.kv...); code != c.code || (c.code != nil && msg != c.msg) {
				t.Fatalf("alter %v: %v %q; want %v %q", c.kv, code, msg, c.code, c.msg)
			}
		}
		if code, msg := alter("", "consumer.heartbeat.interval.ms", "6000"); code != kerr.InvalidRequest {
			t.Fatalf("alter the group named \"\": %v %q; want INVALID_REQUEST", code, msg)
		}

		dreq := kmsg.NewPtrDescribeConfigsRequest()
		dres := kmsg.NewDescribeConfigsRequestResource()
		dres.ResourceType, dres.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "tuned"
		dreq.Resources = append(dreq.Resources, dres)
		dresp, err := dreq.RequestWith(ctx, cl)
		if err != nil || len(dresp.Resources) != 1 || dresp.Resources[0].ErrorCode != 0 {
			t.Fatalf("DescribeConfigs of group tuned: %v %+v", err, dresp)
		}
		got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range dresp.Resources[0].Configs {
			got[c.Name] = c
		}
		if len(got) != 10 {
			t.Fatalf("DescribeConfigs of a group lists %d keys; want Kafka's 10", len(got))
		}
		for key, want := range map[string]struct {
			value  string
			source kmsg.ConfigSource
		}{
			"consumer.heartbeat.interval.ms": {"6000", kmsg.ConfigSourceGroupConfig},
			"share.auto.offset.reset":        {"by_duration:PT1H30M", kmsg.ConfigSourceGroupConfig},
			"consumer.session.timeout.ms":    {"45000", kmsg.ConfigSourceDefaultConfig},
			"share.isolation.level":          {"read_uncommitted", kmsg.ConfigSourceDefaultConfig},
		} {
			if c := got[key]; deref(c.Value) != want.value || c.Source != want.source {
				t.Errorf("%s = %q from %v; want %q from %v", key, deref(c.Value), c.Source, want.value, want.source)
			}
		}

		heartbeat := func(group string) int32 {
			t.Helper()
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis, req.SubscribedTopicNames = group, "member-"+group, 0, 5000, []string{"gc"}
			var ms int32
			// The group's __consumer_offsets partition may still be loading.
			testutil.WaitFor(t, 10*time.Second, func() error {
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					t.Fatalf("ConsumerGroupHeartbeat of %s: %v", group, err)
				}
				if resp.ErrorCode != 0 {
					return fmt.Errorf("ConsumerGroupHeartbeat of %s: %w", group, kerr.ErrorForCode(resp.ErrorCode))
				}
				ms = resp.HeartbeatIntervalMillis
				return nil
			})
			return ms
		}
		if ms := heartbeat("tuned"); ms != 6000 {
			t.Errorf("a member of the group with consumer.heartbeat.interval.ms=6000 is told %d ms", ms)
		}
		if ms := heartbeat("plain"); ms != 5000 {
			t.Errorf("a member of a group without configs is told %d ms; want the broker's 5000", ms)
		}
	})
}
