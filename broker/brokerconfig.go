package broker

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"ringbroker/ring"
)

// Config is the broker's configuration. Keys follow Apache Kafka's server.properties names where
// the meaning matches; brokerConfigDefs says which key sets which field. The zero value is not
// usable: start from DefaultConfig.
type Config struct {
	NodeID int32 // node.id
	// Listeners is the parsed listeners list (listeners); the first is the client listener.
	Listeners []Listener
	// AdvertisedListeners (advertised.listeners) defaults to Listeners.
	AdvertisedListeners []Listener
	LogDirs             []string // log.dirs (or log.dir)
	NumPartitions       int32    // num.partitions
	DefaultReplication  int16    // default.replication.factor
	AutoCreateTopics    bool     // auto.create.topics.enable
	DeleteTopicEnable   bool     // delete.topic.enable
	SocketRequestMax    int      // socket.request.max.bytes
	MessageMaxBytes     int32    // message.max.bytes
	MetricsListen       string   // metrics.listen (ringbroker's own); "" disables the endpoint
	IO                  string   // io.backend (ringbroker's own): auto, uring or netpoll
	Rings               int      // io.rings (ringbroker's own): 0 = one per core
	SendZCThreshold     int      // io.send.zc.threshold.bytes (ringbroker's own)
	PinCPUs             bool     // io.pin.cpus (ringbroker's own): pin each ring's thread to a CPU
	SocketSendBuffer    int      // socket.send.buffer.bytes: -1 = the kernel's autotuning
	SocketReceiveBuffer int      // socket.receive.buffer.bytes: -1 = the kernel's autotuning
	// FetchSendfile (io.fetch.sendfile, ringbroker's own) writes Fetch record data with
	// sendfile from the page cache instead of sendmsg from the mapped segment; off by default,
	// as sendmsg costs less CPU on loopback (ring's BenchmarkSendFileVsMmap).
	FetchSendfile bool
	// InlineRequests (io.inline.requests, ringbroker's own) runs the requests that cannot block
	// (ApiVersions, Metadata, Produce whose appends are only writes to the page cache, and the
	// coordinators' requests, which only queue on a coordinator shard) on the io_uring thread
	// that read them, sparing the hand-over to a handler worker and back.
	InlineRequests bool
	// UringWait (io.uring.wait, ringbroker's own) is how io_uring loops block: hold (the
	// default) keeps the loop's Go P running through the wait once the process has a P per
	// loop (Broker.HoldWaits; handoff until then), handoff gives the P to another thread
	// first, syscall keeps it in the scheduler's system-call state.
	UringWait string
	ClusterID string // cluster.id (ringbroker's own; Kafka takes it from the storage format step)
	// QueuedMaxRequestBytes (queued.max.request.bytes) bounds the memory of requests read and
	// not yet answered, over all connections; connections that need more wait (muted) until
	// memory returns. -1 is unbounded, as Kafka's default; ringbroker's default is 256 MiB.
	QueuedMaxRequestBytes int64
	// NumIOThreads (num.io.threads) is the number of handler workers, spread over the rings.
	NumIOThreads int
	// MaxInflightPerConn (max.inflight.requests.per.connection, ringbroker's own) is how many
	// requests of one connection may be read and not yet answered before the broker stops
	// reading from it.
	MaxInflightPerConn int
	// PprofListen (pprof.listen, ringbroker's own) serves Go's net/http/pprof profiles there;
	// "" (the default) disables it.
	PprofListen string
	// TelemetryMaxBytes (telemetry.max.bytes) is the largest client metrics push (KIP-714),
	// compressed or not.
	TelemetryMaxBytes int32

	// Security is how listeners authenticate and requests are authorized.
	Security SecurityConfig
	// Quotas is the sampling of client quotas and the connection limits.
	Quotas QuotaConfig
	// protocolMapText is listener.security.protocol.map as set; listenerProtocol parses it.
	protocolMapText string

	OffsetsPartitions          int32         // offsets.topic.num.partitions
	GroupInitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms
	GroupMinSessionTimeout     time.Duration // group.min.session.timeout.ms
	GroupMaxSessionTimeout     time.Duration // group.max.session.timeout.ms
	// KIP-848 consumer groups (group.consumer.*); min/max bound the configured values.
	ConsumerHeartbeatInterval    time.Duration // group.consumer.heartbeat.interval.ms
	ConsumerMinHeartbeatInterval time.Duration // group.consumer.min.heartbeat.interval.ms
	ConsumerMaxHeartbeatInterval time.Duration // group.consumer.max.heartbeat.interval.ms
	ConsumerSessionTimeout       time.Duration // group.consumer.session.timeout.ms
	ConsumerMinSessionTimeout    time.Duration // group.consumer.min.session.timeout.ms
	ConsumerMaxSessionTimeout    time.Duration // group.consumer.max.session.timeout.ms
	ConsumerAssignors            []string      // group.consumer.assignors: uniform, range; the first is the default

	// Log defaults for topics (log.* broker keys); topic configs override them.
	SegmentBytes       int64         // log.segment.bytes
	SegmentMs          time.Duration // log.roll.ms / log.roll.hours
	IndexIntervalBytes int           // log.index.interval.bytes
	MaxIndexBytes      int           // log.index.size.max.bytes
	FlushMessages      int64         // log.flush.interval.messages
	FlushInterval      time.Duration // log.flush.interval.ms; 0 = never by time
	RetentionMs        int64         // log.retention.ms / minutes / hours; -1 = forever
	RetentionBytes     int64         // log.retention.bytes
	CleanupPolicy      string        // log.cleanup.policy
	CompressionType    string        // compression.type

	// Replication (Kafka's replica.* keys and the topic defaults they set).
	MinInsyncReplicas     int32         // min.insync.replicas (topic config min.insync.replicas)
	UncleanLeaderElection bool          // unclean.leader.election.enable (topic config of the same name)
	ReplicaLagTimeMax     time.Duration // replica.lag.time.max.ms: a follower not caught up for this long leaves the ISR
	ReplicaFetchMaxBytes  int32         // replica.fetch.max.bytes: per partition of a follower fetch
	ReplicaFetchRespMax   int32         // replica.fetch.response.max.bytes: per follower fetch
	ReplicaFetchWaitMax   time.Duration // replica.fetch.wait.max.ms: how long a follower fetch may park
	ReplicaFetchMinBytes  int32         // replica.fetch.min.bytes
	ReplicaFetchBackoff   time.Duration // replica.fetch.backoff.ms: the pause after a failed follower fetch
	OffsetsTopicReplicas  int16         // offsets.topic.replication.factor
	OffsetsCommitTimeout  time.Duration // offsets.commit.timeout.ms: the wait of a coordinator append for its ISR
	// The transaction coordinator's __transaction_state topic and timeouts (transaction.*).
	TxnStatePartitions       int32         // transaction.state.log.num.partitions
	TxnStateReplicas         int16         // transaction.state.log.replication.factor
	TxnStateMinISR           int32         // transaction.state.log.min.isr
	TxnStateSegmentBytes     int32         // transaction.state.log.segment.bytes
	TxnMaxTimeout            time.Duration // transaction.max.timeout.ms
	TxnAbortTimedOutInterval time.Duration // transaction.abort.timed.out.transaction.cleanup.interval.ms
	TxnIDExpiration          time.Duration // transactional.id.expiration.ms
	TxnRemoveExpiredInterval time.Duration // transaction.remove.expired.transaction.cleanup.interval.ms
	TxnPartitionVerification bool          // transaction.partition.verification.enable
	// LeaderReplicationThrottledRate and FollowerReplicationThrottledRate
	// ({leader,follower}.replication.throttled.rate, dynamic broker configs in Kafka) bound
	// the bytes per second of replication of the throttled replicas (topic configs
	// {leader,follower}.replication.throttled.replicas) that are out of the ISR; see quota.go.
	LeaderReplicationThrottledRate   int64
	FollowerReplicationThrottledRate int64
	// AlterLogDirsRate is replica.alter.log.dirs.io.max.bytes.per.second: the bound on the
	// bytes per second log dir moves copy.
	AlterLogDirsRate int64

	// Incremental fetch sessions (KIP-227, fetchsession.go).
	FetchSessionSlots       int32         // max.incremental.fetch.session.cache.slots
	FetchSessionEvictionMin time.Duration // min.incremental.fetch.session.eviction.ms

	// Preferred leaders (leaderbalance.go): the active controller moves leadership back to each
	// partition's first replica every LeaderImbalanceCheckInterval while AutoLeaderRebalance.
	AutoLeaderRebalance          bool          // auto.leader.rebalance.enable
	LeaderImbalanceCheckInterval time.Duration // leader.imbalance.check.interval.seconds
	// LeaderImbalancePerBrokerPct (leader.imbalance.per.broker.percentage) is accepted and has
	// no effect, as on Kafka's KRaft controller.
	LeaderImbalancePerBrokerPct int32

	// FlushGroupCommit (log.flush.group.commit, ringbroker's own; topic config
	// flush.group.commit) makes Produce with acks >= 1 answer only after a shared fsync
	// covering its batch.
	FlushGroupCommit bool
	// LogCacheWindowBytes (log.cache.window.bytes, ringbroker's own) is how many of each
	// partition's newest bytes stay in the page cache; older ones are written back and dropped
	// from it (rlog.Writeback). 0 leaves the page cache to the kernel.
	LogCacheWindowBytes int64
	// RetentionCheckInterval is log.retention.check.interval.ms: how often retention runs.
	RetentionCheckInterval time.Duration

	// Cluster keys (KRaft's names; see quorum.go). Without controller.quorum.voters the node
	// is the sole voter of its own metadata quorum, with no controller listener.
	ProcessRoles            []string      // process.roles
	QuorumVoters            string        // controller.quorum.voters: id@host:port,...
	QuorumBootstrapServers  []string      // controller.quorum.bootstrap.servers
	ControllerListenerNames []string      // controller.listener.names
	BrokerHeartbeatInterval time.Duration // broker.heartbeat.interval.ms
	BrokerSessionTimeout    time.Duration // broker.session.timeout.ms
	// MetadataSnapshotEntries (metadata.snapshot.interval.entries, ringbroker's own): a
	// snapshot of the metadata image every this many Raft entries.
	MetadataSnapshotEntries uint64

	// static holds the keys set with Set (from server.properties or an override) with their
	// values as given, which DescribeConfigs reports as STATIC_BROKER_CONFIG. A Config is
	// built once and then copied, so the copies share it.
	static map[string]string
}

