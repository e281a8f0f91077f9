package broker

import (
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

// Fetch session epochs (KIP-227), as Kafka's FetchMetadata names them.
const (
	// sessionFinalEpoch in a request is a full fetch without a session (and closes the one
	// named).
	sessionFinalEpoch = -1
	// sessionInitialEpoch in a request is a full fetch that asks for a new session.
	sessionInitialEpoch = 0
)

// nextSessionEpoch is the epoch that follows e: 1 after the largest, as Kafka wraps.
func nextSessionEpoch(e int32) int32 {
	switch {
	case e < 0:
		return sessionFinalEpoch
	case e == math.MaxInt32:
		return 1
	}
	return e + 1
}

// fetchSessionCache holds the incremental fetch sessions of one broker, shared by all its
// connections (a client may reconnect and go on with its session), at most
// max.incremental.fetch.session.cache.slots of them. Eviction is Kafka's: a session unused
// for min.incremental.fetch.session.eviction.ms goes first; otherwise a new session may take
// the place of the least valuable one it outranks, valued by (privileged, partitions, id),
// where a consumer's session is evictable once older than that time and by a follower's
// (privileged) session at any age, and a follower's only once older than that time.
//
// Lock order: a session's mu before the cache's mu; the cache never takes a session's lock.
type fetchSessionCache struct {
	maxSlots   int
	evictAfter int64 // milliseconds

	mu sync.Mutex
	// sessions by id (guarded by mu). An evicted or closed session leaves the map; a request
	// already holding it still completes with it, as on Kafka.
	sessions map[int32]*fetchSession
	// partitions is the sum of the sessions' cachedSize (guarded by mu).
	partitions int
	evictions  uint64 // guarded by mu
}

func newFetchSessionCache(slots int, evictAfter time.Duration) *fetchSessionCache {
	return &fetchSessionCache{maxSlots: slots, evictAfter: evictAfter.Milliseconds(),
		sessions: make(map[int32]*fetchSession)}
}

// fetchSession is one client's or follower's session: the partitions it fetches with what it
// last asked of each and what it was last told.
type fetchSession struct {
	id         int32
	privileged bool  // opened by a follower
	topicIDs   bool  // opened with Fetch v13+, so keyed by topic id, not name
	created    int64 // Unix milliseconds

	// Guarded by the cache's mu.
	lastUsed   int64 // Unix milliseconds
	cachedSize int   // partitions as counted in the cache at the last touch

	mu sync.Mutex
	// epoch is the epoch the next request must carry (guarded by mu).
	epoch int32
	parts sessionPartitions // guarded by mu
	// sent lists, while a response is built, the parts it includes (guarded by mu), to
	// update once it is sent; kept to spare an allocation per response.
	sent []sentPartition
}

// sentPartition is one partition of a session response as it was sent.
type sentPartition struct {
	at           int32 // index in parts.items
	hw, logStart int64
	err          bool
	records      bool
}

// sessionKey names a partition in a session: by topic id (v13+) or by name, never both.
type sessionKey struct {
	id        [16]byte
	topic     string
	partition int32
}

// cachedPartition is a partition of a session: what the fetcher last asked of it (Kafka's
// request data) and what the last response told of it, so an incremental response can leave
// it out while nothing changed.
type cachedPartition struct {
	key sessionKey
	pf  partitionFetch
	// hw and logStart are what the fetcher was last told; hw -1 after an error, so the
	// partition is sent again once the error is gone.
	hw, logStart int64
	prev, next   int32 // list links in sessionPartitions.items; -1 at the ends
}

// partitionFetch is what a fetch asks of one partition, from a request or cached in a session.
type partitionFetch struct {
	fetchOffset      int64
	logStartOffset   int64 // the follower's
	maxBytes         int32
	leaderEpoch      int32 // the fetcher's current leader epoch; -1: unchecked
	lastFetchedEpoch int32 // -1: none
}

func requestPartitionFetch(rp *kmsg.FetchRequestTopicPartition) partitionFetch {
	return partitionFetch{fetchOffset: rp.FetchOffset, logStartOffset: rp.LogStartOffset,
		maxBytes: rp.PartitionMaxBytes, leaderEpoch: rp.CurrentLeaderEpoch, lastFetchedEpoch: rp.LastFetchedEpoch}
}

// sessionPartitions is an ordered set of cached partitions: a list over a slice with a map
// from key to index, so that a partition that returned data moves to the end in O(1), as
// Kafka rotates them so that every partition gets its turn under max bytes.
type sessionPartitions struct {
	items      []cachedPartition
	index      map[sessionKey]int32
	head, tail int32   // -1 when empty
	free       []int32 // unused indexes of items
}

func newSessionPartitions(n int) sessionPartitions {
	return sessionPartitions{items: make([]cachedPartition, 0, n), index: make(map[sessionKey]int32, n), head: -1, tail: -1}
}

func (s *sessionPartitions) len() int { return len(s.index) }

// upsert sets what the fetcher asks of k, adding k at the end when new. The key's topic name
// is copied: the request's strings alias its frame.
func (s *sessionPartitions) upsert(k sessionKey, pf partitionFetch) {
	if i, ok := s.index[k]; ok {
		s.items[i].pf = pf
		return
	}
	k.topic = strings.Clone(k.topic)
	cp := cachedPartition{key: k, pf: pf, hw: -1, logStart: -1, prev: -1, next: -1}
	var i int32
	if n := len(s.free); n > 0 {
		i, s.free = s.free[n-1], s.free[:n-1]
		s.items[i] = cp
	} else {
		i = int32(len(s.items))
		s.items = append(s.items, cp)
	}
	s.index[k] = i
	s.linkLast(i)
}

// remove drops k from the set.
func (s *sessionPartitions) remove(k sessionKey) {
	i, ok := s.index[k]
	if !ok {
		return
	}
	s.unlink(i)
	delete(s.index, k)
	s.items[i] = cachedPartition{}
	s.free = append(s.free, i)
}

// moveLast moves item i to the end of the list.
func (s *sessionPartitions) moveLast(i int32) {
	if s.tail == i {
		return
	}
	s.unlink(i)
	s.linkLast(i)
}

func (s *sessionPartitions) linkLast(i int32) {
	s.items[i].prev, s.items[i].next = s.tail, -1
	if s.tail >= 0 {
		s.items[s.tail].next = i
	} else {
		s.head = i
	}
	s.tail = i
}

func (s *sessionPartitions) unlink(i int32) {
	it := &s.items[i]
	if it.prev >= 0 {
		s.items[it.prev].next = it.next
	} else {
		s.head = it.next
	}
	if it.next >= 0 {
		s.items[it.next].prev = it.prev
	} else {
		s.tail = it.prev
	}
	it.prev, it.next = -1, -1
}

// requestKey is the session key of a request's partition: by id from v13, by name before.
func requestKey(version int16, rt *kmsg.FetchRequestTopic, partition int32) sessionKey {
	if version >= 13 {
		return sessionKey{id: rt.TopicID, partition: partition}
	}
	return sessionKey{topic: rt.Topic, partition: partition}
}

// update applies an incremental request to the session: its partitions are added or replace
// what was asked of them, its forgotten topics' partitions leave.
func (s *fetchSession) update(req *kmsg.FetchRequest) {
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			s.parts.upsert(requestKey(req.Version, rt, rp.Partition), requestPartitionFetch(rp))
		}
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			if req.Version >= 13 {
				s.parts.remove(sessionKey{id: ft.TopicID, partition: p})
			} else {
				s.parts.remove(sessionKey{topic: ft.Topic, partition: p})
			}
		}
	}
}

