package broker

import (
	"testing"
	"time"

	"ringbroker/internal/timingwheel"
)

// TestPurgatoryCallbackCancels fires a deadline whose callback cancels its own timer and
// schedules another, as an acks=all Produce that times out does (settle cancels the
// response's timer): it used to deadlock the purgatory, which fired callbacks under its lock.
func TestPurgatoryCallbackCancels(t *testing.T) {
	p := newPurgatory()
	defer p.close()
	fired := make(chan struct{})
	var timer *timingwheel.Timer
	scheduled := make(chan struct{})
	timer = p.after(time.Now().Add(5*time.Millisecond), func() {
		<-scheduled
		p.cancel(timer)
		p.after(time.Now(), func() { close(fired) })
	})
	close(scheduled)
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the callback scheduled from a firing callback never ran: the purgatory is stuck")
	}
}