// Listener is one name://host:port entry of listeners.
type Listener struct {
	Name string
	Host string
	Port int
}

// Addr is host:port.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// String renders the listener as in server.properties.
func (l Listener) String() string { return l.Name + "://" + l.Addr() }

// configKind is the type of a config value, as Kafka's ConfigDef.Type.
type configKind int8

const (
	kindLong configKind = iota
	kindInt
	kindShort
	kindBool
	kindDouble
	kindString
	kindList
	kindClass
	kindPassword
)

// String is the kind's name as Kafka's documentation writes it.
func (k configKind) String() string {
	return [...]string{"long", "int", "short", "boolean", "double", "string", "list", "class", "password"}[k]
}

// bits is how many bits an integer kind holds.
func (k configKind) bits() int {
	switch k {
	case kindInt:
		return 32
	case kindShort:
		return 16
	}
	return 64
}

// brokerConfigDef is one broker config key: its name, type, default, what it means, and how a
// value is checked and stored in Config and read back from it.
type brokerConfigDef struct {
	name string
	kind configKind
	// dflt is the default as server.properties would write it; DefaultConfig sets it. Empty
	// for keys that are unset by default (null in Kafka's terms) and for synonyms.
	dflt string
	doc  string
	// synonymOf names the key that this one sets in another form (broker.id for node.id,
	// log.retention.hours for log.retention.ms), its value multiplied by scale when that is
	// not 0; it is described as that key.
	synonymOf string
	scale     int64
	// ignored keys are accepted, type-checked, for compatibility with Kafka's sample
	// server.properties, and have no effect.
	ignored bool
	// dynamic keys may be changed while running, as dynamic broker configs (dynconf.go);
	// they are the keys Kafka changes live that ringbroker also applies live.
	dynamic bool
	// dynamicOnly keys are Kafka's dynamic configs that are no KafkaConfig keys (the
	// replication throttle rates of DynamicConfig.Broker): only kafka-configs sets them, and
	// DescribeConfigs lists them only when set, without a default synonym.
	dynamicOnly bool
	// set checks a value and stores it; nil for synonyms, which Config.set resolves.
	set func(c *Config, val string) error
	// get renders the current value as set would take it; nil for synonyms and ignored keys.
	get func(c *Config) string
}

