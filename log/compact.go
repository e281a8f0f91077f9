package log

// One cleaning builds a map from key to latest offset over the dirty part of a log (segments
// from the cleaner checkpoint up to the first uncleanable offset: the active segment or the
// first segment newer than min.compaction.lag.ms), then rewrites every segment below the map's
// end in groups that fit segment.bytes, keeping a record only when no later record has its
// key. Offsets never change: batches keep their base offset and last offset delta, records
// their offset deltas.
//
// Tombstones follow KIP-534: the first cleaning that keeps a tombstone rewrites its batch with
// the delete-horizon attribute (0x40) and baseTimestamp = now + delete.retention.ms (record
// timestamp deltas rebased onto it); a later cleaning after the horizon drops the tombstone.
// Records without a key are dropped, as Kafka does. A batch of an idempotent producer whose
// records are all dropped stays as an empty batch when it is that producer's last batch, so
// the producer's sequence survives. Transactions, after Kafka's cleaner: the batches of an
// aborted transaction (one with a .txnindex entry whose transaction is no longer unstable:
// decided and replicated) are removed, but for a producer's last batch, which stays empty,
// and never enter the key map. A marker whose transaction has no batch left gets a delete horizon like a
// tombstone and goes after it, with its .txnindex entry; the other entries of a group go to
// the cleaned segment. Records of committed transactions (decided, below the first unstable
// offset, and not aborted) are compacted like any other, so their markers go too once none of
// their records is left; those of undecided transactions are copied unchanged and stay out of
// the key map.
//
// Compressed batches are decompressed with internal/codec and rewritten with the same codec
// and a fresh CRC.

import (
	"bufio"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"ringbroker/internal/codec"
	"ringbroker/internal/crc32c"
	"ringbroker/internal/fsutil"
	"ringbroker/internal/recordbatch"
)

const (
	// maxCleanerDecompressedBytes bounds the decompressed size of one batch the cleaner reads.
	maxCleanerDecompressedBytes = 128 << 20
	// offsetMapEntryBytes is the memory one key costs in the offset map (hash, offset and Go
	// map overhead); it turns CleanerConfig.DedupeBufferBytes into a key count.
	offsetMapEntryBytes = 64
	// cleanerWriteBuffer is the buffered-writer size for cleaned segments.
	cleanerWriteBuffer = 1 << 20
)

// filter is what deciding on one record needs.
type filter struct {
	mapEnd          int64                  // records at or past it are kept unexamined
	now             int64                  // Unix ms
	deleteRetention int64                  // ms
	producerLast    map[int64]int64        // producer id -> last offset of its newest batch
	aborted         map[int64][]abortedTxn // producer id -> its decided aborted transactions
	firstUnstable   int64                  // markers at or past it are not decided yet
	txnRetained     map[int64]bool         // producer id -> a batch of its open transaction was kept
	removedMarkers  map[int64]bool         // offsets of the markers this cleaning removed
	minHorizon      int64                  // smallest delete horizon among the kept batches
	stats           *CleanStats            // counters
	offsets         map[[16]byte]int64     // key hash -> latest offset
}

