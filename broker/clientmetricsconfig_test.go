package broker

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestParseSubscription: a subscription's configs are validated as Kafka's
// ClientMetricsConfigs.validate, with its error codes and messages, and parsed with Kafka's
// defaults, its match patterns matching whole attributes as Java's Matcher.matches.
func TestParseSubscription(t *testing.T) {
	for _, c := range []struct {
		name     string
		cfg      map[string]string
		wantCode *kerr.Error
		wantMsg  string
	}{
		{"", nil, kerr.InvalidRequest, "Subscription name can't be empty"},
		{"s", map[string]string{"metrics": "*", "color": "red"}, kerr.InvalidRequest, "Unknown client metrics configuration: color"},
		{"s", map[string]string{"interval.ms": "abc"}, kerr.InvalidConfig, "Invalid value abc for configuration interval.ms: Not a number of type INT"},
		{"s", map[string]string{"interval.ms": "99"}, kerr.InvalidRequest, "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)"},
		{"s", map[string]string{"interval.ms": "3600001"}, kerr.InvalidRequest, "Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 (1 hour)"},
		{"s", map[string]string{"match": "client_id"}, kerr.InvalidConfig, "Illegal client matching pattern: client_id"},
		{"s", map[string]string{"match": "client_id="}, kerr.InvalidConfig, "Illegal client matching pattern: client_id="},
		{"s", map[string]string{"match": "client_id=a=b"}, kerr.InvalidConfig, "Illegal client matching pattern: client_id=a=b"},
		{"s", map[string]string{"match": "client_rack=r1"}, kerr.InvalidConfig, "Illegal client matching pattern: client_rack=r1"},
		{"s", map[string]string{"match": "client_id=(unclosed"}, kerr.InvalidConfig, "Illegal client matching pattern: client_id=(unclosed"},
		{"s", map[string]string{"match": "client_id=a,,client_software_name=b"}, kerr.InvalidConfig, "Illegal client matching pattern: "},
		{"s", map[string]string{"metrics": "", "interval.ms": " 100 ", "match": ""}, nil, ""},
		{"s", nil, nil, ""},
	} {
		_, code, msg := parseSubscription(c.name, c.cfg)
		if code != c.wantCode || msg != c.wantMsg {
			t.Errorf("%q %v: %v %q; want %v %q", c.name, c.cfg, code, msg, c.wantCode, c.wantMsg)
		}
	}

	s, code, msg := parseSubscription("s", map[string]string{"metrics": " org.apache.kafka.producer. , org.apache.kafka.consumer.",
		"match": "client_id = app-.* , client_software_name=apache-kafka-java"})
	if code != nil {
		t.Fatalf("valid subscription refused: %v %s", code, msg)
	}
	if !slices.Equal(s.metrics, []string{"org.apache.kafka.producer.", "org.apache.kafka.consumer."}) || s.interval != cmIntervalDefault {
		t.Fatalf("parsed metrics %q, interval %d", s.metrics, s.interval)
	}
	for _, c := range []struct {
		attrs map[string]string
		want  bool
	}{
		{map[string]string{selClientID: "app-1", selSoftwareName: "apache-kafka-java"}, true},
		{map[string]string{selClientID: "my-app-1", selSoftwareName: "apache-kafka-java"}, false}, // the whole id must match
		{map[string]string{selClientID: "app-1", selSoftwareName: "apache-kafka-java-x"}, false},
		{map[string]string{selClientID: "app-1"}, false},
	} {
		if got := s.matches(c.attrs); got != c.want {
			t.Errorf("match of %v: %v, want %v", c.attrs, got, c.want)
		}
	}
	if all, _, _ := parseSubscription("all", nil); !all.matches(nil) {
		t.Error("a subscription without match patterns does not match every client")
	}
}

// configResourcesClient is a raw client for the config resource tests.
func configResourcesClient(t *testing.T, b *Broker) (*kgo.Client, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return newClient(t, b, kgo.DisableClientMetrics()), ctx
}

// alterClientMetricsReq sends one IncrementalAlterConfigs of subscription name and returns its
// error code and message.
func alterClientMetricsReq(ctx context.Context, t *testing.T, cl *kgo.Client, name string, validateOnly bool, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.Configs = kmsg.ConfigResourceTypeClientMetrics, name, ops
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Resources[0]
	return r.ErrorCode, deref(r.ErrorMessage)
}