// intRule is an extra rule on an integer value.
type intRule func(n int64) error

// inRange refuses values outside [lo, hi].
func inRange(lo, hi int64) intRule {
	return func(n int64) error {
		if n < lo || n > hi {
			return fmt.Errorf("must be in %d..%d", lo, hi)
		}
		return nil
	}
}

// atLeast refuses values below lo.
func atLeast(lo int64) intRule {
	return func(n int64) error {
		if n < lo {
			return fmt.Errorf("must be at least %d", lo)
		}
		return nil
	}
}

// positiveOrMinusOne refuses 0 and values below -1, for keys where -1 has the meaning given
// (no bound; the operating system's default), which the error names.
func positiveOrMinusOne(meaning string) intRule {
	return func(n int64) error {
		if n == 0 || n < -1 {
			return fmt.Errorf("must be positive, or -1 for %s", meaning)
		}
		return nil
	}
}

// parseInt parses an integer of bits bits and checks it with rule, if not nil.
func parseInt(val string, bits int, rule intRule) (int64, error) {
	n, err := strconv.ParseInt(val, 10, bits)
	if err == nil && rule != nil {
		err = rule(n)
	}
	return n, err
}

// intDef is an integer key stored in the field that field returns; the field's type bounds it
// as much as the kind.
func intDef[T ~int | ~int16 | ~int32 | ~int64 | ~uint64](name string, kind configKind, dflt string, field func(*Config) *T, rule intRule, doc string) brokerConfigDef {
	var zero T
	bits := min(kind.bits(), 8*int(unsafe.Sizeof(zero)))
	return brokerConfigDef{name: name, kind: kind, dflt: dflt, doc: doc,
		set: func(c *Config, val string) error {
			n, err := parseInt(val, bits, rule)
			if err == nil {
				*field(c) = T(n)
			}
			return err
		},
		get: func(c *Config) string { return strconv.FormatInt(int64(*field(c)), 10) },
	}
}

// msDef is a duration key written in milliseconds.
func msDef(name string, kind configKind, dflt string, field func(*Config) *time.Duration, rule intRule, doc string) brokerConfigDef {
	return brokerConfigDef{name: name, kind: kind, dflt: dflt, doc: doc,
		set: func(c *Config, val string) error {
			ms, err := parseInt(val, kind.bits(), rule)
			if err == nil {
				*field(c) = time.Duration(ms) * time.Millisecond
			}
			return err
		},
		get: func(c *Config) string { return strconv.FormatInt(field(c).Milliseconds(), 10) },
	}
}

// secondsDef is a duration key written in seconds.
func secondsDef(name string, kind configKind, dflt string, field func(*Config) *time.Duration, rule intRule, doc string) brokerConfigDef {
	return brokerConfigDef{name: name, kind: kind, dflt: dflt, doc: doc,
		set: func(c *Config, val string) error {
			s, err := parseInt(val, kind.bits(), rule)
			if err == nil && s > int64(math.MaxInt64/time.Second) {
				err = fmt.Errorf("must be at most %d", int64(math.MaxInt64/time.Second))
			}
			if err == nil {
				*field(c) = time.Duration(s) * time.Second
			}
			return err
		},
		get: func(c *Config) string { return strconv.FormatInt(int64(*field(c)/time.Second), 10) },
	}
}

// boolDef is a boolean key (strconv.ParseBool's spellings).
func boolDef(name, dflt string, field func(*Config) *bool, doc string) brokerConfigDef {
	return brokerConfigDef{name: name, kind: kindBool, dflt: dflt, doc: doc,
		set: func(c *Config, val string) (err error) {
			*field(c), err = strconv.ParseBool(val)
			return err
		},
		get: func(c *Config) string { return strconv.FormatBool(*field(c)) },
	}
}

// stringDef is a string key; valid, if set, checks the value.
func stringDef(name, dflt string, field func(*Config) *string, valid func(string) error, doc string) brokerConfigDef {
	return brokerConfigDef{name: name, kind: kindString, dflt: dflt, doc: doc,
		set: func(c *Config, val string) error {
			if valid != nil {
				if err := valid(val); err != nil {
					return err
				}
			}
			*field(c) = val
			return nil
		},
		get: func(c *Config) string { return *field(c) },
	}
}

// listDef is a comma-separated list key, empty items dropped; valid, if set, checks it.
func listDef(name, dflt string, field func(*Config) *[]string, valid func([]string) error, doc string) brokerConfigDef {
	return brokerConfigDef{name: name, kind: kindList, dflt: dflt, doc: doc,
		set: func(c *Config, val string) error {
			items := splitList(val)
			if valid != nil {
				if err := valid(items); err != nil {
					return err
				}
			}
			*field(c) = items
			return nil
		},
		get: func(c *Config) string { return strings.Join(*field(c), ",") },
	}
}

// listenersDef is a listeners key.
func listenersDef(name, dflt string, field func(*Config) *[]Listener, doc string) brokerConfigDef {
	return brokerConfigDef{name: name, kind: kindString, dflt: dflt, doc: doc,
		set: func(c *Config, val string) (err error) {
			*field(c), err = parseListeners(val)
			return err
		},
		get: func(c *Config) string {
			s := make([]string, len(*field(c)))
			for i, l := range *field(c) {
				s[i] = l.String()
			}
			return strings.Join(s, ",")
		},
	}
}

// synonymDef is a key that sets the key of; in another unit when scale is not 0: a value n
// sets of to n*scale. dflt, if not empty, is the default of, set through this key, as Kafka
// has log.retention.hours=168 and no log.retention.ms.
func synonymDef(name, of string, kind configKind, scale int64, unit, dflt string) brokerConfigDef {
	doc := "the same as " + of
	if scale != 0 {
		doc = of + " in " + unit
	}
	return brokerConfigDef{name: name, kind: kind, synonymOf: of, scale: scale, doc: doc, dflt: dflt}
}

// ofKind is d described as a value of kind k, for a key Kafka types otherwise than its field.
func (d brokerConfigDef) ofKind(k configKind) brokerConfigDef {
	d.kind = k
	return d
}

// live marks d a dynamic broker config.
func (d brokerConfigDef) live() brokerConfigDef {
	d.dynamic = true
	return d
}

