package ring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"ringbroker/internal/affinity"
)

// Ring geometry.
const (
	// sqEntries is the submission queue size; the kernel makes the CQ twice as large,
	// and with FEAT_NODROP an overflowing CQ is buffered, not dropped.
	sqEntries = 1024
	// cqeBatch is how many completions one peek takes.
	cqeBatch = 256
	// bufGroup is the provided-buffer group id; each ring has its own group space.
	bufGroup = 0
	// acceptRetryNanos is the pause before re-arming an accept that failed for lack of
	// resources (EMFILE, ENFILE, ENOMEM), instead of spinning on the same error.
	acceptRetryNanos = 100_000_000
)

// opKind is the top byte of a CQE's user_data; the low bits carry an index.
type opKind uint8

const (
	kindAccept      opKind = iota + 1 // multishot accept on the ring's listener
	kindAcceptRetry                   // timeout before re-arming accept
	kindRecv                          // recv into a provided buffer; index = conn slot
	kindSend                          // send op; index = sendOp index
	kindWake                          // eventfd read
	kindCancel                        // cancel of all ops on a conn's fd; index = conn slot
	kindIgnore                        // completions whose result is not needed
	kindFill                          // recv straight into a handler's buffer; index = conn slot
	kindPollOut                       // POLLOUT poll before a sendfile; index = conn slot
)

// zcFlags asks SEND_ZC notifications to say when the kernel copied anyway
// (loopback always does), where the kernel supports it.
func zcFlags(reportUsage bool) uint16 {
	if reportUsage {
		return giouring.SendZCReportUsage
	}
	return 0
}

func userData(k opKind, idx uint32) uint64 { return uint64(k)<<56 | uint64(idx) }

func splitUserData(ud uint64) (opKind, uint32) { return opKind(ud >> 56), uint32(ud) }

// uringServer runs one ring per event loop, each on its own listener.
type uringServer struct {
	h           Handler
	log         *slog.Logger
	bound       *net.TCPAddr
	rings       []*uring
	nextID      atomic.Uint64
	setupDesc   string // setup flags the rings got, for logs
	zcThreshold int    // effective SEND_ZC threshold; 0 means disabled
	// tlsConns serves the connections of a TLS listener (nil on plaintext): the rings accept
	// them and hand them over.
	tlsConns *connGroup
}

// listenUring opens cfg.Rings listeners and rings. Errors that mean io_uring
// cannot run here wrap errUnavailable.
func listenUring(cfg Config, h Handler) (*uringServer, error) {
	if disabledByEnv() {
		return nil, fmt.Errorf("%w: %s=1", errUnavailable, DisableEnv)
	}
	zcReport, err := checkKernel()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnavailable, err)
	}
	fds, bound, err := listenSockets(cfg.Addr, cfg.Rings, cfg.SocketBuffers)
	if err != nil {
		return nil, err
	}
	for _, c := range cappedSocketBuffers(fds[0], cfg.SocketBuffers) {
		cfg.Logger.Warn("ring: socket buffer capped", "addr", bound, "detail", c)
	}
	s := &uringServer{h: h, log: cfg.Logger, bound: bound}
	if cfg.TLS != nil {
		s.tlsConns = newConnGroup(cfg, h)
	}
	ready := make(chan error, len(fds))
	start := make(chan bool, len(fds))
	for i, fd := range fds {
		r := &uring{
			srv:        s,
			idx:        i,
			lfd:        fd,
			pin:        cfg.PinCPUs,
			bufSize:    cfg.RecvBufferSize,
			nbufs:      cfg.RecvBuffers,
			zcWant:     cfg.SendZCThreshold,
			zcLoopback: cfg.SendZCLoopback,
			zcFlags:    zcFlags(zcReport),
			exitCh:     make(chan struct{}),
		}
		r.wait.Store(&cfg.Wait)
		r.st.start = time.Now()
		s.rings = append(s.rings, r)
		go r.run(ready, start)
	}
	var firstErr error
	for range fds {
		if err := <-ready; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for range fds {
		start <- firstErr == nil
	}
	if firstErr != nil {
		for _, r := range s.rings {
			<-r.exitCh
		}
		return nil, fmt.Errorf("%w: %w", errUnavailable, firstErr)
	}
	s.setupDesc = s.rings[0].setupDesc
	s.zcThreshold = s.rings[0].zcThreshold
	return s, nil
}

func (s *uringServer) addr() net.Addr { return s.bound }

func (s *uringServer) setWait(m WaitMode) {
	for _, r := range s.rings {
		r.wait.Store(&m)
	}
}

