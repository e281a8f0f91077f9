package broker

import (
	"errors"
	"log/slog"
	"path/filepath"
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

// readLogStarts reads the log-start-offset-checkpoint of dir; a damaged file is reported and
// ignored, which only lets DeleteRecords'd records reappear until the next DeleteRecords.
func readLogStarts(dir string, logger *slog.Logger) map[rlog.TopicPartition]int64 {
	starts, err := rlog.ReadOffsetCheckpoint(filepath.Join(dir, rlog.LogStartOffsetFile))
	if err != nil {
		logger.Warn("log-start-offset checkpoint unreadable; logs start at their first segment", "err", err)
		return nil
	}
	return starts
}

// writeLogStarts checkpoints every partition's log start offset, so that DeleteRecords and
// retention hold across restarts.
func (b *Broker) writeLogStarts() error {
	starts := map[rlog.TopicPartition]int64{}
	for _, ps := range b.parts.Load().byName {
		for _, p := range ps {
			if p != nil {
				starts[rlog.TopicPartition{Topic: p.topic, Partition: p.index}] = p.log().LogStartOffset()
			}
		}
	}
	return rlog.WriteOffsetCheckpoint(filepath.Join(b.cfg.LogDirs[0], rlog.LogStartOffsetFile), starts)
}

// applyRetention runs one retention check over every partition (the log retention thread of
// Kafka), then checkpoints the log start offsets when any moved.
func (b *Broker) applyRetention() {
	deleted := 0
	for _, ps := range b.parts.Load().byName {
		for _, p := range ps {
			if p == nil {
				continue
			}
			n, err := p.log().ApplyRetention()
			deleted += n
			if err != nil && !errors.Is(err, rlog.ErrClosed) {
				b.logger.Error("retention", "topic", p.topic, "partition", p.index, "err", err)
			}
		}
	}
	if deleted == 0 {
		return
	}
	if err := b.writeLogStarts(); err != nil {
		b.logger.Error("write log-start-offset checkpoint", "err", err)
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
