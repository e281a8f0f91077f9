package quota

import (
	"fmt"
	"math"
	"net/netip"
	"sync"
	"time"
)

// Unlimited is the value of a connection limit or rate that is not set (Kafka's
// Int.MaxValue defaults).
const Unlimited = math.MaxInt32

// ConnectionConfig is the connection limits of a broker, with Kafka's keys.
type ConnectionConfig struct {
	// MaxConnections is max.connections: connections over all listeners, bar the
	// inter-broker listener when there are others.
	MaxConnections int
	// MaxConnectionsPerIP is max.connections.per.ip.
	MaxConnectionsPerIP int
	// PerIPOverrides is max.connections.per.ip.overrides, resolved (see ParseOverrides and
	// ResolveOverrides).
	PerIPOverrides map[netip.Addr]int
	// MaxConnectionCreationRate is max.connection.creation.rate: new connections per second
	// over all listeners, bar the inter-broker listener when there are others.
	MaxConnectionCreationRate int
	// Listeners are the listeners and their own limits.
	Listeners []ListenerLimits
	// InterBrokerListener is the listener brokers use; when there are other listeners it is
	// exempt from the broker-wide limits, so brokers can always reach each other.
	InterBrokerListener string
	// Windows and WindowSize are quota.window.num and quota.window.size.seconds: the
	// sampling of the creation rates. A rate throttle is at most one WindowSize.
	Windows    int
	WindowSize time.Duration
}

// ListenerLimits are the limits of one listener, listener.name.<name>.max.connections and
// listener.name.<name>.max.connection.creation.rate. Zero takes the broker-wide value, as a
// listener without its own key does in Kafka.
type ListenerLimits struct {
	Name                      string
	MaxConnections            int
	MaxConnectionCreationRate int
}

// DefaultConnectionConfig is Kafka's defaults: nothing limited, rates sampled over 11 windows
// of a second.
func DefaultConnectionConfig() ConnectionConfig {
	return ConnectionConfig{
		MaxConnections:            Unlimited,
		MaxConnectionsPerIP:       Unlimited,
		MaxConnectionCreationRate: Unlimited,
		Windows:                   11,
		WindowSize:                time.Second,
	}
}

// Validate refuses what Kafka's configuration refuses, with Kafka's messages.
func (c ConnectionConfig) Validate() error {
	for _, v := range [...]struct {
		key string
		n   int
	}{
		{"max.connections", c.MaxConnections},
		{"max.connections.per.ip", c.MaxConnectionsPerIP},
		{"max.connection.creation.rate", c.MaxConnectionCreationRate},
	} {
		if v.n < 0 {
			return configError(v.key, v.n, 0)
		}
	}
	if c.MaxConnectionsPerIP == 0 && len(c.PerIPOverrides) == 0 {
		return fmt.Errorf("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set.")
	}
	for _, l := range c.Listeners {
		if l.MaxConnections < 0 {
			return fmt.Errorf("listener %s: Invalid max.connections %d", l.Name, l.MaxConnections)
		}
		if l.MaxConnectionCreationRate < 0 {
			return fmt.Errorf("listener %s: Invalid max.connection.creation.rate %d", l.Name, l.MaxConnectionCreationRate)
		}
	}
	if c.Windows < 1 {
		return configError("quota.window.num", c.Windows, 1)
	}
	if c.WindowSize < time.Second || c.WindowSize%time.Second != 0 {
		return fmt.Errorf("Invalid value %v for configuration quota.window.size.seconds: Value must be at least 1 whole second", c.WindowSize)
	}
	return nil
}

// Verdict is what the broker should do with a newly accepted connection.
type Verdict uint8

// The verdicts of ConnectionQuotas.Acquire.
const (
	// Accept: serve the connection once Admission.Delay has passed. A delay is Kafka's
	// accept-time throttle of max.connection.creation.rate: hold the connection unread until
	// then (Kafka's acceptor waits before taking it on). The connection is counted already;
	// Release it when it closes.
	Accept Verdict = iota
	// WaitForSlot: the listener or the broker is at max.connections. Hold the connection
	// unread, accept no more on the listener, and call Acquire for it again after the next
	// Release (Kafka's acceptor blocks until a connection closes). Nothing is counted.
	WaitForSlot
	// RejectTooMany: the IP is at max.connections.per.ip (or its override). Close the
	// connection once Admission.Delay has passed (at once when zero). Nothing is counted.
	RejectTooMany
	// RejectThrottled: the IP is over its connection_creation_rate quota. Close the
	// connection once Admission.Delay has passed (Kafka delays the close by the throttle
	// time, so that the client does not reconnect at once). Nothing is counted.
	RejectThrottled
)

