package broker

// DescribeLogDirs (key 35), versions 0-4.
//
// Behavior: one entry per configured log dir (log.dirs, by absolute path, in config order), each
// with the partition replicas this broker holds in it, leader or follower: the size of the
// partition's segments in bytes, the offset lag (high watermark minus log end offset, at least 0,
// Kafka's figure for a current replica) and IsFuture false; a replica being moved to the dir
// (AlterReplicaLogDirs) is listed there too with IsFuture true, the bytes copied so far and as
// lag the offsets left to copy (the current log's end minus the copy's). Null topics ask for
// every partition; a requested partition this broker does not hold is left out, and a topic
// left with no partitions too. A dir that is offline after an I/O error, or that cannot be
// examined (removed, not a directory), is answered KAFKA_STORAGE_ERROR with no topics, as Kafka
// answers an offline dir. kafka-log-dirs (LogDirsCommand) asks every broker with null topics.
//
// A principal without DESCRIBE on the cluster gets no dirs and CLUSTER_AUTHORIZATION_FAILED, as
// Kafka's.
//
// Version notes: v1 is the same as v0; v2 is flexible; v3 adds the top-level error code (0, or
// CLUSTER_AUTHORIZATION_FAILED); v4 adds TotalBytes and UsableBytes of the dir's file system, from
// statfs. v5 (IsCordoned) is not served, as Kafka 4.1 does not.

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"ringbroker/auth/acl"
)

var describeLogDirsAPI = &api{key: kmsg.DescribeLogDirs, minVersion: 0, maxVersion: 4, handle: handleDescribeLogDirs}

func handleDescribeLogDirs(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DescribeLogDirsRequest)
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	if !rc.authorizer().mayCluster(acl.OpDescribe) {
		// As Kafka's: no dirs, and the error from v3.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		rc.respond(resp)
		return
	}
	tbl := b.parts.Load()
	for _, d := range b.dirs {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = d.path
		if d.offline() {
			rd.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		total, usable, err := dirSpace(d.path)
		if err != nil {
			b.logger.Warn("describe log dir", "dir", d.path, "err", err)
			rd.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		rd.TotalBytes, rd.UsableBytes = total, usable
		rd.Topics = heldReplicas(tbl, d, req.Topics)
		resp.Dirs = append(resp.Dirs, rd)
	}
	rc.respond(resp)
}

// heldReplicas describes the partitions of tbl in dir d, current or future, that topics asks
// for (nil: all), by topic name and partition index; topics with none are left out.
func heldReplicas(tbl *partitionTable, d *logDir, topics []kmsg.DescribeLogDirsRequestTopic) []kmsg.DescribeLogDirsResponseDirTopic {
	var want map[string]map[int32]bool
	if topics != nil {
		want = map[string]map[int32]bool{}
		for _, t := range topics {
			if want[t.Topic] == nil {
				want[t.Topic] = map[int32]bool{}
			}
			for _, p := range t.Partitions {
				want[t.Topic][p] = true
			}
		}
	}
	var out []kmsg.DescribeLogDirsResponseDirTopic
	for name, ps := range tbl.byName {
		if want != nil && want[name] == nil {
			continue
		}
		rt := kmsg.NewDescribeLogDirsResponseDirTopic()
		rt.Topic = name
		for _, p := range ps {
			if p == nil || (want != nil && !want[name][p.index]) {
				continue
			}
			l := p.log()
			if p.dir.Load() == d {
				rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
				rp.Partition = p.index
				rp.Size = l.Size()
				rp.OffsetLag = max(p.highWatermark()-l.LogEndOffset(), 0)
				rt.Partitions = append(rt.Partitions, rp)
			}
			if m := p.move.Load(); m != nil && m.to == d {
				rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
				rp.Partition = p.index
				rp.Size = m.future.Size()
				rp.OffsetLag = max(l.LogEndOffset()-m.future.LogEndOffset(), 0)
				rp.IsFuture = true
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		if len(rt.Partitions) > 0 {
			out = append(out, rt)
		}
	}
	slices.SortFunc(out, func(a, b kmsg.DescribeLogDirsResponseDirTopic) int { return cmp.Compare(a.Topic, b.Topic) })
	return out
}

// dirSpace checks that dir is a directory and returns the size of its file system and the bytes
// an unprivileged writer may still use there (Java's FileStore total and usable space).
func dirSpace(dir string) (total, usable int64, err error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, 0, err
	}
	if !fi.IsDir() {
		return 0, 0, fmt.Errorf("log dir %s is not a directory", dir)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return blockBytes(st.Blocks, int64(st.Frsize)), blockBytes(st.Bavail, int64(st.Frsize)), nil
}

// blockBytes is blocks*size, math.MaxInt64 when that does not fit (Kafka's answer for file
// systems larger than a long).
func blockBytes(blocks uint64, size int64) int64 {
	if size <= 0 {
		return 0
	}
	if blocks > math.MaxInt64/uint64(size) {
		return math.MaxInt64
	}
	return int64(blocks) * size
}
