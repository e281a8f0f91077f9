package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// KeyDistribution names how producers choose record keys, as in the
// OpenMessaging Benchmark. Keys decide partitions through the client's
// default partitioner, so the same workload spreads the same way on any broker.
type KeyDistribution string

// Key distributions.
const (
	// KeyNone sends records without a key; the client's sticky partitioner places them.
	KeyNone KeyDistribution = "NO_KEY"
	// KeyRandomNano gives every record a fresh random key.
	KeyRandomNano KeyDistribution = "RANDOM_NANO"
	// KeyRoundRobin cycles through a fixed pool of RoundRobinKeys keys.
	KeyRoundRobin KeyDistribution = "KEY_ROUND_ROBIN"
)

// RoundRobinKeys is the size of the key pool that KeyRoundRobin cycles through.
const RoundRobinKeys = 10_000

// maxTransactionSize bounds Workload.TransactionSize: each producer keeps a transaction's
// records, values included, until it commits.
const maxTransactionSize = 100_000

// Duration is a time.Duration that reads and writes as text ("30s", "1m30s")
// in workload files and results. A bare number is read as seconds.
type Duration time.Duration

// UnmarshalText parses "1m30s" or a plain number of seconds.
func (d *Duration) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(secs) || secs < 0 || secs > float64(1<<62)/1e9 {
			return fmt.Errorf("duration %q: out of range", s)
		}
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration in Go's notation, e.g. "1m0s".
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).String()), nil
}

// Workload describes one benchmark run, in the spirit of the OpenMessaging
// Benchmark's workload files. Field names are the YAML and JSON keys.
type Workload struct {
	// Name labels the workload in reports.
	Name string `yaml:"name" json:"name"`
	// Topics is how many topics are created for the run.
	Topics int `yaml:"topics" json:"topics"`
	// PartitionsPerTopic is each topic's partition count.
	PartitionsPerTopic int `yaml:"partitionsPerTopic" json:"partitionsPerTopic"`
	// ReplicationFactor of the created topics; default 1.
	ReplicationFactor int `yaml:"replicationFactor" json:"replicationFactor"`
	// MessageSize is the record value size in bytes (at least StampSize).
	MessageSize int `yaml:"messageSize" json:"messageSize"`
	// PayloadFile, if set, is a file whose bytes are the record value; its size
	// overrides MessageSize. A relative path is relative to the workload file.
	PayloadFile string `yaml:"payloadFile,omitempty" json:"payloadFile,omitempty"`
	// KeyDistribution picks record keys; default NO_KEY.
	KeyDistribution KeyDistribution `yaml:"keyDistribution" json:"keyDistribution"`
	// ProducersPerTopic is how many producer clients write to each topic.
	ProducersPerTopic int `yaml:"producersPerTopic" json:"producersPerTopic"`
	// ConsumerPerSubscription is how many consumer clients read each topic;
	// partitions are split among them. 0 disables end-to-end measurement.
	ConsumerPerSubscription int `yaml:"consumerPerSubscription" json:"consumerPerSubscription"`
	// ProducerRate is the total target rate in records per second over all
	// producers; 0 is the highest rate the consumers sustain, searched during the run
	// (RateController), or as fast as the clients can when there are no consumers or
	// the workload is transactional.
	ProducerRate float64 `yaml:"producerRate" json:"producerRate"`
	// Acks is "0", "1" or "all"; default "all".
	Acks string `yaml:"acks" json:"acks"`
	// Compression is none, gzip, snappy, lz4 or zstd; default none.
	Compression string `yaml:"compression" json:"compression"`
	// LingerMs is the producer linger in milliseconds; default 1.
	LingerMs int `yaml:"lingerMs" json:"lingerMs"`
	// BatchSize is the maximum record batch size in bytes; 0 keeps the client default.
	BatchSize int `yaml:"batchSize" json:"batchSize"`
	// TransactionSize, when above 0, makes the workload transactional: each producer has a
	// transactional.id of its own and sends its records in transactions of this many, spread
	// round-robin over the topic's partitions, each flushed and committed before the next
	// begins; consumers read committed. Needs acks=all. 0: no transactions.
	TransactionSize int `yaml:"transactionSize,omitempty" json:"transactionSize,omitempty"`
	// WarmupDuration runs load before measuring; default 10s.
	WarmupDuration Duration `yaml:"warmupDuration" json:"warmupDuration"`
	// TestDuration is the measured period; default 1m.
	TestDuration Duration `yaml:"testDuration" json:"testDuration"`

	// dir is the directory of the workload file, for a relative PayloadFile.
	dir string
}

// DefaultWorkload returns the values a workload file starts from: every key
// that the file omits keeps its value from here.
func DefaultWorkload() Workload {
	return Workload{
		Topics:             1,
		PartitionsPerTopic: 1,
		ReplicationFactor:  1,
		MessageSize:        1024,
		KeyDistribution:    KeyNone,
		ProducersPerTopic:  1,
		Acks:               "all",
		Compression:        "none",
		LingerMs:           1,
		WarmupDuration:     Duration(10 * time.Second),
		TestDuration:       Duration(time.Minute),
	}
}

// ParseWorkload decodes a workload from YAML (or JSON, which YAML accepts),
// fills omitted keys from DefaultWorkload, rejects unknown keys and validates it.
func ParseWorkload(data []byte) (Workload, error) {
	w := DefaultWorkload()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil {
		if errors.Is(err, io.EOF) {
			return Workload{}, errors.New("parse workload: empty document")
		}
		return Workload{}, fmt.Errorf("parse workload: %w", err)
	}
	w.Acks = normalizeAcks(w.Acks)
	w.Compression = strings.ToLower(w.Compression)
	if err := w.Validate(); err != nil {
		return Workload{}, err
	}
	return w, nil
}

