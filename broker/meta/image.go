package meta

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
)

// ErrStalePartitionEpoch says a partition record was based on an older partition state than
// the current one: another change (an ISR change, a leader election) committed first.
var ErrStalePartitionEpoch = errors.New("partition epoch is not the current one")

// ErrProducerIDsBehind says a producer-id block record does not advance the next producer id:
// another block was reserved from the same image first.
var ErrProducerIDsBehind = errors.New("producer id block already reserved")

// ErrIneligibleReplica says a partition record adds to an ISR a broker that is in controlled
// shutdown, which Kafka's controller refuses with INELIGIBLE_REPLICA.
var ErrIneligibleReplica = errors.New("replica is not eligible to join the ISR")

// Image is an immutable snapshot of cluster metadata. Apply returns a new image; an image once
// published is never modified, so request handlers read it without locks.
type Image struct {
	// Offset is the metadata log offset of the last record applied.
	Offset int64
	// ClusterID identifies the cluster (Kafka's base64 form).
	ClusterID string
	// Brokers by node id.
	Brokers map[int32]Broker
	// UnregisteredEpochs holds the last epoch of each broker UnregisterBroker removed, so that
	// its next registration takes a higher one: broker epochs never go back (KIP-903). A map
	// is never modified once published.
	UnregisteredEpochs map[int32]int64
	// Topics by name, and the same topics by id.
	Topics     map[string]*Topic
	TopicsByID map[UUID]*Topic
	// NextProducerID is the first producer id not yet handed out in a block.
	NextProducerID int64
	// Features holds the feature levels finalized by Feature records (UpdateFeatures), by
	// name; a feature absent here has the level the broker bootstraps it at. FeaturesEpoch
	// counts those records, Kafka's finalized features epoch (0: none yet), so that it grows
	// with every change and is the same on every node.
	Features      map[string]int16
	FeaturesEpoch int64
	// BrokerConfigs holds the dynamic broker configs by resource: a node id ("1"), or "" for
	// the cluster-wide default. Absent resources have none; a map is never modified once
	// published (Apply copies the one it changes).
	BrokerConfigs map[string]map[string]string
	// ClientMetrics holds the KIP-714 client metrics subscriptions by name, each with the keys
	// ClientMetricsConfig records set; a subscription without keys is absent, and a map is
	// never modified once published. ClientMetricsEpoch counts those records, so that a
	// change is seen without comparing maps.
	ClientMetrics      map[string]map[string]string
	ClientMetricsEpoch int64
	// GroupConfigs holds the dynamic configs of groups by group id (GroupConfig records); a
	// group without keys is absent, and a map is never modified once published.
	GroupConfigs map[string]map[string]string
	// Security is the ACLs, SCRAM credentials and client quotas; nil when there are none.
	Security *Security
	// Quorum holds, by node id, what the membership changes of the controller quorum recorded
	// of each member (see QuorumMember); founding voters of a static quorum are absent. A map
	// is never modified once published.
	Quorum map[int32]QuorumMember
	// DelegationTokens holds the delegation tokens (KIP-48) by id; nil when there are none,
	// and a map is never modified once published.
	DelegationTokens map[string]DelegationToken
}

// Broker is a registered broker.
type Broker struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   string
	// Endpoints are the broker's advertised listeners by name; empty for a registration
	// written before listeners were recorded, which has Host and Port only.
	Endpoints []Endpoint `json:",omitempty"`
	// Incarnation identifies the process that registered; zero on a single node.
	Incarnation UUID
	// Epoch is the broker epoch (KIP-903): it grows by one with each registration of a new
	// incarnation of the node, so that an ISR change built on what an earlier process of the
	// node fetched is refused.
	Epoch int64 `json:",omitempty"`
	// Fenced brokers stopped heartbeating: they lead nothing and are not listed to clients.
	Fenced bool
	// InControlledShutdown brokers asked to stop: leadership moves away from them and they
	// leave every ISR, until they register again.
	InControlledShutdown bool `json:",omitempty"`
}

// Endpoint is where a client connected to listener reaches the broker: the endpoint of that
// name, or Host and Port for a registration without endpoints or an empty listener. ok is
// false when the broker has endpoints but none of that name; Kafka leaves such a broker out
// of what it tells the client.
func (br Broker) Endpoint(listener string) (host string, port int32, ok bool) {
	if listener == "" || len(br.Endpoints) == 0 {
		return br.Host, br.Port, true
	}
	for _, e := range br.Endpoints {
		if e.Name == listener {
			return e.Host, e.Port, true
		}
	}
	return "", 0, false
}

