package quota

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Clock is the time source of the quota managers; tests pass a fake one. nil is time.Now.
type Clock func() time.Time

// The sensor bookkeeping Kafka's Metrics does: a sensor idle for an hour is dropped
// (ClientQuotaManager's INACTIVE_SENSOR_EXPIRATION_TIME_SECONDS), checked every 30 seconds
// (Metrics' ExpireSensorTask), so memory stays bounded however many client ids come and go.
const (
	sensorExpiryMs = int64(time.Hour / time.Millisecond)
	sweepEveryMs   = int64(30 * time.Second / time.Millisecond)
)

// ClientQuotas measures clients against the quotas of a Store and says how long to throttle
// them, as Kafka's ClientQuotaManager (Produce, Fetch), ClientRequestQuotaManager (Request) and
// ControllerMutationQuotaManager (ControllerMutation) do. Each kind has its own sensors, one
// per SensorKey; a kind is measured only while some entity has its key. It is safe for
// concurrent use.
//
// A throttle time goes into the response's throttle_time_ms, which is sent at once; the broker
// then stops reading from the connection for that long (Kafka mutes the channel, KIP-219), and
// clients that know KIP-219 wait too. When two kinds throttle one request, the longer time wins.
type ClientQuotas struct {
	store   *Store
	clock   Clock
	windows [numKinds]windowing
	// maxRequestThrottleMs caps Request throttle times at one window (Kafka's maxThrottleTimeMs).
	maxRequestThrottleMs int64
	kinds                [numKinds]sensors
}

// sensors are the sensors of one kind, by key.
type sensors struct {
	// mu guards m and lastSweepMs; recording holds it for reading, so a sweep never drops a
	// sensor being recorded into.
	mu          sync.RWMutex
	m           map[SensorKey]*sensor
	lastSweepMs int64
}

// sensor is one client's measurement: a rate, or for ControllerMutation a token bucket.
type sensor struct {
	mu           sync.Mutex
	rate         rate
	bucket       tokenBucket
	lastRecordMs atomic.Int64
}

// NewClientQuotas measures clients against the quotas of store, sampling as cfg says.
func NewClientQuotas(store *Store, cfg Config, clock Clock) (*ClientQuotas, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("client quotas: %w", err)
	}
	if store == nil {
		return nil, fmt.Errorf("client quotas: no store")
	}
	if clock == nil {
		clock = time.Now
	}
	q := &ClientQuotas{store: store, clock: clock, maxRequestThrottleMs: cfg.WindowSize.Milliseconds()}
	rates := windowing{samples: cfg.Windows, windowMs: cfg.WindowSize.Milliseconds()}
	q.windows = [numKinds]windowing{rates, rates, rates,
		{samples: cfg.ControllerWindows, windowMs: cfg.ControllerWindowSize.Milliseconds()}}
	for i := range q.kinds {
		q.kinds[i].m = make(map[SensorKey]*sensor)
	}
	return q, nil
}

// Record records value for the client (user principal name, client id) under kind k and returns
// how long to throttle it: zero while its rate is within its quota, else the time that brings
// the rate back to the quota if nothing more came ((rate - quota) / quota × the measured span).
// A rate kind keeps the value recorded either way. Units: Produce takes the request's size in bytes, once
// the request is handled; Fetch the response's size in bytes (call Unrecord if the fetch is
// throttled, since the broker then answers it empty); Request takes percent-seconds (see
// RecordRequestTime), its throttle capped at one window; ControllerMutation takes partitions
// and, while the client's bucket is exhausted, records nothing and returns the time the bucket
// takes to refill (see MutationQuota for the per-request form Kafka's APIs use).
func (q *ClientQuotas) Record(k Kind, user, clientID string, value float64) time.Duration {
	var ms int64
	q.with(k, user, clientID, func(s *sensor, r Resolution, w windowing, now int64) {
		if k == ControllerMutation {
			if tokens := s.bucket.measure(w, r.Quota, r.OK, now); tokens < 0 {
				ms = bucketThrottleMs(tokens, r.Quota)
				return
			}
			s.bucket.record(w, r.Quota, r.OK, value, now)
			return
		}
		s.rate.record(w, value, now)
		if !r.OK {
			return
		}
		if observed := s.rate.measure(w, now); observed > r.Quota {
			ms = throttleMs(observed, r.Quota, s.rate.windowSize(w, now))
		}
	})
	if k == Request {
		ms = min(ms, q.maxRequestThrottleMs)
	}
	return time.Duration(ms) * time.Millisecond
}

