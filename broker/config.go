package broker

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is the broker's configuration. Keys follow Apache Kafka's server.properties names where
// the meaning matches; the zero value is not usable, start from DefaultConfig.
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
	ClusterID           string   // cluster.id (ringbroker's own; Kafka takes it from the storage format step)

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

	// FlushGroupCommit (log.flush.group.commit, ringbroker's own; topic config
	// flush.group.commit) makes Produce with acks >= 1 answer only after a shared fsync
	// covering its batch.
	FlushGroupCommit bool
	// RetentionCheckInterval is log.retention.check.interval.ms: how often retention runs.
	RetentionCheckInterval time.Duration

	// Cluster keys (KRaft's names; see cluster.go). Without controller.quorum.voters the node
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

// DefaultConfig is a single node with data in ./data, clients on 127.0.0.1:9092 and metrics on
// 127.0.0.1:9644; the log defaults are Kafka's.
func DefaultConfig() Config {
	return Config{
		NodeID:             1,
		Listeners:          []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}},
		LogDirs:            []string{"./data"},
		NumPartitions:      1,
		DefaultReplication: 1,
		AutoCreateTopics:   true,
		DeleteTopicEnable:  true,
		SocketRequestMax:   100 << 20,
		MessageMaxBytes:    1048588,
		MetricsListen:      "127.0.0.1:9644",
		IO:                 "auto",
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * time.Hour,
		IndexIntervalBytes: 4096,
		MaxIndexBytes:      10 << 20,
		FlushMessages:      1<<63 - 1,
		RetentionMs:        7 * 24 * 3600 * 1000,
		RetentionBytes:     -1,
		CleanupPolicy:      "delete",
		CompressionType:    "producer",

		RetentionCheckInterval: 300 * time.Second,

		BrokerHeartbeatInterval: 2 * time.Second,
		BrokerSessionTimeout:    9 * time.Second,
		MetadataSnapshotEntries: 10000,

		OffsetsPartitions:          50,
		GroupInitialRebalanceDelay: 3 * time.Second,

		ConsumerHeartbeatInterval:    5 * time.Second,
		ConsumerMinHeartbeatInterval: 5 * time.Second,
		ConsumerMaxHeartbeatInterval: 15 * time.Second,
		ConsumerSessionTimeout:       45 * time.Second,
		ConsumerMinSessionTimeout:    45 * time.Second,
		ConsumerMaxSessionTimeout:    60 * time.Second,
		ConsumerAssignors:            []string{"uniform", "range"},
		GroupMinSessionTimeout:       6 * time.Second,
		GroupMaxSessionTimeout:       30 * time.Minute,
	}
}

// LoadProperties applies a server.properties file to c.
func (c *Config) LoadProperties(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open config %s: %w", path, err)
	}
	defer f.Close()
	if err := c.ReadProperties(f); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// ReadProperties applies Java-properties style "key=value" lines ('#' and '!' comments).
func (c *Config) ReadProperties(r io.Reader) error {
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' || s[0] == '!' {
			continue
		}
		k, v, ok := cutProperty(s)
		if !ok {
			return fmt.Errorf("line %d: %q is not key=value", line, s)
		}
		if err := c.Set(k, v); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
	return sc.Err()
}

func cutProperty(s string) (string, string, bool) {
	i := strings.IndexAny(s, "=:")
	if i <= 0 {
		return "", "", false
	}
	return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:]), true
}

// Override applies one "key=value" given on the command line.
func (c *Config) Override(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("override %q: want key=value", kv)
	}
	return c.Set(strings.TrimSpace(k), strings.TrimSpace(v))
}

