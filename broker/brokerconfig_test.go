package broker

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/brokertest"
)

// TestDefaultConfig checks the defaults the table gives against the values Config had before
// the table existed, field by field, and that each key's default reads back as written.
func TestDefaultConfig(t *testing.T) {
	want := Config{
		NodeID: 1, Listeners: []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}}, LogDirs: []string{"./data"},
		NumPartitions: 1, DefaultReplication: 1, AutoCreateTopics: true, DeleteTopicEnable: true,
		SocketRequestMax: 100 << 20, MessageMaxBytes: 1048588, MetricsListen: "127.0.0.1:9644", IO: "auto", TelemetryMaxBytes: 1 << 20,
		QueuedMaxRequestBytes: 256 << 20, NumIOThreads: 8, MaxInflightPerConn: 5, InlineRequests: true, UringWait: "hold", SocketSendBuffer: 4 << 20, SocketReceiveBuffer: -1,
		SegmentBytes: 1 << 30, SegmentMs: 7 * 24 * time.Hour, IndexIntervalBytes: 4096, MaxIndexBytes: 10 << 20,
		FlushMessages: 1<<63 - 1, RetentionMs: 7 * 24 * 3600 * 1000, RetentionBytes: -1, CleanupPolicy: "delete",
		CompressionType: "producer", RetentionCheckInterval: 300 * time.Second,
		BrokerHeartbeatInterval: 2 * time.Second, BrokerSessionTimeout: 9 * time.Second, MetadataSnapshotEntries: 10000,
		OffsetsPartitions: 50, GroupInitialRebalanceDelay: 3 * time.Second,
		ConsumerHeartbeatInterval: 5 * time.Second, ConsumerMinHeartbeatInterval: 5 * time.Second,
		ConsumerMaxHeartbeatInterval: 15 * time.Second, ConsumerSessionTimeout: 45 * time.Second,
		ConsumerMinSessionTimeout: 45 * time.Second, ConsumerMaxSessionTimeout: 60 * time.Second,
		ConsumerAssignors: []string{"uniform", "range"}, GroupMinSessionTimeout: 6 * time.Second, GroupMaxSessionTimeout: 30 * time.Minute,
		MinInsyncReplicas: 1, ReplicaLagTimeMax: 30 * time.Second, ReplicaFetchMaxBytes: 1 << 20, ReplicaFetchRespMax: 10 << 20,
		ReplicaFetchWaitMax: 500 * time.Millisecond, ReplicaFetchMinBytes: 1, ReplicaFetchBackoff: time.Second, OffsetsTopicReplicas: 3, OffsetsCommitTimeout: 5 * time.Second,
		TxnStatePartitions: 50, TxnStateReplicas: 3, TxnStateMinISR: 2, TxnStateSegmentBytes: 104857600, TxnMaxTimeout: 15 * time.Minute,
		TxnAbortTimedOutInterval: 10 * time.Second, TxnIDExpiration: 7 * 24 * time.Hour, TxnRemoveExpiredInterval: time.Hour, TxnPartitionVerification: true,
		FetchSessionSlots: 1000, FetchSessionEvictionMin: 2 * time.Minute,
		AutoLeaderRebalance: true, LeaderImbalanceCheckInterval: 300 * time.Second, LeaderImbalancePerBrokerPct: 10,
		LogCacheWindowBytes: 64 << 20, LeaderReplicationThrottledRate: 1<<63 - 1, FollowerReplicationThrottledRate: 1<<63 - 1, AlterLogDirsRate: 1<<63 - 1,
		Security: SecurityConfig{InterBrokerProtocol: "PLAINTEXT", SaslMechanisms: []string{"GSSAPI"}, InterBrokerSaslMechanism: "GSSAPI",
			SaslMaxReceive: 512 << 10, FailedAuthDelay: 100 * time.Millisecond, AuthTimeout: 10 * time.Second, SSLKeystoreType: "JKS", SSLTruststoreType: "JKS",
			SSLClientAuth: "none", SSLEnabledProtocols: []string{"TLSv1.2", "TLSv1.3"}, SSLProtocol: "TLSv1.3",
			SSLPrincipalMappingRules: "DEFAULT", SSLEndpointIdentification: "https",
			OAuthSubClaim: "sub", OAuthScopeClaim: "scope", OAuthClockSkew: 30 * time.Second, OAuthJWKSRefresh: time.Hour,
			TokenMaxLifetime: 7 * 24 * time.Hour, TokenExpiryTime: 24 * time.Hour, TokenCheckInterval: time.Hour},
		Quotas: QuotaConfig{Windows: 11, WindowSize: time.Second, MaxConnections: 1<<31 - 1, MaxConnectionsPerIP: 1<<31 - 1, MaxCreationRate: 1<<31 - 1},
	}
	got := DefaultConfig()
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		if f := gv.Type().Field(i); f.IsExported() && !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
			t.Errorf("default %s = %v, want %v", f.Name, gv.Field(i).Interface(), wv.Field(i).Interface())
		}
	}
	seen := map[string]bool{}
	for _, d := range brokerConfigDefs {
		if seen[d.name] {
			t.Errorf("key %s defined twice", d.name)
		}
		seen[d.name] = true
		if d.doc == "" {
			t.Errorf("key %s has no doc", d.name)
		}
		if d.get != nil && d.dflt != "" && d.get(&got) != d.dflt {
			t.Errorf("key %s reads back %q by default, want its default %q", d.name, d.get(&got), d.dflt)
		}
		if _, ok := lookupBrokerConfig(d.synonymOf); d.synonymOf != "" && !ok {
			t.Errorf("key %s is a synonym of unknown key %s", d.name, d.synonymOf)
		}
	}
	for _, d := range topicConfigDefs {
		bd, ours := lookupBrokerConfig(d.brokerKey)
		k, kafka := lookupKafkaBrokerKey(d.brokerKey)
		if d.dflt == nil && (ours && bd.get == nil || !ours && (!kafka || k.defaultValue() == nil)) {
			t.Errorf("topic config %s takes its default from broker key %q, which has no value", d.name, d.brokerKey)
		}
	}
}

