package broker

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ringbroker/broker/meta"
)

// Replication throttles, as Kafka's ReplicationQuotaManager: the leader bounds the bytes it
// sends to followers of its throttled replicas (topic config
// leader.replication.throttled.replicas) to leader.replication.throttled.rate, and a follower
// bounds what it fetches of its throttled replicas (follower.replication.throttled.replicas)
// to follower.replication.throttled.rate. Only replicas out of the ISR are held back, as in
// Kafka (ReplicaManager.shouldLeaderThrottle, ReplicaFetcherThread.shouldFollowerThrottle), so
// an in-sync follower never falls behind because of a throttle and the ISR is not shrunk for it.

// The topic configs that list throttled replicas.
const (
	leaderThrottledReplicas   = "leader.replication.throttled.replicas"
	followerThrottledReplicas = "follower.replication.throttled.replicas"
)

// Kafka's replication.quota.window.num and replication.quota.window.size.seconds defaults.
const (
	quotaWindows    = 11
	quotaWindowSize = time.Second
)

// rateQuota measures bytes per second over the last quotaWindows windows and says when they
// exceed a bound, as Kafka's quota sensor with a Rate measure: the rate is the bytes of the
// windows kept divided by the time they span, which counts as at least quotaWindows-1 windows,
// so a quota starting from rest lets about (quotaWindows-1) windows' worth through at once
// and then holds the long-run rate to the bound.
type rateQuota struct {
	// bound is the most bytes per second; math.MaxInt64 is unbounded (the default).
	bound atomic.Int64
	mu    sync.Mutex
	// windows[i] holds the bytes recorded in window start[i] (a window number: Unix time
	// divided by quotaWindowSize); a window older than quotaWindows windows is stale.
	windows [quotaWindows]int64
	start   [quotaWindows]int64
}

// newRateQuota is an unbounded quota.
func newRateQuota() *rateQuota {
	q := &rateQuota{}
	q.bound.Store(math.MaxInt64)
	return q
}

// setBound changes the bound; the bytes recorded so far still count.
func (q *rateQuota) setBound(bytesPerSec int64) { q.bound.Store(bytesPerSec) }

// bounded reports whether the quota has a bound, without a lock: the fetch paths ask it first
// and look at topic configs only when a throttle rate is set.
func (q *rateQuota) bounded() bool { return q.bound.Load() != math.MaxInt64 }

// record counts n bytes sent or fetched at now.
func (q *rateQuota) record(now time.Time, n int) {
	w := now.UnixNano() / int64(quotaWindowSize)
	i := w % quotaWindows
	q.mu.Lock()
	if q.start[i] != w {
		q.start[i], q.windows[i] = w, 0
	}
	q.windows[i] += int64(n)
	q.mu.Unlock()
}

// rate is the bytes per second measured at now.
func (q *rateQuota) rate(now time.Time) float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := now.UnixNano() / int64(quotaWindowSize)
	var total int64
	oldest := w
	for i := range q.windows {
		if q.start[i] > w-quotaWindows && q.start[i] <= w && q.windows[i] > 0 {
			total += q.windows[i]
			oldest = min(oldest, q.start[i])
		}
	}
	elapsed := now.Sub(time.Unix(0, oldest*int64(quotaWindowSize)))
	elapsed = max(elapsed, (quotaWindows-1)*quotaWindowSize)
	return float64(total) / elapsed.Seconds()
}

// exceeded reports whether the measured rate is above the bound.
func (q *rateQuota) exceeded(now time.Time) bool {
	bound := q.bound.Load()
	return bound != math.MaxInt64 && q.rate(now) > float64(bound)
}

// replicationQuotas are a broker's two replication throttles and the throttle of its log dir
// moves.
type replicationQuotas struct {
	leader   *rateQuota // leader.replication.throttled.rate
	follower *rateQuota // follower.replication.throttled.rate
	// alterLogDirs bounds the bytes AlterReplicaLogDirs moves copy
	// (replica.alter.log.dirs.io.max.bytes.per.second), as Kafka's ReplicaAlterLogDirsThread.
	alterLogDirs *rateQuota
}

func newReplicationQuotas() replicationQuotas {
	return replicationQuotas{leader: newRateQuota(), follower: newRateQuota(), alterLogDirs: newRateQuota()}
}

// setRates applies the rates in force.
func (r replicationQuotas) setRates(leader, follower, alterLogDirs int64) {
	r.leader.setBound(leader)
	r.follower.setBound(follower)
	r.alterLogDirs.setBound(alterLogDirs)
}

// listsReplica reports whether a {leader,follower}.replication.throttled.replicas value
// lists partition on node: "*" lists every replica, otherwise partition:node pairs (as
// Kafka's TopicConfigHandler.parseThrottledPartitions).
func listsReplica(val string, partition, node int32) bool {
	val = strings.TrimSpace(val)
	if val == "*" {
		return true
	}
	p, n := strconv.Itoa(int(partition)), strconv.Itoa(int(node))
	for _, it := range splitList(val) {
		ps, ns, ok := strings.Cut(it, ":")
		if ok && strings.TrimSpace(ps) == p && strings.TrimSpace(ns) == n {
			return true
		}
	}
	return false
}

// throttledReplica reports whether node's replica of p is listed in the topic config key
// ({leader,follower}.replication.throttled.replicas) of p's topic in im.
func (p *partition) throttledReplica(im *meta.Image, key string, node int32) bool {
	t := im.TopicsByID[p.topicID]
	return t != nil && listsReplica(t.Configs[key], p.index, node)
}
