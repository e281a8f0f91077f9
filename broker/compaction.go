package broker

// Log compaction wiring: the broker's one log cleaner (log.Cleaner) is told about every open
// partition of a topic whose cleanup.policy includes compact, with the topic's compaction
// settings, and forgets it when the partition is deleted or the policy changes. Produce refuses
// records without a key on compacted topics, as Kafka does.

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/broker/meta"
	rlog "ringbroker/log"
	"ringbroker/wire"
)

// compactedDecodeLimit bounds the decompressed size of a batch checked for keys on Produce.
const compactedDecodeLimit = 128 << 20

// errNoKey stops record decoding at the first record without a key.
var errNoKey = errors.New("record without key")

// compactionConfigFor returns the compaction settings of topic t and whether its cleanup.policy
// includes compact.
func (b *Broker) compactionConfigFor(t *meta.Topic) (rlog.CompactionConfig, bool) {
	get := func(name string) string {
		v, _ := b.live().effectiveTopicConfig(t.Configs, name)
		return v
	}
	ms := func(name string) time.Duration {
		n, err := strconv.ParseInt(get(name), 10, 64)
		if err != nil || n <= 0 || n >= math.MaxInt64/int64(time.Millisecond) {
			return 0
		}
		return time.Duration(n) * time.Millisecond
	}
	cc := rlog.DefaultCompactionConfig()
	cc.DeleteRetention = ms("delete.retention.ms")
	cc.MinCompactionLag = ms("min.compaction.lag.ms")
	cc.MaxCompactionLag = ms("max.compaction.lag.ms") // Long.MAX_VALUE, the default, disables
	if r, err := strconv.ParseFloat(get("min.cleanable.dirty.ratio"), 64); err == nil {
		cc.MinCleanableDirtyRatio = r
	}
	return cc, contains(splitList(get("cleanup.policy")), "compact")
}

// registerCompaction adds p's log to the cleaner when topic t is compacted, and removes it
// otherwise; called when a partition opens and when the topic's configs change.
func (b *Broker) registerCompaction(p *partition, t *meta.Topic) {
	if cc, ok := b.compactionConfigFor(t); ok {
		b.cleaner.Add(p.log(), cc)
	} else {
		b.cleaner.Remove(p.log())
	}
}

// checkCompactedKeys refuses a record batch holding a record without a key, for a compacted
// topic: INVALID_RECORD "Compacted topic cannot accept message without key", as Kafka's
// LogValidator.
func (b *Broker) checkCompactedKeys(topic string, index int32, records []byte) (*kerr.Error, string) {
	i := 0
	err := b.codecs.DecodeRecords(wire.Batch(records), compactedDecodeLimit, func(r *wire.Record) error {
		if r.Key == nil {
			return errNoKey
		}
		i++
		return nil
	})
	switch {
	case errors.Is(err, errNoKey):
		return kerr.InvalidRecord, fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d (record %d).", topic, index, i)
	case err != nil:
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return ke, err.Error()
		}
		return kerr.CorruptMessage, err.Error()
	}
	return nil, ""
}