func (s *uringServer) ringStats() []Stats {
	out := make([]Stats, len(s.rings))
	for i, r := range s.rings {
		out[i] = r.st.snapshot()
		out[i].Idle = r.st.waited(out[i].Uptime)
	}
	return out
}

func (s *uringServer) shutdown(ctx context.Context) error {
	if s.tlsConns != nil {
		s.tlsConns.beginDrain()
	}
	err := s.shutdownRings(ctx)
	if s.tlsConns != nil {
		if terr := s.tlsConns.shutdown(ctx); err == nil {
			err = terr
		}
	}
	return err
}

// shutdownRings drains and stops the rings and their connections.
func (s *uringServer) shutdownRings(ctx context.Context) error {
	for _, r := range s.rings {
		r.drainReq.Store(true)
		r.kick()
	}
	var err error
	for _, r := range s.rings {
		select {
		case <-r.exitCh:
			continue
		case <-ctx.Done():
			err = ctx.Err()
		}
		break
	}
	if err != nil {
		for _, r := range s.rings {
			r.forceReq.Store(true)
			r.kick()
		}
		for _, r := range s.rings {
			<-r.exitCh
		}
	}
	return err
}

// checkKernel rejects kernels older than 6.0, which lack SEND_ZC (the ring also
// needs multishot accept and ring-mapped provided buffers, both 5.19), and reports
// whether SEND_ZC can report copies (IORING_SEND_ZC_REPORT_USAGE, 6.2).
func checkKernel() (zcReportUsage bool, err error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false, fmt.Errorf("uname: %w", err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	major, minor, ok := parseKernelRelease(rel)
	if !ok {
		return false, fmt.Errorf("cannot parse kernel release %q", rel)
	}
	if major < 6 {
		return false, fmt.Errorf("kernel %s lacks io_uring SEND_ZC; want 6.0 or later", rel)
	}
	return major > 6 || minor >= 2, nil
}

// parseKernelRelease reads "6.18.44-foo" as 6, 18.
func parseKernelRelease(rel string) (major, minor int, ok bool) {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minorStr := parts[1]
	if i := strings.IndexFunc(minorStr, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorStr = minorStr[:i]
	}
	minor, err2 := strconv.Atoi(minorStr)
	return major, minor, err1 == nil && err2 == nil
}

// ringCounters are one ring's Stats, written by its loop and read by Stats.
type ringCounters struct {
	accepted, open, bytesIn, bytesOut, sends, zcSends, zcCopied atomic.Uint64
	partialSends, cqes, enters, wakeups, noBufs                 atomic.Uint64
	directSends, directBlocked, fills, pauses                   atomic.Uint64
	tlsHandshakes, tlsHandshakeErrors, tlsHandshakeTimeouts     atomic.Uint64
	// start is when the loop started: the origin of waitSince and of Stats.Uptime.
	start time.Time
	// waitNanos sums the loop's finished waits for work and waitSince is when the wait in
	// progress began (nanoseconds after start, 0 when none): io_uring's loop only.
	waitNanos, waitSince atomic.Int64
	// busyNanos sums the time connection readers spent in OnData: netpoll's measure.
	busyNanos atomic.Int64
}

// startWait notes that the loop begins waiting for work and returns when (after start).
func (c *ringCounters) startWait() int64 {
	t := max(int64(time.Since(c.start)), 1)
	c.waitSince.Store(t)
	return t
}

// endWait adds the wait that began at t0 (startWait's result) to the loop's idle time.
func (c *ringCounters) endWait(t0 int64) {
	c.waitSince.Store(0)
	c.waitNanos.Add(int64(time.Since(c.start)) - t0)
}

// waited is the loop's idle time as its waits measure it, a wait in progress included.
func (c *ringCounters) waited(uptime time.Duration) time.Duration {
	idle := c.waitNanos.Load()
	if since := c.waitSince.Load(); since > 0 && int64(uptime) > since {
		idle += int64(uptime) - since
	}
	return time.Duration(idle)
}

// snapshot reads the counters; Idle is left to the backend, which knows how it measures it.
func (c *ringCounters) snapshot() Stats {
	return Stats{
		Uptime:   time.Since(c.start),
		Accepted: c.accepted.Load(), Open: c.open.Load(), BytesIn: c.bytesIn.Load(),
		BytesOut: c.bytesOut.Load(), Sends: c.sends.Load(), ZCSends: c.zcSends.Load(),
		ZCCopied: c.zcCopied.Load(), PartialSends: c.partialSends.Load(), CQEs: c.cqes.Load(),
		Enters: c.enters.Load(), Wakeups: c.wakeups.Load(), NoBufs: c.noBufs.Load(),
		DirectSends: c.directSends.Load(), DirectBlocked: c.directBlocked.Load(), Fills: c.fills.Load(),
		Pauses: c.pauses.Load(), TLSHandshakes: c.tlsHandshakes.Load(),
		TLSHandshakeErrors: c.tlsHandshakeErrors.Load(), TLSHandshakeTimeouts: c.tlsHandshakeTimeouts.Load(),
	}
}

// goroutineSnapshot is snapshot for connections served on goroutines of their own (netpoll,
// Adopted), which have no loop to be idle in: Idle is the uptime less the time spent in OnData.
func (c *ringCounters) goroutineSnapshot() Stats {
	st := c.snapshot()
	st.Idle = max(st.Uptime-time.Duration(c.busyNanos.Load()), 0)
	return st
}

// uring is one event loop: a ring, its listener, its provided buffers and its
// connections. Fields below "loop-owned" are touched only by the loop goroutine.
type uring struct {
	srv        *uringServer
	idx        int
	lfd        int // listening socket; -1 once closed
	pin        bool
	bufSize    int
	nbufs      int
	zcWant     int    // Config.SendZCThreshold
	zcLoopback bool   // Config.SendZCLoopback
	zcFlags    uint16 // SEND_ZC flags (sqe ioprio)
	items      outItems

	ring        *giouring.Ring
	fd          int                      // the ring's descriptor, for enterBlocking
	wait        atomic.Pointer[WaitMode] // Config.Wait, then Server.SetWait's
	setupDesc   string
	zcThreshold int // 0: SEND_ZC off (disabled or unsupported)
	efd         int // eventfd that wakes the loop; -1 once closed

	// Kernel-visible memory, all off-heap.
	bufMem  []byte // nbufs recv buffers of bufSize bytes
	brMem   []byte // the provided-buffer ring
	br      *giouring.BufAndRing
	brMask  int
	misc    []byte // eventfd read target and the accept-retry timespec
	opMem   [][]byte
	cqes    []*giouring.CompletionQueueEvent
	loopErr error

	// loop-owned
	conns        []*uconn // by slot; nil when free
	freeSlots    []uint32
	live         int // non-nil entries of conns
	ops          []*sendOp
	freeOps      []uint32
	acceptArmed  bool // a multishot accept is in flight
	acceptTimer  bool // an accept-retry timeout is in flight
	wakeArmed    bool // an eventfd read is in flight
	draining     bool
	forced       bool
	stopping     bool // the loop is exiting: do not re-arm the wake-up read
	pendingLocal []*uconn
	// bufWaiters are connections whose recv found no provided buffer; a recycled buffer
	// re-arms the first of them.
	bufWaiters []*uconn

	drainReq atomic.Bool // Shutdown began
	forceReq atomic.Bool // Shutdown's ctx ended: close everything now
	exitCh   chan struct{}
	st       ringCounters

	mu       sync.Mutex
	pending  []*uconn // guarded by mu: conns with new sends or a Close request
	sleeping bool     // guarded by mu: the loop is blocked (or about to block) in io_uring_enter
	signaled bool     // guarded by mu: an eventfd write is outstanding, its read will wake the loop
	exited   bool     // guarded by mu: efd is closed; never write to it again
}

// run is the ring goroutine: set up, report on ready, wait for start, loop, tear down.
func (r *uring) run(ready chan<- error, start <-chan bool) {
	defer close(r.exitCh)
	// The thread stays locked until the goroutine ends, so it exits with it:
	// a pinned thread never goes back to the runtime's pool.
	runtime.LockOSThread()
	err := r.setup()
	ready <- err
	if !<-start || err != nil {
		r.release()
		return
	}
	r.loop()
	r.release()
}

// setup creates the ring on the calling (locked) thread, registers the
// provided-buffer ring and arms accept and the wake-up read.
func (r *uring) setup() error {
	if r.pin {
		if err := affinity.PinThread(r.idx); err != nil {
			return fmt.Errorf("ring %d: %w", r.idx, err)
		}
	}
	attempts := []struct {
		flags uint32
		desc  string
	}{
		{giouring.SetupSingleIssuer | giouring.SetupDeferTaskrun, "single_issuer|defer_taskrun"},
		{giouring.SetupCoopTaskrun, "coop_taskrun"},
		{0, "none"},
	}
	var errs []string
	for _, a := range attempts {
		ring := giouring.NewRing()
		err := ring.QueueInit(sqEntries, a.flags)
		if err == nil {
			r.ring, r.setupDesc = ring, a.desc
			r.fd = ringFd(ring)
			break
		}
		errs = append(errs, fmt.Sprintf("%s: %v", a.desc, err))
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) {
			break
		}
	}
	if r.ring == nil {
		return fmt.Errorf("ring %d: io_uring_setup(%d entries): %s", r.idx, sqEntries, strings.Join(errs, "; "))
	}
	probe, err := r.ring.GetProbeRing()
	if err != nil {
		return fmt.Errorf("ring %d: probe opcodes: %w", r.idx, err)
	}
	for _, op := range []uint8{giouring.OpAccept, giouring.OpRecv, giouring.OpSend, giouring.OpSendmsg,
		giouring.OpRead, giouring.OpAsyncCancel, giouring.OpTimeout, giouring.OpPollAdd} {
		if !probe.IsSupported(op) {
			return fmt.Errorf("ring %d: kernel lacks io_uring opcode %d", r.idx, op)
		}
	}
	if r.zcWant > 0 && probe.IsSupported(giouring.OpSendZC) && probe.IsSupported(giouring.OpSendMsgZC) {
		r.zcThreshold = r.zcWant
	}
	if r.bufMem, err = offHeap(r.nbufs * r.bufSize); err != nil {
		return fmt.Errorf("ring %d: recv buffers: %w", r.idx, err)
	}
	if r.brMem, err = offHeap(r.nbufs * int(unsafe.Sizeof(giouring.BufAndRing{}))); err != nil {
		return fmt.Errorf("ring %d: buffer ring: %w", r.idx, err)
	}
	reg := giouring.BufReg{RingAddr: uint64(uintptr(unsafe.Pointer(&r.brMem[0]))), RingEntries: uint32(r.nbufs), Bgid: bufGroup}
	if _, err := r.ring.RegisterBufferRing(&reg, 0); err != nil {
		freeOffHeap(r.brMem)
		r.brMem = nil
		return fmt.Errorf("ring %d: register provided-buffer ring of %d entries: %w", r.idx, r.nbufs, err)
	}
	r.br = (*giouring.BufAndRing)(unsafe.Pointer(&r.brMem[0]))
	r.br.BufRingInit()
	r.brMask = giouring.BufRingMask(uint32(r.nbufs))
	for i := range r.nbufs {
		r.br.BufRingAdd(r.bufAddr(uint16(i)), uint32(r.bufSize), uint16(i), r.brMask, i)
	}
	r.br.BufRingAdvance(r.nbufs)
	if r.misc, err = offHeap(64); err != nil {
		return fmt.Errorf("ring %d: %w", r.idx, err)
	}
	ts := (*unix.Timespec)(unsafe.Pointer(&r.misc[16]))
	*ts = unix.NsecToTimespec(acceptRetryNanos)
	if r.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
		r.efd = -1
		return fmt.Errorf("ring %d: eventfd: %w", r.idx, err)
	}
	r.cqes = make([]*giouring.CompletionQueueEvent, cqeBatch)
	r.armAccept()
	r.armWake()
	if _, err := r.ring.Submit(); err != nil {
		return fmt.Errorf("ring %d: first submit: %w", r.idx, err)
	}
	return nil
}

