package broker

import (
	"sync"
	"time"

	"ringbroker/internal/timingwheel"
)

// Purgatory timing: deadlines are bucketed by purgatoryTick on a wheel of purgatorySlots
// (about 4 s per rotation; later deadlines wait on the wheel's idle-stretch jumps).
const (
	purgatoryTick  = time.Millisecond
	purgatorySlots = 4096
)

// purgatory is Kafka's DelayedOperationPurgatory for the data plane: operations that wait for
// a partition to change (a Fetch short of min bytes; acks=all Produce waiting for followers
// once there is replication) or for their deadline. Partitions keep their waiters (partition.go);
// deadlines live here, on one timing wheel driven by one goroutine that sleeps until the next
// deadline. What a deadline fires runs briefly on that goroutine: it only queues the operation
// on a handler worker.
type purgatory struct {
	mu    sync.Mutex
	wheel *timingwheel.Wheel // guarded by mu
	// wakeAt is when the driver sleeps until (guarded by mu); zero while it has nothing to wait
	// for. A deadline before it pokes the driver.
	wakeAt time.Time
	// due collects what the deadlines reached in one Advance fire (guarded by mu); they run
	// after mu is released, so that they may schedule and cancel.
	due  []func()
	poke chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newPurgatory() *purgatory {
	w, err := timingwheel.New(purgatoryTick, purgatorySlots, time.Now())
	if err != nil {
		panic(err) // constant, valid arguments
	}
	p := &purgatory{wheel: w, poke: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// after schedules fn at deadline; fn must not block. fn runs on the purgatory's goroutine and
// may call after and cancel; a cancel that races with the deadline may still see fn run.
func (p *purgatory) after(deadline time.Time, fn func()) *timingwheel.Timer {
	p.mu.Lock()
	t := p.wheel.Schedule(deadline, func() { p.due = append(p.due, fn) })
	poke := p.wakeAt.IsZero() || deadline.Before(p.wakeAt)
	if poke {
		p.wakeAt = deadline
	}
	p.mu.Unlock()
	if poke {
		select {
		case p.poke <- struct{}{}:
		default:
		}
	}
	return t
}

// cancel stops t if it has not fired.
func (p *purgatory) cancel(t *timingwheel.Timer) {
	p.mu.Lock()
	t.Stop()
	p.mu.Unlock()
}

// run advances the wheel at each deadline until close.
func (p *purgatory) run() {
	defer close(p.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-p.poke:
		case <-timer.C:
		}
		p.mu.Lock()
		p.wheel.Advance(time.Now())
		due := p.due
		p.due = nil
		next, ok := p.wheel.NextDeadline()
		if ok {
			p.wakeAt = next
		} else {
			p.wakeAt = time.Time{}
		}
		p.mu.Unlock()
		for _, fn := range due {
			fn()
		}
		d := time.Hour
		if ok {
			d = max(time.Until(next), 0)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(d)
	}
}

// close stops the driver; pending deadlines never fire.
func (p *purgatory) close() {
	close(p.stop)
	<-p.done
}
