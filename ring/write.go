package ring

import (
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxSendfileChunk bounds one sendfile call, so a large file range does not
// hold the socket's lock long against the event loop's sends.
const maxSendfileChunk = 4 << 20

// outItem is one Send call: its pieces, a write cursor and its done.
type outItem struct {
	pieces []Piece
	done   func()
	left   int // bytes not yet written
	idx    int // write cursor: pieces[idx] from byte off is next
	off    int
	// refs counts holders: 1 while queued (or written directly) plus, in the io_uring backend,
	// one per send op that covers it. done runs when it drops to zero, which happens exactly
	// once, and the item goes back to home.
	refs int
	home *outItems
}

// outItems recycles the items of one server's connections, so that a Send allocates nothing
// at steady state. Items are released from any goroutine.
type outItems struct{ pool sync.Pool }

// get is an item for one Send call, holding one reference.
func (p *outItems) get(pieces []Piece, done func()) *outItem {
	it, _ := p.pool.Get().(*outItem)
	if it == nil {
		it = &outItem{}
	}
	*it = outItem{pieces: pieces, done: done, refs: 1, home: p}
	for i := range pieces {
		it.left += pieces[i].size()
	}
	it.skipEmpty()
	return it
}

// put returns an item nothing refers to any more, without running its done.
func (p *outItems) put(it *outItem) {
	*it = outItem{}
	p.pool.Put(it)
}

// skipEmpty moves the cursor past empty pieces.
func (it *outItem) skipEmpty() {
	for it.idx < len(it.pieces) && it.pieces[it.idx].size() == it.off {
		it.idx++
		it.off = 0
	}
}

// release drops one reference; the last runs done and recycles the item, which the caller
// must not touch after that.
func (it *outItem) release() {
	it.refs--
	if it.refs > 0 {
		return
	}
	done := it.done
	it.home.put(it)
	if done != nil {
		done()
	}
}

// advance moves the write cursor n bytes (n <= it.left).
func (it *outItem) advance(n int) {
	it.left -= n
	for n > 0 {
		rem := it.pieces[it.idx].size() - it.off
		if n < rem {
			it.off += n
			return
		}
		n -= rem
		it.idx++
		it.off = 0
	}
	it.skipEmpty()
}

// atFile reports whether the next byte to write comes from a file range.
func (it *outItem) atFile() bool { return it.left > 0 && it.pieces[it.idx].FileLen > 0 }

// writeNonblock writes as much of it as the socket fd takes now, without
// waiting: memory pieces with one sendmsg per run of them, file ranges with
// sendfile. It returns the bytes written; err is unix.EAGAIN when the
// socket is full, nil when the item is complete, or what failed. For file
// ranges the socket itself must be non-blocking.
func writeNonblock(fd int, it *outItem) (int, error) {
	total := 0
	for it.left > 0 {
		var n int
		var err error
		if it.atFile() {
			p := &it.pieces[it.idx]
			off := p.FileOff + int64(it.off)
			n, err = sendfile(fd, p.FileFD, &off, min(p.FileLen-it.off, maxSendfileChunk))
		} else {
			n, err = sendmsgMemory(fd, it)
		}
		if n > 0 {
			it.advance(n)
			total += n
		}
		switch {
		case err == unix.EINTR:
		case err != nil:
			return total, err
		case n == 0:
			// sendfile read nothing: the file is shorter than the range asked for.
			return total, unix.EIO
		}
	}
	return total, nil
}

// sendfile is sendfile(2) retried on EINTR by the caller.
func sendfile(out, in int, off *int64, n int) (int, error) {
	w, err := unix.Sendfile(out, in, off, n)
	if w < 0 {
		w = 0
	}
	return w, err
}

// directIov bounds the iovecs of one sendmsg from the calling goroutine.
const directIov = 32

// sendmsgMemory writes the run of memory pieces at the cursor with one
// non-blocking sendmsg; its iovecs live on the stack.
func sendmsgMemory(fd int, it *outItem) (int, error) {
	var iov [directIov]unix.Iovec
	n := 0
	off := it.off
	for i := it.idx; i < len(it.pieces) && n < directIov; i++ {
		p := &it.pieces[i]
		if p.FileLen > 0 {
			break
		}
		b := p.Buf[off:]
		off = 0
		if len(b) == 0 {
			continue
		}
		iov[n].Base = &b[0]
		iov[n].SetLen(len(b))
		n++
	}
	if n == 0 {
		return 0, nil
	}
	msg := unix.Msghdr{Iov: &iov[0]}
	msg.SetIovlen(n)
	r, _, errno := syscall.Syscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)),
		uintptr(unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL))
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
