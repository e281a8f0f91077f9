package broker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/internal/recordbatch"
	rlog "ringbroker/log"
	"ringbroker/wire"
)

// This file appends to and replays the partitions of the broker's internal topics whose records
// a coordinator keeps (__transaction_state), led here.

// maxInternalLoadBatch bounds one read while a coordinator replays a partition.
const maxInternalLoadBatch = 1 << 20

// appendInternal writes recs as one uncompressed batch to p, which this broker leads, and returns
// the batch's base offset and the log end after it. A producerID >= 0 makes it a transactional
// batch of that producer and epoch (TxnOffsetCommit). The log checks it as a coordinator's
// (AppendAsCoordinator): a transactional batch carries no sequence numbers, but an older producer
// epoch fails with INVALID_PRODUCER_EPOCH. An ISR below min.insync.replicas refuses the append
// (NOT_ENOUGH_REPLICAS). Where mayBlock is false (an event loop thread), an append that would
// wait for another or do more than a write to the page cache writes nothing and fails with
// rlog.ErrWouldBlock (log.TryAppend).
func (b *Broker) appendInternal(p *partition, producerID int64, producerEpoch int16, recs []wire.Record, mayBlock bool) (base, end int64, err error) {
	if st := p.state(); len(st.isr) < st.minISR {
		return 0, 0, fmt.Errorf("append to %s-%d: ISR %v is smaller than min.insync.replicas %d: %w", p.topic, p.index, st.isr, st.minISR, kerr.NotEnoughReplicas)
	}
	now := time.Now().UnixMilli()
	h := wire.BatchHeader{FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if producerID >= 0 {
		h.ProducerID, h.ProducerEpoch, h.Attributes = producerID, producerEpoch, recordbatch.AttrTransactional
	}
	batch, err := b.codecs.AppendBatch(nil, h, wire.CodecNone, recs)
	if err != nil {
		return 0, 0, fmt.Errorf("encode %s-%d batch: %w", p.topic, p.index, err)
	}
	var res rlog.AppendResult
	if mayBlock {
		p.appendMu.Lock()
		res, err = p.log().AppendAsCoordinator(batch)
	} else {
		if !p.appendMu.TryLock() {
			return 0, 0, rlog.ErrWouldBlock
		}
		res, err = p.log().TryAppendAsCoordinator(batch)
	}
	end = p.log().LogEndOffset()
	p.appendMu.Unlock()
	if errors.Is(err, rlog.ErrWouldBlock) {
		return 0, 0, err
	}
	if err != nil {
		b.noteStorageError(p.dir.Load(), err)
		return 0, 0, fmt.Errorf("append to %s-%d: %w: %w", p.topic, p.index, appendErrorCode(err), err)
	}
	p.afterLeaderAppend(b.cfg.NodeID)
	p.wakeWaiters()
	return res.BaseOffset, end, nil
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

// scanInternal calls fn with every batch of p in offset order, from the log start to its end,
// and with from, the offset the read holding the batch began at: records below it were passed
// already (a read may begin inside a batch).
func (b *Broker) scanInternal(p *partition, fn func(batch wire.Batch, from int64) error) error {
	end := p.log().LogEndOffset()
	for off := p.log().LogStartOffset(); off < end; {
		rr, err := p.log().Read(off, maxInternalLoadBatch, end, true)
		if err != nil {
			return fmt.Errorf("load %s-%d at %d: %w", p.topic, p.index, off, err)
		}
		next := off
		data := rr.Data
		for i, pos := 0, 0; len(data) > 0; i++ {
			batch, rest, err := wire.NextBatch(data, i, pos)
			if err == nil {
				err = fn(batch, off)
			}
			if err != nil {
				rr.Release()
				return fmt.Errorf("load %s-%d at %d: %w", p.topic, p.index, off, err)
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

// decodeInternal calls fn for every record of data batch batch at or after from, with copies of
// its key and value (nil for a tombstone), which outlive the read.
func (b *Broker) decodeInternal(batch wire.Batch, from int64, fn func(offset int64, key, value []byte) error) error {
	base := batch.BaseOffset()
	return b.codecs.DecodeRecords(batch, maxInternalLoadBatch*16, func(r *wire.Record) error {
		offset := base + int64(r.OffsetDelta)
		if offset < from {
			return nil
		}
		var value []byte
		if r.Value != nil {
			value = append([]byte{}, r.Value...)
		}
		return fn(offset, append([]byte(nil), r.Key...), value)
	})
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
