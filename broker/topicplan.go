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
		if msg := checkSameReplicationFactor(assignment, len(assignment[0])); msg != "" {
			return fail(kerr.InvalidReplicaAssignment, msg)
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
		var err *kerr.Error
		var msg string
		if assignment, err, msg = b.placeReplicas(im, 0, np, rf); err != nil {
			return fail(err, msg)
		}
	}
	parts := make([]meta.Partition, len(assignment))
	for p, reps := range assignment {
		isr := liveReplicas(im, reps, b.cfg.NodeID)
		if len(isr) == 0 {
			return fail(kerr.InvalidReplicaAssignment, fmt.Sprintf("All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", p))
		}
		parts[p] = meta.Partition{Index: int32(p), Leader: isr[0], Replicas: reps, ISR: isr}
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
	for _, p := range parts {
		recs = append(recs, newPartitionRecord(id, p))
	}
	for k, v := range spec.configs {
		val := *v
		recs = append(recs, meta.Record{Type: meta.TypeConfig, TopicID: id, ConfigKey: k, ConfigValue: &val})
	}
	t := &meta.Topic{Name: spec.name, ID: id, Configs: map[string]string{}}
	t.Partitions = parts
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
	return ""
}

// checkSameReplicationFactor refuses a manual assignment whose partitions do not all have rf
// replicas, as Kafka does.
func checkSameReplicationFactor(assignment [][]int32, rf int) string {
	for _, reps := range assignment {
		if len(reps) != rf {
			return fmt.Sprintf("The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", len(reps), rf)
		}
	}
	return ""
}

// liveReplicas returns the replicas that are registered and unfenced, in replica order: a new
// partition's ISR, whose first member leads. Before any broker registers (a single node at
// its first start) this node counts as live.
func liveReplicas(im *meta.Image, reps []int32, self int32) []int32 {
	var out []int32
	for _, r := range reps {
		br, ok := im.Brokers[r]
		if ok && !br.Fenced || !ok && len(im.Brokers) == 0 && r == self {
			out = append(out, r)
		}
	}
	return out
}

// newPartitionRecord is the record that creates partition p of topic.
func newPartitionRecord(topic meta.UUID, p meta.Partition) meta.Record {
	return meta.Record{Type: meta.TypePartition, TopicID: topic, Partition: p.Index,
		Replicas: p.Replicas, ISR: p.ISR, Leader: p.Leader}
}

// validateTopicConfigValue checks a topic config; settings ringbroker cannot honour yet are
// refused rather than accepted and ignored.
func (b *Broker) validateTopicConfigValue(k, v string) error {
	if err := validateTopicConfig(k, v); err != nil {
		return err
	}
	switch {
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

// placeReplicas assigns partitions first..first+n-1 rf replicas each over the unfenced brokers,
// as Kafka's rack-unaware assignment: the first replicas go round-robin from a random broker,
// so leadership spreads evenly, and the followers of each partition are the next brokers at a
// shift that changes once per round, so no two brokers follow each other everywhere. Before
// any broker is registered (a single node at its first start) this node takes every replica.
func (b *Broker) placeReplicas(im *meta.Image, first, n int32, rf int16) ([][]int32, *kerr.Error, string) {
	var live []int32
	for _, br := range sortedBrokers(im) {
		if !br.Fenced {
			live = append(live, br.NodeID)
		}
	}
	if len(im.Brokers) == 0 {
		live = []int32{b.cfg.NodeID}
	}
	if int(rf) > len(live) {
		return nil, kerr.InvalidReplicationFactor, fmt.Sprintf("Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.", rf, rf, len(live))
	}
	return stripeReplicas(live, first, n, int(rf), rand.IntN(len(live)), rand.IntN(len(live))), nil, ""
}

// stripeReplicas is the placement of placeReplicas from the given random start and shift
// (Kafka's assignReplicasToBrokersRackUnaware).
func stripeReplicas(brokers []int32, first, n int32, rf, start, shift int) [][]int32 {
	nb := len(brokers)
	out := make([][]int32, n)
	for i := range out {
		p := int(first) + i
		if p > 0 && p%nb == 0 {
			shift++
		}
		lead := (p + start) % nb
		reps := []int32{brokers[lead]}
		for j := 0; j < rf-1; j++ {
			reps = append(reps, brokers[(lead+1+(shift+j)%(nb-1))%nb])
		}
		out[i] = reps
	}
	return out
}
