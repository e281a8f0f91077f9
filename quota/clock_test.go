package quota

import (
	"sync"
	"time"
)

// fakeClock is a Clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// newFakeClock stands at a realistic Unix time (Kafka's token bucket starts full only at
// times well after the epoch).
func newFakeClock() *fakeClock { return &fakeClock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