func cmOp(op kmsg.IncrementalAlterConfigOp, name, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Op, c.Name = op, name
	if op != opDelete {
		c.Value = kmsg.StringPtr(value)
	}
	return c
}

// describeClientMetricsReq describes subscription name with synonyms.
func describeClientMetricsReq(ctx context.Context, t *testing.T, cl *kgo.Client, name string) kmsg.DescribeConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources[0]
}

// listConfigResources lists the resources of types with ListConfigResources of version v as
// "type:name" strings.
func listConfigResources(ctx context.Context, t *testing.T, b *Broker, v int16, types ...int8) (int16, []string) {
	t.Helper()
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.ListConfigResources.Int16(), v)
	cl := newClient(t, b, kgo.DisableClientMetrics(), kgo.MaxVersions(versions))
	defer cl.Close()
	req := kmsg.NewPtrListConfigResourcesRequest()
	req.ResourceTypes = types
	r, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != v {
		t.Fatalf("ListConfigResources sent at v%d, want v%d", r.Version, v)
	}
	var out []string
	for _, c := range r.ConfigResources {
		out = append(out, kmsg.ConfigResourceType(c.Type).String()+":"+c.Name)
	}
	return r.ErrorCode, out
}

// TestClientMetricsConfigResources: client metrics subscriptions are created, changed and
// deleted with IncrementalAlterConfigs and AlterConfigs, refused with Kafka's errors, described
// with their defaults as Kafka describes them, and listed by ListConfigResources v0 and v1
// with the other resource types v1 lists.
func TestClientMetricsConfigResources(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		b := startBroker(t, backend, t.TempDir())
		cl, ctx := configResourcesClient(t, b)

		for _, c := range []struct {
			name string
			ops  []kmsg.IncrementalAlterConfigsRequestResourceConfig
			code *kerr.Error
			msg  string
		}{
			{"s", []kmsg.IncrementalAlterConfigsRequestResourceConfig{cmOp(opSet, "color", "red")}, kerr.InvalidRequest, "Unknown client metrics configuration: color"},
			{"s", []kmsg.IncrementalAlterConfigsRequestResourceConfig{cmOp(opSet, "interval.ms", "10")}, kerr.InvalidRequest,
				"Invalid value 10 for interval.ms, interval must be between 100 and 3600000 (1 hour)"},
			{"s", []kmsg.IncrementalAlterConfigsRequestResourceConfig{cmOp(opSet, "match", "client_id")}, kerr.InvalidConfig, "Illegal client matching pattern: client_id"},
			{"s", []kmsg.IncrementalAlterConfigsRequestResourceConfig{cmOp(opAppend, "interval.ms", "100")}, kerr.InvalidConfig,
				"Can't APPEND to key interval.ms because its type is not LIST."},
			{"", []kmsg.IncrementalAlterConfigsRequestResourceConfig{cmOp(opSet, "metrics", "*")}, kerr.InvalidRequest, "Subscription name can't be empty"},
		} {
			code, msg := alterClientMetricsReq(ctx, t, cl, c.name, false, c.ops...)
			if code != c.code.Code || msg != c.msg {
				t.Errorf("alter %q %v: error %d %q; want %s %q", c.name, c.ops, code, msg, c.code.Message, c.msg)
			}
		}
		if code, msg := alterClientMetricsReq(ctx, t, cl, "producers", true, cmOp(opSet, "metrics", "*")); code != 0 {
			t.Fatalf("validate-only alter: %d %s", code, msg)
		}
		if _, got := listConfigResources(ctx, t, b, 0); len(got) != 0 {
			t.Fatalf("validate_only created a subscription: %v", got)
		}
		if code, msg := alterClientMetricsReq(ctx, t, cl, "producers", false, cmOp(opSet, "metrics", "org.apache.kafka.producer."),
			cmOp(opSet, "interval.ms", "1000"), cmOp(opSet, "match", "client_id=app-.*")); code != 0 {
			t.Fatalf("create subscription: %d %s", code, msg)
		}
		if code, msg := alterClientMetricsReq(ctx, t, cl, "producers", false, cmOp(opAppend, "metrics", "org.apache.kafka.consumer.")); code != 0 {
			t.Fatalf("APPEND to metrics: %d %s", code, msg)
		}

		type entry struct {
			value    string
			source   kmsg.ConfigSource
			synonyms int
			typ      kmsg.ConfigType
		}
		described := func(name string) map[string]entry {
			t.Helper()
			r := describeClientMetricsReq(ctx, t, cl, name)
			if r.ErrorCode != 0 {
				t.Fatalf("describe %q: error %d %v", name, r.ErrorCode, r.ErrorMessage)
			}
			out := map[string]entry{}
			for _, c := range r.Configs {
				out[c.Name] = entry{deref(c.Value), c.Source, len(c.ConfigSynonyms), c.ConfigType}
			}
			return out
		}
		want := map[string]entry{
			"metrics":     {"org.apache.kafka.producer.,org.apache.kafka.consumer.", kmsg.ConfigSourceClientMetricsConfig, 1, kmsg.ConfigTypeList},
			"interval.ms": {"1000", kmsg.ConfigSourceClientMetricsConfig, 1, kmsg.ConfigTypeInt},
			"match":       {"client_id=app-.*", kmsg.ConfigSourceClientMetricsConfig, 1, kmsg.ConfigTypeList},
		}
		if got := described("producers"); !maps.Equal(got, want) {
			t.Fatalf("described %v\nwant %v", got, want)
		}
		defaults := map[string]entry{
			"metrics":     {"", kmsg.ConfigSourceDefaultConfig, 0, kmsg.ConfigTypeList},
			"interval.ms": {"300000", kmsg.ConfigSourceDefaultConfig, 0, kmsg.ConfigTypeInt},
			"match":       {"", kmsg.ConfigSourceDefaultConfig, 0, kmsg.ConfigTypeList},
		}
		if got := described("nosuch"); !maps.Equal(got, defaults) {
			t.Fatalf("described an unknown subscription as %v\nwant %v", got, defaults)
		}
		if r := describeClientMetricsReq(ctx, t, cl, ""); r.ErrorCode != kerr.InvalidRequest.Code ||
			deref(r.ErrorMessage) != "Client metrics subscription name must not be empty" {
			t.Fatalf("describe of the empty name: %d %v", r.ErrorCode, r.ErrorMessage)
		}

		if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "t1"); err != nil || resp.Err != nil {
			t.Fatalf("create topic t1: %v %v", err, resp.Err)
		}
		if code, got := listConfigResources(ctx, t, b, 0); code != 0 || !slices.Equal(got, []string{"CLIENT_METRICS:producers"}) {
			t.Fatalf("v0 lists %d %v", code, got)
		}
		if code, got := listConfigResources(ctx, t, b, 1, int8(kmsg.ConfigResourceTypeClientMetrics)); code != 0 || !slices.Equal(got, []string{"CLIENT_METRICS:producers"}) {
			t.Fatalf("v1 of client metrics lists %d %v", code, got)
		}
		id := b.brokerResource()
		if code, got := listConfigResources(ctx, t, b, 1); code != 0 ||
			!slices.Equal(got, []string{"CLIENT_METRICS:producers", "BROKER_LOGGER:" + id, "BROKER:" + id, "TOPIC:t1"}) {
			t.Fatalf("v1 of every type lists %d %v", code, got)
		}
		if code, got := listConfigResources(ctx, t, b, 1, int8(kmsg.ConfigResourceTypeGroupConfig)); code != 0 || len(got) != 0 {
			t.Fatalf("v1 of groups lists %d %v", code, got)
		}
		if code, got := listConfigResources(ctx, t, b, 1, int8(kmsg.ConfigResourceTypeTopic), 1); code != kerr.UnsupportedVersion.Code || len(got) != 0 {
			t.Fatalf("v1 with resource type 1 lists %d %v; want UNSUPPORTED_VERSION and nothing", code, got)
		}

		// AlterConfigs replaces the whole subscription.
		legacy := kmsg.NewPtrAlterConfigsRequest()
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeClientMetrics, "producers"
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "interval.ms", kmsg.StringPtr("2000")
		res.Configs = append(res.Configs, c)
		legacy.Resources = append(legacy.Resources, res)
		if resp, err := legacy.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("AlterConfigs: %v %+v", err, resp)
		}
		want = map[string]entry{
			"metrics":     defaults["metrics"],
			"interval.ms": {"2000", kmsg.ConfigSourceClientMetricsConfig, 1, kmsg.ConfigTypeInt},
			"match":       defaults["match"],
		}
		if got := described("producers"); !maps.Equal(got, want) {
			t.Fatalf("after AlterConfigs: %v\nwant %v", got, want)
		}

		// Deleting every key removes the subscription.
		if code, msg := alterClientMetricsReq(ctx, t, cl, "producers", false, cmOp(opDelete, "interval.ms", "")); code != 0 {
			t.Fatalf("delete: %d %s", code, msg)
		}
		if _, got := listConfigResources(ctx, t, b, 0); len(got) != 0 {
			t.Fatalf("deleted subscription still listed: %v", got)
		}
	})
}