// release frees everything setup made. The kernel has finished with the
// memory: no op is in flight any more, or the ring is already closed.
func (r *uring) release() {
	for _, op := range r.ops {
		if op.conn != nil {
			r.releaseOp(op)
		}
	}
	r.mu.Lock()
	r.exited = true
	if r.efd >= 0 {
		unix.Close(r.efd)
		r.efd = -1
	}
	r.mu.Unlock()
	if r.lfd >= 0 {
		unix.Close(r.lfd)
		r.lfd = -1
	}
	if r.ring != nil {
		if r.br != nil {
			_, _ = r.ring.UnregisterBufferRing(bufGroup)
		}
		r.ring.QueueExit()
		r.ring = nil
	}
	freeOffHeap(r.bufMem)
	freeOffHeap(r.brMem)
	freeOffHeap(r.misc)
	for _, m := range r.opMem {
		freeOffHeap(m)
	}
	r.bufMem, r.brMem, r.misc, r.opMem, r.br = nil, nil, nil, nil, nil
	if r.loopErr != nil {
		r.srv.log.Error("ring: event loop failed", "ring", r.idx, "err", r.loopErr)
	}
}

func (r *uring) bufAddr(bid uint16) uintptr {
	return uintptr(unsafe.Pointer(&r.bufMem[int(bid)*r.bufSize]))
}

