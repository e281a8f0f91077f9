package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	rlog "ringbroker/log"
)

// replicaFetchVersion is the Fetch version followers send: v15 carries the follower's id in
// ReplicaState, names topics by id (v13) and has LastFetchedEpoch/DivergingEpoch (v12).
const replicaFetchVersion = 15

// replicaSocketTimeout bounds one follower fetch beyond its wait (Kafka's
// replica.socket.timeout.ms default).
const replicaSocketTimeout = 30 * time.Second

// maxReplicaResponse bounds a follower fetch response a leader may announce.
const maxReplicaResponse = 256 << 20

// fetcherSet is this broker's follower fetchers: one per leader broker, fetching every
// partition followed there in one request (Kafka's ReplicaFetcherManager with
// num.replica.fetchers=1).
type fetcherSet struct {
	b        *Broker
	mu       sync.Mutex
	byLeader map[int32]*replicaFetcher // guarded by mu
	closed   bool                      // guarded by mu
}

func newFetcherSet(b *Broker) *fetcherSet {
	return &fetcherSet{b: b, byLeader: map[int32]*replicaFetcher{}}
}

// assign makes the fetchers fetch exactly follow: partitions by the leader they follow.
// Fetchers of leaders no longer followed stop.
func (s *fetcherSet) assign(follow map[int32][]*partition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for id, f := range s.byLeader {
		if _, ok := follow[id]; !ok {
			f.close()
			delete(s.byLeader, id)
		}
	}
	for id, ps := range follow {
		f := s.byLeader[id]
		if f == nil {
			f = newReplicaFetcher(s.b, id)
			s.byLeader[id] = f
			go f.run()
		}
		f.setPartitions(ps)
	}
}

// close stops every fetcher and waits for them.
func (s *fetcherSet) close() {
	s.mu.Lock()
	s.closed = true
	fs := s.byLeader
	s.byLeader = map[int32]*replicaFetcher{}
	s.mu.Unlock()
	for _, f := range fs {
		f.close()
	}
}

// replicaFetcher is one follower fetch loop against one leader broker.
type replicaFetcher struct {
	b      *Broker
	leader int32

	mu      sync.Mutex
	parts   []*partition // guarded by mu
	conn    net.Conn     // guarded by mu: closed by close to interrupt a fetch
	stopped bool         // guarded by mu
	changed chan struct{}
	stop    chan struct{}
	done    chan struct{}

	// start rotates the partitions' order in requests, so that one whose batches do not fit
	// behind the others' is first in a later request (which returns at least one whole batch).
	start int
	// backoffUntil holds partitions the leader refused (not leader yet, unknown epoch) out of
	// requests for a while, so that the others keep flowing.
	backoffUntil map[*partition]time.Time
	// retries counts, per partition, the answers in a row saying the leader does not lead it
	// (yet).
	retries map[*partition]int
}

// leaderCatchUpBackoff is the first wait after a leader answered that it does not lead a
// partition its image names it leader of.
const leaderCatchUpBackoff = 5 * time.Millisecond

func newReplicaFetcher(b *Broker, leader int32) *replicaFetcher {
	return &replicaFetcher{b: b, leader: leader, changed: make(chan struct{}, 1), stop: make(chan struct{}),
		done: make(chan struct{}), backoffUntil: map[*partition]time.Time{}, retries: map[*partition]int{}}
}

// setPartitions replaces the partitions fetched.
func (f *replicaFetcher) setPartitions(ps []*partition) {
	f.mu.Lock()
	f.parts = ps
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// close stops the loop, interrupting a fetch in flight, and waits for it.
func (f *replicaFetcher) close() {
	f.mu.Lock()
	if !f.stopped {
		f.stopped = true
		close(f.stop)
		if f.conn != nil {
			f.conn.Close()
		}
	}
	f.mu.Unlock()
	<-f.done
}

// pause waits d, or less when stopped; it reports whether the loop should go on.
func (f *replicaFetcher) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.stop:
		return false
	case <-t.C:
		return true
	}
}

