package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Index entry sizes, as in Kafka's OffsetIndex and TimeIndex.
const (
	offsetEntrySize = 8  // int32 relative offset, int32 position
	timeEntrySize   = 12 // int64 timestamp, int32 relative offset
)

// index is one memory-mapped .index or .timeindex file. The single writer (under Log.mu)
// writes an entry's bytes into the mapping and then publishes it by storing n, so lock-free
// readers only ever see whole entries. No file descriptor is held: a mapping stays valid after
// its descriptor is closed, and the file is reopened by path only to allocate, grow or trim
// it. A partition then holds one descriptor (its active .log) instead of three, so a broker
// with 10,000 partitions stays well under a 20,000 open-file limit.
type index struct {
	path      string
	mm        []byte // shared read-write mapping; entries [0, n) are immutable
	entrySize int64
	// maxEntries is how many entries fit the mapping; n <= maxEntries.
	maxEntries int64
	n          atomic.Int64
	// torn records that the file size was not a multiple of entrySize when opened.
	torn bool
	// reserved is how many bytes from the start of the file have disk blocks allocated (see
	// ensure); the rest of the preallocated file is a hole. Writer state, under Log.mu.
	reserved int64
	// noFallocate says the file system refused fallocate; ensure then trusts the hole.
	noFallocate bool
}

// reserveChunk is how much of an index ensure allocates at a time: one fallocate per 8192
// offset entries (about 32 MiB of batches at the default index.interval.bytes).
const reserveChunk = 64 << 10

// needsReserve reports whether ensure(n) would allocate disk blocks.
func (x *index) needsReserve(n int64) bool {
	return min(n, x.maxEntries)*x.entrySize > x.reserved && !x.noFallocate
}

// ensure allocates disk blocks for the first n entries before they are written through the
// mapping. A store into a hole of a shared mapping on a full disk raises SIGBUS, which would
// kill the broker; fallocate instead fails with ENOSPC, and the append fails cleanly with a
// storage error.
func (x *index) ensure(n int64) error {
	if !x.needsReserve(n) {
		return nil
	}
	need := min(n, x.maxEntries) * x.entrySize
	size := min((need+reserveChunk-1)/reserveChunk*reserveChunk, x.maxEntries*x.entrySize)
	f, err := x.open()
	if err != nil {
		return err
	}
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, x.reserved, size-x.reserved)
	if cerr := f.Close(); err == nil && cerr != nil {
		return fmt.Errorf("close index %s: %w", x.path, cerr)
	}
	switch {
	case errors.Is(err, unix.EOPNOTSUPP):
		x.noFallocate = true
		return nil
	case err != nil:
		return fmt.Errorf("allocate index %s bytes %d..%d: %w", x.path, x.reserved, size, err)
	}
	x.reserved = size
	return nil
}

// openIndex opens (creating it if missing) the index file at path. fresh discards existing
// entries. capBytes > 0 preallocates the file to that size, rounded down to whole entries, so
// the index can grow in place; 0 maps just the existing entries.
func openIndex(path string, entrySize, capBytes int64, fresh bool) (*index, error) {
	flags := os.O_RDWR | os.O_CREATE
	if fresh {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	x := &index{path: path, entrySize: entrySize}
	if err := x.mapFile(f, capBytes); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	if err := f.Close(); err != nil {
		return nil, errors.Join(fmt.Errorf("close index %s: %w", path, err), x.unmap())
	}
	return x, nil
}

// open reopens the index file by path for an operation the mapping cannot do (allocate,
// truncate); the caller closes it.
func (x *index) open() (*os.File, error) {
	f, err := os.OpenFile(x.path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("reopen index: %w", err)
	}
	return f, nil
}

// mapFile maps f, first growing it to capBytes (whole entries) when that is larger.
func (x *index) mapFile(f *os.File, capBytes int64) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat index %s: %w", x.path, err)
	}
	size := fi.Size()
	x.torn = size%x.entrySize != 0
	x.n.Store(size / x.entrySize)
	capBytes = capBytes / x.entrySize * x.entrySize
	if capBytes > size {
		if err := f.Truncate(capBytes); err != nil {
			return fmt.Errorf("preallocate index %s to %d bytes: %w", x.path, capBytes, err)
		}
		size = capBytes
	}
	x.maxEntries = size / x.entrySize
	if size == 0 {
		return nil
	}
	mm, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap index %s (%d bytes): %w", x.path, size, err)
	}
	x.mm = mm
	return nil
}