// loop runs until Shutdown's drain (or force) has closed every connection.
func (r *uring) loop() {
	for {
		r.processPending()
		r.control()
		if r.finished() {
			r.stopping = true
			r.stopWake()
			return
		}
		r.mu.Lock()
		sleep := len(r.pending) == 0
		r.sleeping = sleep
		r.mu.Unlock()
		var waitStart int64
		if sleep {
			waitStart = r.st.startWait()
		}
		err := r.enter(sleep)
		if sleep {
			r.st.endWait(waitStart)
			r.mu.Lock()
			r.sleeping = false
			r.mu.Unlock()
		}
		if err != nil {
			r.loopErr = err
			r.forceReq.Store(true)
			r.drainReq.Store(true)
		}
		r.reap()
	}
}

// enter submits queued SQEs and collects completions, blocking for one when wait.
// Interruptions are not errors; any other failure is returned.
func (r *uring) enter(wait bool) error {
	var err error
	switch mode := *r.wait.Load(); {
	case wait && r.ring.CQReady() > 0:
		// Completions are already there: reap them without sleeping.
		_, err = r.ring.SubmitAndGetEvents()
	case wait && mode == WaitHandoff:
		if errno := enterBlocking(uintptr(r.fd), uintptr(flushSQ(r.ring))); errno != 0 {
			err = errno
		}
	case wait && mode == WaitHold:
		if errno := enterHolding(uintptr(r.fd), uintptr(flushSQ(r.ring))); errno != 0 {
			err = errno
		}
	case wait:
		_, err = r.ring.SubmitAndWait(1)
	default:
		_, err = r.ring.SubmitAndGetEvents()
	}
	r.st.enters.Add(1)
	switch {
	case err == nil, errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EBUSY), errors.Is(err, unix.ETIME):
		return nil
	default:
		return fmt.Errorf("ring %d: io_uring_enter(wait=%v): %w", r.idx, wait, err)
	}
}