// onlyDynamic marks d a dynamic-only broker config.
func (d brokerConfigDef) onlyDynamic() brokerConfigDef {
	d.dynamic, d.dynamicOnly = true, true
	return d
}

// unsetWhenZero describes a zero value as unset (null), for keys whose 0 means "not set".
func (d brokerConfigDef) unsetWhenZero() brokerConfigDef {
	get := d.get
	d.get = func(c *Config) string {
		if v := get(c); v != "0" {
			return v
		}
		return ""
	}
	return d
}

// secret makes d a password, as Kafka's PASSWORD type: DescribeConfigs answers its values as
// null, with IsSensitive.
func (d brokerConfigDef) secret() brokerConfigDef {
	return d.ofKind(kindPassword)
}

// ignoredDef is a Kafka key accepted with no effect yet.
func ignoredDef(name string, kind configKind) brokerConfigDef {
	return brokerConfigDef{name: name, kind: kind, ignored: true,
		doc: "accepted for compatibility with Kafka's sample server.properties; no effect yet",
		set: func(_ *Config, val string) error {
			if kind == kindString {
				return nil
			}
			_, err := parseInt(val, kind.bits(), nil)
			return err
		},
	}
}

// brokerConfigDefs is every broker config key ringbroker takes, with Kafka's type and, where
// the key is Kafka's, Kafka's meaning. Set refuses any other key. DescribeConfigs for a broker
// lists them (but synonyms and ignored keys), and the README's table is generated from them.
var brokerConfigDefs = slices.Concat(coreConfigDefs, securityConfigDefs, oauthConfigDefs, tokenConfigDefs, quotaConfigDefs)