// RecordNoThrottle records value without checking the quota; the next Record sees it. Kafka
// records a request's network-thread time this way once its response is sent.
func (q *ClientQuotas) RecordNoThrottle(k Kind, user, clientID string, value float64) {
	q.with(k, user, clientID, func(s *sensor, r Resolution, w windowing, now int64) {
		if k == ControllerMutation {
			s.bucket.record(w, r.Quota, r.OK, value, now)
			return
		}
		s.rate.record(w, value, now)
	})
}

// Unrecord takes back a value recorded by Record, as Kafka does for a throttled fetch, whose
// response goes out empty.
func (q *ClientQuotas) Unrecord(k Kind, user, clientID string, value float64) {
	q.RecordNoThrottle(k, user, clientID, -value)
}

// RecordRequestTime records d of handler-thread time for a request of the client and returns
// the throttle time of its request_percentage quota, at most one window. d counts as
// d / 1 s × 100 percent-seconds (ClientRequestQuotaManager.nanosToPercentage), so the quota is
// in percent of one thread and is not scaled by the number of threads: 100 is one whole thread.
// Requests Kafka exempts (from the controller or other brokers) should not be recorded.
func (q *ClientQuotas) RecordRequestTime(user, clientID string, d time.Duration) time.Duration {
	return q.Record(Request, user, clientID, RequestPercentSeconds(d))
}

// RequestPercentSeconds converts handler time to the unit of request_percentage sensors.
func RequestPercentSeconds(d time.Duration) float64 {
	return float64(d.Nanoseconds()) * 100 / float64(time.Second)
}

// MaxValueInWindow is the most that can be recorded for the client at once without being
// throttled for certain: quota × (windows - 1) × window size. Kafka bounds a fetch's max bytes
// by it. ok is false when no quota applies.
func (q *ClientQuotas) MaxValueInWindow(k Kind, user, clientID string) (v float64, ok bool) {
	key := k.Key()
	if k >= numKinds || !q.store.enabled(key) {
		return 0, false
	}
	r := q.store.Resolve(key, user, clientID)
	if !r.OK {
		return 0, false
	}
	w := q.windows[k]
	return r.Quota * float64(w.samples-1) * float64(w.windowMs) / 1000, true
}

// with runs fn on the client's sensor of kind k under its lock, creating the sensor when
// needed, and drops idle sensors now and then. It does nothing while no quota of the kind is
// set, as Kafka records nothing then.
func (q *ClientQuotas) with(k Kind, user, clientID string, fn func(*sensor, Resolution, windowing, int64)) {
	key := k.Key()
	if k >= numKinds || !q.store.enabled(key) {
		return
	}
	r := q.store.Resolve(key, user, clientID)
	now := q.clock().UnixMilli()
	ks := &q.kinds[k]
	ks.maybeSweep(now)
	ks.mu.RLock()
	s := ks.m[r.Sensor]
	if s == nil {
		ks.mu.RUnlock()
		ks.mu.Lock()
		if s = ks.m[r.Sensor]; s == nil {
			s = &sensor{}
			s.lastRecordMs.Store(now)
			ks.m[r.Sensor] = s
		}
		ks.mu.Unlock()
		ks.mu.RLock()
	}
	s.mu.Lock()
	fn(s, r, q.windows[k], now)
	s.lastRecordMs.Store(now)
	s.mu.Unlock()
	ks.mu.RUnlock()
}

