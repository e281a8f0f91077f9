package broker

// Replicas in offline log dirs, as Kafka's controller handles the offline dirs a broker reports
// (KIP-858): a replica whose dir is offline can neither lead nor follow, so the active
// controller marks it offline in the partition's metadata (meta.Partition.Offline, what KRaft
// records as the directory id LOST), takes it out of the ISR and, where it led, elects the first
// other in-sync replica that is registered, unfenced and not shutting down. A partition whose
// only in-sync replica it is keeps it in the ISR and has no leader (-1), as Kafka's controller
// leaves it with eligible leader replicas (KIP-966) disabled, which is the level ringbroker
// finalizes; no election picks an offline replica, so clients get LEADER_NOT_AVAILABLE from
// every broker until the replica is back. When its broker, restarted with the dir repaired,
// reports the replica in an online dir, the mark goes and the replica leads again if it is the
// one in-sync replica.
//
// The reports travel as AssignReplicasToDirs (key 73), which Kafka's brokers send to the
// controller over the controller listener: replicas named with the directory id LOST are
// offline, replicas named with any other id are in that online dir. A broker reports what its
// partition table and the metadata disagree on, after every change of either, until the
// controller took it.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

// lostDirID is Kafka's DirectoryId.LOST: the replica's dir is offline or gone.
var lostDirID = meta.UUID{15: 1}

// offlineReportRetry is how long a broker waits before it reports its replicas' dirs again
// after the controller could not take the report.
const offlineReportRetry = 500 * time.Millisecond

// signalDirReport asks the report loop to compare this broker's replicas with the metadata.
func (b *Broker) signalDirReport() {
	select {
	case b.dirReports <- struct{}{}:
	default:
	}
}

// dirReportLoop reports, until the broker stops, the replicas whose dir state the metadata does
// not have yet (dirAssignmentsRequest): at every signal, and again after a failed report.
func (b *Broker) dirReportLoop() {
	defer b.bg.Done()
	var retry <-chan time.Time
	for {
		select {
		case <-b.stop:
			return
		case <-b.dirReports:
		case <-retry:
		}
		retry = nil
		req := b.dirAssignmentsRequest()
		if req == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.BrokerSessionTimeout)
		err := b.sendDirAssignments(ctx, req)
		cancel()
		if err != nil {
			b.logger.Warn("report replica log dirs to the controller", "err", err)
			retry = time.After(offlineReportRetry)
		}
	}
}

// settleDirReport runs, before the broker serves clients, the report the report loop would make
// first, and opens the partitions for the metadata it commits: a replica whose dir was repaired
// since the last run leads again from the broker's first request rather than answering
// NOT_LEADER_OR_FOLLOWER until the loop's first turn. Where the controller does not take the
// report within a broker session, the loop goes on reporting once the broker serves.
func (b *Broker) settleDirReport() {
	req := b.dirAssignmentsRequest()
	if req == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.BrokerSessionTimeout)
	defer cancel()
	if err := b.sendDirAssignments(ctx, req); err != nil {
		b.logger.Warn("report replica log dirs to the controller at start; reporting again once serving", "err", err)
		return
	}
	// The controller committed the report; this node's image may apply it a moment later when
	// another node is the active controller. The image changes waited for here are the
	// controller loop's too (coordinator partitions to load): it gets one once the wait ends.
	defer func() {
		select {
		case b.imageChanged <- struct{}{}:
		default:
		}
	}()
	for {
		if err := b.syncPartitions(); err != nil {
			b.logger.Error("open partitions for the reported log dirs", "err", err)
			return
		}
		if b.dirAssignmentsRequest() == nil {
			return
		}
		select {
		case <-b.imageChanged:
		case <-ctx.Done():
			return
		}
	}
}

// dirAssignmentsRequest is the report of this broker's replicas whose dir state differs from
// the metadata: replicas in an offline dir (or not opened because their dir was offline at
// start) that are not marked offline yet, under LOST, and replicas marked offline whose log is
// open in an online dir, under that dir's id. It is nil when there are none.
func (b *Broker) dirAssignmentsRequest() *kmsg.AssignReplicasToDirsRequest {
	im := b.meta.Image()
	tbl := b.parts.Load()
	self := b.cfg.NodeID
	byDir := map[meta.UUID]map[meta.UUID][]int32{}
	add := func(dir, topic meta.UUID, index int32) {
		if byDir[dir] == nil {
			byDir[dir] = map[meta.UUID][]int32{}
		}
		byDir[dir][topic] = append(byDir[dir][topic], index)
	}
	for id, t := range im.TopicsByID {
		ps := tbl.byID[id]
		for i, pm := range t.Partitions {
			if !slices.Contains(pm.Replicas, self) {
				continue
			}
			var p *partition
			if i < len(ps) {
				p = ps[i]
			}
			switch marked := pm.IsOffline(self); {
			case p == nil && tbl.unopenedAt(id, int32(i)) && !marked:
				add(lostDirID, id, int32(i))
			case p == nil:
			case p.offline() && !marked:
				add(lostDirID, id, int32(i))
			case !p.offline() && marked:
				add(p.dir.Load().id, id, int32(i))
			}
		}
	}
	if len(byDir) == 0 {
		return nil
	}
	req := kmsg.NewPtrAssignReplicasToDirsRequest()
	req.BrokerID, req.BrokerEpoch = self, b.brokerEpoch()
	for _, dir := range slices.SortedFunc(maps.Keys(byDir), compareUUIDs) {
		rd := kmsg.NewAssignReplicasToDirsRequestDirectory()
		rd.ID = dir
		for _, topic := range slices.SortedFunc(maps.Keys(byDir[dir]), compareUUIDs) {
			rt := kmsg.NewAssignReplicasToDirsRequestDirectoryTopic()
			rt.TopicID = topic
			for _, index := range byDir[dir][topic] {
				rp := kmsg.NewAssignReplicasToDirsRequestDirectoryTopicPartition()
				rp.Partition = index
				rt.Partitions = append(rt.Partitions, rp)
			}
			rd.Topics = append(rd.Topics, rt)
		}
		req.Directories = append(req.Directories, rd)
	}
	return req
}

