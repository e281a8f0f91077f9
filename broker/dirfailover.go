package broker

// Leadership away from an offline log dir, as Kafka's controller handles the offline dirs a
// broker reports (KIP-858): the broker's replicas there can neither lead nor follow, so the
// active controller takes the broker out of those partitions' ISRs and, where it led, elects
// the first other in-sync replica that is registered, unfenced and not shutting down. A
// partition whose only in-sync replica is the broker keeps it (Kafka leaves such a partition
// without a leader; here the broker stays leader and answers KAFKA_STORAGE_ERROR, which is as
// unavailable, and no election can bring the replica back while its dir is offline).
//
// The report travels as AssignReplicasToDirs (key 73), which Kafka's brokers send to the
// controller over the controller listener, naming the replicas with Kafka's directory id LOST;
// ringbroker does not track which dir holds which replica otherwise, so other directory ids
// are accepted and change nothing.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

// lostDirID is Kafka's DirectoryId.LOST: the replica's dir is offline or gone.
var lostDirID = meta.UUID{15: 1}

// offlineReportRetry is how long a broker waits before it reports its offline replicas again
// after the controller could not take the report.
const offlineReportRetry = 500 * time.Millisecond

// reportOfflineReplicas asks the active controller, in the background until it has taken the
// report or the broker stops, to move this broker's replicas in the offline dir d out of their
// ISRs and their leadership to other replicas.
func (b *Broker) reportOfflineReplicas(d *logDir) {
	if b.closing.Load() || b.stop == nil {
		return
	}
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		for {
			req := b.offlineReplicasRequest(d)
			if req == nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), b.cfg.BrokerSessionTimeout)
			err := b.sendOfflineReplicas(ctx, req)
			cancel()
			if err == nil {
				return
			}
			b.logger.Warn("report offline replicas to the controller", "dir", d.path, "err", err)
			select {
			case <-b.stop:
				return
			case <-time.After(offlineReportRetry):
			}
		}
	}()
}

// offlineReplicasRequest is the report of this broker's replicas in d that the controller
// would change (see offlineReplicaChange), nil when there are none.
func (b *Broker) offlineReplicasRequest(d *logDir) *kmsg.AssignReplicasToDirsRequest {
	im := b.meta.Image()
	self := b.cfg.NodeID
	rd := kmsg.NewAssignReplicasToDirsRequestDirectory()
	rd.ID = lostDirID
	for _, ps := range b.parts.Load().byID {
		var rt *kmsg.AssignReplicasToDirsRequestDirectoryTopic
		for _, p := range ps {
			if p == nil || p.dir.Load() != d {
				continue
			}
			t := im.TopicsByID[p.topicID]
			if t == nil || int(p.index) >= len(t.Partitions) {
				continue
			}
			if _, ok := offlineReplicaChange(im, t, t.Partitions[p.index], self); !ok {
				continue
			}
			if rt == nil {
				rd.Topics = append(rd.Topics, kmsg.NewAssignReplicasToDirsRequestDirectoryTopic())
				rt = &rd.Topics[len(rd.Topics)-1]
				rt.TopicID = p.topicID
			}
			rp := kmsg.NewAssignReplicasToDirsRequestDirectoryTopicPartition()
			rp.Partition = p.index
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
	if len(rd.Topics) == 0 {
		return nil
	}
	req := kmsg.NewPtrAssignReplicasToDirsRequest()
	req.BrokerID, req.BrokerEpoch = self, b.brokerEpoch()
	req.Directories = append(req.Directories, rd)
	return req
}

// sendOfflineReplicas sends req to the active controller; nil once every partition was taken.
func (b *Broker) sendOfflineReplicas(ctx context.Context, req *kmsg.AssignReplicasToDirsRequest) error {
	resp := kmsg.NewPtrAssignReplicasToDirsResponse()
	if err := b.callController(ctx, req, resp, &resp.ErrorCode); err != nil {
		return err
	}
	for _, d := range resp.Directories {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return fmt.Errorf("AssignReplicasToDirs of partition %d refused: %w", p.Partition, err)
				}
			}
		}
	}
	return nil
}

