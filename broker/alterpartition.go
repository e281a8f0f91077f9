package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

// AlterPartition (key 56) is how a partition's leader changes its ISR, as in KRaft: it sends
// the request to the active controller, which checks it against the partition's and the
// brokers' state and commits the change. It is not served on the client listeners (Kafka's
// brokers do not serve it either); it travels over the controller listener (meta's
// forwarding) as Kafka's encoded request and response.
//
// Version notes: leaders send v3, which names topics by id and gives each new ISR member's
// broker epoch (KIP-903). The leader recovery state after an unclean election (KIP-704) is not
// modelled: only RECOVERED is accepted.

// alterPartitionVersion is the AlterPartition version leaders send and the controller reads.
const alterPartitionVersion = 3

// installControllerAPIs installs the handlers of the Kafka APIs that the active controller
// alone answers, for when this node is that controller.
func (b *Broker) installControllerAPIs() {
	b.meta.HandleControllerAPI(kmsg.AlterPartition.Int16(), b.serveAlterPartition)
	b.meta.HandleControllerAPI(kmsg.DescribeQuorum.Int16(), b.serveDescribeQuorum)
	b.meta.HandleControllerAPI(kmsg.AddRaftVoter.Int16(), func(body []byte) ([]byte, error) { return b.serveVoterChange(body, addVoter) })
	b.meta.HandleControllerAPI(kmsg.RemoveRaftVoter.Int16(), func(body []byte) ([]byte, error) { return b.serveVoterChange(body, removeVoter) })
	b.meta.HandleControllerAPI(kmsg.AssignReplicasToDirs.Int16(), b.serveAssignReplicasToDirs)
	b.meta.HandleControllerAPI(kmsg.UpdateFeatures.Int16(), b.serveKRaftUpgrade)
}

// serveAlterPartition is the active controller's AlterPartition handler (a
// meta.ControllerAPIHandler): it decides the request against the current image and commits the changes
// it accepts.
func (b *Broker) serveAlterPartition(body []byte) ([]byte, error) {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = alterPartitionVersion
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode AlterPartition v%d: %w", alterPartitionVersion, err)
	}
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	resp, recs := decideAlterPartition(b.meta.Image(), req)
	if len(recs) > 0 {
		if _, err := b.meta.Commit(recs); err != nil {
			code := kerr.InvalidUpdateVersion
			switch {
			case errors.Is(err, meta.ErrIneligibleReplica):
				code = kerr.IneligibleReplica
			case !errors.Is(err, meta.ErrStalePartitionEpoch):
				return nil, fmt.Errorf("commit AlterPartition of broker %d: %w", req.BrokerID, err)
			}
			// Another change of the partition, or of a broker, was committed in between.
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					if rp := &resp.Topics[i].Partitions[j]; rp.ErrorCode == 0 {
						*rp = kmsg.AlterPartitionResponseTopicPartition{Partition: rp.Partition, ErrorCode: code.Code, LeaderID: -1, LeaderEpoch: -1}
					}
				}
			}
		}
	}
	return resp.AppendTo(nil), nil
}

