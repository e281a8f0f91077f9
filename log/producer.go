package log

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// producerBatchesRetained is how many recent batches per producer are kept for duplicate
// detection: clients pipeline at most 5 requests per connection (Kafka's
// ProducerStateEntry.NUM_BATCHES_TO_RETAIN).
const producerBatchesRetained = 5

// noProducerEpoch is Kafka's RecordBatch.NO_PRODUCER_EPOCH: the producer is unknown here.
const noProducerEpoch = -1

// producerBatch is the metadata of one batch kept for duplicate detection.
type producerBatch struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

// producerEntry is the state of one producer id: its epoch and its last batches, oldest first.
type producerEntry struct {
	epoch   int16
	n       int // batches in use; <= producerBatchesRetained
	batches [producerBatchesRetained]producerBatch
	// lastTimestamp is the maxTimestamp of the producer's newest batch (kept in snapshots).
	lastTimestamp int64
	// coordinatorEpoch is that of the transaction coordinator that wrote the producer's last
	// marker, -1 before any: a marker from an older coordinator is fenced.
	coordinatorEpoch int32
	// txnFirstOffset is the first offset of the producer's ongoing transaction, -1 when none.
	txnFirstOffset int64
}

// newProducerEntry is the state of a producer the log has not seen.
func newProducerEntry() producerEntry {
	return producerEntry{epoch: noProducerEpoch, coordinatorEpoch: -1, txnFirstOffset: -1}
}

// lastSeq returns the sequence of the newest batch, or -1 (Kafka's NO_SEQUENCE) when none.
func (e *producerEntry) lastSeq() int32 {
	if e.n == 0 {
		return -1
	}
	return e.batches[e.n-1].lastSeq
}

// duplicate returns the retained batch with the same epoch and sequence range, if any.
func (e *producerEntry) duplicate(epoch int16, firstSeq, lastSeq int32) (producerBatch, bool) {
	if e.epoch != epoch {
		return producerBatch{}, false
	}
	for _, b := range e.batches[:e.n] {
		if b.firstSeq == firstSeq && b.lastSeq == lastSeq {
			return b, true
		}
	}
	return producerBatch{}, false
}

// setEpoch moves the entry to epoch, forgetting the batches of the old one.
func (e *producerEntry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.epoch, e.n = epoch, 0
	}
}

// add records a batch written under epoch, dropping the oldest beyond the retained five.
func (e *producerEntry) add(epoch int16, b producerBatch) {
	e.setEpoch(epoch)
	if e.n == producerBatchesRetained {
		copy(e.batches[:], e.batches[1:])
		e.n--
	}
	e.batches[e.n] = b
	e.n++
}

// inSequence reports whether next directly follows last, wrapping MaxInt32 to 0.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// stagedProducer is the state of one producer as an append in progress would leave it.
type stagedProducer struct {
	id    int64
	entry producerEntry
}

// producers is the idempotent-producer state of a partition (Kafka's ProducerStateManager).
// Appends stage their changes and commit them only after the bytes are written, so a failed
// write leaves the state untouched. Guarded by Log.mu.
type producers struct {
	entries map[int64]producerEntry
	staged  []stagedProducer // reused across appends
	// ongoing maps each producer with an ongoing transaction to its first offset; it mirrors
	// the committed entries' txnFirstOffset. ongoingChanged says a commit changed it since
	// Log.noteTxns last looked.
	ongoing        map[int64]int64
	ongoingChanged bool
	// completed lists the transactions the staged batches complete, in log order; commit
	// hands them back.
	completed []completedTxn
}

func newProducers() producers {
	return producers{entries: make(map[int64]producerEntry), ongoing: make(map[int64]int64)}
}

// current returns the state of id including staged changes, and where it is staged (-1: not).
func (p *producers) current(id int64) (producerEntry, int) {
	for i := range p.staged {
		if p.staged[i].id == id {
			return p.staged[i].entry, i
		}
	}
	if e, ok := p.entries[id]; ok {
		return e, -1
	}
	return newProducerEntry(), -1
}

func (p *producers) stage(id int64, e producerEntry, at int) {
	if at >= 0 {
		p.staged[at].entry = e
		return
	}
	p.staged = append(p.staged, stagedProducer{id: id, entry: e})
}