func TestBrokerConfigSet(t *testing.T) {
	c := DefaultConfig()
	for _, kv := range []string{"broker.id=3", "log.dir=/var/x", "log.retention.hours=2", "log.roll.hours=1",
		"queued.max.request.bytes=-1", "num.io.threads=2", "io.backend=netpoll", "process.roles=broker,controller",
		"num.network.threads=3", "inter.broker.listener.name=PLAINTEXT", "group.consumer.assignors=range"} {
		if err := c.Override(kv); err != nil {
			t.Fatalf("override %s: %v", kv, err)
		}
	}
	if c.NodeID != 3 || c.LogDirs[0] != "/var/x" || c.RetentionMs != 2*3600*1000 || c.SegmentMs != time.Hour ||
		c.QueuedMaxRequestBytes != -1 || c.NumIOThreads != 2 || c.IO != "netpoll" || len(c.ProcessRoles) != 2 ||
		c.ConsumerAssignors[0] != "range" {
		t.Fatalf("config after overrides: %+v", c)
	}
	// An alias sets its key; a key in another unit is a key of its own, as in Kafka.
	if !c.isExplicit("node.id") || !c.isExplicit("log.retention.hours") || c.isExplicit("log.retention.ms") || c.isExplicit("num.partitions") {
		t.Fatalf("keys set: %v", c.static)
	}
	for _, kv := range []string{"no.such.key=1", "num.partitions=0", "queued.max.request.bytes=0", "queued.max.request.bytes=-2",
		"num.io.threads=0", "max.inflight.requests.per.connection=0", "io.backend=epoll", "num.network.threads=many",
		"default.replication.factor=40000", "log.dirs=", "process.roles=observer", "io.pin.cpus=maybe", "listeners=9092",
		"leader.replication.throttled.rate=1000", "log.cleaner.threads=two"} {
		if err := c.Override(kv); err == nil {
			t.Errorf("override %s accepted", kv)
		} else if k, _, _ := strings.Cut(kv, "="); !strings.Contains(err.Error(), k) {
			t.Errorf("override %s: error %q does not name the key", kv, err)
		}
	}
	// A Kafka key ringbroker does not act on is taken, as Kafka takes it, and listed as such.
	if err := c.Override("log.cleaner.threads=2"); err != nil {
		t.Errorf("override of a Kafka key ringbroker does not act on: %v; want it kept, as Kafka", err)
	}
	if got := c.NotActedOn(); !slices.Equal(got, []string{"log.cleaner.threads"}) {
		t.Errorf("NotActedOn() = %v; want [log.cleaner.threads]", got)
	}
}

