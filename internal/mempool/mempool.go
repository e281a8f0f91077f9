// Package mempool is the broker's request memory pool (Kafka's
// queued.max.request.bytes): every request frame is received into one buffer
// of exactly its size taken from here, and the buffer comes back when the
// request is done with it.
//
// Buffers are recycled by power-of-two size class, so a steady stream of
// requests allocates nothing. Classes of 64 KiB and more live outside the Go
// heap (anonymous mappings): the garbage collector neither scans nor paces on
// them, a buffer is never zeroed on reuse, and pages of a large buffer become
// resident only as data arrives in them.
//
// The limit is soft, as Kafka's SimpleMemoryPool in non-strict mode: a
// request is granted while the bytes in use are below the limit, so one frame
// larger than the whole pool still gets through an idle broker, and in-use
// memory stays below limit plus one frame. A request that cannot be granted
// registers a wake-up, called once memory has come back.
package mempool

import (
	"fmt"
	"math/bits"
	"sync"

	"golang.org/x/sys/unix"
)

const (
	// minClassShift is the smallest class, 4 KiB: smaller frames get a 4 KiB buffer.
	minClassShift = 12
	// maxClassShift is the largest class, 2 GiB, above Kafka's largest frame.
	maxClassShift = 31
	numClasses    = maxClassShift - minClassShift + 1
	// offHeapShift is the first class mapped outside the Go heap (64 KiB).
	offHeapShift = 16
	// MaxBuffer is the largest buffer Get hands out.
	MaxBuffer = 1 << maxClassShift
)

// Stats are the pool's counters.
type Stats struct {
	Limit     int64  // bytes; 0 means unbounded
	InUse     int64  // bytes handed out and not yet returned, by class size
	Free      int64  // bytes kept in free lists for reuse
	Gets      uint64 // buffers handed out
	Allocs    uint64 // of Gets, those that needed new memory
	Refused   uint64 // Gets refused because the pool was full
	Waiting   int    // wake-ups registered now
	PeakInUse int64  // the largest InUse seen
	Retain    int64  // the most bytes the free lists keep
}

// Pool hands out buffers of exactly the requested size within a byte limit.
// It is safe for concurrent use.
type Pool struct {
	limit  int64 // <= 0: unbounded
	retain int64 // free-list bytes kept at most

	mu sync.Mutex
	// free[i] holds buffers of class minClassShift+i, each with cap == class size.
	free    [numClasses][][]byte
	inUse   int64 // Invariant: the sum of class sizes of buffers handed out.
	freeB   int64 // Invariant: the sum of cap over free.
	peak    int64
	gets    uint64
	allocs  uint64
	refused uint64
	// waiters are called (outside mu) when memory comes back; each at most once.
	waiters []func()
}

// New returns a pool granting buffers while fewer than limit bytes are in use
// (limit <= 0: no limit) and keeping at most retain bytes of returned
// buffers for reuse (retain < 0: as much as limit, or 64 MiB unbounded).
func New(limit, retain int64) *Pool {
	if retain < 0 {
		retain = limit
		if retain <= 0 {
			retain = 64 << 20
		}
	}
	return &Pool{limit: max(limit, 0), retain: retain}
}

// classOf returns the class index for n bytes (n <= MaxBuffer).
func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// Get returns a buffer of len n, or nil when the pool is full. n must be in
// [1, MaxBuffer].
func (p *Pool) Get(n int) []byte {
	return p.GetOrWait(n, nil)
}

// GetOrWait is Get that, when the pool is full, registers wake to be called
// once when memory is returned, so the caller can try again. The check and
// the registration are one step: no return between them is missed.
func (p *Pool) GetOrWait(n int, wake func()) []byte {
	if n <= 0 || n > MaxBuffer {
		panic(fmt.Sprintf("mempool: Get(%d); want 1..%d", n, MaxBuffer))
	}
	c := classOf(n)
	size := int64(1) << (c + minClassShift)
	p.mu.Lock()
	if p.limit > 0 && p.inUse >= p.limit {
		p.refused++
		if wake != nil {
			p.waiters = append(p.waiters, wake)
		}
		p.mu.Unlock()
		return nil
	}
	p.inUse += size
	p.peak = max(p.peak, p.inUse)
	p.gets++
	var b []byte
	if k := len(p.free[c]); k > 0 {
		b = p.free[c][k-1]
		p.free[c][k-1] = nil
		p.free[c] = p.free[c][:k-1]
		p.freeB -= size
	}
	if b == nil {
		p.allocs++
	}
	p.mu.Unlock()
	if b == nil {
		var err error
		if b, err = allocClass(c); err != nil {
			p.mu.Lock()
			p.inUse -= size
			p.refused++
			if wake != nil {
				p.waiters = append(p.waiters, wake)
			}
			p.mu.Unlock()
			return nil
		}
	}
	return b[:n]
}

// Put returns a buffer from Get. It must not be used afterwards.
func (p *Pool) Put(b []byte) {
	if cap(b) == 0 {
		return
	}
	c := classOf(cap(b))
	size := int64(1) << (c + minClassShift)
	if int64(cap(b)) != size {
		panic(fmt.Sprintf("mempool: Put of a buffer with cap %d, not a class size", cap(b)))
	}
	b = b[:cap(b)]
	var drop []byte
	p.mu.Lock()
	p.inUse -= size
	if p.freeB+size <= p.retain {
		p.free[c] = append(p.free[c], b)
		p.freeB += size
	} else {
		drop = b
	}
	var wake []func()
	if len(p.waiters) > 0 && (p.limit <= 0 || p.inUse < p.limit) {
		wake = p.waiters
		p.waiters = nil
	}
	p.mu.Unlock()
	if drop != nil {
		freeClass(c, drop)
	}
	for _, w := range wake {
		w()
	}
}

// Stats returns the current counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Limit: p.limit, InUse: p.inUse, Free: p.freeB, Gets: p.gets, Allocs: p.allocs,
		Refused: p.refused, Waiting: len(p.waiters), PeakInUse: p.peak, Retain: p.retain}
}

// Close unmaps the free lists' off-heap buffers; buffers still handed out
// stay valid until the process ends.
func (p *Pool) Close() {
	p.mu.Lock()
	free := p.free
	p.free = [numClasses][][]byte{}
	p.freeB = 0
	p.mu.Unlock()
	for c, list := range free {
		for _, b := range list {
			freeClass(c, b)
		}
	}
}

// allocClass makes a new buffer of class c: on the heap below offHeapShift,
// an anonymous mapping above.
func allocClass(c int) ([]byte, error) {
	size := 1 << (c + minClassShift)
	if c+minClassShift < offHeapShift {
		return make([]byte, size), nil
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("mempool: mmap %d bytes: %w", size, err)
	}
	return b, nil
}

// freeClass releases a buffer of class c made by allocClass.
func freeClass(c int, b []byte) {
	if c+minClassShift >= offHeapShift {
		_ = unix.Munmap(b)
	}
}
