package broker

// AlterReplicaLogDirs (key 34), versions 1-2.
//
// Behavior: moves this broker's replicas of the named partitions to the named log dir, online
// (logmove.go), as Kafka's ReplicaManager.alterReplicaLogDirs; the answer comes once each move
// has started, not finished: DescribeLogDirs shows the copy as a future replica until it has
// taken the partition's place. Per partition: a dir not in log.dirs is LOG_DIR_NOT_FOUND; an
// offline target dir, an offline replica, or any offline dir on this broker (Kafka creates no
// future log then) is KAFKA_STORAGE_ERROR; a partition of a known topic this broker holds no
// replica of is REPLICA_NOT_AVAILABLE, and the dir is remembered for when the replica is
// created here; an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION. Naming the dir
// the replica is in cancels a move in progress; naming the dir a move is going to leaves it
// going. A principal without ALTER on the cluster gets CLUSTER_AUTHORIZATION_FAILED in every
// partition.
//
// Version notes: v1 is v0 (removed by Kafka 4.0) with the throttle applied after the response;
// v2 is flexible.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	rlog "ringbroker/log"
)

var alterReplicaLogDirsAPI = &api{key: kmsg.AlterReplicaLogDirs, minVersion: 1, maxVersion: 2, handle: handleAlterReplicaLogDirs}

func handleAlterReplicaLogDirs(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.AlterReplicaLogDirsRequest)
	resp := kmsg.NewPtrAlterReplicaLogDirsResponse()
	allowed := rc.authorizer().mayCluster(acl.OpAlter)
	byTopic := map[string]int{}
	for _, rd := range req.Dirs {
		for _, rt := range rd.Topics {
			i, ok := byTopic[rt.Topic]
			if !ok {
				i = len(resp.Topics)
				byTopic[rt.Topic] = i
				st := kmsg.NewAlterReplicaLogDirsResponseTopic()
				st.Topic = rt.Topic
				resp.Topics = append(resp.Topics, st)
			}
			for _, idx := range rt.Partitions {
				sp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				sp.Partition = idx
				if !allowed {
					sp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				} else if code := b.alterReplicaLogDir(rd.Dir, rt.Topic, idx); code != nil {
					sp.ErrorCode = code.Code
				}
				resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
			}
		}
	}
	rc.respond(resp)
}

// alterReplicaLogDir moves this broker's replica of topic's partition index to dir, and
// returns Kafka's error for it, nil when the move started, is under way or is not needed.
func (b *Broker) alterReplicaLogDir(dir, topic string, index int32) *kerr.Error {
	d := b.logDirByPath(dir)
	switch {
	case d == nil:
		return kerr.LogDirNotFound
	case d.offline():
		return kerr.KafkaStorageError
	}
	p := b.parts.Load().lookup(topic, index)
	if p == nil {
		t := b.meta.Image().Topics[topic]
		if t == nil || index < 0 || int(index) >= len(t.Partitions) {
			return kerr.UnknownTopicOrPartition
		}
		if b.parts.Load().unopenedAt(t.ID, index) {
			return kerr.KafkaStorageError
		}
		b.preferredDirs.set(rlog.TopicPartition{Topic: topic, Partition: index}, d)
		return kerr.ReplicaNotAvailable
	}
	if p.offline() {
		return kerr.KafkaStorageError
	}
	b.movesMu.Lock()
	defer b.movesMu.Unlock()
	if p.dir.Load() == d {
		b.cancelMove(p)
		return nil
	}
	if m := p.move.Load(); m != nil && m.to == d {
		return nil
	}
	for _, o := range b.dirs {
		if o.offline() {
			return kerr.KafkaStorageError
		}
	}
	if err := b.startMove(p, d); err != nil {
		b.logger.Error("alter replica log dir", "topic", topic, "partition", index, "dir", d.path, "err", err)
		return kerr.KafkaStorageError
	}
	return nil
}
