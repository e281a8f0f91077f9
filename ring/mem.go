package ring

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// offHeap maps size bytes of anonymous memory outside the Go heap, for
// structures the kernel reads or writes after the submitting call returned
// (recv buffers, the buffer ring, msghdr and iovec arrays): the Go runtime
// neither moves nor frees it.
func offHeap(size int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	return b, nil
}

// freeOffHeap unmaps memory from offHeap; nil is fine.
func freeOffHeap(b []byte) {
	if b != nil {
		_ = unix.Munmap(b)
	}
}

// Layout of one send operation's kernel-visible memory: a msghdr, then its iovecs.
const (
	// maxIov bounds the iovecs of one sendmsg; more queued buffers go in the next one.
	maxIov = 64
	// msghdrSpace is sizeof(struct msghdr) rounded up to keep the iovecs 16-byte aligned.
	msghdrSpace = (int(unsafe.Sizeof(rawMsghdr{})) + 15) &^ 15
	opMemSize   = msghdrSpace + maxIov*int(unsafe.Sizeof(rawIovec{}))
	// opsPerChunk send operations share one mapping.
	opsPerChunk = 64
)

// rawMsghdr and rawIovec have the kernel's layout of struct msghdr and struct
// iovec (64-bit), with addresses as uintptr. They live off-heap, where a typed
// Go pointer must never be stored: the GC's write barrier would shade the stale
// pointer it overwrites, which may point at a freed object.
type rawMsghdr struct {
	name       uintptr
	namelen    uint32
	_          uint32
	iov        uintptr
	iovlen     uint64
	control    uintptr
	controllen uint64
	flags      int32
	_          int32
}

type rawIovec struct {
	base uintptr
	len  uint64
}

// opMem returns the msghdr and the iovec array laid out in mem (opMemSize bytes, off-heap).
func opMem(mem []byte) (*rawMsghdr, []rawIovec) {
	msg := (*rawMsghdr)(unsafe.Pointer(&mem[0]))
	iov := unsafe.Slice((*rawIovec)(unsafe.Pointer(&mem[msghdrSpace])), maxIov)
	return msg, iov
}