// String names the verdict.
func (v Verdict) String() string {
	switch v {
	case Accept:
		return "accept"
	case WaitForSlot:
		return "wait for slot"
	case RejectTooMany:
		return "reject: too many connections"
	case RejectThrottled:
		return "reject: throttled"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Admission is the answer of Acquire.
type Admission struct {
	Verdict Verdict
	// Delay is how long to wait before serving (Accept) or closing (the rejections).
	Delay time.Duration
	// Err says why a connection is rejected, in Kafka's words; nil otherwise.
	Err error
}

// ConnectionQuotas counts connections and paces their creation as Kafka's ConnectionQuotas:
// per listener and broker-wide max.connections, max.connections.per.ip with its overrides,
// max.connection.creation.rate per listener and broker-wide, and the connection_creation_rate
// quotas of IP entities. It is safe for concurrent use.
type ConnectionQuotas struct {
	clock Clock
	store *Store

	mu      sync.Mutex
	cfg     ConnectionConfig
	w       windowing
	perIP   map[netip.Addr]int
	total   int
	lstn    map[string]*listenerState
	broker  rate
	ipRates map[netip.Addr]*ipSensor
	// lastSweepMs is when idle IP sensors were last dropped.
	lastSweepMs int64
}

// listenerState is one listener's count, limits and creation rate.
type listenerState struct {
	count             int
	maxConns, maxRate int
	rate              rate
	// readyMs is when the listener's acceptor is free again: Kafka's acceptor takes one
	// connection at a time and sleeps through each one's throttle, so a connection arriving
	// earlier is taken, and its rate recorded, only then. Invariant: never decreases.
	readyMs int64
}

// ipSensor is the creation rate of one IP with a connection_creation_rate quota.
type ipSensor struct {
	rate         rate
	lastRecordMs int64
}

// NewConnectionQuotas counts connections under cfg. IP connection_creation_rate quotas are
// read from store, which may be nil when there are none.
func NewConnectionQuotas(cfg ConnectionConfig, store *Store, clock Clock) (*ConnectionQuotas, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("connection quotas: %w", err)
	}
	if clock == nil {
		clock = time.Now
	}
	c := &ConnectionQuotas{
		clock:   clock,
		store:   store,
		perIP:   make(map[netip.Addr]int),
		lstn:    make(map[string]*listenerState),
		ipRates: make(map[netip.Addr]*ipSensor),
	}
	c.configure(cfg)
	return c, nil
}

// Reconfigure applies new limits (dynamic broker configs); counts and rates measured so far
// are kept. A connection already waiting out a throttle keeps its delay, as in Kafka.
func (c *ConnectionQuotas) Reconfigure(cfg ConnectionConfig) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("connection quotas: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.configure(cfg)
	return nil
}

// configure installs cfg; the caller holds c.mu or owns c alone.
func (c *ConnectionQuotas) configure(cfg ConnectionConfig) {
	overrides := make(map[netip.Addr]int, len(cfg.PerIPOverrides))
	for a, n := range cfg.PerIPOverrides {
		overrides[a.Unmap()] = n
	}
	cfg.PerIPOverrides = overrides
	c.cfg = cfg
	c.w = windowing{samples: cfg.Windows, windowMs: cfg.WindowSize.Milliseconds()}
	for _, l := range cfg.Listeners {
		c.listener(l.Name)
	}
	for name, l := range c.lstn {
		l.maxConns, l.maxRate = cfg.MaxConnections, cfg.MaxConnectionCreationRate
		for _, ll := range cfg.Listeners {
			if ll.Name != name {
				continue
			}
			if ll.MaxConnections > 0 {
				l.maxConns = ll.MaxConnections
			}
			if ll.MaxConnectionCreationRate > 0 {
				l.maxRate = ll.MaxConnectionCreationRate
			}
		}
	}
}

// listener returns the state of a listener, registering one the configuration did not name
// with the broker-wide limits.
func (c *ConnectionQuotas) listener(name string) *listenerState {
	l := c.lstn[name]
	if l == nil {
		l = &listenerState{maxConns: c.cfg.MaxConnections, maxRate: c.cfg.MaxConnectionCreationRate}
		c.lstn[name] = l
	}
	return l
}

// Acquire admits a connection from ip accepted on listener, in Kafka's order: a free slot on
// the listener and the broker, then the listener's and the broker's creation rates (a delay,
// never a refusal), then the IP's connection_creation_rate (a delayed close), then the IP's
// connection count (a close). See Verdict for what the broker does with each answer.
func (c *ConnectionQuotas) Acquire(listener string, ip netip.Addr) Admission {
	ip = ip.Unmap()
	now := c.clock().UnixMilli()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maybeSweep(now)
	l := c.listener(listener)
	protected := c.protected(listener)
	if !c.slotAvailable(l, protected) {
		return Admission{Verdict: WaitForSlot}
	}
	at := max(now, l.readyMs)
	var wait int64
	if !protected {
		wait = c.recordRate(&c.broker, c.cfg.MaxConnectionCreationRate, at)
	}
	wait = max(wait, c.recordRate(&l.rate, l.maxRate, at))
	ready := at + wait
	l.readyMs = ready
	if bound, ok := c.ipRate(ip); ok {
		s := c.ipRates[ip]
		if s == nil {
			s = &ipSensor{}
			c.ipRates[ip] = s
		}
		s.lastRecordMs = ready
		if t := c.recordRate(&s.rate, bound, ready); t > 0 {
			// The connection is refused, so it counts towards none of the rates.
			s.rate.record(c.w, -1, ready)
			if !protected {
				c.broker.record(c.w, -1, ready)
			}
			l.rate.record(c.w, -1, ready)
			return Admission{
				Verdict: RejectThrottled,
				Delay:   msDuration(ready + t - now),
				Err:     fmt.Errorf("/%s throttled for %d", ip, t),
			}
		}
	}
	limit := c.cfg.MaxConnectionsPerIP
	if n, ok := c.cfg.PerIPOverrides[ip]; ok {
		limit = n
	}
	if c.perIP[ip] >= limit {
		return Admission{
			Verdict: RejectTooMany,
			Delay:   msDuration(ready - now),
			Err:     fmt.Errorf("Too many connections from /%s (maximum = %d)", ip, limit),
		}
	}
	c.perIP[ip]++
	c.total++
	l.count++
	return Admission{Verdict: Accept, Delay: msDuration(ready - now)}
}

// Release uncounts a connection that Acquire accepted, once it is closed. It is an error to
// release more connections of an IP than were accepted.
func (c *ConnectionQuotas) Release(listener string, ip netip.Addr) error {
	ip = ip.Unmap()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.perIP[ip]
	if n == 0 {
		return fmt.Errorf("Attempted to decrease connection count for address with no connections, address: /%s", ip)
	}
	l := c.lstn[listener]
	if l == nil || l.count == 0 {
		return fmt.Errorf("Attempted to decrease connection count for listener %s with no connections", listener)
	}
	if n == 1 {
		delete(c.perIP, ip)
	} else {
		c.perIP[ip] = n - 1
	}
	c.total--
	l.count--
	return nil
}

// Exceeded reports whether the broker holds more than max.connections and listener is not
// the protected inter-broker listener: the broker should then close that listener's least
// recently used connection (Kafka's processors close one per poll). It happens when
// max.connections is lowered, or inter-broker connections fill the broker.
func (c *ConnectionQuotas) Exceeded(listener string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total > c.cfg.MaxConnections && !c.protected(listener)
}

// Count is the number of open connections from ip.
func (c *ConnectionQuotas) Count(ip netip.Addr) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.perIP[ip.Unmap()]
}

