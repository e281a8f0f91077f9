package broker

import (
	"errors"
	"time"

	rlog "ringbroker/log"
)

// defaultRetentionCheckInterval is Kafka's log.retention.check.interval.ms default.
const defaultRetentionCheckInterval = 300 * time.Second

// retentionCheckInterval is log.retention.check.interval.ms, Kafka's default when unset.
func (b *Broker) retentionCheckInterval() time.Duration {
	if b.cfg.RetentionCheckInterval <= 0 {
		return defaultRetentionCheckInterval
	}
	return b.cfg.RetentionCheckInterval
}

// applyRetention runs one retention check over every partition (the log retention thread of
// Kafka), then checkpoints the log start offsets when any moved; partitions of offline dirs
// are left alone.
func (b *Broker) applyRetention() {
	deleted := 0
	for _, ps := range b.parts.Load().byName {
		for _, p := range ps {
			if p == nil || p.offline() {
				continue
			}
			n, err := p.log().ApplyRetention()
			deleted += n
			if err != nil && !errors.Is(err, rlog.ErrClosed) {
				b.logger.Error("retention", "topic", p.topic, "partition", p.index, "err", err)
				b.noteStorageError(p.dir.Load(), err)
			}
		}
	}
	if deleted == 0 {
		return
	}
	if err := b.writeCheckpoints(); err != nil {
		b.logger.Error("write checkpoints", "err", err)
	}
}

// applyTopicLogConfig gives the open logs of topic the configuration now in the metadata image,
// so that altered topic configs take effect at once.
func (b *Broker) applyTopicLogConfig(topic string) {
	t := b.meta.Image().Topics[topic]
	if t == nil {
		return
	}
	cfg := b.logConfigFor(t)
	for _, p := range b.parts.Load().byName[topic] {
		if p == nil {
			continue
		}
		if err := p.log().SetConfig(cfg); err != nil && !errors.Is(err, rlog.ErrClosed) {
			b.logger.Error("apply topic config to open log", "topic", topic, "partition", p.index, "err", err)
		}
		b.registerCompaction(p, t)
	}
}
