// Package mpsc provides a lock-free multi-producer single-consumer queue.
//
// The queue is Dmitry Vyukov's intrusive MPSC queue: a producer links a node
// with one atomic swap of the head and one atomic store of the previous
// node's next pointer; the single consumer walks next pointers without any
// atomic read-modify-write. Nodes are intrusive: the caller allocates a Node
// holding its message, so a push costs no allocation beyond the message
// itself, and a popped node belongs to the consumer again.
//
// Push never blocks and never fails. Between a producer's swap and its store
// the list is briefly unlinked, so Pop may report nothing while a push is in
// flight; Wait accounts for that, because every producer checks for a parked
// consumer after its store.
//
// The broker's handler workers and the group coordinator's shards use one
// Queue each: event loops and other goroutines push, the worker or shard
// goroutine drains, and parks in Wait when the queue is empty.
//
// A consumer parked with nothing queued can be lent: Lend gives another
// goroutine the consumer's place until Return, so work for the consumer can
// run on the goroutine that has it instead of waiting for the consumer to be
// scheduled.
package mpsc

import (
	"runtime"
	"sync/atomic"
)

// Node is one queue element. A Node must not be pushed again until Pop has
// returned it.
type Node[T any] struct {
	next atomic.Pointer[Node[T]]
	// Value is the message carried by the node.
	Value T
}

// Queue is an unbounded lock-free queue for many producers and exactly one
// consumer. Push may be called from any goroutine; Pop and Wait only from
// the single consumer goroutine. The zero value is not usable; call New.
type Queue[T any] struct {
	// head is the most recently pushed node; producers swap it.
	head atomic.Pointer[Node[T]]
	_    [56]byte // keep producer and consumer fields on separate cache lines
	// tail is the oldest node not yet popped, or &stub.
	// Invariant: tail is never nil.
	tail *Node[T]
	// stub keeps the list non-empty so producers never see a nil head.
	stub Node[T]
	_    [56]byte
	// parked is the consumer's state: running, checking or blocked in Wait,
	// or lent.
	parked atomic.Int32
	// wake carries at most one pending wake-up for the consumer.
	wake chan struct{}
}

// The states of Queue.parked. A producer that finds the consumer checking or
// blocked takes the wake-up (setting running) and sends the token; one that
// finds it lent leaves the wake-up to the lender's Return (setting
// lentPushed); one that finds it running sends nothing, since the consumer
// looks at the queue again.
const (
	running int32 = iota
	// checking: in Wait, looking whether the queue is empty.
	checking
	// blocked: in Wait, past its last look at the queue, waiting for a token.
	blocked
	// lent: blocked, and another goroutine acts as the consumer (Lend).
	lent
	// lentPushed: lent, and something was pushed meanwhile.
	lentPushed
)

// New returns an empty queue.
func New[T any]() *Queue[T] {
	q := &Queue[T]{wake: make(chan struct{}, 1)}
	q.head.Store(&q.stub)
	q.tail = &q.stub
	return q
}

// Push appends n to the queue and wakes the consumer if it is parked in Wait.
// It is safe for concurrent use and never blocks.
func (q *Queue[T]) Push(n *Node[T]) {
	q.link(n)
	q.wakeConsumer()
}

// wakeConsumer is Push's second half, after the link: it takes the consumer's
// wake-up where it is parked, or leaves it to a lender.
func (q *Queue[T]) wakeConsumer() {
	for {
		switch st := q.parked.Load(); st {
		case checking, blocked:
			if q.parked.CompareAndSwap(st, running) {
				q.token()
				return
			}
		case lent:
			if q.parked.CompareAndSwap(lent, lentPushed) {
				return
			}
		default:
			return
		}
	}
}

// token sends the consumer its wake-up; the caller has just taken it (set
// parked to running from checking or blocked), so the channel is empty.
func (q *Queue[T]) token() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *Queue[T]) link(n *Node[T]) {
	n.next.Store(nil)
	prev := q.head.Swap(n)
	prev.next.Store(n)
}

// Pop removes and returns the oldest node, or nil when the queue is empty or
// the oldest node's producer has not finished linking it yet; in both cases a
// later Wait returns once a node is available. Only the consumer goroutine
// may call Pop (or a lender between Lend and Return).
func (q *Queue[T]) Pop() *Node[T] {
	tail := q.tail
	next := tail.next.Load()
	if tail == &q.stub {
		if next == nil {
			return nil
		}
		q.tail = next
		tail = next
		next = next.next.Load()
	}
	if next != nil {
		q.tail = next
		return tail
	}
	if tail != q.head.Load() {
		// A producer swapped head but has not linked its node yet.
		return nil
	}
	// tail is the last node: re-insert the stub behind it so tail can leave.
	q.link(&q.stub)
	next = tail.next.Load()
	if next != nil {
		q.tail = next
		return tail
	}
	return nil
}

// idle reports whether nothing can be popped until a producer finishes a
// push: either the queue is empty, or the next node is being linked by a
// producer that checks parked after linking it.
func (q *Queue[T]) idle() bool {
	tail := q.tail
	return tail.next.Load() == nil && (tail == &q.stub || tail != q.head.Load())
}

// Wait blocks the consumer until the queue may be non-empty or done is
// closed. It reports false if it returned because done was closed. A nil
// done never fires. Wait may return spuriously; callers loop on Pop.
// Only the consumer goroutine may call Wait.
func (q *Queue[T]) Wait(done <-chan struct{}) bool {
	q.parked.Store(checking)
	if !q.idle() || !q.parked.CompareAndSwap(checking, blocked) {
		// A push landed between the caller's last Pop and parking.
		if !q.parked.CompareAndSwap(checking, running) {
			// A producer claimed the wake-up and sends (or has sent) a
			// token: consume it so it does not linger.
			<-q.wake
		}
		return true
	}
	select {
	case <-q.wake:
		return true
	case <-done:
	}
	for {
		switch {
		case q.parked.CompareAndSwap(blocked, running):
			return false
		case q.parked.Load() == running:
			// A producer or a returning lender claimed the wake-up.
			<-q.wake
			return false
		}
		// Lent: the lender's Return is near.
		runtime.Gosched()
	}
}

// Lend makes the caller the consumer in place of the one blocked in Wait,
// when the consumer is blocked there and nothing is queued; it reports
// whether it did. Until Return, the caller may do what the consumer does:
// use what the consumer owns and Pop, but not Wait; the consumer stays
// blocked, and pushes meanwhile do not wake it. Any goroutine may call Lend;
// at most one lends at a time.
func (q *Queue[T]) Lend() bool {
	if q.parked.Load() != blocked || !q.parked.CompareAndSwap(blocked, lent) {
		return false
	}
	if q.idle() {
		return true
	}
	// A push is queued whose producer has not yet looked for a wake-up (it
	// finds the queue lent, or blocked again after Return): it goes first,
	// on the consumer.
	q.Return()
	return false
}

// Return ends a Lend: the consumer is woken if something was pushed
// meanwhile, else left blocked. Only the goroutine that lent may call it.
func (q *Queue[T]) Return() {
	if q.parked.CompareAndSwap(lent, blocked) {
		return
	}
	// lentPushed: the push left its wake-up to us.
	q.parked.Store(running)
	q.token()
}