// grow remaps the index with room for capBytes, keeping its entries; used when a segment
// loaded from disk becomes the active one.
func (x *index) grow(capBytes int64) error {
	if capBytes/x.entrySize <= x.maxEntries {
		return nil
	}
	n := x.n.Load()
	if err := x.unmap(); err != nil {
		return err
	}
	x.reserved = min(x.reserved, n*x.entrySize)
	f, err := x.open()
	if err != nil {
		return err
	}
	if err := f.Truncate(n * x.entrySize); err != nil {
		return errors.Join(fmt.Errorf("truncate index %s to %d entries: %w", x.path, n, err), f.Close())
	}
	if err := x.mapFile(f, capBytes); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close index %s: %w", x.path, err)
	}
	return nil
}

// trim shrinks the file to its entries, as Kafka does when a segment stops being active. The
// mapping keeps its length; nothing past n is read again.
func (x *index) trim() error {
	n := x.n.Load()
	x.maxEntries = n
	f, err := x.open()
	if err != nil {
		return err
	}
	if err := f.Truncate(n * x.entrySize); err != nil {
		return errors.Join(fmt.Errorf("trim index %s to %d entries: %w", x.path, n, err), f.Close())
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close index %s: %w", x.path, err)
	}
	return nil
}

func (x *index) unmap() error {
	if x.mm == nil {
		return nil
	}
	err := unix.Munmap(x.mm)
	x.mm = nil
	if err != nil {
		return fmt.Errorf("munmap index %s: %w", x.path, err)
	}
	return nil
}

func (x *index) close() error {
	return x.unmap()
}

// sync writes the mapped entries, and a changed file size, to disk. msync(MS_SYNC) on Linux
// is fdatasync of the mapped range, so it needs no descriptor and works under any name the
// file has been renamed to. An unmapped index is an empty file with nothing to write.
func (x *index) sync() error {
	if x.mm == nil {
		return nil
	}
	if err := unix.Msync(x.mm, unix.MS_SYNC); err != nil {
		return fmt.Errorf("msync index %s: %w", x.path, err)
	}
	return nil
}

// offsetFull reports whether an offset index has no room for another entry.
func (x *index) offsetFull() bool { return x.n.Load() >= x.maxEntries }

// timeFull reports whether a time index has no room left apart from the slot kept for the
// entry written when the segment rolls (Kafka's TimeIndex.isFull).
func (x *index) timeFull() bool { return x.n.Load() >= x.maxEntries-1 }

func (x *index) offsetEntry(i int64) (rel, pos int64) {
	b := x.mm[i*offsetEntrySize:]
	return int64(binary.BigEndian.Uint32(b)), int64(binary.BigEndian.Uint32(b[4:]))
}

func (x *index) timeEntry(i int64) (ts, rel int64) {
	b := x.mm[i*timeEntrySize:]
	return int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint32(b[8:]))
}

// appendOffset adds (rel, pos) to an offset index; a full index drops it, which only makes
// lookups scan further.
func (x *index) appendOffset(rel, pos int64) {
	n := x.n.Load()
	if n >= x.maxEntries {
		return
	}
	b := x.mm[n*offsetEntrySize:]
	binary.BigEndian.PutUint32(b, uint32(rel))
	binary.BigEndian.PutUint32(b[4:], uint32(pos))
	x.n.Store(n + 1)
}

// appendTime adds (ts, rel) to a time index when ts is newer than the last entry. final may
// use the reserved last slot.
func (x *index) appendTime(ts, rel int64, final bool) {
	n := x.n.Load()
	limit := x.maxEntries - 1
	if final {
		limit = x.maxEntries
	}
	lastTs := int64(-1)
	if n > 0 {
		lastTs, _ = x.timeEntry(n - 1)
	}
	if n >= limit || ts <= lastTs {
		return
	}
	b := x.mm[n*timeEntrySize:]
	binary.BigEndian.PutUint64(b, uint64(ts))
	binary.BigEndian.PutUint32(b[8:], uint32(rel))
	x.n.Store(n + 1)
}

