package log

// Transactions on the partition side, after Kafka's ProducerStateManager, TransactionIndex and
// UnifiedLog (KIP-98). A producer's first transactional batch begins its transaction; a
// control batch carrying a COMMIT or ABORT marker (written by WriteTxnMarkers) completes it.
// The last stable offset is the smallest first offset of the transactions still ongoing, or
// completed by a marker the high watermark has not passed yet, capped by the high watermark:
// read_committed consumers read below it. A transaction completed by ABORT is recorded in the
// .txnindex of the segment holding its marker, so that a read_committed fetch can name the
// aborted transactions overlapping the batches it returns.
//
// .txnindex format (Kafka's, big-endian), one 34-byte entry per aborted transaction:
//
//	version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64
//
// lastOffset is the marker's offset; lastStableOffset the last stable offset once the
// transaction completed, which lets a search stop early.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"

	"ringbroker/internal/fsutil"
	"ringbroker/internal/recordbatch"
)

const (
	txnIndexSuffix = ".txnindex"
	// txnEntrySize is the size of one .txnindex entry.
	txnEntrySize = 2 + 8 + 8 + 8 + 8
	// txnIndexVersion is the only entry version Kafka defines.
	txnIndexVersion = 0
	// Control record types of a marker's key (Kafka's ControlRecordType).
	controlAbort  = 0
	controlCommit = 1
	// endTxnMarkerValueSize is a marker value: version int16 and coordinator epoch int32.
	endTxnMarkerValueSize = 2 + 4
)

// endTxnMarker is the record of a COMMIT or ABORT control batch (Kafka's EndTransactionMarker).
type endTxnMarker struct {
	commit           bool
	coordinatorEpoch int32
}

// parseEndTxnMarker reads the control record of control batch b (header and records, at least
// recordbatch.HeaderSize bytes). isMarker is false for a control record of another type (its
// key version 0 or later, as Kafka reads them). It checks every length against b and never
// panics on malformed input.
func parseEndTxnMarker(b []byte) (m endTxnMarker, isMarker bool, err error) {
	if len(b) < recordbatch.HeaderSize {
		return m, false, fmt.Errorf("control batch of %d bytes; want at least %d", len(b), recordbatch.HeaderSize)
	}
	h := parseHeader(b)
	if h.attributes&recordbatch.AttrCompression != 0 {
		return m, false, fmt.Errorf("compressed control batch (attributes %#x)", h.attributes)
	}
	if h.numRecords < 1 {
		return m, false, fmt.Errorf("control batch with %d records; want 1", h.numRecords)
	}
	end := min(h.size(), int64(len(b)))
	if end < recordbatch.HeaderSize {
		return m, false, fmt.Errorf("control batch length %d; want at least %d", h.length, recordbatch.HeaderSize-recordbatch.LogOverhead)
	}
	rec, _, err := nextRecord(b[recordbatch.HeaderSize:end])
	if err != nil {
		return m, false, fmt.Errorf("control record: %w", err)
	}
	if len(rec.key) < 4 {
		return m, false, fmt.Errorf("control record key of %d bytes; want 4", len(rec.key))
	}
	be := binary.BigEndian
	if v := int16(be.Uint16(rec.key)); v < 0 {
		return m, false, fmt.Errorf("control record key version %d", v)
	}
	switch typ := int16(be.Uint16(rec.key[2:])); typ {
	case controlAbort, controlCommit:
		m.commit = typ == controlCommit
	default:
		return m, false, nil
	}
	if len(rec.value) < endTxnMarkerValueSize {
		return m, false, fmt.Errorf("transaction marker value of %d bytes; want at least %d", len(rec.value), endTxnMarkerValueSize)
	}
	if v := int16(be.Uint16(rec.value)); v < 0 {
		return m, false, fmt.Errorf("transaction marker value version %d", v)
	}
	m.coordinatorEpoch = int32(be.Uint32(rec.value[2:]))
	return m, true, nil
}

// completedTxn is a transaction a marker completed (Kafka's CompletedTxn).
type completedTxn struct {
	producerID              int64
	firstOffset, lastOffset int64 // lastOffset is the marker's
	aborted                 bool
}