// maybeSweep drops the sensors idle for more than an hour, at most every 30 seconds.
func (ks *sensors) maybeSweep(now int64) {
	ks.mu.RLock()
	due := now-ks.lastSweepMs >= sweepEveryMs
	ks.mu.RUnlock()
	if !due {
		return
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if now-ks.lastSweepMs < sweepEveryMs {
		return
	}
	ks.lastSweepMs = now
	for key, s := range ks.m {
		if now-s.lastRecordMs.Load() > sensorExpiryMs {
			delete(ks.m, key)
		}
	}
}

// sensorCount is the number of live sensors of kind k.
func (q *ClientQuotas) sensorCount(k Kind) int {
	ks := &q.kinds[k]
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	return len(ks.m)
}

// MutationQuota is the controller_mutation_rate quota of one CreateTopics, CreatePartitions or
// DeleteTopics request (Kafka's ControllerMutationQuota). Strict (for the request versions
// StrictMutationQuota names) refuses a mutation while the client's bucket is exhausted, with
// THROTTLING_QUOTA_EXCEEDED for that topic; permissive (older versions) accepts every mutation
// and only throttles. Either way the response's throttle_time_ms is ThrottleTime. A
// MutationQuota belongs to one request and is not safe for concurrent use.
type MutationQuota struct {
	q              *ClientQuotas
	user, clientID string
	strict         bool
	// lastThrottleMs is the throttle time of the last refused or over-quota record, taken at
	// lastRecordedMs.
	lastThrottleMs, lastRecordedMs int64
}

// NewMutationQuota is the controller mutation quota of one request of the client.
func (q *ClientQuotas) NewMutationQuota(user, clientID string, strict bool) *MutationQuota {
	return &MutationQuota{q: q, user: user, clientID: clientID, strict: strict}
}

// StrictMutationQuota reports whether a request of apiKey at version gets a strict controller
// mutation quota: CreateTopics from v6, DeleteTopics from v5, CreatePartitions from v3 (Kafka's
// strictSinceVersion). Other requests do not take mutation quotas.
func StrictMutationQuota(apiKey, version int16) bool {
	switch apiKey {
	case 19: // CreateTopics
		return version >= 6
	case 20: // DeleteTopics
		return version >= 5
	case 37: // CreatePartitions
		return version >= 3
	}
	return false
}

// Record takes partitions mutations (partitions created, or the partitions of a deleted topic).
// A strict quota whose bucket is already exhausted refuses them, records nothing and returns an
// *Error with THROTTLING_QUOTA_EXCEEDED, which the broker answers for that topic; otherwise they
// are recorded and Record returns nil, a permissive quota noting the throttle time when the
// bucket goes below zero.
func (m *MutationQuota) Record(partitions int) error {
	var refused bool
	m.q.with(ControllerMutation, m.user, m.clientID, func(s *sensor, r Resolution, w windowing, now int64) {
		if m.strict {
			if tokens := s.bucket.measure(w, r.Quota, r.OK, now); tokens < 0 {
				m.lastThrottleMs, m.lastRecordedMs, refused = bucketThrottleMs(tokens, r.Quota), now, true
				return
			}
			s.bucket.record(w, r.Quota, r.OK, float64(partitions), now)
			return
		}
		s.bucket.record(w, r.Quota, r.OK, float64(partitions), now)
		if tokens := s.bucket.measure(w, r.Quota, r.OK, now); tokens < 0 {
			m.lastThrottleMs, m.lastRecordedMs = bucketThrottleMs(tokens, r.Quota), now
		}
	})
	if refused {
		return &Error{Code: kerr.ThrottlingQuotaExceeded, Message: kerr.ThrottlingQuotaExceeded.Description}
	}
	return nil
}

// Exceeded reports whether a strict quota has refused a mutation; a permissive one never does.
func (m *MutationQuota) Exceeded() bool { return m.strict && m.lastThrottleMs > 0 }

// ThrottleTime is the request's throttle time: the last throttle time noted, less the time
// since, as a request may wait before its response is sent.
func (m *MutationQuota) ThrottleTime() time.Duration {
	if m.lastThrottleMs == 0 {
		return 0
	}
	left := m.lastThrottleMs - (m.q.clock().UnixMilli() - m.lastRecordedMs)
	return time.Duration(max(0, left)) * time.Millisecond
}