// clean runs one cleaning of l; without force, only when something is dirty or due.
func (c *Cleaner) clean(l *Log, force bool) (CleanStats, error) {
	c.cleanMu.Lock()
	defer c.cleanMu.Unlock()
	start := time.Now()
	c.mu.Lock()
	e, ok := c.logs[l]
	if !ok {
		c.mu.Unlock()
		return CleanStats{}, fmt.Errorf("clean %s: log not registered with the cleaner", l.dir)
	}
	e.busy = true
	cc, firstDirty, nextHorizon := e.cc, e.firstDirty, e.nextHorizon
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		e.busy = false
		c.cond.Broadcast()
		c.mu.Unlock()
	}()

	now := c.cfg.Now().UnixMilli()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return CleanStats{}, fmt.Errorf("clean %s: %w", l.dir, ErrClosed)
	}
	r := l.cleanableRange(&cc, firstDirty, now)
	var held []*segment
	for _, s := range r.segs {
		if !s.tryRef() {
			break
		}
		held = append(held, s)
	}
	producerLast := make(map[int64]int64, len(l.producers.entries))
	for id, pe := range l.producers.entries {
		if pe.n > 0 {
			producerLast[id] = pe.batches[pe.n-1].lastOffset
		}
	}
	aborted := l.decidedAborts()
	firstUnstable := l.firstUnstable.Load()
	cfg := l.cfg
	l.mu.Unlock()
	defer func() {
		for _, s := range held {
			s.decRef()
		}
	}()
	if len(held) < len(r.segs) {
		return CleanStats{}, fmt.Errorf("clean %s: %w: a segment was dropped meanwhile", l.dir, errCleaningAborted)
	}
	st := CleanStats{FirstDirtyOffset: r.firstDirty}
	if len(held) == 0 || (r.dirtyBytes == 0 && !force && now < nextHorizon) {
		return st, nil
	}

	f := &filter{now: now, deleteRetention: cc.DeleteRetention.Milliseconds(),
		producerLast: producerLast, aborted: aborted, firstUnstable: firstUnstable, txnRetained: map[int64]bool{},
		removedMarkers: map[int64]bool{}, minHorizon: math.MaxInt64, stats: &st, offsets: c.offsets}
	mapEnd, err := c.buildOffsetMap(held, r, f)
	if err != nil {
		return st, fmt.Errorf("clean %s: build offset map: %w", l.dir, err)
	}
	f.mapEnd = mapEnd
	var toClean []*segment
	for _, s := range held {
		if s.base < mapEnd {
			toClean = append(toClean, s)
		}
	}
	for _, group := range groupSegments(toClean, cfg.SegmentBytes) {
		if e.removed.Load() {
			return st, fmt.Errorf("clean %s: %w: log removed from the cleaner", l.dir, errCleaningAborted)
		}
		cleaned, err := c.cleanGroup(l, group, &cfg, f)
		if err != nil {
			return st, fmt.Errorf("clean %s: %w", l.dir, err)
		}
		if cleaned == nil {
			continue
		}
		if err := l.replaceSegments(group, cleaned); err != nil {
			if errors.Is(err, errCleaningAborted) || errors.Is(err, ErrClosed) {
				discardCleaned(cleaned)
			}
			return st, fmt.Errorf("clean %s: %w", l.dir, err)
		}
		st.Segments += len(group)
		st.Groups++
	}
	st.FirstDirtyOffset = mapEnd
	st.Duration = time.Since(start)
	c.mu.Lock()
	if !e.removed.Load() {
		e.firstDirty = mapEnd
		e.nextHorizon = f.minHorizon
	}
	c.mu.Unlock()
	if err := c.writeCheckpoint(l); err != nil {
		c.logger.Warn("cleaner checkpoint not written", "dir", l.dir, "err", err)
	}
	return st, nil
}

// buildOffsetMap fills c.offsets with the latest offset of every key in the dirty segments of
// r, stopping at a batch boundary when the map is full. Control batches, and transactional
// batches of aborted or undecided transactions (f), are not mapped. It returns the offset after
// the last mapped batch (the end of what this cleaning may drop records for).
func (c *Cleaner) buildOffsetMap(segs []*segment, r cleanRange, f *filter) (int64, error) {
	clear(c.offsets)
	end := r.end
	for _, s := range segs {
		if s.next <= r.firstDirty {
			continue
		}
		size := s.size.Load()
		for pos := int64(0); pos < size; {
			h, err := checkBatch(s.data[pos:size], true)
			if err != nil {
				return 0, fmt.Errorf("segment %s position %d: %w", s.path, pos, err)
			}
			b := s.data[pos : pos+h.size()]
			pos += h.size()
			if h.lastOffset() < r.firstDirty || h.isControl() || (h.isTransactional() && !f.committed(&h)) {
				continue
			}
			if len(c.offsets) >= c.maxEntries {
				return h.baseOffset, nil
			}
			err = c.eachRecord(b, &h, func(rec *rawRecord) {
				if rec.key != nil {
					c.offsets[md5.Sum(rec.key)] = h.baseOffset + int64(rec.offsetDelta)
				}
			})
			if err != nil {
				return 0, fmt.Errorf("segment %s batch at offset %d: %w", s.path, h.baseOffset, err)
			}
		}
		s.dropPages() // the scan mapped every page in
	}
	return end, nil
}