// coreConfigDefs are the keys of everything but security (securityconfig.go).
var coreConfigDefs = []brokerConfigDef{
	intDef("node.id", kindInt, "1", func(c *Config) *int32 { return &c.NodeID }, nil,
		"this node's id, in the cluster and in the metadata log"),
	synonymDef("broker.id", "node.id", kindInt, 0, "", ""),
	listenersDef("listeners", "PLAINTEXT://127.0.0.1:9092", func(c *Config) *[]Listener { return &c.Listeners },
		"NAME://host:port,... to listen on; an empty host is every interface. The first one that is not the controller listener serves clients"),
	listenersDef("advertised.listeners", "", func(c *Config) *[]Listener { return &c.AdvertisedListeners },
		"the listeners as clients are told to reach them; empty: the listeners"),
	listDef("log.dirs", "./data", func(c *Config) *[]string { return &c.LogDirs }, nonEmpty,
		"the data directories (JBOD): a new partition goes to the one holding the fewest; the metadata log stays in the first").ofKind(kindString),
	synonymDef("log.dir", "log.dirs", kindString, 0, "", ""),
	intDef("num.partitions", kindInt, "1", func(c *Config) *int32 { return &c.NumPartitions }, atLeast(1),
		"partitions of a topic created without a count"),
	intDef("default.replication.factor", kindInt, "1", func(c *Config) *int16 { return &c.DefaultReplication }, nil,
		"replication factor of a topic created without one"),
	boolDef("auto.create.topics.enable", "true", func(c *Config) *bool { return &c.AutoCreateTopics },
		"create a topic when a client asks for its metadata"),
	boolDef("delete.topic.enable", "true", func(c *Config) *bool { return &c.DeleteTopicEnable },
		"allow DeleteTopics"),
	intDef("socket.request.max.bytes", kindInt, "104857600", func(c *Config) *int { return &c.SocketRequestMax }, nil,
		"the largest request frame; a larger one closes the connection"),
	intDef("queued.max.request.bytes", kindLong, "268435456", func(c *Config) *int64 { return &c.QueuedMaxRequestBytes }, positiveOrMinusOne("no bound"),
		"the memory for requests read and not yet answered, over all connections; a connection that needs memory stops reading until some returns. -1 is unbounded, Kafka's default"),
	intDef("num.io.threads", kindInt, "8", func(c *Config) *int { return &c.NumIOThreads }, inRange(1, 1024),
		"handler workers, spread over the rings"),
	intDef("max.inflight.requests.per.connection", kindInt, "5", func(c *Config) *int { return &c.MaxInflightPerConn }, inRange(1, 1<<20),
		"ringbroker's own: requests read from one connection whose responses are not yet written, before the broker stops reading from it"),
	intDef("message.max.bytes", kindInt, "1048588", func(c *Config) *int32 { return &c.MessageMaxBytes }, nil,
		"the largest record batch a topic takes by default (topic config max.message.bytes)").live(),
	stringDef("metrics.listen", "127.0.0.1:9644", func(c *Config) *string { return &c.MetricsListen }, nil,
		"ringbroker's own: host:port of the Prometheus metrics endpoint; empty disables it"),
	intDef("telemetry.max.bytes", kindInt, "1048576", func(c *Config) *int32 { return &c.TelemetryMaxBytes }, atLeast(1),
		"the largest client metrics push (KIP-714) a client may send, compressed or decompressed; pushed metrics are exported on metrics.listen, without which clients are not asked to push"),
	stringDef("pprof.listen", "", func(c *Config) *string { return &c.PprofListen }, nil,
		"ringbroker's own: host:port to serve Go's /debug/pprof/ on, for go tool pprof; empty is off"),
	stringDef("io.backend", "auto", func(c *Config) *string { return &c.IO }, checkBackend,
		"ringbroker's own: auto (io_uring where the kernel allows it, else netpoll), uring or netpoll"),
	intDef("io.rings", kindInt, "0", func(c *Config) *int { return &c.Rings }, nil,
		"ringbroker's own: rings (event loops) per listener; 0 is one per core"),
	intDef("io.send.zc.threshold.bytes", kindInt, "0", func(c *Config) *int { return &c.SendZCThreshold }, nil,
		"ringbroker's own: sends of at least this many bytes use SEND_ZC on io_uring; 0 is 64 KiB, negative never"),
	boolDef("io.pin.cpus", "false", func(c *Config) *bool { return &c.PinCPUs },
		"ringbroker's own: pin each ring's thread, and its handler workers, to one CPU: ring i to the i-th (modulo their number) of the CPUs the broker may run on (taskset, a cgroup's cpuset)"),
	stringDef("io.uring.wait", string(ring.WaitHold), func(c *Config) *string { return &c.UringWait }, checkWaitMode,
		"ringbroker's own: hold keeps a ring's Go scheduler slot (P) running while it blocks, once GOMAXPROCS has one per ring beside one per core (ringbroker sizes it so unless the GOMAXPROCS environment variable is set; until then it hands off); handoff gives the slot to another thread before it blocks; syscall keeps it as an ordinary system call"),
	boolDef("io.fetch.sendfile", "false", func(c *Config) *bool { return &c.FetchSendfile },
		"ringbroker's own: false sends Fetch data with sendmsg from the mapped segment, whose pages are unmapped once sent; true uses sendfile"),
	boolDef("io.inline.requests", "true", func(c *Config) *bool { return &c.InlineRequests },
		"ringbroker's own: on io_uring, run ApiVersions, Metadata, Produce requests whose appends need no roll, flush or allocation, consumers' Fetch requests that read only what the broker wrote and still has in the page cache (up to 256 KiB of records; none with `log.cache.window.bytes=0`), and the group and transaction coordinators' requests (but TxnOffsetCommit and InitProducerId) on the ring thread that read them, and retry a fetch waiting at the end of the log on the ring thread whose append woke it; false hands every request to a handler worker"),
	stringDef("cluster.id", "", func(c *Config) *string { return &c.ClusterID }, nil,
		"ringbroker's own: the cluster id an unformatted log dir is formatted with (Kafka takes it from the format step); empty: a new one on a single node"),
	intDef("log.segment.bytes", kindInt, "1073741824", func(c *Config) *int64 { return &c.SegmentBytes }, nil,
		"segment size at which a log rolls (topic config segment.bytes)").live(),
	msDef("log.roll.ms", kindLong, "", func(c *Config) *time.Duration { return &c.SegmentMs }, nil,
		"segment age at which a log rolls (topic config segment.ms); unset: log.roll.hours").live(),
	synonymDef("log.roll.hours", "log.roll.ms", kindInt, 3600*1000, "hours", "168"),
	intDef("log.index.interval.bytes", kindInt, "4096", func(c *Config) *int { return &c.IndexIntervalBytes }, nil,
		"bytes between offset index entries (topic config index.interval.bytes)").live(),
	intDef("log.index.size.max.bytes", kindInt, "10485760", func(c *Config) *int { return &c.MaxIndexBytes }, nil,
		"the largest offset index of a segment (topic config segment.index.bytes)").live(),
	intDef("log.flush.interval.messages", kindLong, "9223372036854775807", func(c *Config) *int64 { return &c.FlushMessages }, nil,
		"messages after which a log is fsynced (topic config flush.messages)").live(),
	msDef("log.flush.interval.ms", kindLong, "", func(c *Config) *time.Duration { return &c.FlushInterval }, nil,
		"milliseconds after which a log is fsynced (topic config flush.ms); unset or 0: never by time").unsetWhenZero().live(),
	boolDef("log.flush.group.commit", "false", func(c *Config) *bool { return &c.FlushGroupCommit },
		"ringbroker's own: answer Produce with acks >= 1 after a shared fsync covering its batch (topic config flush.group.commit); see Durability").live(),
	intDef("log.cache.window.bytes", kindLong, "67108864", func(c *Config) *int64 { return &c.LogCacheWindowBytes }, atLeast(0),
		"ringbroker's own: how many of each partition's newest bytes stay in the page cache; older ones are written back and dropped from it so new writes reuse their pages; 0 leaves the page cache to the kernel as Kafka does; see Page cache"),
	intDef("log.retention.ms", kindLong, "", func(c *Config) *int64 { return &c.RetentionMs }, nil,
		"how long a log keeps a segment; -1 is forever (topic config retention.ms); unset: log.retention.minutes, else log.retention.hours").live(),
	synonymDef("log.retention.minutes", "log.retention.ms", kindInt, 60*1000, "minutes", ""),
	synonymDef("log.retention.hours", "log.retention.ms", kindInt, 3600*1000, "hours", "168"),
	intDef("log.retention.bytes", kindLong, "-1", func(c *Config) *int64 { return &c.RetentionBytes }, nil,
		"the size past which a partition's log deletes its oldest segments; -1 is unbounded (topic config retention.bytes)").live(),
	msDef("log.retention.check.interval.ms", kindLong, "300000", func(c *Config) *time.Duration { return &c.RetentionCheckInterval }, atLeast(1),
		"how often retention runs"),
	stringDef("log.cleanup.policy", "delete", func(c *Config) *string { return &c.CleanupPolicy }, nil,
		"delete, compact or both (topic config cleanup.policy)").ofKind(kindList).live(),
	stringDef("compression.type", "producer", func(c *Config) *string { return &c.CompressionType }, validCompressionType,
		"the codec topics store their batches in (topic config compression.type): producer keeps the producer's, else batches in another codec are recompressed").live(),
	intDef("offsets.topic.num.partitions", kindInt, "50", func(c *Config) *int32 { return &c.OffsetsPartitions }, atLeast(1),
		"partitions of __consumer_offsets"),
	msDef("group.initial.rebalance.delay.ms", kindInt, "3000", func(c *Config) *time.Duration { return &c.GroupInitialRebalanceDelay }, nil,
		"how long a new classic group waits for more members before its first rebalance"),
	msDef("group.min.session.timeout.ms", kindInt, "6000", func(c *Config) *time.Duration { return &c.GroupMinSessionTimeout }, nil,
		"the shortest session timeout a classic group member may ask for"),
	msDef("group.max.session.timeout.ms", kindInt, "1800000", func(c *Config) *time.Duration { return &c.GroupMaxSessionTimeout }, nil,
		"the longest session timeout a classic group member may ask for"),
	msDef("group.consumer.heartbeat.interval.ms", kindInt, "5000", func(c *Config) *time.Duration { return &c.ConsumerHeartbeatInterval }, nil,
		"heartbeat interval of KIP-848 consumer group members"),
	msDef("group.consumer.min.heartbeat.interval.ms", kindInt, "5000", func(c *Config) *time.Duration { return &c.ConsumerMinHeartbeatInterval }, nil,
		"lower bound of group.consumer.heartbeat.interval.ms"),
	msDef("group.consumer.max.heartbeat.interval.ms", kindInt, "15000", func(c *Config) *time.Duration { return &c.ConsumerMaxHeartbeatInterval }, nil,
		"upper bound of group.consumer.heartbeat.interval.ms"),
	msDef("group.consumer.session.timeout.ms", kindInt, "45000", func(c *Config) *time.Duration { return &c.ConsumerSessionTimeout }, nil,
		"session timeout of KIP-848 consumer group members"),
	msDef("group.consumer.min.session.timeout.ms", kindInt, "45000", func(c *Config) *time.Duration { return &c.ConsumerMinSessionTimeout }, nil,
		"lower bound of group.consumer.session.timeout.ms"),
	msDef("group.consumer.max.session.timeout.ms", kindInt, "60000", func(c *Config) *time.Duration { return &c.ConsumerMaxSessionTimeout }, nil,
		"upper bound of group.consumer.session.timeout.ms"),
	{name: "group.consumer.assignors", kind: kindList, dflt: "uniform,range",
		doc: "server-side assignors of KIP-848 groups: uniform, range; the first is the default",
		set: func(c *Config, val string) error {
			c.ConsumerAssignors = nil
			for _, a := range strings.Split(val, ",") {
				c.ConsumerAssignors = append(c.ConsumerAssignors, strings.TrimSpace(a))
			}
			return nil
		},
		get: func(c *Config) string { return strings.Join(c.ConsumerAssignors, ",") }},
	listDef("process.roles", "", func(c *Config) *[]string { return &c.ProcessRoles }, checkProcessRoles,
		"broker, controller or both; empty is both (a combined node)"),
	stringDef("controller.quorum.voters", "", func(c *Config) *string { return &c.QuorumVoters }, nil,
		"id@host:port,... of the controllers; empty: this node is the sole voter, with no controller listener").ofKind(kindList),
	listDef("controller.quorum.bootstrap.servers", "", func(c *Config) *[]string { return &c.QuorumBootstrapServers }, nil,
		"host:port,... of controllers of a dynamic quorum (KIP-853), used instead of controller.quorum.voters: the voters are in the metadata log, founded by `ringbroker format --standalone` or `--initial-controllers` and changed by kafka-metadata-quorum add-controller and remove-controller"),
	listDef("controller.listener.names", "", func(c *Config) *[]string { return &c.ControllerListenerNames }, nil,
		"the listener the controllers use, by name (required with controller.quorum.voters or controller.quorum.bootstrap.servers)").ofKind(kindString),
	msDef("broker.heartbeat.interval.ms", kindInt, "2000", func(c *Config) *time.Duration { return &c.BrokerHeartbeatInterval }, atLeast(1),
		"how often a broker heartbeats to the active controller"),
	msDef("broker.session.timeout.ms", kindInt, "9000", func(c *Config) *time.Duration { return &c.BrokerSessionTimeout }, atLeast(1),
		"how long a broker may go without a heartbeat before the active controller fences it"),
	intDef("metadata.snapshot.interval.entries", kindLong, "10000", func(c *Config) *uint64 { return &c.MetadataSnapshotEntries }, atLeast(1),
		"ringbroker's own: a snapshot of the metadata image every this many Raft entries"),
	intDef("offsets.topic.replication.factor", kindShort, "3", func(c *Config) *int16 { return &c.OffsetsTopicReplicas }, atLeast(1),
		"replication factor of __consumer_offsets, created on the first FindCoordinator. With fewer unfenced brokers, consumer groups wait for them (COORDINATOR_NOT_AVAILABLE), as on Kafka. A node with neither controller.quorum.voters nor controller.quorum.bootstrap.servers (one node, as `make run` starts it) takes 1 unless the key is set, as Kafka's sample server.properties does"),
	msDef("offsets.commit.timeout.ms", kindInt, "5000", func(c *Config) *time.Duration { return &c.OffsetsCommitTimeout }, atLeast(1),
		"how long an offset commit or group change waits for the ISR of its __consumer_offsets partition before it fails (COORDINATOR_NOT_AVAILABLE)"),
	intDef("min.insync.replicas", kindInt, "1", func(c *Config) *int32 { return &c.MinInsyncReplicas }, atLeast(1),
		"the fewest in-sync replicas with which acks=all Produce is taken (topic config min.insync.replicas)").live(),
	boolDef("unclean.leader.election.enable", "false", func(c *Config) *bool { return &c.UncleanLeaderElection },
		"elect a replica outside the ISR when no in-sync replica is left, losing what only the ISR had (topic config of the same name)").live(),
	msDef("replica.lag.time.max.ms", kindLong, "30000", func(c *Config) *time.Duration { return &c.ReplicaLagTimeMax }, atLeast(1),
		"a follower that has not caught up with the leader's log end for this long leaves the ISR"),
	intDef("replica.fetch.max.bytes", kindInt, "1048576", func(c *Config) *int32 { return &c.ReplicaFetchMaxBytes }, atLeast(1),
		"bytes a follower fetches per partition per request (at least one batch)"),
	intDef("replica.fetch.response.max.bytes", kindInt, "10485760", func(c *Config) *int32 { return &c.ReplicaFetchRespMax }, atLeast(1),
		"bytes a follower fetches per request"),
	msDef("replica.fetch.wait.max.ms", kindInt, "500", func(c *Config) *time.Duration { return &c.ReplicaFetchWaitMax }, atLeast(1),
		"how long the leader may hold a follower's fetch while it has nothing new"),
	intDef("replica.fetch.min.bytes", kindInt, "1", func(c *Config) *int32 { return &c.ReplicaFetchMinBytes }, atLeast(1),
		"bytes the leader waits for before answering a follower's fetch"),
	msDef("replica.fetch.backoff.ms", kindInt, "1000", func(c *Config) *time.Duration { return &c.ReplicaFetchBackoff }, atLeast(0),
		"how long a follower waits after a failed fetch"),
	intDef("max.incremental.fetch.session.cache.slots", kindInt, "1000", func(c *Config) *int32 { return &c.FetchSessionSlots }, atLeast(0),
		"how many incremental fetch sessions (KIP-227) the broker keeps; a fetch that asks for one when all are taken and none may be evicted is answered without (session id 0)"),
	msDef("min.incremental.fetch.session.eviction.ms", kindInt, "120000", func(c *Config) *time.Duration { return &c.FetchSessionEvictionMin }, atLeast(0),
		"a fetch session unused this long is evicted first for a new one; younger than this, only a follower's session evicts a consumer's"),
	boolDef("auto.leader.rebalance.enable", "true", func(c *Config) *bool { return &c.AutoLeaderRebalance },
		"the active controller moves leadership back to each partition's preferred replica (the first of its replicas) once that one is live and in the ISR, checked every leader.imbalance.check.interval.seconds"),
	secondsDef("leader.imbalance.check.interval.seconds", kindLong, "300", func(c *Config) *time.Duration { return &c.LeaderImbalanceCheckInterval }, atLeast(1),
		"how often the active controller looks for partitions not led by their preferred replica (auto.leader.rebalance.enable)"),
	intDef("leader.imbalance.per.broker.percentage", kindInt, "10", func(c *Config) *int32 { return &c.LeaderImbalancePerBrokerPct }, nil,
		"accepted for server.properties written for Kafka 3.x, with no effect: Kafka's KRaft controller never read it and Kafka 4.1 does not define it. Every partition whose preferred replica can lead is moved back, whatever the imbalance"),
	intDef("leader.replication.throttled.rate", kindLong, "9223372036854775807", func(c *Config) *int64 { return &c.LeaderReplicationThrottledRate }, atLeast(0),
		"bytes per second a leader sends to followers out of the ISR of the partitions its topics list in leader.replication.throttled.replicas (set by kafka-reassign-partitions --throttle)").onlyDynamic(),
	intDef("follower.replication.throttled.rate", kindLong, "9223372036854775807", func(c *Config) *int64 { return &c.FollowerReplicationThrottledRate }, atLeast(0),
		"bytes per second a follower out of the ISR fetches of the partitions its topics list in follower.replication.throttled.replicas (set by kafka-reassign-partitions --throttle)").onlyDynamic(),
	intDef("replica.alter.log.dirs.io.max.bytes.per.second", kindLong, "9223372036854775807", func(c *Config) *int64 { return &c.AlterLogDirsRate }, atLeast(1),
		"bytes per second copied between log dirs by AlterReplicaLogDirs moves, over Kafka's 11 one-second windows").live(),
	intDef("transaction.state.log.num.partitions", kindInt, "50", func(c *Config) *int32 { return &c.TxnStatePartitions }, atLeast(1),
		"partitions of __transaction_state, created on the first FindCoordinator for a transactional id"),
	intDef("transaction.state.log.replication.factor", kindShort, "3", func(c *Config) *int16 { return &c.TxnStateReplicas }, atLeast(1),
		"replication factor of __transaction_state. A node with neither controller.quorum.voters nor controller.quorum.bootstrap.servers (one node, as `make run` starts it) takes 1 unless the key is set, as Kafka's sample server.properties does"),
	intDef("transaction.state.log.min.isr", kindInt, "2", func(c *Config) *int32 { return &c.TxnStateMinISR }, atLeast(1),
		"min.insync.replicas of __transaction_state. A node with neither controller.quorum.voters nor controller.quorum.bootstrap.servers takes 1 unless the key is set"),
	intDef("transaction.state.log.segment.bytes", kindInt, "104857600", func(c *Config) *int32 { return &c.TxnStateSegmentBytes }, atLeast(1),
		"segment.bytes of __transaction_state"),
	msDef("transaction.max.timeout.ms", kindInt, "900000", func(c *Config) *time.Duration { return &c.TxnMaxTimeout }, atLeast(1),
		"the longest transaction.timeout.ms a producer may ask for; InitProducerId asking for more gets INVALID_TRANSACTION_TIMEOUT"),
	msDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", kindInt, "10000", func(c *Config) *time.Duration { return &c.TxnAbortTimedOutInterval }, atLeast(1),
		"how often the transaction coordinator aborts transactions open longer than their timeout"),
	msDef("transactional.id.expiration.ms", kindInt, "604800000", func(c *Config) *time.Duration { return &c.TxnIDExpiration }, atLeast(1),
		"a transactional id with no transaction for this long is removed"),
	boolDef("transaction.partition.verification.enable", "true", func(c *Config) *bool { return &c.TxnPartitionVerification },
		"verify with the transaction coordinator that a transactional batch beginning its producer's transaction in a partition belongs to the producer's Ongoing transaction (KIP-890), refusing it otherwise").live(),
	msDef("transaction.remove.expired.transaction.cleanup.interval.ms", kindInt, "3600000", func(c *Config) *time.Duration { return &c.TxnRemoveExpiredInterval }, atLeast(1),
		"how often expired transactional ids are removed"),
	ignoredDef("num.network.threads", kindInt),
	intDef("socket.send.buffer.bytes", kindInt, "4194304", func(c *Config) *int { return &c.SocketSendBuffer }, positiveOrMinusOne("the operating system's default"),
		"SO_SNDBUF of the connections of every listener, the controller listener's too, -1 for the kernel's autotuning. Kafka's default is 102400; ringbroker's is 4 MiB, so a consumer's fetch response is handed to the kernel whole rather than as the consumer drains it (the unthrottled max-throughput consumer fell behind half as far, BENCHMARKS.md). The kernel doubles the size and caps it at net.core.wmem_max; a cap is logged at start"),
	intDef("socket.receive.buffer.bytes", kindInt, "-1", func(c *Config) *int { return &c.SocketReceiveBuffer }, positiveOrMinusOne("the operating system's default"),
		"SO_RCVBUF of the connections of every listener, the controller listener's too, -1 for the kernel's autotuning. Kafka's default is 102400; ringbroker leaves the receive window to the kernel, which grows it for producers' large batches. The kernel doubles the size and caps it at net.core.rmem_max; a cap is logged at start"),
	ignoredDef("num.recovery.threads.per.data.dir", kindInt),
	ignoredDef("share.coordinator.state.topic.replication.factor", kindShort),
	ignoredDef("share.coordinator.state.topic.min.isr", kindShort),
}