// Topic is a topic and its partitions. Partitions[i].Index == i.
type Topic struct {
	Name       string
	ID         UUID
	Partitions []Partition
	// Configs holds the topic-level overrides only; defaults live in the broker config.
	Configs map[string]string
}

// Partition is the placement and leadership of one partition.
type Partition struct {
	Index       int32
	Leader      int32
	LeaderEpoch int32
	// PartitionEpoch grows with every change of the partition's state (leader, ISR,
	// replicas), so that a change proposed from an older state can be refused.
	PartitionEpoch int32 `json:",omitempty"`
	Replicas       []int32
	ISR            []int32
	// AddingReplicas and RemovingReplicas are set while a reassignment moves the partition
	// (KIP-455): Replicas is the target replicas followed by the removing ones, and the
	// adding ones are catching up. Both are empty otherwise.
	AddingReplicas   []int32 `json:",omitempty"`
	RemovingReplicas []int32 `json:",omitempty"`
	// Offline are the replicas whose broker reported their log dir offline (KIP-858's
	// directory assignment LOST): they can neither lead nor join the ISR until their broker
	// reports them in an online dir again. A subset of Replicas.
	Offline []int32 `json:",omitempty"`
}

// Next returns the record that changes p to leader, leaderEpoch and isr, one partition epoch
// later, keeping its replicas, its offline replicas and any reassignment in progress.
func (p Partition) Next(topic UUID, leader, leaderEpoch int32, isr []int32) Record {
	return Record{Type: TypePartition, TopicID: topic, Partition: p.Index, Replicas: p.Replicas,
		ISR: isr, Leader: leader, LeaderEpoch: leaderEpoch, PartitionEpoch: p.PartitionEpoch + 1,
		AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas, Offline: p.Offline}
}

// IsOffline reports whether broker's replica of p is in a log dir its broker reported offline.
func (p Partition) IsOffline(broker int32) bool { return slices.Contains(p.Offline, broker) }