// check validates batch h, to be written at firstOffset..lastOffset, against its producer's
// state, following Kafka 4's ProducerAppendInfo for client appends:
//   - a batch equal to one of the producer's last five (same epoch and sequence range) is a
//     duplicate: dup is set and the caller writes nothing;
//   - an epoch below the current one fails with ErrInvalidProducerEpoch;
//   - a new epoch must start at sequence 0, unless the producer is unknown here;
//   - otherwise the batch must continue the sequence (ErrOutOfOrderSequence). An unknown
//     producer (for example one whose batches were all deleted) may start anywhere: since
//     KIP-360 Kafka no longer answers UNKNOWN_PRODUCER_ID for this.
//
// Transactions follow Kafka's ProducerAppendInfo: a transactional batch of a producer without
// an ongoing transaction begins one at firstOffset; a non-transactional batch during one fails
// with ErrInvalidTxnState. A control batch b carrying a COMMIT or ABORT marker checks the
// epoch, refuses a coordinator epoch older than the producer's last marker's
// (ErrTransactionCoordinatorFenced) and completes the transaction (one starting at the marker
// when none is ongoing, as Kafka's); other control batches only move the epoch. On success the
// change is staged for commit.
//
// A batch that is not from a client (client false: a coordinator's write, Kafka's
// AppendOrigin.COORDINATOR) is never a duplicate and its sequence is not checked.
func (p *producers) check(h *batchHeader, b []byte, firstOffset, lastOffset int64, client bool) (dup producerBatch, isDup bool, err error) {
	if committed, ok := p.entries[h.producerID]; ok && client && !h.isControl() {
		if b, found := committed.duplicate(h.producerEpoch, h.baseSequence, h.lastSequence()); found {
			return b, true, nil
		}
	}
	e, at := p.current(h.producerID)
	if h.producerEpoch < e.epoch {
		return producerBatch{}, false, fmt.Errorf("%w: producer %d epoch %d at offset %d is older than the current epoch %d",
			ErrInvalidProducerEpoch, h.producerID, h.producerEpoch, firstOffset, e.epoch)
	}
	e.lastTimestamp = h.maxTimestamp
	if h.isControl() {
		m, isMarker, err := parseEndTxnMarker(b)
		if err != nil {
			return producerBatch{}, false, fmt.Errorf("%w: control batch at offset %d: %v", ErrCorruptBatch, firstOffset, err)
		}
		if isMarker && m.coordinatorEpoch < e.coordinatorEpoch {
			return producerBatch{}, false, fmt.Errorf("%w: producer %d marker at offset %d has coordinator epoch %d, older than %d",
				ErrTransactionCoordinatorFenced, h.producerID, firstOffset, m.coordinatorEpoch, e.coordinatorEpoch)
		}
		p.endTxn(h, &e, m, isMarker)
		p.stage(h.producerID, e, at)
		return producerBatch{}, false, nil
	}
	if h.isTransactional() {
		if e.txnFirstOffset < 0 {
			e.txnFirstOffset = firstOffset
		}
	} else if e.txnFirstOffset >= 0 {
		return producerBatch{}, false, fmt.Errorf("%w: producer %d wrote a non-transactional batch at offset %d during its transaction from %d",
			ErrInvalidTxnState, h.producerID, firstOffset, e.txnFirstOffset)
	}
	if client {
		if err := e.checkSequence(h, firstOffset); err != nil {
			return producerBatch{}, false, err
		}
	}
	e.add(h.producerEpoch, producerBatch{firstSeq: h.baseSequence, lastSeq: h.lastSequence(), firstOffset: firstOffset, lastOffset: lastOffset})
	p.stage(h.producerID, e, at)
	return producerBatch{}, false, nil
}

// checkSequence checks that client batch h, to be written at firstOffset, continues e's
// sequence: a new epoch starts at 0 unless the producer is unknown here, the same epoch goes on
// from the last batch.
func (e *producerEntry) checkSequence(h *batchHeader, firstOffset int64) error {
	if h.producerEpoch != e.epoch {
		if h.baseSequence != 0 && e.epoch != noProducerEpoch {
			return fmt.Errorf("%w: producer %d new epoch %d (current %d) at offset %d starts at sequence %d; want 0",
				ErrOutOfOrderSequence, h.producerID, h.producerEpoch, e.epoch, firstOffset, h.baseSequence)
		}
	} else if last := e.lastSeq(); e.epoch != noProducerEpoch && !inSequence(last, h.baseSequence) {
		return fmt.Errorf("%w: producer %d epoch %d at offset %d: sequence %d does not follow %d",
			ErrOutOfOrderSequence, h.producerID, h.producerEpoch, firstOffset, h.baseSequence, last)
	}
	return nil
}