// lookupPosition returns the position of the last offset index entry whose relative offset is
// at most rel, or 0 when there is none. Batches before that position end before rel.
func (x *index) lookupPosition(rel int64) int64 {
	_, pos := x.lastOffsetEntry(func(r, _ int64) bool { return r <= rel })
	return pos
}

// floorPosition returns the largest position in an offset index that is at most pos, or 0 when
// there is none. Index positions are batch starts.
func (x *index) floorPosition(pos int64) int64 {
	_, p := x.lastOffsetEntry(func(_, p int64) bool { return p <= pos })
	return p
}

// lastOffsetEntry returns the last offset index entry for which below holds, below being true
// for a prefix of the entries (both fields only grow), or (0, 0) when it holds for none.
func (x *index) lastOffsetEntry(below func(rel, pos int64) bool) (rel, pos int64) {
	lo, hi := int64(0), x.n.Load() // find the first entry for which below is false
	for lo < hi {
		mid := int64(uint64(lo+hi) >> 1)
		if below(x.offsetEntry(mid)) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return 0, 0
	}
	return x.offsetEntry(lo - 1)
}

// entriesBelow returns how many entries point below relative offset rel: those a truncation at
// that offset keeps. Relative offsets never decrease along either index.
func (x *index) entriesBelow(rel int64) int64 {
	at := int64(0) // where an entry holds its relative offset
	if x.entrySize == timeEntrySize {
		at = 8
	}
	lo, hi := int64(0), x.n.Load() // find the first entry at or past rel
	for lo < hi {
		mid := int64(uint64(lo+hi) >> 1)
		if int64(binary.BigEndian.Uint32(x.mm[mid*x.entrySize+at:])) < rel {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// lookupBeforeTime returns the relative offset of the last time index entry whose timestamp
// is below ts, or -1 when there is none. No batch up to that offset has a timestamp >= ts.
func (x *index) lookupBeforeTime(ts int64) int64 {
	lo, hi := int64(0), x.n.Load() // find the first entry with timestamp >= ts
	for lo < hi {
		mid := int64(uint64(lo+hi) >> 1)
		if t, _ := x.timeEntry(mid); t < ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return -1
	}
	_, rel := x.timeEntry(lo - 1)
	return rel
}

// checkOffsets verifies the structure of an offset index for a segment of segSize bytes:
// whole entries, strictly increasing offsets and positions inside the segment.
func (x *index) checkOffsets(segSize int64) error {
	if x.torn {
		return fmt.Errorf("index %s: size not a multiple of %d", x.path, x.entrySize)
	}
	prevRel, prevPos := int64(-1), int64(-1)
	for i := range x.n.Load() {
		rel, pos := x.offsetEntry(i)
		if rel <= prevRel || pos <= prevPos || pos >= segSize {
			return fmt.Errorf("index %s: entry %d (offset %d, position %d) after (%d, %d) in a %d-byte segment",
				x.path, i, rel, pos, prevRel, prevPos, segSize)
		}
		prevRel, prevPos = rel, pos
	}
	return nil
}

// checkTimes verifies the structure of a time index: whole entries, strictly increasing
// timestamps and non-decreasing offsets.
func (x *index) checkTimes() error {
	if x.torn {
		return fmt.Errorf("time index %s: size not a multiple of %d", x.path, x.entrySize)
	}
	prevTs, prevRel := int64(-1), int64(0)
	for i := range x.n.Load() {
		ts, rel := x.timeEntry(i)
		if ts <= prevTs || rel < prevRel {
			return fmt.Errorf("time index %s: entry %d (timestamp %d, offset %d) after (%d, %d)", x.path, i, ts, rel, prevTs, prevRel)
		}
		prevTs, prevRel = ts, rel
	}
	return nil
}
