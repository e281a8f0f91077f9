package meta

import (
	"encoding/json"
	"fmt"
	"sort"
)

// imageSnapshot is the serialised form of an image.
type imageSnapshot struct {
	Applied        uint64           `json:"applied"`
	Offset         int64            `json:"offset"`
	ClusterID      string           `json:"cluster_id"`
	Brokers        []Broker         `json:"brokers"`
	Topics         []*Topic         `json:"topics"`
	NextProducerID int64            `json:"next_producer_id"`
	Features       map[string]int16 `json:"features,omitempty"`
	FeaturesEpoch  int64            `json:"features_epoch,omitempty"`
	// BrokerConfigs is the image's dynamic broker configs; absent in snapshots written before
	// they existed.
	BrokerConfigs map[string]map[string]string `json:"broker_configs,omitempty"`
	// ClientMetrics and ClientMetricsEpoch are the image's client metrics subscriptions;
	// absent in snapshots written before they existed.
	ClientMetrics      map[string]map[string]string `json:"client_metrics,omitempty"`
	ClientMetricsEpoch int64                        `json:"client_metrics_epoch,omitempty"`
	// UnregisteredEpochs is the image's last epochs of unregistered brokers; absent when
	// there are none.
	UnregisteredEpochs map[int32]int64 `json:"unregistered_epochs,omitempty"`
	// GroupConfigs is the image's dynamic group configs; absent when there are none.
	GroupConfigs map[string]map[string]string `json:"group_configs,omitempty"`
	// Security is the image's ACLs, SCRAM credentials and client quotas; absent when there
	// are none.
	Security *Security `json:"security,omitempty"`
	// Quorum is what membership changes recorded of the quorum's members; absent in
	// snapshots written before it was kept.
	Quorum map[int32]QuorumMember `json:"quorum,omitempty"`
	// DelegationTokens is the image's delegation tokens; absent when there are none.
	DelegationTokens map[string]DelegationToken `json:"delegation_tokens,omitempty"`
}

// Snapshot serialises the current image.
func (sm *stateMachine) Snapshot() ([]byte, error) {
	s := (*RaftStore)(sm)
	im := s.Image()
	s.mu.Lock()
	snap := imageSnapshot{Applied: s.applied, Offset: im.Offset, ClusterID: im.ClusterID, NextProducerID: im.NextProducerID,
		Features: im.Features, FeaturesEpoch: im.FeaturesEpoch, BrokerConfigs: im.BrokerConfigs, Security: im.Security,
		ClientMetrics: im.ClientMetrics, ClientMetricsEpoch: im.ClientMetricsEpoch, GroupConfigs: im.GroupConfigs,
		UnregisteredEpochs: im.UnregisteredEpochs, Quorum: im.Quorum, DelegationTokens: im.DelegationTokens}
	s.mu.Unlock()
	for _, b := range im.Brokers {
		snap.Brokers = append(snap.Brokers, b)
	}
	sort.Slice(snap.Brokers, func(i, j int) bool { return snap.Brokers[i].NodeID < snap.Brokers[j].NodeID })
	for _, n := range im.SortedTopicNames() {
		snap.Topics = append(snap.Topics, im.Topics[n])
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("encode metadata snapshot at offset %d: %w", im.Offset, err)
	}
	return b, nil
}

// Restore replaces the image by a snapshot.
func (sm *stateMachine) Restore(data []byte) error {
	s := (*RaftStore)(sm)
	var snap imageSnapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("decode metadata snapshot (%d bytes): %w", len(data), err)
	}
	im := EmptyImage(snap.ClusterID)
	im.Offset, im.NextProducerID, im.BrokerConfigs, im.Security = snap.Offset, snap.NextProducerID, snap.BrokerConfigs, snap.Security
	im.Features, im.FeaturesEpoch = snap.Features, snap.FeaturesEpoch
	im.ClientMetrics, im.ClientMetricsEpoch = snap.ClientMetrics, snap.ClientMetricsEpoch
	im.GroupConfigs, im.UnregisteredEpochs = snap.GroupConfigs, snap.UnregisteredEpochs
	im.Quorum = snap.Quorum
	im.DelegationTokens = snap.DelegationTokens
	for _, b := range snap.Brokers {
		im.Brokers[b.NodeID] = b
	}
	for _, t := range snap.Topics {
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		im.Topics[t.Name] = t
		im.TopicsByID[t.ID] = t
	}
	s.publish(im)
	s.setApplied(snap.Applied)
	s.learnMemberAddrs(im)
	s.restores.Add(1)
	s.logger.Info("metadata image restored from a snapshot", "applied", snap.Applied, "topics", len(im.Topics))
	return nil
}