// lookupBrokerConfig returns the definition of key.
func lookupBrokerConfig(key string) (brokerConfigDef, bool) {
	i, ok := brokerConfigIndex[key]
	if !ok {
		return brokerConfigDef{}, false
	}
	return brokerConfigDefs[i], true
}

// brokerConfigIndex is the position of each key in brokerConfigDefs: Produce looks topic
// defaults up through it on every request.
var brokerConfigIndex = indexByName(brokerConfigDefs, func(d brokerConfigDef) string { return d.name })

// indexByName maps the name of each of defs to its index, the first one where a name repeats
// (as a scan from the start finds it).
func indexByName[T any](defs []T, name func(T) string) map[string]int {
	index := make(map[string]int, len(defs))
	for i, d := range defs {
		if _, dup := index[name(d)]; !dup {
			index[name(d)] = i
		}
	}
	return index
}

// DefaultConfig is a single node with data in ./data, clients on 127.0.0.1:9092 and metrics on
// 127.0.0.1:9644: every key at the default brokerConfigDefs gives it, Kafka's where the key is
// Kafka's.
func DefaultConfig() Config {
	var c Config
	for _, d := range brokerConfigDefs {
		if d.dflt == "" {
			continue
		}
		if err := c.set(d.name, d.dflt); err != nil {
			panic(fmt.Sprintf("broker config %s: default %q refused: %v", d.name, d.dflt, err))
		}
	}
	return c
}

