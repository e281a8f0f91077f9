package log

import (
	"fmt"

	"ringbroker/internal/recordbatch"
)

// ReadResult holds the batches a Read found.
type ReadResult struct {
	// Data is whole record batches, a slice of the mmap'd segment, valid until Release. It is
	// empty when there is nothing to read. Only when minOneBatch is false and the first batch
	// is larger than maxBytes does it hold that batch's first maxBytes bytes, as Kafka does.
	Data []byte
	// FD is the segment file's descriptor and Pos the position of Data in it, for senders
	// that write the bytes from the page cache (sendfile) instead of through the mapping, so
	// the process never maps them in. FD stays open until Release.
	FD  int
	Pos int64
	// Release drops the segment reference that keeps Data mapped. Call it exactly once, after
	// the last use of Data (for SEND_ZC, after the kernel's notification). Never nil.
	Release func()

	seg *segment // the segment Data maps, nil when Data is empty
}

func noRelease() {}

// DropMapped unmaps the process's pages of the result's Data before it is released
// (MADV_DONTNEED; the page cache keeps them): a sender calls it once the kernel has copied the
// bytes, so serving the log does not grow the broker's resident memory. Small reads are left
// to the segment, which drops its pages once enough are mapped.
//
// It drops whole folios around Data: a read fault maps the whole large folio it lands in
// (Linux 6.18 on), so dropping Data's own pages alone would leave the rest of the folios at
// its edges mapped, and a reader moving through the log would leave most of it mapped.
// Neighbours' pages go too; whoever reads them next faults them in again.
func (r ReadResult) DropMapped() {
	if len(r.Data) < dropMappedMinBytes || r.seg == nil {
		return // counted by the segment, which drops its pages in bulk
	}
	r.seg.dropMapped(r.Pos, r.Pos+int64(len(r.Data)))
}

// Read returns the batches starting with the one that contains offset, up to maxBytes (but
// always at least one whole batch when minOneBatch, as KIP-74), never past maxOffset (the high
// watermark or last stable offset; negative or past the log end means the log end). Reads stay
// within one segment, as Kafka's do. An offset at or past maxOffset (but not past the log end)
// reads nothing. The result's Data stays valid until its Release is called.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64, minOneBatch bool) (ReadResult, error) {
	return l.read(offset, maxBytes, maxOffset, minOneBatch, false)
}

// ReadCached is Read for a caller that must not wait for the disk, such as an event loop
// thread that many connections share: where the batches at offset may not be in the page
// cache, because Writeback dropped them or they were on disk before this process opened
// their segment, it reads nothing and returns ErrWouldBlock. A log without Writeback leaves
// its page cache to the kernel, which may have evicted anything: it refuses every read that
// would return data. What it does read was written by this process and not dropped when the
// read began: only memory pressure, or a drop that began meanwhile (Writeback keeps the bytes
// a reader has not read yet), can have evicted it by the time the bytes are sent. The offset
// index it looks offset up in may still fault in a page or two after a restart.
func (l *Log) ReadCached(offset int64, maxBytes int, maxOffset int64, minOneBatch bool) (ReadResult, error) {
	return l.read(offset, maxBytes, maxOffset, minOneBatch, true)
}

func (l *Log) read(offset int64, maxBytes int, maxOffset int64, minOneBatch, cachedOnly bool) (ReadResult, error) {
	for {
		leo := l.leo.Load()
		segsp := l.segs.Load()
		if segsp == nil {
			return ReadResult{Release: noRelease}, fmt.Errorf("read %s at %d: %w", l.dir, offset, ErrClosed)
		}
		segs := *segsp
		if start := l.logStart.Load(); offset < start || offset > leo {
			return ReadResult{Release: noRelease}, fmt.Errorf("read %s at %d: %w: log start %d, log end %d",
				l.dir, offset, ErrOffsetOutOfRange, start, leo)
		}
		if maxOffset < 0 || maxOffset > leo {
			maxOffset = leo
		}
		if offset >= maxOffset {
			return ReadResult{Release: noRelease}, nil
		}
		if cachedOnly && l.opts.Writeback == nil {
			return ReadResult{Release: noRelease}, fmt.Errorf("read %s at %d without writeback: %w", l.dir, offset, ErrWouldBlock)
		}
		lo, hi := 0, len(segs) // find the first segment with base > offset
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if segs[mid].base <= offset {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		retry := false
		for i := max(lo-1, 0); i < len(segs); i++ {
			s := segs[i]
			if !s.tryRef() {
				retry = true // dropped by a concurrent roll, retention or close; reload
				break
			}
			data, pos, stop, cold := s.read(offset, maxBytes, maxOffset, minOneBatch, cachedOnly, l.leo.Load)
			if cold {
				s.decRef()
				return ReadResult{Release: noRelease}, fmt.Errorf("read %s at %d: %w", l.dir, offset, ErrWouldBlock)
			}
			if stop && len(data) > 0 {
				return ReadResult{Data: data, FD: s.fd, Pos: pos, Release: s.release, seg: s}, nil
			}
			s.decRef()
			if stop {
				break
			}
		}
		if !retry {
			return ReadResult{Release: noRelease}, nil
		}
	}
}

// OffsetForTimestamp finds the earliest record with a timestamp >= ts (ListOffsets): the
// first segment whose largest timestamp reaches ts, then the time index, the offset index and
// a scan of batch headers. Within an uncompressed batch it returns the exact record; within a
// compressed one, the batch's first offset and its maxTimestamp. ok is false when no record is
// that late.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, 0, false
	}
	start := l.logStart.Load()
	for _, s := range *l.segs.Load() {
		if s.maxTs < ts {
			continue
		}
		var pos int64
		if rel := s.timIdx.lookupBeforeTime(ts); rel >= 0 {
			pos = s.offIdx.lookupPosition(rel)
		}
		end := s.size.Load()
		for {
			size, base, last, found := s.batchAt(pos, end)
			if !found {
				break
			}
			b := s.data[pos : pos+size]
			if maxTs := int64(beUint64(b[recordbatch.OffMaxTimestamp:])); last >= start && maxTs >= ts {
				if off, rts, exact := firstRecordAtOrAfter(b, ts, start); exact {
					return off, rts, true
				}
				return max(base, start), maxTs, true
			}
			pos += size
		}
	}
	return 0, 0, false
}

// MaxTimestampOffset answers ListOffsets' MAX_TIMESTAMP (-3, KIP-734): the largest timestamp in
// the log and the last offset of the batch that holds it (the first such batch when several
// share it). ok is false for an empty log.
func (l *Log) MaxTimestampOffset() (offset int64, timestamp int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, 0, false
	}
	start := l.logStart.Load()
	best := int64(-1)
	for _, s := range *l.segs.Load() {
		if s.maxTs > best && s.maxTsOffset >= start {
			best, offset, ok = s.maxTs, s.maxTsOffset, true
		}
	}
	return offset, best, ok
}
