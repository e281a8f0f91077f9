package quota

import (
	"fmt"
	"strconv"
	"time"
)

// The quota keys of client quotas (QuotaConfigs in Kafka). Values are doubles on the wire.
const (
	// KeyProducerByteRate bounds the bytes per second a user/client-id produces to a broker.
	KeyProducerByteRate = "producer_byte_rate"
	// KeyConsumerByteRate bounds the bytes per second a user/client-id fetches from a broker.
	KeyConsumerByteRate = "consumer_byte_rate"
	// KeyRequestPercentage bounds the handler-thread time a user/client-id takes, in percent of
	// one thread (200 is two threads' worth).
	KeyRequestPercentage = "request_percentage"
	// KeyControllerMutationRate bounds the partitions a user/client-id creates or deletes per
	// second (CreateTopics, CreatePartitions, DeleteTopics).
	KeyControllerMutationRate = "controller_mutation_rate"
	// KeyConnectionCreationRate bounds the connections per second accepted from one IP.
	KeyConnectionCreationRate = "connection_creation_rate"
)

// valueType is the config type Kafka gives a quota key, which decides what values are valid.
type valueType uint8

const (
	typeDouble valueType = iota
	typeLong
	typeInt
)

// keyType is the type Kafka defines for a quota key of an entity: user and client-id entities
// take QuotaConfig.userAndClientQuotaConfigs, ip entities QuotaConfig.ipConfigs. ok is false for
// a key the entity cannot have.
func keyType(ip bool, key string) (t valueType, ok bool) {
	if ip {
		return typeInt, key == KeyConnectionCreationRate
	}
	switch key {
	case KeyProducerByteRate, KeyConsumerByteRate:
		return typeLong, true
	case KeyRequestPercentage, KeyControllerMutationRate:
		return typeDouble, true
	}
	return 0, false
}

// Kind is one of Kafka's client quota managers: each measures its own quantity with its own
// sensors, bounded by its own quota key.
type Kind uint8

// The kinds of client quota, after Kafka's QuotaType.
const (
	// Produce measures the bytes of produce requests (ClientQuotaManager for Produce).
	Produce Kind = iota
	// Fetch measures the bytes of fetch responses (ClientQuotaManager for Fetch).
	Fetch
	// Request measures handler-thread time in percent (ClientRequestQuotaManager).
	Request
	// ControllerMutation measures partitions created or deleted, with a token bucket
	// (ControllerMutationQuotaManager).
	ControllerMutation
	numKinds
)

// Key is the quota key that bounds the kind.
func (k Kind) Key() string {
	switch k {
	case Produce:
		return KeyProducerByteRate
	case Fetch:
		return KeyConsumerByteRate
	case Request:
		return KeyRequestPercentage
	case ControllerMutation:
		return KeyControllerMutationRate
	}
	return ""
}

// String is Kafka's QuotaType name.
func (k Kind) String() string {
	switch k {
	case Produce:
		return "Produce"
	case Fetch:
		return "Fetch"
	case Request:
		return "Request"
	case ControllerMutation:
		return "ControllerMutation"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Config is the sampling of quota sensors, with Kafka's keys and defaults.
type Config struct {
	// Windows is quota.window.num: the samples a rate is measured over (default 11).
	Windows int
	// WindowSize is quota.window.size.seconds: the span of one sample (default 1 s).
	WindowSize time.Duration
	// ControllerWindows is controller.quota.window.num (default 11): the token bucket of
	// controller_mutation_rate holds ControllerWindows × ControllerWindowSize × the rate.
	ControllerWindows int
	// ControllerWindowSize is controller.quota.window.size.seconds (default 1 s).
	ControllerWindowSize time.Duration
}

// DefaultConfig is Kafka's defaults: 11 windows of one second, for both sensor families.
func DefaultConfig() Config {
	return Config{Windows: 11, WindowSize: time.Second, ControllerWindows: 11, ControllerWindowSize: time.Second}
}

// validate refuses values Kafka's ConfigDef refuses (each is at least 1, sizes in whole seconds).
func (c Config) validate() error {
	for _, v := range [...]struct {
		key string
		n   int
	}{{"quota.window.num", c.Windows}, {"controller.quota.window.num", c.ControllerWindows}} {
		if v.n < 1 {
			return configError(v.key, v.n, 1)
		}
	}
	for _, v := range [...]struct {
		key string
		d   time.Duration
	}{{"quota.window.size.seconds", c.WindowSize}, {"controller.quota.window.size.seconds", c.ControllerWindowSize}} {
		if v.d < time.Second || v.d%time.Second != 0 {
			return fmt.Errorf("Invalid value %v for configuration %s: Value must be at least 1 whole second", v.d, v.key)
		}
	}
	return nil
}

// configError is ConfigDef's Range.atLeast message.
func configError(key string, v, least int) error {
	return fmt.Errorf("Invalid value %d for configuration %s: Value must be at least %d", v, key, least)
}