// abortedTxn is one .txnindex entry.
type abortedTxn struct {
	producerID, firstOffset, lastOffset, lastStableOffset int64
}

// AbortedTxn is an aborted transaction a read_committed fetcher must skip: the producer's
// batches from FirstOffset up to its ABORT marker.
type AbortedTxn struct {
	ProducerID, FirstOffset int64
}

// appendTxnEntry appends a's .txnindex entry to dst.
func appendTxnEntry(dst []byte, a abortedTxn) []byte {
	be := binary.BigEndian
	dst = be.AppendUint16(dst, txnIndexVersion)
	dst = be.AppendUint64(dst, uint64(a.producerID))
	dst = be.AppendUint64(dst, uint64(a.firstOffset))
	dst = be.AppendUint64(dst, uint64(a.lastOffset))
	return be.AppendUint64(dst, uint64(a.lastStableOffset))
}

// decodeTxnIndex parses a .txnindex file. It checks the size, each entry's version and
// offsets (0 <= firstOffset <= lastOffset, lastStableOffset >= 0, lastOffset ascending as
// appends write them) and never panics on malformed input.
func decodeTxnIndex(b []byte) ([]abortedTxn, error) {
	if len(b)%txnEntrySize != 0 {
		return nil, fmt.Errorf("transaction index of %d bytes is not a multiple of %d", len(b), txnEntrySize)
	}
	be := binary.BigEndian
	out := make([]abortedTxn, 0, len(b)/txnEntrySize)
	prev := int64(-1)
	for i := 0; i < len(b); i += txnEntrySize {
		e := b[i : i+txnEntrySize]
		if v := int16(be.Uint16(e)); v != txnIndexVersion {
			return nil, fmt.Errorf("transaction index entry %d: version %d; want %d", i/txnEntrySize, v, txnIndexVersion)
		}
		a := abortedTxn{producerID: int64(be.Uint64(e[2:])), firstOffset: int64(be.Uint64(e[10:])),
			lastOffset: int64(be.Uint64(e[18:])), lastStableOffset: int64(be.Uint64(e[26:]))}
		if a.producerID < 0 || a.firstOffset < 0 || a.lastOffset < a.firstOffset || a.lastStableOffset < 0 || a.lastOffset <= prev {
			return nil, fmt.Errorf("transaction index entry %d: producer %d offsets %d..%d, last stable %d after %d",
				i/txnEntrySize, a.producerID, a.firstOffset, a.lastOffset, a.lastStableOffset, prev)
		}
		prev = a.lastOffset
		out = append(out, a)
	}
	return out, nil
}

// txnIndexPath names the segment's transaction index.
func (s *segment) txnIndexPath() string {
	return s.path[:len(s.path)-len(logSuffix)] + txnIndexSuffix
}

// abortedTxns returns the segment's .txnindex entries. Lock-free: the list only grows by
// appends published with a new slice header.
func (s *segment) abortedTxns() []abortedTxn {
	if p := s.aborted.Load(); p != nil {
		return *p
	}
	return nil
}

// loadTxnIndex reads the segment's .txnindex, if any.
func (s *segment) loadTxnIndex() error {
	data, err := os.ReadFile(s.txnIndexPath())
	if errors.Is(err, fs.ErrNotExist) {
		s.aborted.Store(nil)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read transaction index: %w", err)
	}
	list, err := decodeTxnIndex(data)
	if err != nil {
		return fmt.Errorf("%s: %w", s.txnIndexPath(), err)
	}
	s.aborted.Store(&list)
	return nil
}

// appendAborted adds an entry to the segment's .txnindex, creating the file on the first, as
// Kafka does. The entry is visible to reads at once, even if the write fails. Called under
// Log.mu (or before the segment is published).
func (s *segment) appendAborted(a abortedTxn) error {
	list := append(s.abortedTxns(), a)
	s.aborted.Store(&list)
	s.txnFileMu.Lock()
	defer s.txnFileMu.Unlock()
	if s.txnFile == nil {
		f, err := os.OpenFile(s.txnIndexPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("open transaction index: %w", err)
		}
		s.txnFile = f
	}
	if _, err := s.txnFile.Write(appendTxnEntry(make([]byte, 0, txnEntrySize), a)); err != nil {
		return fmt.Errorf("write transaction index %s: %w", s.txnIndexPath(), err)
	}
	s.txnDirty = true
	return nil
}