func (f *replicaFetcher) run() {
	defer close(f.done)
	var c *replicaClient
	defer func() {
		if c != nil {
			c.conn.Close()
		}
	}()
	for {
		f.mu.Lock()
		parts := f.parts
		f.mu.Unlock()
		now := time.Now()
		active := parts[:0:0]
		wait := f.b.cfg.ReplicaFetchBackoff + time.Millisecond
		for _, p := range parts {
			if until, ok := f.backoffUntil[p]; ok && now.Before(until) {
				wait = min(wait, until.Sub(now)+time.Millisecond)
				continue
			}
			delete(f.backoffUntil, p)
			if f.holdBack(p, now) {
				wait = min(wait, throttleRecheck)
				continue
			}
			active = append(active, p)
		}
		if len(active) == 0 {
			select {
			case <-f.stop:
				return
			case <-f.changed:
			case <-time.After(wait):
			}
			continue
		}
		if c == nil {
			var err error
			if c, err = f.dial(); err != nil {
				f.b.logger.Debug("follower fetcher cannot reach the leader", "leader", f.leader, "err", err)
				if !f.pause(f.b.cfg.ReplicaFetchBackoff) {
					return
				}
				continue
			}
		}
		req := f.request(active)
		resp := kmsg.NewPtrFetchResponse()
		if err := c.roundTrip(req, resp, time.Duration(req.MaxWaitMillis)*time.Millisecond+replicaSocketTimeout); err != nil {
			select {
			case <-f.stop:
				return
			default:
			}
			f.b.logger.Info("follower fetch failed", "leader", f.leader, "err", err)
			c.conn.Close()
			// One immediate reconnect: a dead leader then shows at once as a refused
			// connection (see dial) rather than after the backoff.
			if c, err = f.dial(); err == nil {
				continue
			}
			if !f.pause(f.b.cfg.ReplicaFetchBackoff) {
				return
			}
			continue
		}
		if resp.ErrorCode != 0 {
			f.b.logger.Warn("follower fetch refused", "leader", f.leader, "err", kerr.ErrorForCode(resp.ErrorCode))
			if !f.pause(f.b.cfg.ReplicaFetchBackoff) {
				return
			}
			continue
		}
		f.handle(active, resp, time.Now())
	}
}

// throttleRecheck is how soon a follower looks again at a partition its throttle held back.
const throttleRecheck = 100 * time.Millisecond

// holdBack reports whether p is left out of the next fetch: its replica here is throttled
// (follower.replication.throttled.replicas), out of the ISR, and the follower throttle is
// exceeded, as Kafka's ReplicaFetcherThread.shouldFollowerThrottle.
func (f *replicaFetcher) holdBack(p *partition, now time.Time) bool {
	q := f.b.quotas.follower
	if !q.bounded() || !p.throttledReplica(f.b.meta.Image(), followerThrottledReplicas, f.b.cfg.NodeID) {
		return false
	}
	st := p.state()
	return st != nil && !slices.Contains(st.isr, f.b.cfg.NodeID) && q.exceeded(now)
}

// dial connects to the leader's client listener as the metadata image names it.
func (f *replicaFetcher) dial() (*replicaClient, error) {
	br, ok := f.b.meta.Image().Brokers[f.leader]
	if !ok || br.Fenced {
		return nil, fmt.Errorf("leader %d is not registered or fenced", f.leader)
	}
	addr := net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port)))
	conn, err := f.b.peers.dial(f.leader, addr, replicaSocketTimeout)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			// Nothing listens there: the leader's process is likely gone, and the controller
			// can fence it at once instead of after its session timeout.
			f.b.reportUnreachable(br)
		}
		return nil, fmt.Errorf("dial leader %d at %s: %w", f.leader, addr, err)
	}
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		conn.Close()
		return nil, errors.New("fetcher stopped")
	}
	f.conn = conn
	f.mu.Unlock()
	clientID := "ringbroker-replica-fetcher-" + strconv.Itoa(int(f.b.cfg.NodeID))
	return &replicaClient{conn: conn, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}, nil
}