// eachRecord calls fn for every record of batch b, decompressing into c.payload when needed.
func (c *Cleaner) eachRecord(b []byte, h *batchHeader, fn func(*rawRecord)) error {
	payload := b[recordbatch.HeaderSize:]
	if id := codec.Codec(h.attributes & recordbatch.AttrCompression); id != codec.None {
		var err error
		c.payload, err = c.codecs.Decompress(id, payload, c.payload[:0], maxCleanerDecompressedBytes)
		if err != nil {
			return fmt.Errorf("decompress %s: %w", id, err)
		}
		payload = c.payload
	}
	for i := int32(0); i < h.numRecords; i++ {
		rec, n, err := nextRecord(payload)
		if err != nil {
			return fmt.Errorf("record %d of %d: %w", i, h.numRecords, err)
		}
		fn(&rec)
		payload = payload[n:]
	}
	if len(payload) != 0 {
		return fmt.Errorf("%d bytes after %d records", len(payload), h.numRecords)
	}
	return nil
}

// groupSegments splits segs into runs that can become one segment: at most segmentBytes in
// total and with every offset within 32 bits of the first base, as Kafka's groupSegmentsBySize.
func groupSegments(segs []*segment, segmentBytes int64) [][]*segment {
	var groups [][]*segment
	for i := 0; i < len(segs); {
		j, size := i+1, segs[i].size.Load()
		for j < len(segs) && size+segs[j].size.Load() <= segmentBytes && segs[j].next-1-segs[i].base <= math.MaxInt32 {
			size += segs[j].size.Load()
			j++
		}
		groups = append(groups, segs[i:j])
		i = j
	}
	return groups
}