// closeTxnFile closes the transaction index file if it is open; the next entry opens it again.
func (s *segment) closeTxnFile() error {
	s.txnFileMu.Lock()
	defer s.txnFileMu.Unlock()
	if s.txnFile == nil {
		return nil
	}
	err := s.txnFile.Close()
	s.txnFile, s.txnDirty = nil, false
	if err != nil {
		return fmt.Errorf("close transaction index %s: %w", s.txnIndexPath(), err)
	}
	return nil
}

// resetTxnIndex removes the segment's .txnindex before it is rebuilt from its batches.
func (s *segment) resetTxnIndex() error {
	s.aborted.Store(nil)
	if err := s.closeTxnFile(); err != nil {
		return err
	}
	if err := ignoreNotExist(os.Remove(s.txnIndexPath())); err != nil {
		return fmt.Errorf("remove transaction index: %w", err)
	}
	return nil
}

// truncateTxnIndex drops the entries of transactions whose marker is at or past end (Kafka's
// TransactionIndex.truncateTo), rewriting the file atomically; without entries left it is
// removed.
func (s *segment) truncateTxnIndex(end int64) error {
	list := s.abortedTxns()
	n := len(list)
	for n > 0 && list[n-1].lastOffset >= end {
		n--
	}
	if n == len(list) {
		return nil
	}
	if n == 0 {
		return s.resetTxnIndex()
	}
	kept := append([]abortedTxn(nil), list[:n]...)
	var data []byte
	for _, a := range kept {
		data = appendTxnEntry(data, a)
	}
	if err := s.closeTxnFile(); err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(s.txnIndexPath(), data); err != nil {
		return fmt.Errorf("truncate transaction index to %d: %w", end, err)
	}
	s.aborted.Store(&kept)
	return nil
}

// syncTxnIndex fsyncs the transaction index if it was written to since the last call.
func (s *segment) syncTxnIndex() error {
	s.txnFileMu.Lock()
	defer s.txnFileMu.Unlock()
	if s.txnFile == nil || !s.txnDirty {
		return nil
	}
	if err := s.txnFile.Sync(); err != nil {
		return fmt.Errorf("fsync transaction index %s: %w", s.txnIndexPath(), err)
	}
	s.txnDirty = false
	return nil
}

// ongoingFirst returns the smallest first offset of an ongoing transaction of a producer other
// than except, or math.MaxInt64.
func (p *producers) ongoingFirst(except int64) int64 {
	first := int64(math.MaxInt64)
	for id, off := range p.ongoing {
		if id != except {
			first = min(first, off)
		}
	}
	return first
}

// noteTxns records what a commit of the producer state changed: transactions completed (an
// aborted one into the .txnindex of s, the segment holding its marker, when index is set) and
// the first unstable offset. Called under l.mu, after every commit; it costs nothing when no
// transaction began or ended. It returns the first failed index write.
func (l *Log) noteTxns(done []completedTxn, s *segment, index bool) error {
	if len(done) == 0 && !l.producers.ongoingChanged {
		return nil
	}
	var err error
	if len(done) > 0 {
		l.txnMu.Lock()
		for _, c := range done {
			if c.aborted && index {
				// Kafka's ProducerStateManager.lastStableOffset(completedTxn).
				lso := l.producers.ongoingFirst(c.producerID)
				if lso == math.MaxInt64 {
					lso = c.lastOffset + 1
				}
				if werr := s.appendAborted(abortedTxn{c.producerID, c.firstOffset, c.lastOffset, lso}); werr != nil && err == nil {
					err = werr
				}
			}
			l.unreplicated = append(l.unreplicated, c)
		}
		l.txnMu.Unlock()
	}
	l.updateFirstUnstable()
	return err
}

// updateFirstUnstable recomputes the first unstable offset from the ongoing and unreplicated
// transactions. Called under l.mu.
func (l *Log) updateFirstUnstable() {
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	l.producers.ongoingChanged = false
	first := l.producers.ongoingFirst(-1)
	l.ongoingMin.Store(first)
	for _, c := range l.unreplicated {
		first = min(first, c.firstOffset)
	}
	l.firstUnstable.Store(first)
}