// TestClientMetricsAuthorization: as Kafka, client metrics resources and ListConfigResources
// need DESCRIBE_CONFIGS (describe, list) and ALTER_CONFIGS (alter) on the cluster, refused
// with CLUSTER_AUTHORIZATION_FAILED.
func TestClientMetricsAuthorization(t *testing.T) {
	b := authzBroker(t, "netpoll")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := userClient(t, b, "admin", kgo.DisableClientMetrics())
	alice := userClient(t, b, "alice", kgo.DisableClientMetrics())
	if code, msg := alterClientMetricsReq(ctx, t, admin, "s", false, cmOp(opSet, "metrics", "*")); code != 0 {
		t.Fatalf("admin's alter: %d %s", code, msg)
	}
	list := func(cl *kgo.Client) int16 {
		resp, err := kmsg.NewPtrListConfigResourcesRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	check := func(what string, wantDescribe, wantAlter *kerr.Error) {
		t.Helper()
		wantCode(t, what+": ListConfigResources", list(alice), wantDescribe)
		wantCode(t, what+": DescribeConfigs", describeClientMetricsReq(ctx, t, alice, "s").ErrorCode, wantDescribe)
		code, _ := alterClientMetricsReq(ctx, t, alice, "s", false, cmOp(opSet, "interval.ms", "1000"))
		wantCode(t, what+": IncrementalAlterConfigs", code, wantAlter)
	}
	check("without ACLs", kerr.ClusterAuthorizationFailed, kerr.ClusterAuthorizationFailed)
	createACLs(t, ctx, admin, allowACL(kmsg.ACLResourceTypeCluster, "kafka-cluster", "alice", kmsg.ACLOperationDescribeConfigs))
	check("with DESCRIBE_CONFIGS on the cluster", nil, kerr.ClusterAuthorizationFailed)
	createACLs(t, ctx, admin, allowACL(kmsg.ACLResourceTypeCluster, "kafka-cluster", "alice", kmsg.ACLOperationAlterConfigs))
	check("with ALTER_CONFIGS too", nil, nil)
}

// FuzzParseSubscription: any subscription configs are accepted or refused with INVALID_REQUEST
// or INVALID_CONFIG, never a panic; an accepted one has an interval within Kafka's bounds and
// a pattern for each selector it names.
func FuzzParseSubscription(f *testing.F) {
	f.Add("s", "org.apache.kafka.producer.,*", "1000", "client_id=app-.*,client_software_name=apache-kafka-java")
	f.Add("", "", "abc", "client_id")
	f.Add("s", " ", " 100 ", "client_source_port=5[0-9]{3}")
	f.Fuzz(func(t *testing.T, name, metrics, interval, match string) {
		s, code, msg := parseSubscription(name, map[string]string{cmMetrics: metrics, cmInterval: interval, cmMatch: match})
		if code != nil {
			if code != kerr.InvalidRequest && code != kerr.InvalidConfig || msg == "" {
				t.Fatalf("refused with %v %q", code, msg)
			}
			return
		}
		if s.interval < cmIntervalMin || s.interval > cmIntervalMax || s.name != name {
			t.Fatalf("accepted %q with interval %d", name, s.interval)
		}
		for sel, re := range s.match {
			if !slices.Contains(matchSelectors, sel) || re == nil {
				t.Fatalf("accepted a pattern for %q", sel)
			}
		}
	})
}