// Set applies one key. Keys neither ringbroker nor Kafka knows are refused, so that a
// configuration never silently means something else here; a Kafka key ringbroker does not act
// on is type-checked and kept, as Kafka takes it, and NotActedOn reports it.
func (c *Config) Set(key, val string) error {
	if d, _ := lookupBrokerConfig(key); d.dynamicOnly {
		return fmt.Errorf("config %s: a dynamic broker config only, as in Kafka: set it with kafka-configs --entity-type brokers", key)
	}
	if err := c.set(key, val); err != nil {
		return fmt.Errorf("config %s=%q: %w", key, val, err)
	}
	if c.static == nil {
		c.static = map[string]string{}
	}
	c.static[key] = val
	if d, _ := lookupBrokerConfig(key); d.synonymOf != "" && d.scale == 0 {
		// An alias (broker.id, log.dir) is the key it names under another name; a synonym
		// in another unit (log.retention.hours) is a key of its own, as in Kafka.
		c.static[d.synonymOf] = val
	}
	return nil
}

func (c *Config) set(key, val string) error {
	if strings.HasPrefix(key, listenerPropPrefix) {
		return c.setListenerProp(key, val)
	}
	d, ok := lookupBrokerConfig(key)
	if k, kafka := lookupKafkaBrokerKey(key); !ok && kafka {
		// Kafka takes it, so a server.properties from a Kafka deployment starts here too: the
		// value is checked for its type, kept for DescribeConfigs and not acted on
		// (NotActedOn lists it, for a warning).
		return checkKind(k.kind, val)
	}
	if !ok {
		return fmt.Errorf("unknown config key %q", key)
	}
	if d.synonymOf == "" {
		return d.set(c, val)
	}
	if d.scale != 0 {
		n, err := parseInt(val, d.kind.bits(), nil)
		if err != nil {
			return err
		}
		val = strconv.FormatInt(n*d.scale, 10)
	}
	return c.set(d.synonymOf, val)
}

