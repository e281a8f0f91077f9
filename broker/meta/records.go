package meta

import (
	"encoding/json"
	"fmt"
)

// RecordType names the kind of a metadata record.
type RecordType string

// The metadata record types, modelled on KRaft's TopicRecord, PartitionRecord, ConfigRecord,
// RemoveTopicRecord and ProducerIdsRecord.
const (
	TypeTopic       RecordType = "topic"
	TypePartition   RecordType = "partition"
	TypeConfig      RecordType = "config"
	TypeRemoveTopic RecordType = "remove_topic"
	TypeProducerIDs RecordType = "producer_ids"
	TypeBroker      RecordType = "broker"
	// TypeFence fences (Fenced) or unfences a registered broker, as KRaft's
	// FenceBrokerRecord and UnfenceBrokerRecord.
	TypeFence RecordType = "fence"
	// TypeUnregisterBroker removes a broker's registration, as KRaft's UnregisterBrokerRecord
	// (the UnregisterBroker API): it is no longer listed, fenced or elected until it
	// registers again.
	TypeUnregisterBroker RecordType = "unregister_broker"
	// TypeControlledShutdown marks a registered broker (NodeID, Incarnation) as shutting down
	// in a controlled way, as KRaft's BrokerRegistrationChangeRecord with InControlledShutdown:
	// it is no longer elected leader nor taken back into an ISR, until it registers again.
	TypeControlledShutdown RecordType = "controlled_shutdown"
	// TypeFeature finalizes FeatureName at FeatureLevel (0 disables it), as KRaft's
	// FeatureLevelRecord.
	TypeFeature RecordType = "feature"
	// TypeBrokerConfig sets (ConfigValue) or removes (nil) a dynamic broker config, as KRaft's
	// ConfigRecord of resource type BROKER: ConfigResource names the broker by node id, or is
	// empty for the cluster-wide default of every broker.
	TypeBrokerConfig RecordType = "broker_config"
	// TypeClientMetricsConfig sets (ConfigValue) or removes (nil) one key of a KIP-714 client
	// metrics subscription, as KRaft's ConfigRecord of resource type CLIENT_METRICS:
	// ConfigResource names the subscription, never empty.
	TypeClientMetricsConfig RecordType = "client_metrics_config"
	// TypeGroupConfig sets (ConfigValue) or removes (nil) one dynamic config of a group
	// (KIP-848's consumer.session.timeout.ms and the like), as KRaft's ConfigRecord of
	// resource type GROUP: ConfigResource names the group, never empty.
	TypeGroupConfig RecordType = "group_config"
	// TypeQuorumMember records a static quorum's voter (NodeID) with its controller listener
	// (MemberAddr) and directory id (DirectoryID), as KRaft's VotersRecord does when a static
	// quorum is upgraded to kraft.version 1: the upgrade commits one for every voter at once,
	// and from then on the voters are the log's, as a dynamic quorum's.
	TypeQuorumMember RecordType = "quorum_member"
)