// mustSend is Kafka's rule for an incremental response: a partition is sent when it has
// records, an error or a diverging epoch, or its high watermark or log start offset changed
// since the fetcher was last told.
func (cp *cachedPartition) mustSend(hw, logStart int64, err, records, diverging bool) bool {
	return records || err || diverging || hw != cp.hw || logStart != cp.logStart
}

// get returns the session with id, or nil.
func (c *fetchSessionCache) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

// remove closes the session with id, if there is one.
func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessions[id]; s != nil {
		c.removeLocked(s)
	}
}

// removeSession removes s unless it is gone already (evicted, or closed meanwhile).
func (c *fetchSessionCache) removeSession(s *fetchSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions[s.id] == s {
		c.removeLocked(s)
	}
}

func (c *fetchSessionCache) removeLocked(s *fetchSession) {
	delete(c.sessions, s.id)
	c.partitions -= s.cachedSize
}

// touch marks s used at now with size partitions.
func (c *fetchSessionCache) touch(s *fetchSession, size int, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.lastUsed = now
	if c.sessions[s.id] == s {
		c.partitions += size - s.cachedSize
	}
	s.cachedSize = size
}

// create opens a session of parts and returns it, or nil when every slot is taken and no
// session may be evicted for it.
func (c *fetchSessionCache) create(now int64, privileged, topicIDs bool, parts sessionPartitions) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxSlots <= 0 || len(c.sessions) >= c.maxSlots && !c.evictLocked(now, privileged, parts.len()) {
		return nil
	}
	s := &fetchSession{id: c.newIDLocked(), privileged: privileged, topicIDs: topicIDs, created: now,
		lastUsed: now, cachedSize: parts.len(), epoch: nextSessionEpoch(sessionInitialEpoch), parts: parts}
	c.sessions[s.id] = s
	c.partitions += s.cachedSize
	return s
}