// cleanGroup writes the cleaned copy of group as a sealed, fsynced segment under .cleaned
// names. It returns nil when the group is one segment that cleaning would not change.
func (c *Cleaner) cleanGroup(l *Log, group []*segment, cfg *Config, f *filter) (cleaned *segment, err error) {
	base := group[0].base
	file, err := os.OpenFile(cleanedPath(l.dir, base, logSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create cleaned segment: %w", err)
	}
	s := newSegment(base, file.Name(), file, l.logger, l.opts.Now())
	defer func() {
		if cleaned == nil {
			discardCleaned(s)
		}
	}()
	if s.offIdx, err = openIndex(cleanedPath(l.dir, base, indexSuffix), offsetEntrySize, int64(cfg.MaxIndexBytes), true); err != nil {
		return nil, err
	}
	if s.timIdx, err = openIndex(cleanedPath(l.dir, base, timeIndexSuffix), timeEntrySize, int64(cfg.MaxIndexBytes), true); err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(file, cleanerWriteBuffer)
	var pos int64
	changed := len(group) > 1
	for _, old := range group {
		size := old.size.Load()
		f.stats.BytesRead += size
		for p := int64(0); p < size; {
			h, err := checkBatch(old.data[p:size], true)
			if err != nil {
				return nil, fmt.Errorf("segment %s position %d: %w", old.path, p, err)
			}
			in := old.data[p : p+h.size()]
			p += h.size()
			out, same, err := c.filterBatch(in, &h, f)
			if err != nil {
				return nil, fmt.Errorf("segment %s batch at offset %d: %w", old.path, h.baseOffset, err)
			}
			changed = changed || !same
			if out == nil {
				continue
			}
			if pos+int64(len(out)) > math.MaxInt32 {
				return nil, fmt.Errorf("cleaned segment at %d would pass 32-bit positions", base)
			}
			if err := errors.Join(s.offIdx.ensure(s.offIdx.n.Load()+1), s.timIdx.ensure(s.timIdx.n.Load()+2)); err != nil {
				return nil, err
			}
			if _, err := w.Write(out); err != nil {
				return nil, fmt.Errorf("write cleaned segment %s: %w", s.path, err)
			}
			oh := parseHeader(out)
			s.noteBatch(pos, oh.size(), oh.lastOffset(), oh.maxTimestamp, int64(cfg.IndexIntervalBytes), true)
			pos += oh.size()
		}
		old.dropPages() // the scan mapped every page in
	}
	if !changed {
		return nil, nil
	}
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("write cleaned segment %s: %w", s.path, err)
	}
	if err := writeCleanedTxnIndex(l.dir, s, group, f.removedMarkers); err != nil {
		return nil, err
	}
	f.stats.BytesWritten += pos
	if err := s.deactivate(); err != nil {
		return nil, err
	}
	if err := s.mapData(0); err != nil {
		return nil, err
	}
	if err := errors.Join(file.Sync(), s.offIdx.sync(), s.timIdx.sync()); err != nil {
		return nil, fmt.Errorf("fsync cleaned segment %s: %w", s.path, err)
	}
	s.dirty.Store(false)
	return s, nil
}

// writeCleanedTxnIndex gives the cleaned segment s the .txnindex entries of group but those of
// removed markers, written and fsynced under its .cleaned name when there are any.
func writeCleanedTxnIndex(dir string, s *segment, group []*segment, removed map[int64]bool) error {
	var entries []abortedTxn
	var data []byte
	for _, old := range group {
		for _, a := range old.abortedTxns() {
			if removed[a.lastOffset] {
				continue
			}
			entries = append(entries, a)
			data = appendTxnEntry(data, a)
		}
	}
	if len(entries) == 0 {
		return nil
	}
	path := cleanedPath(dir, s.base, txnIndexSuffix)
	if err := writeTemp(path, func(f *os.File) error { _, err := f.Write(data); return err }); err != nil {
		return fmt.Errorf("write cleaned transaction index: %w", err)
	}
	if err := os.Rename(path+fsutil.TmpSuffix, path); err != nil {
		return fmt.Errorf("write cleaned transaction index: %w", err)
	}
	s.aborted.Store(&entries)
	return nil
}

// decidedAborts maps each producer to its aborted transactions in the .txnindex files that
// are no longer unstable (their marker is replicated: they start below the first unstable
// offset), whose batches cleaning removes. Called under l.mu.
func (l *Log) decidedAborts() map[int64][]abortedTxn {
	stable := l.firstUnstable.Load()
	out := map[int64][]abortedTxn{}
	for _, s := range *l.segs.Load() {
		for _, a := range s.abortedTxns() {
			if a.firstOffset < stable {
				out[a.producerID] = append(out[a.producerID], a)
			}
		}
	}
	return out
}

// committed reports whether transactional data batch h belongs to a committed transaction: one
// decided (it starts below the first unstable offset) and not aborted.
func (f *filter) committed(h *batchHeader) bool {
	return h.baseOffset < f.firstUnstable && !f.inAbortedTxn(h)
}

// inAbortedTxn reports whether data batch h belongs to an aborted transaction of f.aborted.
func (f *filter) inAbortedTxn(h *batchHeader) bool {
	for _, a := range f.aborted[h.producerID] {
		if a.firstOffset <= h.baseOffset && h.baseOffset <= a.lastOffset {
			return true
		}
	}
	return false
}