// protected reports whether listener is the inter-broker listener while others exist.
func (c *ConnectionQuotas) protected(listener string) bool {
	return listener == c.cfg.InterBrokerListener && len(c.lstn) > 1
}

// slotAvailable is Kafka's connectionSlotAvailable.
func (c *ConnectionQuotas) slotAvailable(l *listenerState, protected bool) bool {
	if l.count >= l.maxConns {
		return false
	}
	return protected || c.total < c.cfg.MaxConnections
}

// recordRate records one connection at ms into r, bounded by bound per second, and returns
// the throttle time, at most one window (ConnectionQuotas.recordAndGetThrottleTimeMs).
func (c *ConnectionQuotas) recordRate(r *rate, bound int, ms int64) int64 {
	r.record(c.w, 1, ms)
	observed := r.measure(c.w, ms)
	if observed <= float64(bound) {
		return 0
	}
	return min(throttleMs(observed, float64(bound), r.windowSize(c.w, ms)), c.w.windowMs)
}

// ipRate is the connection_creation_rate quota of ip; ok is false when it is unlimited.
func (c *ConnectionQuotas) ipRate(ip netip.Addr) (int, bool) {
	if c.store == nil {
		return 0, false
	}
	v, ok := c.store.IPConnectionRate(ip)
	if !ok || v >= Unlimited {
		return 0, false
	}
	return int(v), true
}

// maybeSweep drops IP sensors idle for an hour, at most every 30 seconds.
func (c *ConnectionQuotas) maybeSweep(now int64) {
	if now-c.lastSweepMs < sweepEveryMs {
		return
	}
	c.lastSweepMs = now
	for ip, s := range c.ipRates {
		if now-s.lastRecordMs > sensorExpiryMs {
			delete(c.ipRates, ip)
		}
	}
}

// msDuration converts milliseconds to a Duration.
func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