// serveAssignReplicasToDirs is the active controller's AssignReplicasToDirs handler (a
// meta.ControllerAPIHandler): for replicas reported LOST it commits the partition changes of
// offlineReplicaChange. A requester not registered at its epoch is STALE_BROKER_EPOCH; a
// partition changed by another commit in between is INVALID_UPDATE_VERSION, for the broker to
// report again.
func (b *Broker) serveAssignReplicasToDirs(body []byte) ([]byte, error) {
	req := kmsg.NewPtrAssignReplicasToDirsRequest()
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode AssignReplicasToDirs: %w", err)
	}
	resp := kmsg.NewPtrAssignReplicasToDirsResponse()
	resp.Version = req.Version
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	im := b.meta.Image()
	if br, ok := im.Brokers[req.BrokerID]; !ok || br.Fenced || req.BrokerEpoch != -1 && req.BrokerEpoch != br.Epoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return resp.AppendTo(nil), nil
	}
	var recs []meta.Record
	var taken []*int16
	for _, rd := range req.Directories {
		sd := kmsg.NewAssignReplicasToDirsResponseDirectory()
		sd.ID = rd.ID
		for _, rt := range rd.Topics {
			st := kmsg.NewAssignReplicasToDirsResponseDirectoryTopic()
			st.TopicID = rt.TopicID
			t := im.TopicsByID[meta.UUID(rt.TopicID)]
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAssignReplicasToDirsResponseDirectoryTopicPartition()
				sp.Partition = rp.Partition
				switch {
				case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case meta.UUID(rd.ID) == lostDirID:
					if rec, ok := offlineReplicaChange(im, t, t.Partitions[rp.Partition], req.BrokerID); ok {
						recs = append(recs, rec)
					}
				}
				st.Partitions = append(st.Partitions, sp)
			}
			sd.Topics = append(sd.Topics, st)
		}
		resp.Directories = append(resp.Directories, sd)
	}
	for i := range resp.Directories {
		for j := range resp.Directories[i].Topics {
			for k := range resp.Directories[i].Topics[j].Partitions {
				taken = append(taken, &resp.Directories[i].Topics[j].Partitions[k].ErrorCode)
			}
		}
	}
	if len(recs) > 0 {
		if _, err := b.meta.Commit(recs); err != nil {
			if !errors.Is(err, meta.ErrStalePartitionEpoch) && !errors.Is(err, meta.ErrIneligibleReplica) {
				return nil, fmt.Errorf("commit the offline replicas of broker %d: %w", req.BrokerID, err)
			}
			for _, code := range taken {
				if *code == 0 {
					*code = kerr.InvalidUpdateVersion.Code
				}
			}
		}
	}
	return resp.AppendTo(nil), nil
}

// offlineReplicaChange is the change of partition pm of t once broker's replica of it is
// offline: broker leaves the ISR, and if it led, the first other in-sync replica that is
// registered, unfenced and not shutting down leads in a new leader epoch. ok is false when
// nothing changes: broker is not in the ISR, is its last member, or led with no other replica
// to take over.
func offlineReplicaChange(im *meta.Image, t *meta.Topic, pm meta.Partition, broker int32) (meta.Record, bool) {
	if !slices.Contains(pm.ISR, broker) || len(pm.ISR) == 1 {
		return meta.Record{}, false
	}
	isr := slices.DeleteFunc(slices.Clone(pm.ISR), func(r int32) bool { return r == broker })
	leader, epoch := pm.Leader, pm.LeaderEpoch
	if pm.Leader == broker {
		leader = -1
		for _, r := range pm.Replicas {
			if br, ok := im.Brokers[r]; ok && slices.Contains(isr, r) && !br.Fenced && !br.InControlledShutdown {
				leader = r
				break
			}
		}
		if leader < 0 {
			return meta.Record{}, false
		}
		epoch++
	}
	return pm.Next(t.ID, leader, epoch, isr), true
}
