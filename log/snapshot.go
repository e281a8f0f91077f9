package log

// Producer state snapshots, after Kafka's ProducerStateManager: at every roll the producer
// state as of the new segment's base offset is written to %020d.snapshot (in the background,
// like the flush of the rolled segment), and at a clean close as of the log end offset. Open
// loads the latest snapshot (after a crash, the latest at or below the recovery point),
// replays only the batches from its offset on, and skips reading the batches of trusted
// sealed segments wholly below it: their end offset and largest timestamp come from their
// indexes. A damaged snapshot is removed and the next older one tried; without one the state
// is rebuilt from every batch header as before.
//
// File format (big-endian), Kafka's layout with ringbroker's version 2 entries:
//
//	version int16 | crc uint32 (CRC32C of what follows) | count int32 | count entries
//
// Version 2 entry: producerId int64, epoch int16, lastTimestamp int64, coordinatorEpoch int32
// (-1 before the producer's first marker), currentTxnFirstOffset int64 (the first offset of
// its ongoing transaction, -1 when none: recovery restores ongoing transactions from it), n
// int8 (<= 5), then n batches (firstSeq int32, lastSeq int32, firstOffset int64, lastOffset
// int64), oldest first. Kafka's version 1 entries (producerId, epoch, lastSequence,
// lastOffset, offsetDelta, timestamp, coordinatorEpoch, currentTxnFirstOffset: only the
// newest batch) are read too.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"ringbroker/internal/crc32c"
	"ringbroker/internal/fsutil"
)

const (
	snapshotSuffix = ".snapshot"
	// snapshotVersionKafka is Kafka's format, one batch per producer; read only.
	snapshotVersionKafka = 1
	// snapshotVersion is the format written: the last five batches per producer.
	snapshotVersion = 2
	// snapshotHeaderSize is version, CRC and entry count.
	snapshotHeaderSize = 2 + 4 + 4
	// snapshotKafkaEntrySize is the size of a version 1 entry.
	snapshotKafkaEntrySize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8
	// snapshotEntryFixed is the size of a version 2 entry without its batches.
	snapshotEntryFixed = 8 + 2 + 8 + 4 + 8 + 1
	// snapshotBatchSize is the size of one batch of a version 2 entry.
	snapshotBatchSize = 4 + 4 + 8 + 8
	// snapshotsRetained is how many snapshot files a log keeps; older ones are removed.
	snapshotsRetained = 3
)