// TestDescribeBrokerConfigs asks a broker for its configs: exactly the keys Kafka 4.1.1 lists
// (testdata) when no other key is set, typed, with the keys set at start as static and the rest
// as defaults, Kafka's synonym chains, the keys ringbroker does not act on read-only with
// Kafka's default and documented as such, and a ringbroker key listed once it is set.
func TestDescribeBrokerConfigs(t *testing.T) {
	const jaas = `org.apache.kafka.common.security.plain.PlainLoginModule required user_a="secret";`
	want := map[string]kafkaConfigRow{}
	for _, r := range readKafkaConfigs(t, "testdata/kafka-4.1.1-broker-configs.tsv") {
		want[r.name] = r
	}
	for _, tc := range []struct {
		overrides []string
		extra     []string // keys listed beyond Kafka's
	}{
		{overrides: []string{"num.partitions=3", "log.retention.hours=100"}},
		{overrides: []string{"log.flush.group.commit=true", "listener.name.plaintext.plain.sasl.jaas.config=" + jaas},
			extra: []string{"log.flush.group.commit", "listener.name.plaintext.plain.sasl.jaas.config"}},
	} {
		b := startBroker(t, "netpoll", t.TempDir(), tc.overrides...)
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeSynonyms, req.IncludeDocumentation = true, true
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
		req.Resources = append(req.Resources, res)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := req.RequestWith(ctx, newClient(t, b))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			got[c.Name] = c
			if _, ok := want[c.Name]; !ok && !slices.Contains(tc.extra, c.Name) {
				t.Errorf("%v: key %s listed; Kafka 4.1.1 does not list it", tc.overrides, c.Name)
			}
			if c.Documentation == nil || *c.Documentation == "" {
				t.Errorf("%v: key %s without documentation", tc.overrides, c.Name)
			}
		}
		for name, r := range want {
			c, ok := got[name]
			if !ok {
				t.Errorf("%v: key %s not listed", tc.overrides, name)
				continue
			}
			if g := c.ConfigType.String(); g != r.kind {
				t.Errorf("key %s of type %s, Kafka's %s", name, g, r.kind)
			}
			if g := brokertest.ConfigValue(c.Value); c.Source == kmsg.ConfigSourceDefaultConfig && g != r.dflt && ringbrokerDefaults[name] == "" {
				t.Errorf("key %s described as %s by default, Kafka's default %s", name, g, r.dflt)
			}
			if r.kind == "PASSWORD" && (!c.IsSensitive || c.Value != nil) {
				t.Errorf("password %s described as %s, sensitive %v", name, brokertest.ConfigValue(c.Value), c.IsSensitive)
			}
		}
		for _, extra := range tc.extra {
			if c := got[extra]; c.Source != kmsg.ConfigSourceStaticBrokerConfig {
				t.Errorf("%v: %s described as %s (%v)", tc.overrides, extra, brokertest.ConfigValue(c.Value), c.Source)
			}
		}
		// A listener override is typed and hidden as the key it overrides, which is its synonym.
		if c := got["listener.name.plaintext.plain.sasl.jaas.config"]; len(tc.extra) > 0 && (c.ConfigType != kmsg.ConfigTypePassword || !c.IsSensitive ||
			c.Value != nil || synonymSources(c) != "STATIC_BROKER_CONFIG:listener.name.plaintext.plain.sasl.jaas.config=") {
			t.Errorf("listener override described as %s (%v, sensitive %v), synonyms %q", brokertest.ConfigValue(c.Value), c.ConfigType, c.IsSensitive, synonymSources(c))
		}
		if len(tc.extra) > 0 {
			continue
		}
		for _, w := range []struct{ key, value, source, synonyms string }{
			{"num.partitions", "3", "STATIC_BROKER_CONFIG", "STATIC_BROKER_CONFIG:num.partitions=3, DEFAULT_CONFIG:num.partitions=1"},
			{"log.segment.bytes", "1073741824", "DEFAULT_CONFIG", "DEFAULT_CONFIG:log.segment.bytes=1073741824"},
			// As Kafka: log.retention.ms itself is unset, so its chain is empty.
			{"log.retention.ms", "null", "DEFAULT_CONFIG", ""},
			{"log.retention.hours", "100", "STATIC_BROKER_CONFIG", "STATIC_BROKER_CONFIG:log.retention.hours=100, DEFAULT_CONFIG:log.retention.hours=168"},
			{"log.flush.interval.ms", "null", "DEFAULT_CONFIG", ""},
			{"log.cleaner.threads", "1", "DEFAULT_CONFIG", "DEFAULT_CONFIG:log.cleaner.threads=1"},
			{"ssl.keystore.password", "null", "DEFAULT_CONFIG", ""},
		} {
			c := got[w.key]
			if g := brokertest.ConfigValue(c.Value); g != w.value || c.Source.String() != w.source || synonymSources(c) != w.synonyms {
				t.Errorf("%s described as %s (%v), synonyms %q; want %s (%s), synonyms %q", w.key, g, c.Source, synonymSources(c), w.value, w.source, w.synonyms)
			}
		}
		if c := got["log.cleaner.threads"]; !c.ReadOnly || !strings.HasSuffix(*c.Documentation, notActedOnDoc) {
			t.Errorf("log.cleaner.threads, which ringbroker does not act on: read-only %v, documentation %q", c.ReadOnly, *c.Documentation)
		}
		if c := got["log.retention.ms"]; c.ReadOnly {
			t.Errorf("log.retention.ms, a dynamic config, described read-only")
		}
		if lc := b.cfg.RetentionMs; lc != 100*3600*1000 {
			t.Errorf("log.retention.hours=100: log.retention.ms in force %d", lc)
		}
	}
}