// request builds the follower fetch of parts: from each log's end, with its latest epoch.
func (f *replicaFetcher) request(parts []*partition) *kmsg.FetchRequest {
	cfg := &f.b.cfg
	req := kmsg.NewPtrFetchRequest()
	req.Version = replicaFetchVersion
	req.ReplicaID = -1
	req.ReplicaState.ID = cfg.NodeID
	req.ReplicaState.Epoch = f.b.brokerEpoch()
	req.MaxWaitMillis = int32(cfg.ReplicaFetchWaitMax.Milliseconds())
	req.MinBytes = cfg.ReplicaFetchMinBytes
	req.MaxBytes = cfg.ReplicaFetchRespMax
	req.SessionEpoch = -1
	f.start++
	for i := range parts {
		p := parts[(i+f.start)%len(parts)]
		st := p.state()
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.index
		rp.CurrentLeaderEpoch = st.leaderEpoch
		rp.FetchOffset = p.log().LogEndOffset()
		rp.LastFetchedEpoch = -1
		if ep, ok := p.log().LatestEpoch(); ok {
			rp.LastFetchedEpoch = ep
		}
		rp.LogStartOffset = p.log().LogStartOffset()
		rp.PartitionMaxBytes = cfg.ReplicaFetchMaxBytes
		if n := len(req.Topics); n > 0 && req.Topics[n-1].TopicID == p.topicID {
			req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, rp)
			continue
		}
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = p.topicID
		rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// handle applies a fetch response to the partitions fetched: appends the records, follows the
// leader's high watermark and log start, and truncates where the leader says the logs diverged.
func (f *replicaFetcher) handle(parts []*partition, resp *kmsg.FetchResponse, now time.Time) {
	type key struct {
		id    [16]byte
		index int32
	}
	byKey := make(map[key]*partition, len(parts))
	for _, p := range parts {
		byKey[key{p.topicID, p.index}] = p
	}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			p := byKey[key{rt.TopicID, rp.Partition}]
			if p == nil {
				continue
			}
			if q := f.b.quotas.follower; q.bounded() && p.throttledReplica(f.b.meta.Image(), followerThrottledReplicas, f.b.cfg.NodeID) {
				q.record(now, len(rp.RecordBatches))
			}
			err := f.apply(p, rp)
			switch {
			case err == nil:
				delete(f.retries, p)
			case errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.UnknownLeaderEpoch):
				// The leader the image names has not applied that image yet, a matter of
				// milliseconds after an election, while acks=all producers wait for this
				// follower: ask again soon, then back off more each time.
				n := f.retries[p]
				f.retries[p] = n + 1
				f.backoffUntil[p] = now.Add(min(leaderCatchUpBackoff<<min(n, 16), f.b.cfg.ReplicaFetchBackoff))
				if n > 0 {
					f.b.logger.Info("leader does not lead the partition yet", "topic", p.topic, "partition", p.index, "leader", f.leader, "tries", n+1, "err", err)
				}
			default:
				f.b.logger.Warn("follower fetch of a partition failed", "topic", p.topic, "partition", p.index, "leader", f.leader, "err", err)
				f.backoffUntil[p] = now.Add(f.b.cfg.ReplicaFetchBackoff)
			}
		}
	}
}

// apply handles one partition of a fetch response.
func (f *replicaFetcher) apply(p *partition, rp *kmsg.FetchResponseTopicPartition) error {
	// Under appendMu the role cannot change (applyState takes it too): a partition that became
	// leader meanwhile never gets the old leader's records.
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if st := p.state(); st == nil || st.leader || st.leaderID != f.leader {
		return nil // leadership moved meanwhile; the next assignment says where to fetch
	}
	switch err := kerr.ErrorForCode(rp.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.OffsetOutOfRange):
		return f.resetOutOfRange(p, rp)
	default:
		return fmt.Errorf("leader answered %w", err)
	}
	if rp.DivergingEpoch.EndOffset >= 0 {
		return f.truncateDiverged(p, rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset)
	}
	if len(rp.RecordBatches) > 0 {
		// A partition whose next batch did not fit the response comes again, first in a later one.
		if _, err := p.log().AppendAsFollower(rp.RecordBatches); err != nil && !errors.Is(err, rlog.ErrIncompleteBatch) {
			f.b.noteStorageError(p.dir.Load(), err)
			return fmt.Errorf("append as follower: %w", err)
		}
	}
	p.setFollowerHW(rp.HighWatermark)
	if rp.LogStartOffset > p.log().LogStartOffset() {
		if _, err := p.log().DeleteRecordsBefore(min(rp.LogStartOffset, p.log().LogEndOffset())); err != nil {
			return fmt.Errorf("follow the leader's log start %d: %w", rp.LogStartOffset, err)
		}
	}
	return nil
}