// newIDLocked picks a random positive id no session has.
func (c *fetchSessionCache) newIDLocked() int32 {
	for {
		id := rand.Int32N(math.MaxInt32) + 1
		if _, taken := c.sessions[id]; !taken {
			return id
		}
	}
}

// evictLocked makes room for a new session of size partitions, privileged or not, and says
// whether it did. It looks at every session, which is cheap next to the full fetch that asks:
// sessions are created rarely and there are at most max.incremental.fetch.session.cache.slots.
func (c *fetchSessionCache) evictLocked(now int64, privileged bool, size int) bool {
	var lru, victim *fetchSession
	for _, s := range c.sessions {
		if lru == nil || s.lastUsed < lru.lastUsed || s.lastUsed == lru.lastUsed && s.id < lru.id {
			lru = s
		}
		// Evictable as of its last use: older than evictAfter by then, or a consumer's
		// session when a follower asks.
		old := s.lastUsed-s.created > c.evictAfter
		if !old && (!privileged || s.privileged) {
			continue
		}
		if victim == nil || evictionLess(s, victim) {
			victim = s
		}
	}
	switch {
	case lru == nil:
		return false
	case now-lru.lastUsed > c.evictAfter:
		victim = lru // stale
	case victim == nil:
		return false
	case evictionLess(&fetchSession{privileged: privileged, cachedSize: size}, victim):
		return false // the new session is worth less than the least valuable one
	}
	c.removeLocked(victim)
	c.evictions++
	return true
}

// evictionLess orders sessions by value, least first: a consumer's before a follower's, then
// by partitions, then by id (a new session, id 0, loses a tie of partitions).
func evictionLess(a, b *fetchSession) bool {
	if a.privileged != b.privileged {
		return !a.privileged
	}
	if a.cachedSize != b.cachedSize {
		return a.cachedSize < b.cachedSize
	}
	return a.id < b.id
}

// stats returns the number of sessions, partitions cached in them and evictions so far, for
// the metrics (Kafka's NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached and
// IncrementalFetchSessionEvictionsPerSec).
func (c *fetchSessionCache) stats() (sessions, partitions int, evictions uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions), c.partitions, c.evictions
}

// sessionTopic resolves a session key's topic in the image.
func sessionTopic(im *meta.Image, k sessionKey, topicIDs bool) *meta.Topic {
	if topicIDs {
		return im.TopicsByID[meta.UUID(k.id)]
	}
	return im.Topics[k.topic]
}
