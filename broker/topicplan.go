package broker

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/broker/meta"
)

// topicSpec is a topic to create, as asked by CreateTopics or by auto-creation.
type topicSpec struct {
	name       string
	partitions int32 // -1: num.partitions
	rf         int16 // -1: default.replication.factor
	assignment map[int32][]int32
	configs    map[string]*string
	// internal marks the broker's own topics (__consumer_offsets), which may use settings not
	// open to clients yet and names clients may not create.
	internal bool
}

// topicResult is the outcome of creating one topic.
type topicResult struct {
	err     *kerr.Error
	message string
	topic   *meta.Topic
}

// maxTopicNameLen is Kafka's limit on topic names.
const maxTopicNameLen = 249

// validateTopicName applies Kafka's Topic.validate rules.
func validateTopicName(name string) string {
	switch {
	case name == "":
		return "Topic name is illegal, it can't be empty"
	case name == "." || name == "..":
		return "Topic name cannot be \".\" or \"..\""
	case len(name) > maxTopicNameLen:
		return fmt.Sprintf("Topic name is illegal, it can't be longer than %d characters, topic name: %s", maxTopicNameLen, name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Sprintf("Topic name %q is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return ""
}

// collisionName maps '.' to '_', as Kafka does to detect topics whose metric names collide.
func collisionName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// planTopic validates spec against image im and returns the records that create it.
func (b *Broker) planTopic(im *meta.Image, spec topicSpec) ([]meta.Record, topicResult) {
	fail := func(e *kerr.Error, msg string) ([]meta.Record, topicResult) {
		return nil, topicResult{err: e, message: msg}
	}
	if msg := validateTopicName(spec.name); msg != "" {
		return fail(kerr.InvalidTopicException, msg)
	}
	if isInternalTopic(spec.name) && !spec.internal {
		return fail(kerr.InvalidRequest, fmt.Sprintf("Creation of internal topic %s is prohibited.", spec.name))
	}
	if _, ok := im.Topics[spec.name]; ok {
		return fail(kerr.TopicAlreadyExists, fmt.Sprintf("Topic '%s' already exists.", spec.name))
	}
	for n := range im.Topics {
		if collisionName(n) == collisionName(spec.name) {
			return fail(kerr.InvalidTopicException, fmt.Sprintf("Topic '%s' collides with existing topic: %s", spec.name, n))
		}
	}
	brokers := len(im.Brokers)
	if brokers == 0 {
		brokers = 1
	}
	var assignment [][]int32
	if len(spec.assignment) > 0 {
		if spec.partitions != -1 || spec.rf != -1 {
			return fail(kerr.InvalidRequest, "Both numPartitions or replicationFactor and replicasAssignment were set. Both cannot be used at the same time.")
		}
		assignment = make([][]int32, len(spec.assignment))
		for p, reps := range spec.assignment {
			if p < 0 || int(p) >= len(spec.assignment) {
				return fail(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
			}
			if msg := b.checkReplicas(im, reps); msg != "" {
				return fail(kerr.InvalidReplicaAssignment, msg)
			}
			assignment[p] = reps
		}
	} else {
		np, rf := spec.partitions, spec.rf
		if np == -1 {
			np = b.cfg.NumPartitions
		}
		if rf == -1 {
			rf = b.cfg.DefaultReplication
		}
		if np <= 0 {
			return fail(kerr.InvalidPartitions, "Number of partitions must be larger than 0.")
		}
		if rf <= 0 {
			return fail(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0.")
		}
		if int(rf) > brokers {
			return fail(kerr.InvalidReplicationFactor, fmt.Sprintf("Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.", rf, rf, brokers))
		}
		if rf > 1 {
			return fail(kerr.InvalidReplicationFactor, fmt.Sprintf("Replication factor %d is not supported: ringbroker does not replicate partition data yet, so every partition has one replica; use replication factor 1.", rf))
		}
		assignment = b.placeReplicas(im, np)
	}
	for k, v := range spec.configs {
		if v == nil {
			return fail(kerr.InvalidConfig, fmt.Sprintf("Null value not supported for topic configs: %s", k))
		}
		validate := b.validateTopicConfigValue
		if spec.internal {
			validate = func(k, v string) error { return validateTopicConfig(k, v) }
		}
		if err := validate(k, *v); err != nil {
			return fail(kerr.InvalidConfig, err.Error())
		}
	}
	id := meta.NewUUID()
	recs := []meta.Record{{Type: meta.TypeTopic, TopicName: spec.name, TopicID: id}}
	for p, reps := range assignment {
		recs = append(recs, meta.Record{Type: meta.TypePartition, TopicID: id, Partition: int32(p),
			Replicas: reps, ISR: reps, Leader: reps[0]})
	}
	for k, v := range spec.configs {
		val := *v
		recs = append(recs, meta.Record{Type: meta.TypeConfig, TopicID: id, ConfigKey: k, ConfigValue: &val})
	}
	t := &meta.Topic{Name: spec.name, ID: id, Configs: map[string]string{}}
	for p, reps := range assignment {
		t.Partitions = append(t.Partitions, meta.Partition{Index: int32(p), Leader: reps[0], Replicas: reps, ISR: reps})
	}
	for k, v := range spec.configs {
		t.Configs[k] = *v
	}
	return recs, topicResult{topic: t}
}

// checkReplicas validates a manual replica list for one partition.
func (b *Broker) checkReplicas(im *meta.Image, reps []int32) string {
	if len(reps) == 0 {
		return "The manual partition assignment includes a partition with no replicas."
	}
	seen := map[int32]bool{}
	for _, r := range reps {
		if seen[r] {
			return fmt.Sprintf("The manual partition assignment includes the broker %d more than once.", r)
		}
		seen[r] = true
		if _, ok := im.Brokers[r]; !ok && r != b.cfg.NodeID {
			return fmt.Sprintf("The manual partition assignment includes broker %d, but no such broker is registered.", r)
		}
	}
	if len(reps) > 1 {
		return "Replication factors above 1 need data replication, which this version of ringbroker does not have yet."
	}
	return ""
}

// validateTopicConfigValue checks a topic config; settings ringbroker cannot honour yet are
// refused rather than accepted and ignored.
func (b *Broker) validateTopicConfigValue(k, v string) error {
	if err := validateTopicConfig(k, v); err != nil {
		return err
	}
	switch {
	case k == "compression.type" && v != "producer":
		return fmt.Errorf("compression.type=%s needs broker-side recompression, which ringbroker does not do yet; only 'producer' is supported", v)
	case k == "remote.storage.enable" && strings.EqualFold(v, "true"):
		return fmt.Errorf("tiered storage is not supported by ringbroker")
	case k == "preallocate" && strings.EqualFold(v, "true"):
		return fmt.Errorf("preallocate=true (segment file preallocation) is not implemented in ringbroker yet")
	}
	return nil
}

// createTopics validates and commits specs; each topic commits on its own, as Kafka reports
// each topic's result separately. validateOnly checks without committing.
func (b *Broker) createTopics(specs []topicSpec, validateOnly bool) []topicResult {
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	out := make([]topicResult, len(specs))
	for i, spec := range specs {
		im := b.meta.Image()
		recs, res := b.planTopic(im, spec)
		if res.err != nil || validateOnly {
			out[i] = res
			continue
		}
		if _, err := b.meta.Commit(recs); err != nil {
			out[i] = topicResult{err: kerr.UnknownServerError, message: err.Error()}
			continue
		}
		out[i] = res
	}
	if !validateOnly {
		if err := b.syncPartitions(); err != nil {
			b.logger.Error("open partitions of new topics", "err", err)
			for i := range out {
				if out[i].err == nil {
					out[i] = topicResult{err: kerr.KafkaStorageError, message: err.Error()}
				}
			}
		}
	}
	return out
}

// placeReplicas assigns n partitions with one replica each, round-robin over the unfenced
// brokers from a random first one (as Kafka's placer), or all to this node when no broker is
// registered yet.
func (b *Broker) placeReplicas(im *meta.Image, n int32) [][]int32 {
	var live []int32
	for _, br := range sortedBrokers(im) {
		if !br.Fenced {
			live = append(live, br.NodeID)
		}
	}
	if len(live) == 0 {
		live = []int32{b.cfg.NodeID}
	}
	start := rand.IntN(len(live))
	out := make([][]int32, n)
	for p := range out {
		out[p] = []int32{live[(start+p)%len(live)]}
	}
	return out
}