// Record is one change of cluster state. Exactly the fields of its Type are set.
type Record struct {
	Type RecordType `json:"type"`

	// Topic and RemoveTopic.
	TopicName string `json:"topic,omitempty"`
	TopicID   UUID   `json:"topic_id,omitempty"`

	// Partition.
	Partition   int32   `json:"partition,omitempty"`
	Replicas    []int32 `json:"replicas,omitempty"`
	ISR         []int32 `json:"isr,omitempty"`
	Leader      int32   `json:"leader,omitempty"`
	LeaderEpoch int32   `json:"leader_epoch,omitempty"`
	// PartitionEpoch is the partition's epoch after the record: 0 when it creates the
	// partition, the current epoch + 1 when it changes one (a record that does not follow the
	// current epoch is stale and refused, as KRaft refuses an AlterPartition with
	// INVALID_UPDATE_VERSION). Logs written before partition epochs carry 0 on changes too,
	// which is taken as the next epoch.
	PartitionEpoch int32 `json:"partition_epoch,omitempty"`
	// AddingReplicas and RemovingReplicas describe a reassignment in progress (KIP-455, as in
	// KRaft's PartitionRecord): Replicas holds both the target replicas and the ones leaving;
	// the adding ones catch up, then a record without either list completes the move.
	AddingReplicas   []int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas []int32 `json:"removing_replicas,omitempty"`
	// ISREpochs, when set, holds for each ISR member the broker epoch its leader saw it fetch
	// with (-1: not checked), as AlterPartition's NewIsrWithEpochs (KIP-903): a member new to
	// the ISR whose epoch is not its registration's is refused.
	ISREpochs []int64 `json:"isr_epochs,omitempty"`
	// Offline are the replicas whose log dir their broker reported offline (Partition.Offline),
	// as KRaft's PartitionRecord.Directories names them with the directory id LOST.
	Offline []int32 `json:"offline_replicas,omitempty"`

	// Config, BrokerConfig, ClientMetricsConfig and GroupConfig: a config key set to Value,
	// or removed when Value is nil.
	ConfigKey   string  `json:"config_key,omitempty"`
	ConfigValue *string `json:"config_value,omitempty"`
	// ConfigResource is a BrokerConfig's broker (a node id, or "" for the cluster default),
	// a ClientMetricsConfig's subscription name or a GroupConfig's group id.
	ConfigResource string `json:"config_resource,omitempty"`

	// ProducerIDs: the next producer id block handed out ends before NextProducerID.
	NextProducerID int64 `json:"next_producer_id,omitempty"`

	// Broker registration.
	NodeID int32  `json:"node_id,omitempty"`
	Host   string `json:"host,omitempty"`
	Port   int32  `json:"port,omitempty"`
	Rack   string `json:"rack,omitempty"`
	// Endpoints are a broker registration's advertised listeners, as KRaft's
	// RegisterBrokerRecord.EndPoints: clients are told the endpoint of the listener they are
	// connected to. Host and Port are the inter-broker listener's.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// Incarnation is a broker registration's id, new at every process start; in a
	// ControlledShutdown record, the registration that asked to shut down.
	Incarnation UUID `json:"incarnation,omitempty"`

	// QuorumMember: the voter's controller listener address and metadata directory id.
	MemberAddr  string `json:"member_addr,omitempty"`
	DirectoryID UUID   `json:"directory_id,omitempty"`

	// Fence: whether NodeID is fenced from now on.
	Fenced bool `json:"fenced,omitempty"`

	// Feature: a feature flag and its finalized level.
	FeatureName  string `json:"feature,omitempty"`
	FeatureLevel int16  `json:"feature_level,omitempty"`

	// ACL and RemoveACL: the binding's id, and the binding added.
	ACLID UUID `json:"acl_id,omitempty"`
	ACL   *ACL `json:"acl,omitempty"`

	// ScramCredential: the user, the mechanism, and the credential (nil removes it).
	ScramUser      string           `json:"scram_user,omitempty"`
	ScramMechanism string           `json:"scram_mechanism,omitempty"`
	Scram          *ScramCredential `json:"scram,omitempty"`

	// ClientQuota: the entity, the quota key, and its value (nil removes it).
	QuotaEntity []QuotaEntityPart `json:"quota_entity,omitempty"`
	QuotaKey    string            `json:"quota_key,omitempty"`
	QuotaValue  *float64          `json:"quota_value,omitempty"`

	// DelegationToken: the token added or replaced. RemoveDelegationToken: the id removed.
	Token   *DelegationToken `json:"token,omitempty"`
	TokenID string           `json:"token_id,omitempty"`
}

// Endpoint is one advertised listener of a broker.
type Endpoint struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// EncodeRecords serialises a group of records that commit together.
func EncodeRecords(recs []Record) ([]byte, error) {
	b, err := json.Marshal(recs)
	if err != nil {
		return nil, fmt.Errorf("encode %d metadata records: %w", len(recs), err)
	}
	return b, nil
}

// DecodeRecords parses a group written by EncodeRecords.
func DecodeRecords(b []byte) ([]Record, error) {
	var recs []Record
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("decode metadata records (%d bytes): %w", len(b), err)
	}
	return recs, nil
}