// Reassigning reports whether a reassignment of the partition is in progress.
func (p Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// TargetReplicas returns the replicas the partition has once its reassignment, if any, is
// complete: Replicas without the removing ones.
func (p Partition) TargetReplicas() []int32 {
	if len(p.RemovingReplicas) == 0 {
		return p.Replicas
	}
	out := make([]int32, 0, len(p.Replicas))
	for _, r := range p.Replicas {
		if !slices.Contains(p.RemovingReplicas, r) {
			out = append(out, r)
		}
	}
	return out
}

// InISR reports whether node is in the partition's in-sync replica set.
func (p Partition) InISR(node int32) bool {
	for _, r := range p.ISR {
		if r == node {
			return true
		}
	}
	return false
}

// ReadyToShutDown reports whether broker node, registered as incarnation inc, is recorded in
// controlled shutdown and leads no partition, so that it can stop without taking a leader
// away from clients.
func (im *Image) ReadyToShutDown(node int32, inc UUID) bool {
	br, ok := im.Brokers[node]
	if !ok || br.Incarnation != inc || !br.InControlledShutdown {
		return false
	}
	for _, t := range im.Topics {
		for _, p := range t.Partitions {
			if p.Leader == node {
				return false
			}
		}
	}
	return true
}

// EmptyImage is the image before any record is applied.
func EmptyImage(clusterID string) *Image {
	return &Image{
		Offset:     -1,
		ClusterID:  clusterID,
		Brokers:    map[int32]Broker{},
		Topics:     map[string]*Topic{},
		TopicsByID: map[UUID]*Topic{},
	}
}

// SortedTopicNames returns the topic names in order, for stable responses.
func (im *Image) SortedTopicNames() []string {
	names := make([]string, 0, len(im.Topics))
	for n := range im.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Apply returns the image after recs, committed at offset. im is not modified; topics that a
// record touches are copied, the rest are shared.
func (im *Image) Apply(offset int64, recs []Record) (*Image, error) {
	next := &Image{
		Offset:             offset,
		ClusterID:          im.ClusterID,
		Brokers:            im.Brokers,
		UnregisteredEpochs: im.UnregisteredEpochs,
		Topics:             make(map[string]*Topic, len(im.Topics)),
		TopicsByID:         make(map[UUID]*Topic, len(im.TopicsByID)),
		NextProducerID:     im.NextProducerID,
		Features:           im.Features,
		FeaturesEpoch:      im.FeaturesEpoch,
		BrokerConfigs:      im.BrokerConfigs,
		Security:           im.Security,

		ClientMetrics:      im.ClientMetrics,
		ClientMetricsEpoch: im.ClientMetricsEpoch,
		GroupConfigs:       im.GroupConfigs,
		Quorum:             im.Quorum,
		DelegationTokens:   im.DelegationTokens,
	}
	for n, t := range im.Topics {
		next.Topics[n] = t
		next.TopicsByID[t.ID] = t
	}
	copied := map[UUID]bool{}
	mutable := func(id UUID) (*Topic, error) {
		t, ok := next.TopicsByID[id]
		if !ok {
			return nil, fmt.Errorf("metadata record for unknown topic id %s", id)
		}
		if !copied[id] {
			c := *t
			c.Partitions = append([]Partition(nil), t.Partitions...)
			c.Configs = make(map[string]string, len(t.Configs))
			for k, v := range t.Configs {
				c.Configs[k] = v
			}
			t = &c
			next.Topics[t.Name] = t
			next.TopicsByID[id] = t
			copied[id] = true
		}
		return t, nil
	}
	brokersCopied := false
	for i, r := range recs {
		switch r.Type {
		case TypeTopic:
			if _, ok := next.Topics[r.TopicName]; ok {
				return nil, fmt.Errorf("record %d: topic %q already exists", i, r.TopicName)
			}
			t := &Topic{Name: r.TopicName, ID: r.TopicID, Configs: map[string]string{}}
			next.Topics[t.Name] = t
			next.TopicsByID[t.ID] = t
			copied[t.ID] = true
		case TypePartition:
			t, err := mutable(r.TopicID)
			if err != nil {
				return nil, fmt.Errorf("record %d: %w", i, err)
			}
			p := Partition{Index: r.Partition, Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch,
				Replicas: append([]int32(nil), r.Replicas...), ISR: append([]int32(nil), r.ISR...),
				AddingReplicas: slices.Clone(r.AddingReplicas), RemovingReplicas: slices.Clone(r.RemovingReplicas)}
			for _, n := range r.Offline {
				// A replica a reassignment removed is offline nowhere any more.
				if slices.Contains(p.Replicas, n) && !slices.Contains(p.Offline, n) {
					p.Offline = append(p.Offline, n)
				}
			}
			for _, n := range append(slices.Clone(p.AddingReplicas), p.RemovingReplicas...) {
				if !slices.Contains(p.Replicas, n) || (slices.Contains(p.AddingReplicas, n) && slices.Contains(p.RemovingReplicas, n)) {
					return nil, fmt.Errorf("record %d: partition %d of %q: replicas %v, adding %v, removing %v: broker %d is not a replica or both adding and removing",
						i, r.Partition, t.Name, p.Replicas, p.AddingReplicas, p.RemovingReplicas, n)
				}
			}
			switch {
			case int(r.Partition) == len(t.Partitions):
				t.Partitions = append(t.Partitions, p)
			case int(r.Partition) < len(t.Partitions):
				old := t.Partitions[r.Partition]
				for j, n := range p.ISR {
					if old.InISR(n) {
						continue
					}
					if next.Brokers[n].InControlledShutdown {
						return nil, fmt.Errorf("record %d: partition %d of %q: broker %d is in controlled shutdown: %w", i, r.Partition, t.Name, n, ErrIneligibleReplica)
					}
					if j < len(r.ISREpochs) && r.ISREpochs[j] >= 0 && r.ISREpochs[j] != next.Brokers[n].Epoch {
						return nil, fmt.Errorf("record %d: partition %d of %q: broker %d fetched at epoch %d, registered at %d: %w",
							i, r.Partition, t.Name, n, r.ISREpochs[j], next.Brokers[n].Epoch, ErrIneligibleReplica)
					}
				}
				cur := old.PartitionEpoch
				switch r.PartitionEpoch {
				case 0:
					p.PartitionEpoch = cur + 1
				case cur + 1:
				default:
					return nil, fmt.Errorf("record %d: partition %d of %q at epoch %d, not after %d: %w", i, r.Partition, t.Name, r.PartitionEpoch, cur, ErrStalePartitionEpoch)
				}
				t.Partitions[r.Partition] = p
			default:
				return nil, fmt.Errorf("record %d: partition %d of %q leaves a gap after %d partitions", i, r.Partition, t.Name, len(t.Partitions))
			}
		case TypeConfig:
			t, err := mutable(r.TopicID)
			if err != nil {
				return nil, fmt.Errorf("record %d: %w", i, err)
			}
			if r.ConfigValue == nil {
				delete(t.Configs, r.ConfigKey)
			} else {
				t.Configs[r.ConfigKey] = *r.ConfigValue
			}
		case TypeBrokerConfig:
			next.BrokerConfigs = withResourceConfig(next.BrokerConfigs, r)
		case TypeClientMetricsConfig:
			if err := next.applyClientMetricsConfig(r); err != nil {
				return nil, fmt.Errorf("record %d: %w", i, err)
			}
		case TypeGroupConfig:
			if err := next.applyGroupConfig(r); err != nil {
				return nil, fmt.Errorf("record %d: %w", i, err)
			}
		case TypeACL, TypeRemoveACL, TypeScramCredential, TypeClientQuota:
			sec, err := next.Security.applySecurity(r)
			if err != nil {
				return nil, fmt.Errorf("record %d: %w", i, err)
			}
			next.Security = sec
		case TypeDelegationToken, TypeRemoveDelegationToken:
			if err := next.applyDelegationToken(r); err != nil {
				return nil, fmt.Errorf("record %d: %w", i, err)
			}
		case TypeRemoveTopic:
			t, ok := next.TopicsByID[r.TopicID]
			if !ok {
				return nil, fmt.Errorf("record %d: remove unknown topic id %s", i, r.TopicID)
			}
			delete(next.Topics, t.Name)
			delete(next.TopicsByID, t.ID)
		case TypeProducerIDs:
			if r.NextProducerID <= next.NextProducerID {
				return nil, fmt.Errorf("record %d: producer id block end %d does not advance past %d: %w", i, r.NextProducerID, next.NextProducerID, ErrProducerIDsBehind)
			}
			next.NextProducerID = r.NextProducerID
		case TypeFeature:
			if r.FeatureName == "" || r.FeatureLevel < 0 {
				return nil, fmt.Errorf("record %d: feature %q at level %d", i, r.FeatureName, r.FeatureLevel)
			}
			f := maps.Clone(next.Features)
			if f == nil {
				f = map[string]int16{}
			}
			f[r.FeatureName] = r.FeatureLevel
			next.Features, next.FeaturesEpoch = f, next.FeaturesEpoch+1
		case TypeBroker, TypeFence, TypeControlledShutdown, TypeUnregisterBroker:
			if !brokersCopied {
				b := make(map[int32]Broker, len(next.Brokers)+1)
				for k, v := range next.Brokers {
					b[k] = v
				}
				next.Brokers = b
				brokersCopied = true
			}
			if r.Type == TypeBroker {
				old, ok := next.Brokers[r.NodeID]
				epoch := max(old.Epoch, next.UnregisteredEpochs[r.NodeID]) + 1
				if ok && old.Incarnation == r.Incarnation && old.Epoch > 0 {
					epoch = old.Epoch
				}
				next.Brokers[r.NodeID] = Broker{NodeID: r.NodeID, Host: r.Host, Port: r.Port, Rack: r.Rack, Endpoints: r.Endpoints, Incarnation: r.Incarnation, Epoch: epoch}
				break
			}
			br, ok := next.Brokers[r.NodeID]
			if !ok {
				return nil, fmt.Errorf("record %d: %s of unregistered broker %d", i, r.Type, r.NodeID)
			}
			if r.Type == TypeUnregisterBroker {
				delete(next.Brokers, r.NodeID)
				retired := maps.Clone(next.UnregisteredEpochs)
				if retired == nil {
					retired = map[int32]int64{}
				}
				retired[r.NodeID] = br.Epoch
				next.UnregisteredEpochs = retired
				break
			}
			if r.Type == TypeControlledShutdown {
				// A request of an earlier registration does not stop the one that replaced it.
				if r.Incarnation == br.Incarnation {
					br.InControlledShutdown = true
					next.Brokers[r.NodeID] = br
				}
				break
			}
			br.Fenced = r.Fenced
			next.Brokers[r.NodeID] = br
		case TypeQuorumMember:
			if _, _, err := net.SplitHostPort(r.MemberAddr); err != nil || r.NodeID < 0 || r.DirectoryID.IsZero() {
				return nil, fmt.Errorf("record %d: quorum member %d at %q with directory id %s: want a node id, host:port and a directory id", i, r.NodeID, r.MemberAddr, r.DirectoryID)
			}
			next = next.withMember(r.NodeID, QuorumMember{Addr: r.MemberAddr, DirectoryID: r.DirectoryID}, true)
		default:
			return nil, fmt.Errorf("record %d: unknown metadata record type %q", i, r.Type)
		}
	}
	return next, nil
}
