package quota

import "math"

// windowing is the sample layout of a sensor: Kafka's MetricConfig samples and timeWindowMs.
type windowing struct {
	samples  int   // quota.window.num
	windowMs int64 // quota.window.size.seconds, in milliseconds
}

// sample is one window of a rate (SampledStat.Sample). Times are Unix milliseconds.
type sample struct {
	startMs, lastEventMs int64
	value                float64
}

// rate is Kafka's Rate over a WindowedSum (Kafka 3.8 and later): the sum of the samples kept
// divided by the time from the oldest sample's start, counted as at least samples-1 whole
// windows, so a client starting from rest may send about samples-1 windows' worth at once.
// A sample starts at its first record, not on a window boundary. It is not safe for concurrent
// use.
type rate struct {
	// samples grows to samples+1 entries: Kafka keeps one more than it measures, as the
	// oldest may still overlap the measured span. Invariant: current < len(samples) once
	// anything is recorded.
	samples []sample
	current int
}

// record adds v at now, starting a new sample when the current one is a window old.
func (r *rate) record(w windowing, v float64, now int64) {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{startMs: now, lastEventMs: now})
	}
	s := &r.samples[r.current]
	if now-s.startMs >= w.windowMs {
		r.current = (r.current + 1) % (w.samples + 1)
		if r.current == len(r.samples) {
			r.samples = append(r.samples, sample{})
		}
		s = &r.samples[r.current]
		*s = sample{startMs: now}
	}
	s.value += v
	s.lastEventMs = now
}

// purge resets the samples with no event in the last samples windows
// (SampledStat.purgeObsoleteSamples); a sample overlapping the measured span is kept.
func (r *rate) purge(w windowing, now int64) {
	expire := int64(w.samples) * w.windowMs
	for i := range r.samples {
		if now-r.samples[i].lastEventMs >= expire {
			r.samples[i] = sample{startMs: now, lastEventMs: now}
		}
	}
}

// measure is the rate per second at now.
func (r *rate) measure(w windowing, now int64) float64 {
	r.purge(w, now)
	var total float64
	for _, s := range r.samples {
		total += s.value
	}
	return total / (float64(r.windowSize(w, now)) / 1000)
}

// windowSize is the span the rate divides by, in milliseconds (Rate.windowSize).
func (r *rate) windowSize(w windowing, now int64) int64 {
	r.purge(w, now)
	oldest := now
	for _, s := range r.samples {
		oldest = min(oldest, s.startMs)
	}
	elapsed := now - oldest
	full := elapsed / w.windowMs
	if least := int64(w.samples - 1); full < least {
		elapsed += (least - full) * w.windowMs
	}
	return elapsed
}

// throttleMs is QuotaUtils.throttleTime: the delay that brings an observed rate back to the
// bound if nothing more is recorded, (observed - bound) / bound × the measured span, rounded
// as Java's Math.round.
func throttleMs(observed, bound float64, spanMs int64) int64 {
	return int64(math.Floor((observed-bound)/bound*float64(spanMs) + 0.5))
}

// tokenBucket is Kafka's TokenBucket: credits refill at the quota per second up to a burst of
// samples × window × quota, records take credits, and the quota is exhausted while credits are
// below zero. The zero value is full. It is not safe for concurrent use.
type tokenBucket struct {
	tokens float64
	lastMs int64
	// started is false until the first refill; Kafka's bucket starts at time 0 and so is
	// full at its first use.
	started bool
}

// burst is the bucket's capacity for quota.
func (w windowing) burst(quota float64) float64 {
	return float64(w.samples) * float64(w.windowMs) / 1000 * quota
}

// refill adds the credits earned since the last refill. An unbounded quota keeps the bucket
// infinitely full, so that a bound set later finds it full, as Kafka's Long.MAX_VALUE bound does.
func (b *tokenBucket) refill(w windowing, quota float64, bounded bool, now int64) {
	switch {
	case !bounded:
		b.tokens = math.Inf(1)
	case !b.started:
		b.tokens = w.burst(quota)
	default:
		b.tokens = min(w.burst(quota), b.tokens+quota*float64(now-b.lastMs)/1000)
	}
	b.lastMs, b.started = now, true
}

// record takes v credits at now.
func (b *tokenBucket) record(w windowing, quota float64, bounded bool, v float64, now int64) {
	b.refill(w, quota, bounded, now)
	if bounded {
		b.tokens = min(w.burst(quota), b.tokens-v)
	}
}

// measure is the credits left at now.
func (b *tokenBucket) measure(w windowing, quota float64, bounded bool, now int64) float64 {
	b.refill(w, quota, bounded, now)
	return b.tokens
}

// bucketThrottleMs is ControllerMutationQuotaManager.throttleTimeMs: the time to refill a
// bucket at tokens (below zero) back to zero.
func bucketThrottleMs(tokens, quota float64) int64 {
	return int64(math.Floor(-tokens/quota*1000 + 0.5))
}
