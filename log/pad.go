package log

import (
	"fmt"
	"io"
	"unsafe"

	"golang.org/x/sys/unix"
)

// padBytes is the step in which appends to a hot partition write zeros ahead of its active
// segment's data. ext4 (like other file systems with large folios) sizes a new page-cache folio
// by the write that creates it, so appends of a few dozen KiB at unaligned positions fill the
// cache with folios of a few KiB, and each folio costs its allocation, its buffer heads, its
// writeback and its drop: about half the CPU of writing a record batch. An append that passes
// the zeros written ahead carries zeros on to the next multiple of padBytes in the same system
// call, so every new region of the file starts aligned and becomes one 256 KiB folio, which the
// next appends overwrite. The zeros lie past the data (size), so no reader sees them; roll and
// close cut them off (trimAllocated) and recovery drops them after a crash (zeroTail). Only
// segments with blocks allocated ahead (allocateAhead: partitions written steadily) are padded,
// within those blocks, so a broker with many idle partitions holds no zeros for them.
const padBytes = 256 << 10

// zeroPad is what the padding writes. Nothing writes to it, so its pages stay the kernel's
// shared zero page and cost no memory.
var zeroPad [padBytes]byte

// padFor returns the zeros to write after an append to s that ends at end: none while end is
// within the zeros written before, or when s has no blocks allocated ahead; else up to the
// next multiple of padBytes. Called under Log.mu.
func padFor(s *segment, end int64) []byte {
	if end <= s.padEnd || s.allocEnd.Load() <= end {
		return nil
	}
	return zeroPad[:(end+padBytes-1)/padBytes*padBytes-end]
}

// writeSegment writes data and then zeros to s at off, in one pwritev when there are zeros
// (so that the kernel sees the whole length when it sizes the folios), going on after a short
// write. Called under Log.mu, which guards l.iov.
func (l *Log) writeSegment(s *segment, data, zeros []byte, off int64) (int, error) {
	if len(zeros) == 0 {
		return s.f.WriteAt(data, off)
	}
	defer func() { l.iov = [2]unix.Iovec{} }() // hold no reference to data
	total := len(data) + len(zeros)
	done := 0
	for done < total {
		n := 0
		if done < len(data) {
			l.iov[0].Base, l.iov[1].Base = &data[done], &zeros[0]
			l.iov[0].SetLen(len(data) - done)
			l.iov[1].SetLen(len(zeros))
			n = 2
		} else {
			z := zeros[done-len(data):]
			l.iov[0].Base = &z[0]
			l.iov[0].SetLen(len(z))
			n = 1
		}
		at := uint64(off) + uint64(done)
		r, _, errno := unix.Syscall6(unix.SYS_PWRITEV, uintptr(s.fd), uintptr(unsafe.Pointer(&l.iov[0])), uintptr(n),
			uintptr(at), uintptr(at>>(8*unsafe.Sizeof(uintptr(0))-1)>>1), 0)
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0:
			return done, fmt.Errorf("pwritev %s at %d: %w", s.path, at, errno)
		case r == 0:
			return done, fmt.Errorf("pwritev %s at %d: %w", s.path, at, io.ErrShortWrite)
		}
		done += int(r)
	}
	return min(done, len(data)), nil
}

// zeroTail reports whether a scan of a segment that stopped at end stopped at the zeros
// appends wrote ahead (padBytes) rather than at a damaged batch: everything from end to the
// file's end is zero, and no more than a padding step of it. Only the last segment with data
// can have such a tail; Open checks that the segments after it are empty.
func zeroTail(s *segment, end, fileSize int64) bool {
	if end >= fileSize || fileSize-end > padBytes || fileSize > int64(len(s.data)) {
		return false
	}
	for _, c := range s.data[end:fileSize] {
		if c != 0 {
			return false
		}
	}
	return true
}