// sqe returns a zeroed submission entry, submitting to make room when the SQ is full.
func (r *uring) sqe() *giouring.SubmissionQueueEntry {
	for {
		if e := r.ring.GetSQE(); e != nil {
			*e = giouring.SubmissionQueueEntry{}
			return e
		}
		_, _ = r.ring.SubmitAndGetEvents()
	}
}

func (r *uring) armAccept() {
	e := r.sqe()
	e.OpCode = giouring.OpAccept
	e.Fd = int32(r.lfd)
	// Non-blocking sockets: Sends from other goroutines write to them directly.
	e.OpcodeFlags = unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK
	e.IoPrio = giouring.AcceptMultishot
	e.UserData = userData(kindAccept, 0)
	r.acceptArmed = true
}

func (r *uring) armAcceptRetry() {
	e := r.sqe()
	e.OpCode = giouring.OpTimeout
	e.Fd = -1
	e.Addr = uint64(uintptr(unsafe.Pointer(&r.misc[16])))
	e.Len = 1
	e.UserData = userData(kindAcceptRetry, 0)
	r.acceptTimer = true
}

func (r *uring) armWake() {
	e := r.sqe()
	e.OpCode = giouring.OpRead
	e.Fd = int32(r.efd)
	e.Addr = uint64(uintptr(unsafe.Pointer(&r.misc[0])))
	e.Len = 8
	e.UserData = userData(kindWake, 0)
	r.wakeArmed = true
}

// armRecv submits one recv into a provided buffer. Single-shot rather than multishot: after
// each completion the handler may want the next bytes in a buffer of its own (Next.Fill), or
// none for a while (Next.Pause).
func (r *uring) armRecv(c *uconn) {
	e := r.sqe()
	e.OpCode = giouring.OpRecv
	e.Fd = int32(c.fd)
	e.Flags = giouring.SqeBufferSelect
	e.BufIG = bufGroup
	e.UserData = userData(kindRecv, c.slot)
	c.recvArmed = true
}

// armFill submits a recv of the rest of c.fill straight into it, waiting for all of it.
func (r *uring) armFill(c *uconn) {
	b := c.fill[c.fillOff:]
	c.fillPin.Pin(&b[0])
	e := r.sqe()
	e.OpCode = giouring.OpRecv
	e.Fd = int32(c.fd)
	e.Addr = uint64(uintptr(unsafe.Pointer(&b[0])))
	e.Len = uint32(min(len(b), 1<<30))
	e.OpcodeFlags = unix.MSG_WAITALL
	e.UserData = userData(kindFill, c.slot)
	c.recvArmed = true
}