// sendDirAssignments sends req to the active controller; nil once every partition was taken.
func (b *Broker) sendDirAssignments(ctx context.Context, req *kmsg.AssignReplicasToDirsRequest) error {
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
// meta.ControllerAPIHandler): it commits offlineReplicaChange for the replicas reported LOST and
// onlineReplicaChange for the others. A requester not registered at its epoch is
// STALE_BROKER_EPOCH; a partition changed by another commit in between is
// INVALID_UPDATE_VERSION, for the broker to report again.
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
	changed := map[meta.UUID]map[int32]bool{}
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
				case !slices.Contains(t.Partitions[rp.Partition].Replicas, req.BrokerID):
					sp.ErrorCode = kerr.NotLeaderForPartition.Code
				case changed[t.ID][rp.Partition]:
					// Named twice: the first naming counts.
				default:
					pm := t.Partitions[rp.Partition]
					var rec meta.Record
					var ok bool
					if meta.UUID(rd.ID) == lostDirID {
						rec, ok = offlineReplicaChange(im, t, pm, req.BrokerID, b.uncleanElection)
					} else {
						rec, ok = onlineReplicaChange(im, t, pm, req.BrokerID, b.uncleanElection)
					}
					if ok {
						recs = append(recs, rec)
						if changed[t.ID] == nil {
							changed[t.ID] = map[int32]bool{}
						}
						changed[t.ID][rp.Partition] = true
					}
				}
				st.Partitions = append(st.Partitions, sp)
			}
			sd.Topics = append(sd.Topics, st)
		}
		resp.Directories = append(resp.Directories, sd)
	}
	if len(recs) == 0 {
		return resp.AppendTo(nil), nil
	}
	if _, err := b.meta.Commit(recs); err != nil {
		if !errors.Is(err, meta.ErrStalePartitionEpoch) && !errors.Is(err, meta.ErrIneligibleReplica) {
			return nil, fmt.Errorf("commit the replica log dirs of broker %d: %w", req.BrokerID, err)
		}
		for i := range resp.Directories {
			for j := range resp.Directories[i].Topics {
				for k := range resp.Directories[i].Topics[j].Partitions {
					if code := &resp.Directories[i].Topics[j].Partitions[k].ErrorCode; *code == 0 {
						*code = kerr.InvalidUpdateVersion.Code
					}
				}
			}
		}
	}
	return resp.AppendTo(nil), nil
}

// offlineReplicaChange is the change of partition pm of t once broker's replica of it is in an
// offline dir: the replica is marked offline, and the partition is brought in line as when a
// broker is fenced (electLeader): the replica leaves the ISR unless it is its last member, and
// if it led, the first other in-sync replica that may lead does, else nobody (-1), or, where
// the topic allows an unclean election (unclean), any replica that may. ok is false when the
// replica is marked offline already.
func offlineReplicaChange(im *meta.Image, t *meta.Topic, pm meta.Partition, broker int32, unclean func(*meta.Topic) bool) (meta.Record, bool) {
	if pm.IsOffline(broker) {
		return meta.Record{}, false
	}
	pm.Offline = append(slices.Clone(pm.Offline), broker)
	return brokerDirChange(im, t, pm, unclean), true
}

// onlineReplicaChange is the change of partition pm of t once broker reports its replica of it
// in an online dir: the offline mark goes, and a partition without a leader gets one if the
// replica may now lead it (electLeader). ok is false when the replica is not marked offline.
func onlineReplicaChange(im *meta.Image, t *meta.Topic, pm meta.Partition, broker int32, unclean func(*meta.Topic) bool) (meta.Record, bool) {
	if !pm.IsOffline(broker) {
		return meta.Record{}, false
	}
	pm.Offline = slices.DeleteFunc(slices.Clone(pm.Offline), func(r int32) bool { return r == broker })
	return brokerDirChange(im, t, pm, unclean), true
}

// brokerDirChange is the record of pm, whose offline replicas changed, brought in line with the
// brokers that may lead (electLeader over leaderCandidates).
func brokerDirChange(im *meta.Image, t *meta.Topic, pm meta.Partition, unclean func(*meta.Topic) bool) meta.Record {
	if rec, ok := electLeader(t, pm, leaderCandidates(im), unclean); ok {
		return rec
	}
	return pm.Next(t.ID, pm.Leader, pm.LeaderEpoch, pm.ISR)
}

// withoutOffline is live less p's offline replicas: the brokers that may lead p or stay in its
// ISR. live itself is returned when p has none, and is never modified.
func withoutOffline(live map[int32]bool, p meta.Partition) map[int32]bool {
	if len(p.Offline) == 0 {
		return live
	}
	out := maps.Clone(live)
	for _, r := range p.Offline {
		delete(out, r)
	}
	return out
}

// compareUUIDs orders uuids by their bytes, for reports in a stable order.
func compareUUIDs(a, b meta.UUID) int { return bytes.Compare(a[:], b[:]) }