// resetTxns forgets the unreplicated transactions and recomputes the first unstable offset
// when the producer state starts over. Called under l.mu.
func (l *Log) resetTxns() {
	l.txnMu.Lock()
	l.unreplicated = l.unreplicated[:0]
	l.txnMu.Unlock()
	l.updateFirstUnstable()
}

// rebuildOngoing derives the ongoing transactions from the entries (after a snapshot load).
func (p *producers) rebuildOngoing() {
	clear(p.ongoing)
	for id, e := range p.entries {
		if e.txnFirstOffset >= 0 {
			p.ongoing[id] = e.txnFirstOffset
		}
	}
}

// LastStableOffset returns the partition's last stable offset given its high watermark hw
// (Kafka's UnifiedLog.lastStableOffset): the first offset of the oldest transaction that is
// ongoing or whose marker hw has not passed yet, but not below the log start offset (a
// transaction whose start DeleteRecords or retention removed holds it at the log start, as
// Kafka's maybeIncrementFirstUnstableOffset), or hw when that is not below it. Completed
// transactions whose marker lies below hw stop counting. Lock-free unless a transaction is
// unstable below hw.
func (l *Log) LastStableOffset(hw int64) int64 {
	if l.firstUnstable.Load() >= hw {
		return hw
	}
	return l.pruneUnreplicated(hw)
}

// NoteHighWatermark tells the log that its partition's high watermark moved to hw (Kafka's
// ProducerStateManager.onHighWatermarkUpdated): completed transactions whose marker lies below
// it stop holding the last stable offset back and are forgotten, so that a replica nobody
// reads from does not keep every transaction it ever saw. Lock-free unless a transaction is
// unstable below hw.
func (l *Log) NoteHighWatermark(hw int64) {
	if l.firstUnstable.Load() < hw {
		l.pruneUnreplicated(hw)
	}
}

// pruneUnreplicated forgets the unreplicated transactions whose marker lies below hw and
// returns the last stable offset for hw.
func (l *Log) pruneUnreplicated(hw int64) int64 {
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	kept := l.unreplicated[:0]
	first := int64(math.MaxInt64)
	for _, c := range l.unreplicated {
		if c.lastOffset >= hw {
			kept = append(kept, c)
			first = min(first, c.firstOffset)
		}
	}
	l.unreplicated = kept
	first = min(first, l.ongoingMin.Load())
	l.firstUnstable.Store(first)
	return min(max(first, l.logStart.Load()), hw)
}

// AbortedTransactions lists the aborted transactions overlapping offsets from..upto-1 (Kafka's
// collectAbortedTransactions): the .txnindex entries whose marker is at or past from and whose
// first offset is below upto, from the segment holding from on, stopping after the entry whose
// last stable offset reaches upto. A read_committed fetcher drops their batches.
func (l *Log) AbortedTransactions(from, upto int64) []AbortedTxn {
	segsp := l.segs.Load()
	if segsp == nil || upto <= from {
		return nil
	}
	segs := *segsp
	i := len(segs) - 1
	for i > 0 && segs[i].base > from {
		i--
	}
	var out []AbortedTxn
	for _, s := range segs[i:] {
		for _, a := range s.abortedTxns() {
			if a.lastOffset >= from && a.firstOffset < upto {
				out = append(out, AbortedTxn{ProducerID: a.producerID, FirstOffset: a.firstOffset})
			}
			if a.lastStableOffset >= upto {
				return out
			}
		}
	}
	return out
}

// InTransaction reports whether producerID has a transaction ongoing in this partition at epoch:
// a transactional batch of it at that epoch written since its last marker. Produce asks the
// transaction coordinator to verify only the batches that would begin one (KIP-890); under
// transaction version 2 the next transaction's batches carry the epoch its predecessor's
// markers bump to, so they are verified even while those markers are on their way.
func (l *Log) InTransaction(producerID int64, epoch int16) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.producers.ongoing[producerID]; !ok {
		return false
	}
	e, _ := l.producers.current(producerID)
	return e.epoch == epoch
}