// filterBatch decides what of batch b (header h, CRC checked) survives. It returns b itself
// with same = true when the batch is kept byte for byte, nil when it goes entirely, or a
// rewritten batch (valid until the next call).
func (c *Cleaner) filterBatch(b []byte, h *batchHeader, f *filter) (out []byte, same bool, err error) {
	hasHorizon := h.attributes&recordbatch.AttrDeleteHorizon != 0
	if hasHorizon {
		f.minHorizon = min(f.minHorizon, h.baseTimestamp)
	}
	switch {
	case h.isControl():
		return c.filterMarker(b, h, f, hasHorizon)
	case h.isTransactional() && h.numRecords > 0 && f.inAbortedTxn(h):
		f.stats.RecordsRead += int64(h.numRecords)
		out := c.dropAll(b, h, f)
		if out != nil {
			f.txnRetained[h.producerID] = true
		}
		return out, false, nil
	case h.isTransactional() && (h.numRecords == 0 || !f.committed(h)):
		f.txnRetained[h.producerID] = true
		return b, true, nil
	case h.numRecords == 0:
		return b, true, nil
	case h.isTransactional():
		out, same, err = c.filterRecords(b, h, f, hasHorizon)
		if out != nil {
			f.txnRetained[h.producerID] = true
		}
		return out, same, err
	}
	return c.filterRecords(b, h, f, hasHorizon)
}

// filterRecords keeps the records of data batch b that no later record of the offset map
// supersedes and that are not tombstones past their delete horizon.
func (c *Cleaner) filterRecords(b []byte, h *batchHeader, f *filter, hasHorizon bool) (out []byte, same bool, err error) {
	c.kept = c.kept[:0]
	tombstones := false
	err = c.eachRecord(b, h, func(rec *rawRecord) {
		f.stats.RecordsRead++
		off := h.baseOffset + int64(rec.offsetDelta)
		if off < f.mapEnd {
			if rec.key == nil {
				return // Kafka drops records without a key from compacted logs
			}
			if latest, ok := f.offsets[md5.Sum(rec.key)]; ok && off < latest {
				return
			}
			if rec.tombstone && hasHorizon && f.now >= h.baseTimestamp {
				return
			}
		}
		tombstones = tombstones || rec.tombstone
		c.kept = append(c.kept, *rec)
	})
	if err != nil {
		return nil, false, err
	}
	f.stats.RecordsKept += int64(len(c.kept))
	setHorizon := tombstones && !hasHorizon
	switch {
	case len(c.kept) == int(h.numRecords) && !setHorizon:
		return b, true, nil
	case len(c.kept) == 0:
		return c.dropAll(b, h, f), false, nil
	}
	out, err = c.rewrite(b, h, f, setHorizon)
	return out, false, err
}

// filterMarker decides on control batch b, as Kafka's cleaner does with transaction markers:
// a marker of a decided transaction none of whose batches this cleaning kept (they all lie
// before it, from the log start on) first gets a delete horizon (now + delete.retention.ms)
// and goes once it has passed, with its .txnindex entry; other control batches stay as they
// are.
func (c *Cleaner) filterMarker(b []byte, h *batchHeader, f *filter, hasHorizon bool) ([]byte, bool, error) {
	_, isMarker, err := parseEndTxnMarker(b)
	if err != nil || !isMarker || h.baseOffset >= f.firstUnstable {
		return b, true, nil
	}
	retained := f.txnRetained[h.producerID]
	delete(f.txnRetained, h.producerID)
	switch {
	case retained:
		return b, true, nil
	case hasHorizon && f.now >= h.baseTimestamp:
		f.removedMarkers[h.baseOffset] = true
		return nil, false, nil
	case hasHorizon:
		return b, true, nil
	}
	c.kept = c.kept[:0]
	if err := c.eachRecord(b, h, func(rec *rawRecord) { c.kept = append(c.kept, *rec) }); err != nil {
		return nil, false, err
	}
	out, err := c.rewrite(b, h, f, true)
	return out, false, err
}