// cancel submits a cancel of the op with user data target.
func (r *uring) cancel(target uint64) {
	e := r.sqe()
	e.OpCode = giouring.OpAsyncCancel
	e.Fd = -1
	e.Addr = target
	e.UserData = userData(kindIgnore, 0)
}

// kick wakes the loop so it sees drainReq/forceReq.
func (r *uring) kick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.exited {
		r.signaled = true
		r.writeEventfd()
	}
}

// post queues c for the loop (new sends or a Close) and wakes the loop if it sleeps.
func (r *uring) post(c *uconn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, c)
	if r.sleeping && !r.signaled && !r.exited {
		r.signaled = true
		r.writeEventfd()
	}
}

// writeEventfd adds 1 to the eventfd; called with mu held so the fd cannot close meanwhile.
func (r *uring) writeEventfd() {
	one := [8]byte{1}
	for {
		_, err := unix.Write(r.efd, one[:])
		if err != unix.EINTR {
			return
		}
	}
}

// stopWake cancels the eventfd read and waits for it, so no op is left in flight.
func (r *uring) stopWake() {
	if r.wakeArmed {
		r.cancel(userData(kindWake, 0))
	}
	for r.wakeArmed {
		if err := r.enter(true); err != nil {
			r.loopErr = err
			return
		}
		r.reap()
	}
}

// control applies Shutdown's requests.
func (r *uring) control() {
	if !r.draining && r.drainReq.Load() {
		r.draining = true
		switch {
		case r.acceptArmed:
			r.cancel(userData(kindAccept, 0))
		case r.acceptTimer:
			r.cancel(userData(kindAcceptRetry, 0))
		default:
			r.closeListener()
		}
		for _, c := range r.conns {
			if c != nil && !c.torn {
				c.closing = true
				r.pump(c)
			}
		}
	}
	if !r.forced && r.forceReq.Load() {
		r.forced = true
		for _, c := range r.conns {
			if c != nil && !c.torn {
				r.closeConn(c, nil, true)
			}
		}
	}
}

func (r *uring) closeListener() {
	if r.lfd >= 0 {
		unix.Close(r.lfd)
		r.lfd = -1
	}
}

// finished reports whether the loop may exit: draining, listener closed, and
// every connection gone (when forced: gone but for SEND_ZC notifications; release
// then drops those buffers without waiting).
func (r *uring) finished() bool {
	if !r.draining || r.acceptArmed || r.acceptTimer {
		return false
	}
	if r.live == 0 {
		return true
	}
	if !r.forced {
		return false
	}
	for _, c := range r.conns {
		if c != nil && !c.fdClosed {
			return false
		}
	}
	return true
}

// processPending moves sends and Close requests posted by Conn methods into
// the loop-owned queues and starts sends.
func (r *uring) processPending() {
	r.mu.Lock()
	p := r.pending
	r.pending = r.pendingLocal[:0]
	r.mu.Unlock()
	for _, c := range p {
		c.mu.Lock()
		q := c.queue
		c.queue = c.queueSpare[:0]
		closeReq, resume, failErr := c.closeReq, c.resumeReq, c.failErr
		c.resumeReq, c.failErr = false, nil
		c.queued = false
		c.mu.Unlock()
		if c.torn {
			for _, it := range q {
				it.release()
			}
			r.maybeFree(c)
		} else {
			c.outq = append(c.outq, q...)
			switch {
			case failErr != nil:
				r.closeConn(c, failErr, true)
			case closeReq:
				c.closing = true
			}
			if resume {
				r.resume(c)
			}
			r.pump(c)
		}
		clear(q)
		c.queueSpare = q[:0]
	}
	clear(p)
	r.pendingLocal = p[:0]
}

// reap handles every completion available now.
func (r *uring) reap() {
	for {
		n := r.ring.PeekBatchCQE(r.cqes)
		if n == 0 {
			return
		}
		for _, cqe := range r.cqes[:n] {
			r.handle(cqe.UserData, cqe.Res, cqe.Flags)
		}
		r.ring.CQAdvance(n)
		r.st.cqes.Add(uint64(n))
	}
}

func (r *uring) handle(ud uint64, res int32, flags uint32) {
	kind, idx := splitUserData(ud)
	switch kind {
	case kindAccept:
		r.onAccept(res, flags)
	case kindAcceptRetry:
		r.acceptTimer = false
		if r.draining {
			r.closeListener()
		} else {
			r.armAccept()
		}
	case kindRecv:
		r.onRecv(r.conns[idx], res, flags)
	case kindSend:
		r.onSend(r.ops[idx], res, flags)
	case kindWake:
		r.wakeArmed = false
		r.mu.Lock()
		r.signaled = false
		r.mu.Unlock()
		r.st.wakeups.Add(1)
		if !r.stopping && res != -int32(unix.ECANCELED) {
			r.armWake()
		}
	case kindCancel:
		c := r.conns[idx]
		c.cancelPending = false
		r.maybeFree(c)
	case kindFill:
		r.onFill(r.conns[idx], res)
	case kindPollOut:
		r.onPollOut(r.conns[idx], res)
	case kindIgnore:
	}
}

