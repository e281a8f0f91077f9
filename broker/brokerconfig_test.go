package broker

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDefaultConfig checks the defaults the table gives against the values Config had before
// the table existed, field by field, and that each key's default reads back as written.
func TestDefaultConfig(t *testing.T) {
	want := Config{
		NodeID: 1, Listeners: []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}}, LogDirs: []string{"./data"},
		NumPartitions: 1, DefaultReplication: 1, AutoCreateTopics: true, DeleteTopicEnable: true,
		SocketRequestMax: 100 << 20, MessageMaxBytes: 1048588, MetricsListen: "127.0.0.1:9644", IO: "auto", TelemetryMaxBytes: 1 << 20,
		QueuedMaxRequestBytes: 256 << 20, NumIOThreads: 8, MaxInflightPerConn: 5,
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
		LogCacheWindowBytes: 64 << 20, LeaderReplicationThrottledRate: 1<<63 - 1, FollowerReplicationThrottledRate: 1<<63 - 1,
		Security: SecurityConfig{InterBrokerProtocol: "PLAINTEXT", SaslMechanisms: []string{"GSSAPI"}, InterBrokerSaslMechanism: "GSSAPI",
			SaslMaxReceive: 512 << 10, FailedAuthDelay: 100 * time.Millisecond, AuthTimeout: 10 * time.Second, SSLKeystoreType: "JKS", SSLTruststoreType: "JKS",
			SSLClientAuth: "none", SSLEnabledProtocols: []string{"TLSv1.2", "TLSv1.3"}, SSLProtocol: "TLSv1.3",
			SSLPrincipalMappingRules: "DEFAULT", SSLEndpointIdentification: "https",
			OAuthSubClaim: "sub", OAuthScopeClaim: "scope", OAuthClockSkew: 30 * time.Second, OAuthJWKSRefresh: time.Hour},
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
		if d.get != nil && d.get(&got) != d.dflt {
			t.Errorf("key %s reads back %q by default, want its default %q", d.name, d.get(&got), d.dflt)
		}
		if _, ok := lookupBrokerConfig(d.synonymOf); d.synonymOf != "" && !ok {
			t.Errorf("key %s is a synonym of unknown key %s", d.name, d.synonymOf)
		}
	}
	for _, d := range topicConfigDefs {
		if bd, ok := lookupBrokerConfig(d.brokerKey); d.dflt == nil && (!ok || bd.get == nil) {
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
	if !c.isExplicit("node.id") || !c.isExplicit("log.retention.ms") || c.isExplicit("num.partitions") {
		t.Fatalf("explicit keys: %v", c.explicit)
	}
	for _, kv := range []string{"no.such.key=1", "num.partitions=0", "queued.max.request.bytes=0", "queued.max.request.bytes=-2",
		"num.io.threads=0", "max.inflight.requests.per.connection=0", "io.backend=epoll", "num.network.threads=many",
		"default.replication.factor=40000", "log.dirs=", "process.roles=observer", "io.pin.cpus=maybe", "listeners=9092",
		"leader.replication.throttled.rate=1000"} {
		if err := c.Override(kv); err == nil {
			t.Errorf("override %s accepted", kv)
		} else if k, _, _ := strings.Cut(kv, "="); !strings.Contains(err.Error(), k) {
			t.Errorf("override %s: error %q does not name the key", kv, err)
		}
	}
}

// TestDescribeBrokerConfigs asks a broker for its configs: every key of the table but synonyms
// and ignored ones (and dynamic-only ones, unset), typed, with the keys set at start as static
// and the rest as defaults.
func TestDescribeBrokerConfigs(t *testing.T) {
	b := startBroker(t, "netpoll", t.TempDir(), "num.partitions=3")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rcs, err := kadm.NewClient(newClient(t, b)).DescribeBrokerConfigs(ctx, b.cfg.NodeID)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("1", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		got[c.Key] = c
	}
	for _, d := range brokerConfigDefs {
		if _, ok := got[d.name]; ok != (d.get != nil && !d.dynamicOnly) {
			t.Errorf("key %s described: %v", d.name, ok)
		}
	}
	if c := got["num.partitions"]; c.MaybeValue() != "3" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("num.partitions described as %+v", c)
	}
	if c := got["log.segment.bytes"]; c.MaybeValue() != "1073741824" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("log.segment.bytes described as %+v", c)
	}
	if c := got["log.flush.interval.ms"]; c.Value != nil {
		t.Errorf("unset log.flush.interval.ms described as %q", c.MaybeValue())
	}
}