// rewrite encodes batch b (header h) with only the records in c.kept and, when setHorizon,
// with a delete horizon of now + delete.retention.ms (KIP-534): the attribute set,
// baseTimestamp the horizon and the record timestamp deltas rebased onto it. The result is
// valid until the next call.
func (c *Cleaner) rewrite(b []byte, h *batchHeader, f *filter, setHorizon bool) ([]byte, error) {
	horizon := int64(-1)
	if setHorizon {
		horizon = f.now + f.deleteRetention
		f.minHorizon = min(f.minHorizon, horizon)
	}
	c.raw = c.raw[:0]
	maxTs := int64(-1)
	for i := range c.kept {
		rec := &c.kept[i]
		ts := h.baseTimestamp + rec.tsDelta
		maxTs = max(maxTs, ts)
		if setHorizon {
			c.raw = appendRebased(c.raw, rec, ts-horizon)
		} else {
			c.raw = append(c.raw, rec.whole...)
		}
	}
	be := binary.BigEndian
	c.out = append(c.out[:0], b[:recordbatch.HeaderSize]...)
	attrs := h.attributes
	if setHorizon {
		attrs |= recordbatch.AttrDeleteHorizon
		be.PutUint16(c.out[recordbatch.OffAttributes:], uint16(attrs))
		be.PutUint64(c.out[recordbatch.OffBaseTimestamp:], uint64(horizon))
	}
	if attrs&recordbatch.AttrLogAppendTime == 0 {
		be.PutUint64(c.out[recordbatch.OffMaxTimestamp:], uint64(maxTs))
	}
	be.PutUint32(c.out[recordbatch.OffNumRecords:], uint32(len(c.kept)))
	var err error
	if c.out, err = c.codecs.Compress(codec.Codec(attrs&recordbatch.AttrCompression), c.raw, c.out); err != nil {
		return nil, fmt.Errorf("recompress: %w", err)
	}
	be.PutUint32(c.out[recordbatch.OffBatchLength:], uint32(len(c.out)-recordbatch.LogOverhead))
	be.PutUint32(c.out[recordbatch.OffCRC:], crc32c.Checksum(c.out[recordbatch.OffAttributes:]))
	return c.out, nil
}

// dropAll is what remains of batch b when none of its records do: an empty batch when it is
// its producer's newest (so the producer's sequence survives), else nothing.
func (c *Cleaner) dropAll(b []byte, h *batchHeader, f *filter) []byte {
	if last, ok := f.producerLast[h.producerID]; ok && h.producerID >= 0 && last == h.lastOffset() {
		return c.emptyBatch(b, h)
	}
	return nil
}

// emptyBatch rewrites b as a batch without records that keeps its offsets, producer id, epoch
// and sequences, as Kafka's DefaultRecordBatch.writeEmptyHeader: uncompressed, both timestamps
// the original maxTimestamp.
func (c *Cleaner) emptyBatch(b []byte, h *batchHeader) []byte {
	be := binary.BigEndian
	c.out = append(c.out[:0], b[:recordbatch.HeaderSize]...)
	attrs := h.attributes &^ (recordbatch.AttrCompression | recordbatch.AttrDeleteHorizon)
	be.PutUint32(c.out[recordbatch.OffBatchLength:], uint32(recordbatch.HeaderSize-recordbatch.LogOverhead))
	be.PutUint16(c.out[recordbatch.OffAttributes:], uint16(attrs))
	be.PutUint64(c.out[recordbatch.OffBaseTimestamp:], uint64(h.maxTimestamp))
	be.PutUint32(c.out[recordbatch.OffNumRecords:], 0)
	be.PutUint32(c.out[recordbatch.OffCRC:], crc32c.Checksum(c.out[recordbatch.OffAttributes:]))
	return c.out
}