// endTxn moves e to the epoch of control batch h and, for a marker m, completes the
// producer's transaction: staged in p.completed, with the marker's coordinator epoch kept.
func (p *producers) endTxn(h *batchHeader, e *producerEntry, m endTxnMarker, isMarker bool) {
	e.setEpoch(h.producerEpoch)
	if !isMarker {
		return
	}
	first := e.txnFirstOffset
	if first < 0 {
		first = h.baseOffset
	}
	p.completed = append(p.completed, completedTxn{producerID: h.producerID, firstOffset: first, lastOffset: h.lastOffset(), aborted: !m.commit})
	e.txnFirstOffset = -1
	e.coordinatorEpoch = m.coordinatorEpoch
}

// commit applies the staged changes and returns the transactions they complete, valid until
// the next append.
func (p *producers) commit() []completedTxn {
	for _, s := range p.staged {
		p.entries[s.id] = s.entry
		first, had := p.ongoing[s.id]
		switch {
		case s.entry.txnFirstOffset >= 0 && (!had || first != s.entry.txnFirstOffset):
			p.ongoing[s.id] = s.entry.txnFirstOffset
			p.ongoingChanged = true
		case s.entry.txnFirstOffset < 0 && had:
			delete(p.ongoing, s.id)
			p.ongoingChanged = true
		}
	}
	p.staged = p.staged[:0]
	done := p.completed
	p.completed = p.completed[:0]
	return done
}

// discard drops the staged changes.
func (p *producers) discard() {
	p.staged = p.staged[:0]
	p.completed = p.completed[:0]
}

// replay stages batch h without validation, as Kafka applies batches read back from disk or
// replicated from the leader, which validated them: the entries end up as the leader's, so a
// replica that becomes leader detects the same duplicates.
// A control batch b that does not hold a readable marker only moves the epoch.
func (p *producers) replay(h *batchHeader, b []byte) {
	e, at := p.current(h.producerID)
	e.lastTimestamp = h.maxTimestamp
	if h.isControl() {
		m, isMarker, err := parseEndTxnMarker(b)
		p.endTxn(h, &e, m, isMarker && err == nil)
	} else {
		if h.isTransactional() && e.txnFirstOffset < 0 {
			e.txnFirstOffset = h.baseOffset
		}
		e.add(h.producerEpoch, producerBatch{firstSeq: h.baseSequence, lastSeq: h.lastSequence(), firstOffset: h.baseOffset, lastOffset: h.lastOffset()})
	}
	p.stage(h.producerID, e, at)
}

// load applies a batch read back from disk at once and returns the transactions it completes,
// valid until the next change.
func (p *producers) load(h *batchHeader, b []byte) []completedTxn {
	p.replay(h, b)
	return p.commit()
}

// ProducerState is one producer's state in a partition as DescribeProducers reports it (Kafka's
// ProducerStateEntry, seen through UnifiedLog.activeProducers).
type ProducerState struct {
	ProducerID int64
	Epoch      int16
	// LastSequence is the last sequence of the producer's newest retained batch, -1 when none.
	LastSequence int32
	// LastTimestamp is the max timestamp of the producer's newest batch, markers included.
	LastTimestamp int64
	// CoordinatorEpoch is that of the coordinator that wrote the producer's last marker, -1
	// before any.
	CoordinatorEpoch int32
	// TxnStartOffset is the first offset of the producer's ongoing transaction, -1 when none.
	TxnStartOffset int64
}

// ActiveProducers returns the state of every producer the log tracks, by producer id, for
// DescribeProducers. It waits for an append in progress, so it sees whole appends.
func (l *Log) ActiveProducers() []ProducerState {
	l.mu.Lock()
	out := make([]ProducerState, 0, len(l.producers.entries))
	for id, e := range l.producers.entries {
		out = append(out, ProducerState{ProducerID: id, Epoch: e.epoch, LastSequence: e.lastSeq(),
			LastTimestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch, TxnStartOffset: e.txnFirstOffset})
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b ProducerState) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}