// truncateDiverged truncates p where its log and the leader's part (KIP-320/KIP-595, as
// Kafka's AbstractFetcherThread): to the end of the largest epoch both have, never past
// either log's end. When the follower does not know the leader's epoch, the next fetch (with
// the follower's now latest epoch) narrows it down further.
func (f *replicaFetcher) truncateDiverged(p *partition, epoch int32, end int64) error {
	leo := p.log().LogEndOffset()
	target := min(end, leo)
	if epoch >= 0 {
		if fe, fend := p.log().EndOffsetForEpoch(epoch); fe >= 0 {
			target = min(fend, leo)
			if fe == epoch {
				target = min(fend, end, leo)
			}
		}
	}
	f.b.logger.Info("truncating a diverged follower", "topic", p.topic, "partition", p.index,
		"leader_epoch", epoch, "leader_epoch_end", end, "log_end", leo, "to", target)
	if err := p.log().TruncateTo(target); err != nil {
		return fmt.Errorf("truncate to %d: %w", target, err)
	}
	p.hw.Store(min(p.hw.Load(), p.log().LogEndOffset()))
	return nil
}

// resetOutOfRange handles OFFSET_OUT_OF_RANGE: a follower behind the leader's log start starts
// over at it; one past the leader's end (only after an unclean election) truncates to the
// leader's high watermark.
func (f *replicaFetcher) resetOutOfRange(p *partition, rp *kmsg.FetchResponseTopicPartition) error {
	leo := p.log().LogEndOffset()
	if rp.LogStartOffset >= 0 && leo < rp.LogStartOffset {
		f.b.logger.Info("follower behind the leader's log start: starting over", "topic", p.topic, "partition", p.index, "log_end", leo, "leader_log_start", rp.LogStartOffset)
		if err := p.log().TruncateFullyAndStartAt(rp.LogStartOffset); err != nil {
			return fmt.Errorf("start over at %d: %w", rp.LogStartOffset, err)
		}
		p.hw.Store(rp.LogStartOffset)
		return nil
	}
	target := max(rp.HighWatermark, p.log().LogStartOffset())
	if target >= leo {
		return fmt.Errorf("offset %d out of range on the leader (high watermark %d)", leo, rp.HighWatermark)
	}
	f.b.logger.Warn("follower ahead of the leader: truncating to its high watermark", "topic", p.topic, "partition", p.index, "log_end", leo, "to", target)
	if err := p.log().TruncateTo(target); err != nil {
		return fmt.Errorf("truncate to %d: %w", target, err)
	}
	p.hw.Store(min(p.hw.Load(), p.log().LogEndOffset()))
	return nil
}

// replicaClient is a follower's connection to a leader: Kafka request frames out, response
// frames in, one at a time.
type replicaClient struct {
	conn   net.Conn
	format *kmsg.RequestFormatter
	corr   int32
	out    []byte
	in     []byte
}

// roundTrip sends req and decodes its response into resp within timeout.
func (c *replicaClient) roundTrip(req kmsg.Request, resp kmsg.Response, timeout time.Duration) error {
	c.corr++
	c.out = c.format.AppendRequest(c.out[:0], req, c.corr)
	if err := c.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("set deadline: %w", err)
	}
	if _, err := c.conn.Write(c.out); err != nil {
		return fmt.Errorf("write %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return fmt.Errorf("read %s response size: %w", kmsg.NameForKey(req.Key()), err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxReplicaResponse {
		return fmt.Errorf("%s response of %d bytes", kmsg.NameForKey(req.Key()), n)
	}
	if cap(c.in) < int(n) {
		c.in = make([]byte, n)
	}
	c.in = c.in[:n]
	if _, err := io.ReadFull(c.conn, c.in); err != nil {
		return fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	if corr := int32(binary.BigEndian.Uint32(c.in)); corr != c.corr {
		return fmt.Errorf("%s response has correlation id %d, want %d", kmsg.NameForKey(req.Key()), corr, c.corr)
	}
	resp.SetVersion(req.GetVersion())
	body := c.in[4:]
	if resp.IsFlexible() {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return fmt.Errorf("%s response header: tagged fields cut short", kmsg.NameForKey(req.Key()))
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return nil
}