// decideAlterPartition checks each partition change of req against im as KRaft's
// ReplicationControlManager does and returns the response and the records of the changes it
// accepts: the requester must be registered at its epoch (else STALE_BROKER_EPOCH for all);
// a partition must be at the request's leader and partition epochs (a newer one here means
// this is not the active controller any more: NOT_CONTROLLER; an older one
// FENCED_LEADER_EPOCH or INVALID_UPDATE_VERSION), led by the requester, and its new ISR made
// of its replicas, holding the leader, with every member registered, unfenced, not shutting
// down and at the broker epoch given (INELIGIBLE_REPLICA).
func decideAlterPartition(im *meta.Image, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, []meta.Record) {
	resp := kmsg.NewPtrAlterPartitionResponse()
	resp.Version = req.Version
	if br, ok := im.Brokers[req.BrokerID]; !ok || br.Fenced || req.BrokerEpoch != -1 && req.BrokerEpoch != br.Epoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return resp, nil
	}
	var recs []meta.Record
	for _, rt := range req.Topics {
		t := im.TopicsByID[meta.UUID(rt.TopicID)]
		st := kmsg.NewAlterPartitionResponseTopic()
		st.TopidID = rt.TopicID // sic: kmsg spells the response field so
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderID, sp.LeaderEpoch = -1, -1
			switch {
			case t == nil:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				pm := t.Partitions[rp.Partition]
				isr := make([]int32, len(rp.NewEpochISR))
				epochs := make([]int64, len(rp.NewEpochISR))
				for i, m := range rp.NewEpochISR {
					isr[i], epochs[i] = m.BrokerID, m.BrokerEpoch
				}
				if code := checkAlterPartition(im, req.BrokerID, pm, &rp, isr, epochs); code != nil {
					sp.ErrorCode = code.Code
					break
				}
				rec := pm.Next(t.ID, pm.Leader, pm.LeaderEpoch, isr)
				rec.ISREpochs = epochs
				recs = append(recs, rec)
				sp.LeaderID, sp.LeaderEpoch, sp.ISR, sp.PartitionEpoch = rec.Leader, rec.LeaderEpoch, isr, rec.PartitionEpoch
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, recs
}

// checkAlterPartition returns why broker cannot change partition pm's ISR to isr (members'
// broker epochs in epochs, -1 unchecked), or nil.
func checkAlterPartition(im *meta.Image, broker int32, pm meta.Partition, rp *kmsg.AlterPartitionRequestTopicPartition, isr []int32, epochs []int64) *kerr.Error {
	switch {
	case rp.LeaderEpoch > pm.LeaderEpoch || rp.PartitionEpoch > pm.PartitionEpoch:
		return kerr.NotController
	case rp.LeaderEpoch < pm.LeaderEpoch:
		return kerr.FencedLeaderEpoch
	case broker != pm.Leader:
		return kerr.InvalidRequest
	case rp.PartitionEpoch < pm.PartitionEpoch:
		return kerr.InvalidUpdateVersion
	case rp.LeaderRecoveryState != 0, !slices.Contains(isr, pm.Leader):
		return kerr.InvalidRequest
	}
	for i, r := range isr {
		if !slices.Contains(pm.Replicas, r) || slices.Contains(isr[:i], r) {
			return kerr.InvalidRequest
		}
	}
	for i, r := range isr {
		br, ok := im.Brokers[r]
		if !ok || br.Fenced || br.InControlledShutdown || epochs[i] != -1 && epochs[i] != br.Epoch {
			return kerr.IneligibleReplica
		}
	}
	return nil
}

// alterISR asks the active controller to change p's ISR from partition state pm (of topic
// topicID) to isr, with the broker epochs the followers fetched with. It returns nil once the
// change is committed; the next image brings it.
func (b *Broker) alterISR(ctx context.Context, p *partition, topicID meta.UUID, pm meta.Partition, isr []int32) error {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = alterPartitionVersion
	req.BrokerID = b.cfg.NodeID
	req.BrokerEpoch = b.brokerEpoch()
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = p.index, pm.LeaderEpoch, pm.PartitionEpoch
	for _, r := range isr {
		m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		m.BrokerID, m.BrokerEpoch = r, p.followerEpoch(r)
		if r == b.cfg.NodeID {
			m.BrokerEpoch = req.BrokerEpoch
		}
		rp.NewEpochISR = append(rp.NewEpochISR, m)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrAlterPartitionResponse()
	if err := b.callController(ctx, req, resp, &resp.ErrorCode); err != nil {
		return err
	}
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
				return fmt.Errorf("AlterPartition of partition %d refused: %w", sp.Partition, err)
			}
		}
	}
	return nil
}

// callController sends req to the active controller and decodes its answer into resp; the
// answer's top-level error code, at code, is returned as an error.
func (b *Broker) callController(ctx context.Context, req kmsg.Request, resp kmsg.Response, code *int16) error {
	out, err := b.meta.ControllerAPI(ctx, req.Key(), req.AppendTo(nil))
	if err != nil {
		return err
	}
	name := kmsg.NameForKey(req.Key())
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(out); err != nil {
		return fmt.Errorf("decode %s response: %w", name, err)
	}
	if err := kerr.ErrorForCode(*code); err != nil {
		return fmt.Errorf("%s refused: %w", name, err)
	}
	return nil
}

// brokerEpoch is this broker's epoch in the current image, or -1 while it is not registered
// under this process.
func (b *Broker) brokerEpoch() int64 {
	if br, ok := b.meta.Image().Brokers[b.cfg.NodeID]; ok && br.Incarnation == b.incarnation {
		return br.Epoch
	}
	return -1
}