// LoadWorkload reads and parses a workload file; a relative payloadFile in it
// is resolved against the file's directory.
func LoadWorkload(path string) (Workload, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Workload{}, fmt.Errorf("load workload: %w", err)
	}
	w, err := ParseWorkload(data)
	if err != nil {
		return Workload{}, fmt.Errorf("workload %s: %w", path, err)
	}
	w.dir = filepath.Dir(path)
	return w, nil
}

func normalizeAcks(a string) string {
	switch strings.ToLower(strings.TrimSpace(a)) {
	case "all", "-1":
		return "all"
	default:
		return strings.TrimSpace(a)
	}
}

// Validate reports the first field that is out of range, with its value.
func (w *Workload) Validate() error {
	switch {
	case strings.TrimSpace(w.Name) == "":
		return errors.New("workload: name is empty")
	case w.Topics < 1 || w.Topics > 10_000:
		return fmt.Errorf("workload %s: topics=%d; want 1..10000", w.Name, w.Topics)
	case w.PartitionsPerTopic < 1 || w.PartitionsPerTopic > 100_000:
		return fmt.Errorf("workload %s: partitionsPerTopic=%d; want 1..100000", w.Name, w.PartitionsPerTopic)
	case w.ReplicationFactor < 1 || w.ReplicationFactor > 32:
		return fmt.Errorf("workload %s: replicationFactor=%d; want 1..32", w.Name, w.ReplicationFactor)
	case w.PayloadFile == "" && (w.MessageSize < StampSize || w.MessageSize > 64<<20):
		return fmt.Errorf("workload %s: messageSize=%d; want %d..%d", w.Name, w.MessageSize, StampSize, 64<<20)
	case w.ProducersPerTopic < 1 || w.ProducersPerTopic > 1000:
		return fmt.Errorf("workload %s: producersPerTopic=%d; want 1..1000", w.Name, w.ProducersPerTopic)
	case w.ConsumerPerSubscription < 0 || w.ConsumerPerSubscription > 1000:
		return fmt.Errorf("workload %s: consumerPerSubscription=%d; want 0..1000", w.Name, w.ConsumerPerSubscription)
	case math.IsNaN(w.ProducerRate) || w.ProducerRate < 0 || w.ProducerRate > 1e9:
		return fmt.Errorf("workload %s: producerRate=%v; want 0 (max) or up to 1e9 records/s", w.Name, w.ProducerRate)
	case w.LingerMs < 0 || w.LingerMs > 60_000:
		return fmt.Errorf("workload %s: lingerMs=%d; want 0..60000", w.Name, w.LingerMs)
	case w.BatchSize < 0 || w.BatchSize > 1<<30:
		return fmt.Errorf("workload %s: batchSize=%d; want 0 (client default) or up to %d", w.Name, w.BatchSize, 1<<30)
	case w.TransactionSize < 0 || w.TransactionSize > maxTransactionSize:
		return fmt.Errorf("workload %s: transactionSize=%d; want 0 (no transactions) or up to %d", w.Name, w.TransactionSize, maxTransactionSize)
	case w.TransactionSize > 0 && w.Acks != "all":
		return fmt.Errorf("workload %s: transactionSize=%d with acks=%s; transactions need acks=all", w.Name, w.TransactionSize, w.Acks)
	case w.WarmupDuration < 0:
		return fmt.Errorf("workload %s: warmupDuration=%v; want >= 0", w.Name, time.Duration(w.WarmupDuration))
	case w.TestDuration <= 0:
		return fmt.Errorf("workload %s: testDuration=%v; want > 0", w.Name, time.Duration(w.TestDuration))
	}
	switch w.KeyDistribution {
	case KeyNone, KeyRandomNano, KeyRoundRobin:
	default:
		return fmt.Errorf("workload %s: keyDistribution=%q; want %s, %s or %s", w.Name, w.KeyDistribution, KeyNone, KeyRandomNano, KeyRoundRobin)
	}
	switch w.Acks {
	case "0", "1", "all":
	default:
		return fmt.Errorf("workload %s: acks=%q; want 0, 1 or all", w.Name, w.Acks)
	}
	switch w.Compression {
	case "none", "gzip", "snappy", "lz4", "zstd":
	default:
		return fmt.Errorf("workload %s: compression=%q; want none, gzip, snappy, lz4 or zstd", w.Name, w.Compression)
	}
	return nil
}

// Payload returns the record value template: the payload file's bytes, or
// MessageSize bytes of pseudo-random (incompressible) data from seed. The
// first StampSize bytes are overwritten per record with the intended send time.
func (w *Workload) Payload(seed uint64) ([]byte, error) {
	if w.PayloadFile == "" {
		p := make([]byte, w.MessageSize)
		x := seed | 1
		for i := range p {
			// xorshift64: cheap, deterministic, incompressible enough for codecs.
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			p[i] = byte(x)
		}
		return p, nil
	}
	path := w.PayloadFile
	if !filepath.IsAbs(path) && w.dir != "" {
		path = filepath.Join(w.dir, path)
	}
	p, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("workload %s: payload: %w", w.Name, err)
	}
	if len(p) < StampSize {
		return nil, fmt.Errorf("workload %s: payload %s has %d bytes; want at least %d", w.Name, path, len(p), StampSize)
	}
	return p, nil
}