// checkKind checks that val parses as a value of kind, as Kafka's ConfigDef.parseType.
func checkKind(kind configKind, val string) error {
	val = strings.TrimSpace(val)
	var err error
	switch kind {
	case kindLong, kindInt, kindShort:
		_, err = parseInt(val, kind.bits(), nil)
	case kindDouble:
		_, err = strconv.ParseFloat(val, 64)
	case kindBool:
		if !strings.EqualFold(val, "true") && !strings.EqualFold(val, "false") {
			err = fmt.Errorf("expected value to be either true or false")
		}
	}
	if err != nil {
		return fmt.Errorf("not a value of type %s: %w", kind, err)
	}
	return nil
}

// NotActedOn lists the keys set with Set that Kafka has and ringbroker keeps without acting on
// them (DescribeConfigs shows their values), sorted: what a server.properties written for
// Kafka sets that means nothing here.
func (c *Config) NotActedOn() []string {
	var out []string
	for key := range c.static {
		if _, ours := lookupBrokerConfig(key); ours {
			continue
		}
		if _, kafka := lookupKafkaBrokerKey(key); kafka {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// isExplicit reports whether key was set with Set.
func (c *Config) isExplicit(key string) bool {
	_, ok := c.static[key]
	return ok
}

// socketBuffers are socket.send.buffer.bytes and socket.receive.buffer.bytes for every
// listener, the controller's too: -1 (the kernel's autotuning) is 0 there, which sets nothing.
func (c *Config) socketBuffers() ring.SocketBuffers {
	return ring.SocketBuffers{Send: max(c.SocketSendBuffer, 0), Receive: max(c.SocketReceiveBuffer, 0)}
}

// offsetsTopicRF is the replication factor __consumer_offsets is created with: the configured
// one, or 1 on a node that founds a quorum of its own (no controller.quorum.voters) and was
// not told otherwise, where the default 3 could never be met.
func (c *Config) offsetsTopicRF() int16 {
	if !c.inCluster() && !c.isExplicit("offsets.topic.replication.factor") {
		return 1
	}
	return c.OffsetsTopicReplicas
}

// txnStateTopicRF and txnStateMinISR are the replication factor and min.insync.replicas
// __transaction_state is created with: the configured ones, or 1 on a node that founds a quorum of
// its own and was not told otherwise, as offsetsTopicRF.
func (c *Config) txnStateTopicRF() int16 {
	if !c.inCluster() && !c.isExplicit("transaction.state.log.replication.factor") {
		return 1
	}
	return c.TxnStateReplicas
}

func (c *Config) txnStateMinISR() int32 {
	if !c.inCluster() && !c.isExplicit("transaction.state.log.min.isr") {
		return 1
	}
	return c.TxnStateMinISR
}

func nonEmpty(items []string) error {
	if len(items) == 0 {
		return fmt.Errorf("empty")
	}
	return nil
}

func checkBackend(val string) error {
	_, err := ring.ParseBackend(val)
	return err
}

func checkWaitMode(val string) error {
	_, err := ring.ParseWaitMode(val)
	return err
}

func splitList(val string) []string {
	var out []string
	for _, s := range strings.Split(val, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// parseListeners parses "NAME://host:port,..."; an empty host means all interfaces.
func parseListeners(val string) ([]Listener, error) {
	var out []Listener
	for _, s := range splitList(val) {
		name, hp, ok := strings.Cut(s, "://")
		if !ok {
			return nil, fmt.Errorf("listener %q: want NAME://host:port", s)
		}
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			return nil, fmt.Errorf("listener %q: %w", s, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("listener %q: bad port %q", s, port)
		}
		out = append(out, Listener{Name: name, Host: host, Port: p})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no listeners")
	}
	return out, nil
}