// encodeSnapshot renders the producer entries as a version 2 snapshot, ordered by producer id.
func encodeSnapshot(entries map[int64]producerEntry) []byte {
	ids := make([]int64, 0, len(entries))
	for id := range entries {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	be := binary.BigEndian
	b := make([]byte, snapshotHeaderSize, snapshotHeaderSize+len(ids)*(snapshotEntryFixed+producerBatchesRetained*snapshotBatchSize))
	be.PutUint16(b, snapshotVersion)
	be.PutUint32(b[6:], uint32(len(ids)))
	for _, id := range ids {
		e := entries[id]
		b = be.AppendUint64(b, uint64(id))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = be.AppendUint64(b, uint64(e.lastTimestamp))
		b = be.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = be.AppendUint64(b, uint64(e.txnFirstOffset))
		b = append(b, byte(e.n))
		for _, pb := range e.batches[:e.n] {
			b = be.AppendUint32(b, uint32(pb.firstSeq))
			b = be.AppendUint32(b, uint32(pb.lastSeq))
			b = be.AppendUint64(b, uint64(pb.firstOffset))
			b = be.AppendUint64(b, uint64(pb.lastOffset))
		}
	}
	be.PutUint32(b[2:], crc32c.Checksum(b[6:]))
	return b
}

// decodeSnapshot parses a version 1 (Kafka) or 2 snapshot. It checks the CRC, every count and
// length against the input, and never panics on malformed input.
func decodeSnapshot(b []byte) (map[int64]producerEntry, error) {
	if len(b) < snapshotHeaderSize {
		return nil, fmt.Errorf("snapshot of %d bytes; want at least %d", len(b), snapshotHeaderSize)
	}
	be := binary.BigEndian
	version := int16(be.Uint16(b))
	if version != snapshotVersionKafka && version != snapshotVersion {
		return nil, fmt.Errorf("snapshot version %d; want %d or %d", version, snapshotVersionKafka, snapshotVersion)
	}
	if stored, got := be.Uint32(b[2:]), crc32c.Checksum(b[6:]); stored != got {
		return nil, fmt.Errorf("snapshot crc mismatch: stored %#08x, computed %#08x", stored, got)
	}
	count := int32(be.Uint32(b[6:]))
	minEntry := snapshotEntryFixed
	if version == snapshotVersionKafka {
		minEntry = snapshotKafkaEntrySize
	}
	p := b[snapshotHeaderSize:]
	if count < 0 || int64(count)*int64(minEntry) > int64(len(p)) {
		return nil, fmt.Errorf("snapshot claims %d entries in %d bytes", count, len(p))
	}
	entries := make(map[int64]producerEntry, count)
	for i := range count {
		var id int64
		e := newProducerEntry()
		if version == snapshotVersionKafka {
			id, e = decodeKafkaEntry(p)
			p = p[snapshotKafkaEntrySize:]
		} else {
			if len(p) < snapshotEntryFixed {
				return nil, fmt.Errorf("snapshot entry %d: %d bytes left; want %d", i, len(p), snapshotEntryFixed)
			}
			id = int64(be.Uint64(p))
			e.epoch = int16(be.Uint16(p[8:]))
			e.lastTimestamp = int64(be.Uint64(p[10:]))
			e.coordinatorEpoch = int32(be.Uint32(p[18:]))
			e.txnFirstOffset = int64(be.Uint64(p[22:]))
			e.n = int(p[snapshotEntryFixed-1])
			p = p[snapshotEntryFixed:]
			if e.n > producerBatchesRetained || len(p) < e.n*snapshotBatchSize {
				return nil, fmt.Errorf("snapshot entry %d: %d batches in %d bytes; want at most %d", i, e.n, len(p), producerBatchesRetained)
			}
			for j := range e.n {
				pb := producerBatch{
					firstSeq: int32(be.Uint32(p)), lastSeq: int32(be.Uint32(p[4:])),
					firstOffset: int64(be.Uint64(p[8:])), lastOffset: int64(be.Uint64(p[16:])),
				}
				if pb.firstOffset < 0 || pb.lastOffset < pb.firstOffset {
					return nil, fmt.Errorf("snapshot entry %d batch %d: offsets %d..%d", i, j, pb.firstOffset, pb.lastOffset)
				}
				e.batches[j] = pb
				p = p[snapshotBatchSize:]
			}
		}
		if id < 0 {
			return nil, fmt.Errorf("snapshot entry %d: producer id %d", i, id)
		}
		if e.txnFirstOffset < -1 {
			return nil, fmt.Errorf("snapshot entry %d: transaction first offset %d", i, e.txnFirstOffset)
		}
		if _, dup := entries[id]; dup {
			return nil, fmt.Errorf("snapshot entry %d: producer id %d repeated", i, id)
		}
		entries[id] = e
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("snapshot has %d bytes after %d entries", len(p), count)
	}
	return entries, nil
}

// decodeKafkaEntry reads a version 1 entry (len(p) >= snapshotKafkaEntrySize): its one batch
// is the producer's newest, unless lastSequence is -1 (only transaction markers).
func decodeKafkaEntry(p []byte) (int64, producerEntry) {
	be := binary.BigEndian
	id := int64(be.Uint64(p))
	e := producerEntry{epoch: int16(be.Uint16(p[8:])), lastTimestamp: int64(be.Uint64(p[26:])),
		coordinatorEpoch: int32(be.Uint32(p[34:])), txnFirstOffset: int64(be.Uint64(p[38:]))}
	lastSeq := int32(be.Uint32(p[10:]))
	lastOffset := int64(be.Uint64(p[14:]))
	delta := int32(be.Uint32(p[22:]))
	if lastSeq >= 0 && delta >= 0 && lastOffset >= int64(delta) {
		firstSeq := lastSeq - delta
		if firstSeq < 0 {
			firstSeq = int32(int64(firstSeq) + math.MaxInt32 + 1) // the batch wrapped past MaxInt32
		}
		e.n = 1
		e.batches[0] = producerBatch{firstSeq: firstSeq, lastSeq: lastSeq, firstOffset: lastOffset - int64(delta), lastOffset: lastOffset}
	}
	return id, e
}

// snapshotPath names the snapshot holding the producer state below offset.
func snapshotPath(dir string, offset int64) string { return segmentPath(dir, offset, snapshotSuffix) }

// listSnapshots returns the offsets of the snapshot files in dir, ascending.
func listSnapshots(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var offsets []int64
	for _, e := range ents {
		name := e.Name()
		if filepath.Ext(name) != snapshotSuffix {
			continue
		}
		if off, _, ok := parseSegmentName(name[:len(name)-len(snapshotSuffix)] + logSuffix); ok {
			offsets = append(offsets, off) // ReadDir sorts by name, and names are zero-padded
		}
	}
	return offsets, nil
}

// takeSnapshot captures the producer state as of offset (the new segment's base at a roll)
// and writes it in the background. Called under l.mu.
func (l *Log) takeSnapshot(offset int64) {
	data := encodeSnapshot(l.producers.entries)
	l.flushes.Go(func() {
		if err := l.writeSnapshot(offset, data); err != nil {
			l.logger.Warn("producer state snapshot not written", "offset", offset, "err", err)
		}
	})
}

// writeSnapshot durably writes a snapshot and removes all but the newest snapshotsRetained.
func (l *Log) writeSnapshot(offset int64, data []byte) error {
	if err := fsutil.WriteFileAtomic(snapshotPath(l.dir, offset), data); err != nil {
		return fmt.Errorf("write producer snapshot: %w", err)
	}
	offsets, err := listSnapshots(l.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, old := range offsets[:max(len(offsets)-snapshotsRetained, 0)] {
		errs = append(errs, ignoreNotExist(os.Remove(snapshotPath(l.dir, old))))
	}
	return errors.Join(errs...)
}

// loadSnapshot restores the producer state from the newest usable snapshot at or below limit
// (Open: any after a clean shutdown, else the recovery point). Damaged snapshots are removed.
// It returns the snapshot's offset, from which batches must be replayed (0: none loaded).
func (l *Log) loadSnapshot(limit int64) int64 {
	offsets, err := listSnapshots(l.dir)
	if err != nil {
		l.logger.Warn("rebuilding producer state from the log", "err", err)
		return 0
	}
	for i := len(offsets) - 1; i >= 0; i-- {
		off := offsets[i]
		if off > limit {
			continue
		}
		path := snapshotPath(l.dir, off)
		data, err := os.ReadFile(path)
		var entries map[int64]producerEntry
		if err == nil {
			entries, err = decodeSnapshot(data)
		}
		if err != nil {
			l.logger.Warn("removing unusable producer snapshot", "file", path, "err", err)
			if rerr := ignoreNotExist(os.Remove(path)); rerr != nil {
				l.logger.Warn("remove producer snapshot", "file", path, "err", rerr)
			}
			continue
		}
		l.producers.entries = entries
		l.producers.rebuildOngoing()
		return off
	}
	return 0
}

// loadTrusted prepares a sealed segment that needs no recovery and lies wholly below the
// producer snapshot without reading its batches: the end offset comes from the batches after
// the last offset index entry, the largest timestamp from the final time index entry. It
// returns false when the caller must scan the segment (the leader-epoch checkpoint is not
// trusted, the segment reaches past the snapshot, or its tail does not frame).
func (l *Log) loadTrusted(s *segment, expectNext, snapOffset int64) bool {
	if l.epochsDirty || len(l.epochs.entries) == 0 {
		return false
	}
	end := s.size.Load()
	var pos int64
	if n := s.offIdx.n.Load(); n > 0 {
		_, pos = s.offIdx.offsetEntry(n - 1)
	}
	if end > 0 {
		if h, err := checkBatch(s.data[:end], false); err != nil || h.baseOffset < max(expectNext, s.base) {
			return false
		}
	}
	next := s.base
	for pos < end {
		h, err := checkBatch(s.data[pos:end], false)
		if err != nil {
			return false
		}
		next = h.lastOffset() + 1
		pos += h.size()
	}
	if next > snapOffset {
		return false
	}
	s.next = next
	if n := s.timIdx.n.Load(); n > 0 {
		ts, rel := s.timIdx.timeEntry(n - 1)
		s.maxTs, s.maxTsOffset = ts, s.base+rel
	}
	return true
}

// removeSnapshotsAbove removes the snapshots past end, the log end offset after a truncation:
// they describe batches that are gone.
func (l *Log) removeSnapshotsAbove(end int64) error {
	offsets, err := listSnapshots(l.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, off := range offsets {
		if off > end {
			errs = append(errs, ignoreNotExist(os.Remove(snapshotPath(l.dir, off))))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove producer snapshots past %d: %w", end, err)
	}
	return nil
}

// reloadProducers rebuilds the producer state of a log cut at end, as Kafka's
// rebuildProducerState: from the newest snapshot at or below end, then the batch headers of
// segs from its offset on (found through the offset index).
func (l *Log) reloadProducers(segs []*segment, end int64) {
	l.producers = newProducers()
	l.resetTxns()
	from := l.loadSnapshot(end)
	for _, s := range segs {
		if s.next <= from {
			continue
		}
		var pos int64
		if from > s.base {
			pos = s.offIdx.lookupPosition(from - s.base)
		}
		for size := s.size.Load(); pos < size; {
			h := parseHeader(s.data[pos:size])
			if h.producerID >= 0 && h.baseOffset >= from {
				// The segments' .txnindex files already hold the aborted transactions.
				if err := l.noteTxns(l.producers.load(&h, s.data[pos:pos+h.size()]), s, false); err != nil {
					l.logger.Warn("reload producer state", "err", err)
				}
			}
			pos += h.size()
		}
	}
	l.updateFirstUnstable()
}