func (r *uring) onAccept(res int32, flags uint32) {
	if flags&giouring.CQEFMore == 0 {
		r.acceptArmed = false
	}
	if res >= 0 {
		if r.draining {
			unix.Close(int(res))
		} else {
			r.openConn(int(res))
		}
	}
	if r.acceptArmed {
		return
	}
	errno := syscall.Errno(-res)
	switch {
	case r.draining:
		r.closeListener()
	case res >= 0 || errno == unix.ECONNABORTED || errno == unix.EINTR || errno == unix.EAGAIN:
		r.armAccept()
	default:
		r.srv.log.Warn("ring: accept failed, retrying", "ring", r.idx, "err", errno.Error(), "retry_in", "100ms")
		r.armAcceptRetry()
	}
}

func (r *uring) openConn(fd int) {
	if g := r.srv.tlsConns; g != nil {
		r.st.accepted.Add(1)
		g.adopt(fd, r.srv.nextID.Add(1), r.idx, &r.st)
		return
	}
	sa, err := unix.Getpeername(fd)
	if err != nil {
		unix.Close(fd) // the peer left before we saw it
		return
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	c := &uconn{r: r, id: r.srv.nextID.Add(1), fd: fd, remote: sockaddrToTCP(sa)}
	c.noZC = c.remote.IP.IsLoopback() && !r.zcLoopback
	if n := len(r.freeSlots); n > 0 {
		c.slot = r.freeSlots[n-1]
		r.freeSlots = r.freeSlots[:n-1]
		r.conns[c.slot] = c
	} else {
		c.slot = uint32(len(r.conns))
		r.conns = append(r.conns, c)
	}
	r.live++
	r.st.accepted.Add(1)
	r.st.open.Add(1)
	r.srv.h.OnOpen(c)
	if !c.torn {
		r.armRecv(c)
	}
}

func (r *uring) onRecv(c *uconn, res int32, flags uint32) {
	c.recvArmed = false
	errno := syscall.Errno(-res)
	if flags&giouring.CQEFBuffer != 0 {
		bid := uint16(flags >> giouring.CQEBufferShift)
		if res > 0 {
			r.st.bytesIn.Add(uint64(res))
			r.deliver(c, bid, 0, int(res))
		} else {
			r.recycle(bid)
		}
	}
	switch {
	case res > 0:
	case errno == unix.ENOBUFS:
		if !c.torn {
			r.st.noBufs.Add(1)
			c.wantBuf = true
			r.bufWaiters = append(r.bufWaiters, c)
		}
	default:
		r.recvEnded(c, res, r.armRecv)
	}
	r.maybeFree(c)
}

// recvEnded handles a recv completion without data: retried after an interruption (with
// rearm), the peer's close, a cancellation, or an error that closes c.
func (r *uring) recvEnded(c *uconn, res int32, rearm func(*uconn)) {
	errno := syscall.Errno(-res)
	switch {
	case errno == unix.EAGAIN || errno == unix.EINTR:
		if !c.torn {
			rearm(c)
		}
	case res == 0:
		r.closeConn(c, io.EOF, true)
	case errno == unix.ECANCELED:
	default:
		r.closeConn(c, fmt.Errorf("recv on conn %d from %s: %w", c.id, c.remote, errno), true)
	}
}

// deliver hands n bytes at off of provided buffer bid to the handler and does what it asks
// next; the buffer is recycled unless a pause keeps part of it.
func (r *uring) deliver(c *uconn, bid uint16, off, n int) {
	if !c.readable() {
		r.recycle(bid)
		return
	}
	base := int(bid)*r.bufSize + off
	next, err := r.srv.h.OnData(c, r.bufMem[base:base+n:base+n])
	if err != nil {
		r.recycle(bid)
		r.closeConn(c, err, true)
		return
	}
	used := min(max(next.Consumed, 0), n)
	if used < n {
		c.held = heldBytes{ok: true, bid: bid, off: off + used, n: n - used}
		c.paused = true
		r.st.pauses.Add(1)
		return
	}
	r.recycle(bid)
	r.follow(c, next)
}

// follow arms what the handler's Next asks for: a fill, a pause or the next recv.
func (r *uring) follow(c *uconn, next Next) {
	switch {
	case c.torn:
	case len(next.Fill) > 0:
		r.st.fills.Add(1)
		c.fill, c.fillOff = next.Fill, 0
		r.armFill(c)
	case next.Pause:
		c.paused = true
		r.st.pauses.Add(1)
	default:
		r.armRecv(c)
	}
}

// onFill handles a completion of the recv into c.fill.
func (r *uring) onFill(c *uconn, res int32) {
	c.recvArmed = false
	c.fillPin.Unpin()
	switch {
	case res > 0:
		r.st.bytesIn.Add(uint64(res))
		c.fillOff += int(res)
		if c.torn {
			break
		}
		if c.fillOff < len(c.fill) {
			r.armFill(c)
			break
		}
		c.fill = nil
		if !c.readable() {
			break
		}
		next, err := r.srv.h.OnFilled(c)
		if err != nil {
			r.closeConn(c, err, true)
			break
		}
		r.follow(c, next)
	default:
		r.recvEnded(c, res, r.armFill)
	}
	r.maybeFree(c)
}

// resume restarts a paused connection: first the data it left in its buffer, then the socket.
func (r *uring) resume(c *uconn) {
	if !c.paused || c.torn {
		return
	}
	c.paused = false
	if h := c.held; h.ok {
		c.held = heldBytes{}
		r.deliver(c, h.bid, h.off, h.n)
		return
	}
	r.armRecv(c)
}

// recycle gives provided buffer bid back to the kernel and, when a connection waits for one,
// re-arms its recv.
func (r *uring) recycle(bid uint16) {
	r.br.BufRingAdd(r.bufAddr(bid), uint32(r.bufSize), bid, r.brMask, 0)
	r.br.BufRingAdvance(1)
	for len(r.bufWaiters) > 0 {
		c := r.bufWaiters[0]
		r.bufWaiters[0] = nil
		r.bufWaiters = r.bufWaiters[1:]
		c.wantBuf = false
		if !c.torn && !c.paused && !c.recvArmed {
			r.armRecv(c)
			return
		}
	}
}

// closeConn tears c down: no more Sends, queued sends released, in-flight ops
// cancelled, OnClose called. abort drops unsent data with an RST (SO_LINGER 0),
// which also makes the kernel release SEND_ZC pages promptly. The fd closes
// once its ops have completed (maybeFree).
func (r *uring) closeConn(c *uconn, err error, abort bool) {
	if c.torn {
		return
	}
	c.torn = true
	c.closeErr = err
	c.mu.Lock()
	c.closed = true
	q := c.queue
	c.queue = nil
	c.mu.Unlock()
	for _, it := range q {
		it.release()
	}
	for _, it := range c.outq {
		it.release()
	}
	c.outq = nil
	if c.held.ok {
		r.recycle(c.held.bid)
		c.held = heldBytes{}
	}
	if abort {
		_ = unix.SetsockoptLinger(c.fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	}
	if c.recvArmed || c.inflight != nil || c.pollArmed {
		_ = unix.Shutdown(c.fd, unix.SHUT_RDWR)
		e := r.sqe()
		e.OpCode = giouring.OpAsyncCancel
		e.Fd = int32(c.fd)
		e.OpcodeFlags = giouring.AsyncCancelFd | giouring.AsyncCancelAll
		e.UserData = userData(kindCancel, c.slot)
		c.cancelPending = true
	}
	r.st.open.Add(^uint64(0))
	r.maybeFree(c)
}

// maybeFree closes c's fd once no op on it is in flight, and frees its slot
// once the kernel has also sent every SEND_ZC notification.
func (r *uring) maybeFree(c *uconn) {
	if !c.torn || c.freed {
		return
	}
	if !c.notified && !c.recvArmed {
		// The handler hears of the close only once the kernel no longer writes into its fill
		// buffer, which it may then release.
		c.notified = true
		r.srv.h.OnClose(c, c.closeErr)
	}
	if c.recvArmed || c.inflight != nil || c.pollArmed || c.cancelPending {
		return
	}
	c.mu.Lock()
	busy := c.direct
	c.mu.Unlock()
	if busy {
		return // the direct Send posts c when it is done
	}
	if !c.fdClosed {
		unix.Close(c.fd)
		c.fdClosed = true
	}
	if c.zcPending > 0 {
		return
	}
	c.freed = true
	r.conns[c.slot] = nil
	r.freeSlots = append(r.freeSlots, c.slot)
	r.live--
}
