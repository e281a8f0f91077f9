package broker

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"ringbroker/internal/affinity"
	"ringbroker/internal/mpsc"
)

// task is work for a handler worker: a connection with requests to run, or a parked Fetch to
// try again. Each task embeds the queue node it is pushed with, so pushing allocates nothing; a
// task is in at most one queue at a time.
type task interface {
	run()
	queueNode() *mpsc.Node[task]
}

// handlerPool is Kafka's request handler pool (num.io.threads): a fixed set of worker
// goroutines, split among the event loops, each fed by its own lock-free queue. Requests never
// get a goroutine of their own. A connection's requests run on the workers of the loop that
// reads them, one at a time and in order; with io.pin.cpus each worker is pinned to its loop's
// CPU.
type handlerPool struct {
	// byLoop[i] are the workers of event loop i.
	byLoop [][]*worker
	all    []*worker
	// epoch is when the pool started; workers' idle times are measured from it.
	epoch time.Time
	// flat makes every worker serve every loop (netpoll has a single loop).
	flat atomic.Bool
	stop chan struct{}
	wg   sync.WaitGroup
}

// worker is one handler goroutine and its queue.
type worker struct {
	q *mpsc.Queue[task]
	// idle is set while the worker waits for work, so dispatch prefers it.
	idle atomic.Bool
	// idleNanos is the time the worker has waited for work, but for a wait in progress, which
	// began idleSince (nanoseconds after the pool's epoch, plus one; 0 while working): Kafka's
	// RequestHandlerAvgIdlePercent (kafkametrics.go).
	idleNanos, idleSince atomic.Int64
}

// wait blocks until the worker has work (true) or the pool stops (false), idle meanwhile.
func (w *worker) wait(stop <-chan struct{}, epoch time.Time) bool {
	since := int64(time.Since(epoch)) + 1
	w.idleSince.Store(since)
	w.idle.Store(true)
	ok := w.q.Wait(stop)
	w.idle.Store(false)
	w.idleSince.Store(0)
	w.idleNanos.Add(int64(time.Since(epoch)) + 1 - since)
	return ok
}

// newHandlerPool starts total workers (at least one per loop) spread over loops event loops.
func newHandlerPool(total, loops int, pin bool) *handlerPool {
	loops = max(loops, 1)
	per := max(total/loops, 1)
	p := &handlerPool{byLoop: make([][]*worker, loops), stop: make(chan struct{}), epoch: time.Now()}
	for l := range loops {
		for range per {
			w := &worker{q: mpsc.New[task]()}
			p.byLoop[l] = append(p.byLoop[l], w)
			p.all = append(p.all, w)
			p.wg.Add(1)
			go p.work(w, l, pin)
		}
	}
	return p
}

// work runs tasks until the pool stops.
func (p *handlerPool) work(w *worker, loop int, pin bool) {
	defer p.wg.Done()
	if pin {
		runtime.LockOSThread()
		// A failure leaves the worker unpinned, which is only slower.
		_ = affinity.PinThread(loop)
	}
	for {
		n := w.q.Pop()
		if n == nil {
			if !w.wait(p.stop, p.epoch) {
				return
			}
			continue
		}
		n.Value.run()
	}
}

// dispatch queues t on a worker of loop: an idle one if there is, else the next in turn.
// hint spreads the choice (a connection id, say).
func (p *handlerPool) dispatch(loop int, hint uint64, t task) {
	ws := p.byLoop[loop%len(p.byLoop)]
	if p.flat.Load() {
		ws = p.all
	}
	start := int(hint % uint64(len(ws)))
	w := ws[start]
	for i := range ws {
		if c := ws[(start+i)%len(ws)]; c.idle.Load() {
			w = c
			break
		}
	}
	n := t.queueNode()
	n.Value = t
	w.q.Push(n)
}

// flatten lets every worker take work of every loop.
func (p *handlerPool) flatten() { p.flat.Store(true) }

// close stops the workers once their queues are empty of what is running now; tasks still
// queued are dropped (the listeners are closed before).
func (p *handlerPool) close() {
	close(p.stop)
	p.wg.Wait()
}
