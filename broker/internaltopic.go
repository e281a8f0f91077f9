package broker

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/wire"
)

// This file appends to and replays the partitions of the broker's internal topics whose records
// a coordinator keeps (__transaction_state), led here.

// maxInternalLoadBatch bounds one read while a coordinator replays a partition.
const maxInternalLoadBatch = 1 << 20

// appendInternal writes recs as one uncompressed batch to p, which this broker leads, and returns
// the log end after it. An ISR below min.insync.replicas refuses the append (NOT_ENOUGH_REPLICAS).
func (b *Broker) appendInternal(p *partition, recs []wire.Record) (int64, error) {
	if st := p.state(); len(st.isr) < st.minISR {
		return 0, fmt.Errorf("append to %s-%d: ISR %v is smaller than min.insync.replicas %d: %w", p.topic, p.index, st.isr, st.minISR, kerr.NotEnoughReplicas)
	}
	now := time.Now().UnixMilli()
	batch, err := b.codecs.AppendBatch(nil, wire.BatchHeader{FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, wire.CodecNone, recs)
	if err != nil {
		return 0, fmt.Errorf("encode %s-%d batch: %w", p.topic, p.index, err)
	}
	p.appendMu.Lock()
	_, err = p.log.Append(batch)
	end := p.log.LogEndOffset()
	p.appendMu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("append to %s-%d: %w", p.topic, p.index, err)
	}
	p.afterLeaderAppend(b.cfg.NodeID)
	p.wakeWaiters()
	return end, nil
}

// waitInternal calls done once the high watermark of p reaches end (nil), the partition stops
// being led here, or timeout passes (REQUEST_TIMED_OUT).
func (b *Broker) waitInternal(p *partition, end int64, timeout time.Duration, done func(error)) {
	if p.highWatermark() >= end {
		done(nil)
		return
	}
	var once sync.Once
	finish := func(err error) { once.Do(func() { done(err) }) }
	timer := b.purgatory.after(time.Now().Add(timeout), func() {
		finish(fmt.Errorf("append to %s-%d: not replicated within %v: %w", p.topic, p.index, timeout, kerr.RequestTimedOut))
	})
	if !p.waitHW(end, func(code *kerr.Error) {
		b.purgatory.cancel(timer)
		if code != nil {
			finish(fmt.Errorf("append to %s-%d: %w", p.topic, p.index, code))
			return
		}
		finish(nil)
	}) {
		b.purgatory.cancel(timer)
		finish(nil)
	}
}

// replayInternal calls fn with the key and value (nil for a tombstone) of every record of p's
// data batches in offset order, from the log start to its end.
func (b *Broker) replayInternal(p *partition, fn func(key, value []byte) error) error {
	end := p.log.LogEndOffset()
	for off := p.log.LogStartOffset(); off < end; {
		rr, err := p.log.Read(off, maxInternalLoadBatch, end, true)
		if err != nil {
			return fmt.Errorf("load %s-%d at %d: %w", p.topic, p.index, off, err)
		}
		next := off
		data := rr.Data
		for i, pos := 0, 0; len(data) > 0; i++ {
			batch, rest, err := wire.NextBatch(data, i, pos)
			if err != nil {
				rr.Release()
				return fmt.Errorf("load %s-%d at %d: %w", p.topic, p.index, off, err)
			}
			base := batch.BaseOffset()
			if !batch.IsControl() {
				err = b.codecs.DecodeRecords(batch, maxInternalLoadBatch*16, func(r *wire.Record) error {
					if base+int64(r.OffsetDelta) < off {
						return nil
					}
					var value []byte
					if r.Value != nil {
						value = append([]byte{}, r.Value...)
					}
					return fn(append([]byte(nil), r.Key...), value)
				})
				if err != nil {
					rr.Release()
					return fmt.Errorf("load %s-%d at %d: %w", p.topic, p.index, off, err)
				}
			}
			next = batch.LastOffset() + 1
			pos += len(batch)
			data = rest
		}
		rr.Release()
		if next <= off {
			return fmt.Errorf("load %s-%d: no progress at offset %d", p.topic, p.index, off)
		}
		off = next
	}
	return nil
}

// syncCoordinatorPartitions hands a coordinator every partition of topic led here, under its
// leader epoch, and takes back those no longer led here; loaded, guarded by the caller, records
// what the coordinator holds. A partition loaded under an earlier leader epoch is loaded again:
// this replica may have followed another leader meanwhile.
func (b *Broker) syncCoordinatorPartitions(topic string, loaded map[int32]int32, load func(idx, epoch int32) error, unload func(idx int32) error) error {
	ps := b.parts.Load().byName[topic]
	for _, idx := range slices.Sorted(maps.Keys(loaded)) {
		if int(idx) < len(ps) && ps[idx] != nil && ps[idx].isLeader() {
			continue
		}
		if err := unload(idx); err != nil {
			return fmt.Errorf("unload %s-%d: %w", topic, idx, err)
		}
		delete(loaded, idx)
	}
	for i, p := range ps {
		if p == nil || !p.isLeader() {
			continue
		}
		idx, epoch := int32(i), p.state().leaderEpoch
		if was, ok := loaded[idx]; ok && was == epoch {
			continue
		}
		if err := load(idx, epoch); err != nil {
			return fmt.Errorf("load %s-%d: %w", topic, idx, err)
		}
		loaded[idx] = epoch
	}
	return nil
}