// Set applies one key. Kafka keys that ringbroker does not act on yet are refused, so that a
// configuration never silently means something else here.
func (c *Config) Set(key, val string) error {
	var err error
	switch key {
	case "node.id", "broker.id":
		var n int64
		n, err = strconv.ParseInt(val, 10, 32)
		c.NodeID = int32(n)
	case "listeners":
		c.Listeners, err = parseListeners(val)
	case "advertised.listeners":
		c.AdvertisedListeners, err = parseListeners(val)
	case "log.dirs", "log.dir":
		c.LogDirs = splitList(val)
		if len(c.LogDirs) == 0 {
			err = fmt.Errorf("empty")
		}
	case "num.partitions":
		var n int64
		n, err = strconv.ParseInt(val, 10, 32)
		if err == nil && n < 1 {
			err = fmt.Errorf("must be at least 1")
		}
		c.NumPartitions = int32(n)
	case "default.replication.factor":
		var n int64
		n, err = strconv.ParseInt(val, 10, 16)
		c.DefaultReplication = int16(n)
	case "auto.create.topics.enable":
		c.AutoCreateTopics, err = strconv.ParseBool(val)
	case "delete.topic.enable":
		c.DeleteTopicEnable, err = strconv.ParseBool(val)
	case "socket.request.max.bytes":
		c.SocketRequestMax, err = strconv.Atoi(val)
	case "message.max.bytes":
		var n int64
		n, err = strconv.ParseInt(val, 10, 32)
		c.MessageMaxBytes = int32(n)
	case "metrics.listen":
		c.MetricsListen = val
	case "io.backend":
		c.IO = val
	case "io.rings":
		c.Rings, err = strconv.Atoi(val)
	case "io.pin.cpus":
		c.PinCPUs, err = strconv.ParseBool(val)
	case "io.send.zc.threshold.bytes":
		c.SendZCThreshold, err = strconv.Atoi(val)
	case "cluster.id":
		c.ClusterID = val
	case "log.segment.bytes":
		c.SegmentBytes, err = strconv.ParseInt(val, 10, 64)
	case "log.roll.ms":
		c.SegmentMs, err = parseMillis(val)
	case "log.roll.hours":
		var h int64
		h, err = strconv.ParseInt(val, 10, 64)
		c.SegmentMs = time.Duration(h) * time.Hour
	case "log.index.interval.bytes":
		c.IndexIntervalBytes, err = strconv.Atoi(val)
	case "log.index.size.max.bytes":
		c.MaxIndexBytes, err = strconv.Atoi(val)
	case "log.flush.interval.messages":
		c.FlushMessages, err = strconv.ParseInt(val, 10, 64)
	case "log.flush.interval.ms":
		c.FlushInterval, err = parseMillis(val)
	case "log.retention.ms":
		c.RetentionMs, err = strconv.ParseInt(val, 10, 64)
	case "log.retention.minutes":
		var m int64
		m, err = strconv.ParseInt(val, 10, 64)
		c.RetentionMs = m * 60 * 1000
	case "log.retention.hours":
		var h int64
		h, err = strconv.ParseInt(val, 10, 64)
		c.RetentionMs = h * 3600 * 1000
	case "log.retention.bytes":
		c.RetentionBytes, err = strconv.ParseInt(val, 10, 64)
	case "log.flush.group.commit":
		c.FlushGroupCommit, err = strconv.ParseBool(val)
	case "log.retention.check.interval.ms":
		c.RetentionCheckInterval, err = parseMillis(val)
		if err == nil && c.RetentionCheckInterval <= 0 {
			err = fmt.Errorf("must be at least 1")
		}
	case "log.cleanup.policy":
		c.CleanupPolicy = val
	case "compression.type":
		c.CompressionType = val
	case "offsets.topic.num.partitions":
		var n int64
		n, err = strconv.ParseInt(val, 10, 32)
		if err == nil && n < 1 {
			err = fmt.Errorf("must be at least 1")
		}
		c.OffsetsPartitions = int32(n)
	case "group.initial.rebalance.delay.ms":
		c.GroupInitialRebalanceDelay, err = parseMillis(val)
	case "group.min.session.timeout.ms":
		c.GroupMinSessionTimeout, err = parseMillis(val)
	case "group.max.session.timeout.ms":
		c.GroupMaxSessionTimeout, err = parseMillis(val)
	case "group.consumer.heartbeat.interval.ms":
		c.ConsumerHeartbeatInterval, err = parseMillis(val)
	case "group.consumer.min.heartbeat.interval.ms":
		c.ConsumerMinHeartbeatInterval, err = parseMillis(val)
	case "group.consumer.max.heartbeat.interval.ms":
		c.ConsumerMaxHeartbeatInterval, err = parseMillis(val)
	case "group.consumer.session.timeout.ms":
		c.ConsumerSessionTimeout, err = parseMillis(val)
	case "group.consumer.min.session.timeout.ms":
		c.ConsumerMinSessionTimeout, err = parseMillis(val)
	case "group.consumer.max.session.timeout.ms":
		c.ConsumerMaxSessionTimeout, err = parseMillis(val)
	case "group.consumer.assignors":
		c.ConsumerAssignors = nil
		for _, a := range strings.Split(val, ",") {
			c.ConsumerAssignors = append(c.ConsumerAssignors, strings.TrimSpace(a))
		}
	case "process.roles":
		c.ProcessRoles = splitList(val)
		err = checkProcessRoles(c.ProcessRoles)
	case "controller.quorum.voters":
		c.QuorumVoters = val
	case "controller.quorum.bootstrap.servers":
		c.QuorumBootstrapServers = splitList(val)
	case "controller.listener.names":
		c.ControllerListenerNames = splitList(val)
	case "broker.heartbeat.interval.ms":
		c.BrokerHeartbeatInterval, err = parseMillis(val)
		if err == nil && c.BrokerHeartbeatInterval <= 0 {
			err = fmt.Errorf("must be at least 1")
		}
	case "broker.session.timeout.ms":
		c.BrokerSessionTimeout, err = parseMillis(val)
		if err == nil && c.BrokerSessionTimeout <= 0 {
			err = fmt.Errorf("must be at least 1")
		}
	case "metadata.snapshot.interval.entries":
		c.MetadataSnapshotEntries, err = strconv.ParseUint(val, 10, 64)
		if err == nil && c.MetadataSnapshotEntries == 0 {
			err = fmt.Errorf("must be at least 1")
		}
	case "offsets.topic.replication.factor", "transaction.state.log.replication.factor",
		"transaction.state.log.min.isr",
		"listener.security.protocol.map", "inter.broker.listener.name", "num.network.threads",
		"num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
		"num.recovery.threads.per.data.dir",
		"share.coordinator.state.topic.replication.factor",
		"share.coordinator.state.topic.min.isr":
		// Accepted for compatibility with Kafka's sample server.properties; no effect yet.
	default:
		return fmt.Errorf("unknown config key %q", key)
	}
	if err != nil {
		return fmt.Errorf("config %s=%q: %w", key, val, err)
	}
	return nil
}

func parseMillis(val string) (time.Duration, error) {
	ms, err := strconv.ParseInt(val, 10, 64)
	return time.Duration(ms) * time.Millisecond, err
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
