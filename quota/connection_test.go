package quota

import (
	"net/netip"
	"testing"
	"time"
)

// newConnectionQuotas is a counter on a fake clock; mod adjusts Kafka's defaults.
func newConnectionQuotas(t *testing.T, store *Store, mod func(*ConnectionConfig)) (*ConnectionQuotas, *fakeClock) {
	t.Helper()
	cfg := DefaultConnectionConfig()
	cfg.Listeners = []ListenerLimits{{Name: "CLIENT"}, {Name: "BROKER"}}
	cfg.InterBrokerListener = "BROKER"
	if mod != nil {
		mod(&cfg)
	}
	c := newFakeClock()
	q, err := NewConnectionQuotas(cfg, store, c.now)
	if err != nil {
		t.Fatal(err)
	}
	return q, c
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestPerIPLimits checks max.connections.per.ip and its overrides, including an override of 0.
func TestPerIPLimits(t *testing.T) {
	q, _ := newConnectionQuotas(t, nil, func(c *ConnectionConfig) {
		c.MaxConnectionsPerIP = 2
		c.PerIPOverrides = map[netip.Addr]int{addr("10.0.0.9"): 4, addr("::ffff:10.0.0.8"): 0}
	})
	for _, tc := range []struct {
		ip       string
		accepted int
		wErr     string
	}{
		{"10.0.0.1", 2, "Too many connections from /10.0.0.1 (maximum = 2)"},
		{"10.0.0.9", 4, "Too many connections from /10.0.0.9 (maximum = 4)"},
		{"10.0.0.8", 0, "Too many connections from /10.0.0.8 (maximum = 0)"},
	} {
		for i := range tc.accepted {
			if a := q.Acquire("CLIENT", addr(tc.ip)); a.Verdict != Accept || a.Delay != 0 {
				t.Fatalf("%s #%d: %+v, want accept", tc.ip, i+1, a)
			}
		}
		a := q.Acquire("CLIENT", addr(tc.ip))
		if a.Verdict != RejectTooMany || a.Err == nil || a.Err.Error() != tc.wErr {
			t.Fatalf("%s over the limit: %+v, want %q", tc.ip, a, tc.wErr)
		}
	}
	// An IPv4-mapped address is the same IP.
	if a := q.Acquire("CLIENT", addr("::ffff:10.0.0.1")); a.Verdict != RejectTooMany {
		t.Fatalf("mapped address: %+v, want too many", a)
	}
	if err := q.Release("CLIENT", addr("10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if a := q.Acquire("CLIENT", addr("10.0.0.1")); a.Verdict != Accept || q.Count(addr("10.0.0.1")) != 2 {
		t.Fatalf("after a release: %+v count %d, want accept 2", a, q.Count(addr("10.0.0.1")))
	}
	if err := q.Release("CLIENT", addr("10.0.0.7")); err == nil {
		t.Fatal("released a connection never acquired")
	}
}

// TestCreationRateDelay checks max.connection.creation.rate = 5: from rest 50 connections
// (5/s over the 10-window floor) are taken at once; then each waits for the one before it and
// 200 ms more, so connections arriving together are taken 5 a second, never refused.
func TestCreationRateDelay(t *testing.T) {
	q, c := newConnectionQuotas(t, nil, func(c *ConnectionConfig) { c.MaxConnectionCreationRate = 5 })
	for i := range 50 {
		if a := q.Acquire("CLIENT", addr("10.0.0.1")); a.Verdict != Accept || a.Delay != 0 {
			t.Fatalf("#%d: %+v, want accept at once", i+1, a)
		}
	}
	for i, w := range []time.Duration{200, 400, 600, 800} {
		if a := q.Acquire("CLIENT", addr("10.0.0.1")); a.Verdict != Accept || a.Delay != w*time.Millisecond {
			t.Fatalf("#%d: %+v, want accept after %dms", 51+i, a, w)
		}
	}
	c.advance(800 * time.Millisecond)
	if a := q.Acquire("CLIENT", addr("10.0.0.1")); a.Delay != 200*time.Millisecond {
		t.Fatalf("after waiting: %+v, want accept after 200ms", a)
	}
	// The inter-broker listener is exempt from the broker-wide rate while others exist.
	if a := q.Acquire("BROKER", addr("10.0.0.2")); a.Verdict != Accept || a.Delay != 0 {
		t.Fatalf("inter-broker listener: %+v, want accept at once", a)
	}
}

// TestListenerRateAndCap checks a listener's own creation rate, and that a throttle is never
// more than one window even when the rate is far over the bound (here after lowering it).
func TestListenerRateAndCap(t *testing.T) {
	q, _ := newConnectionQuotas(t, nil, func(c *ConnectionConfig) {
		c.Listeners = []ListenerLimits{{Name: "CLIENT", MaxConnectionCreationRate: 2}, {Name: "OTHER"}}
	})
	for range 20 {
		q.Acquire("CLIENT", addr("10.0.0.1"))
	}
	if a := q.Acquire("CLIENT", addr("10.0.0.1")); a.Delay != 500*time.Millisecond {
		t.Fatalf("21st on CLIENT: %+v, want 500ms", a)
	}
	for range 50 {
		if a := q.Acquire("OTHER", addr("10.0.0.1")); a.Delay != 0 {
			t.Fatalf("OTHER: %+v, want no delay", a)
		}
	}
	cfg := DefaultConnectionConfig()
	cfg.Listeners = []ListenerLimits{{Name: "CLIENT"}, {Name: "OTHER", MaxConnectionCreationRate: 1}}
	if err := q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	// 51 over 10 s is 5.1/s against 1/s: 41 s by the formula, capped at 1 s.
	if a := q.Acquire("OTHER", addr("10.0.0.1")); a.Delay != time.Second {
		t.Fatalf("after lowering the rate: %+v, want 1s", a)
	}
}

// TestIPCreationRate checks connection_creation_rate quotas of IP entities: over the quota a
// connection is closed after the throttle time, and it counts towards no rate, so the
// broker-wide rate is not used up by refused connections.
func TestIPCreationRate(t *testing.T) {
	s := NewStore()
	s.Set(Entity{IP: NameOf("10.0.0.5")}, KeyConnectionCreationRate, 2)
	s.Set(Entity{IP: DefaultName()}, KeyConnectionCreationRate, 1)
	q, c := newConnectionQuotas(t, s, func(c *ConnectionConfig) { c.MaxConnectionCreationRate = 3 })
	for i := range 20 {
		if a := q.Acquire("CLIENT", addr("10.0.0.5")); a.Verdict != Accept || a.Delay != 0 {
			t.Fatalf("#%d: %+v, want accept", i+1, a)
		}
	}
	for range 30 {
		a := q.Acquire("CLIENT", addr("10.0.0.5"))
		if a.Verdict != RejectThrottled || a.Delay != 500*time.Millisecond || a.Err.Error() != "/10.0.0.5 throttled for 500" {
			t.Fatalf("over the IP quota: %+v, want closed after 500ms", a)
		}
	}
	// The default IP quota applies to other IPs; 20 + 10 = 30 connections is 3/s broker-wide,
	// not over max.connection.creation.rate, as the 30 refused ones were taken back.
	for i := range 10 {
		if a := q.Acquire("CLIENT", addr("10.0.0.6")); a.Verdict != Accept || a.Delay != 0 {
			t.Fatalf("10.0.0.6 #%d: %+v, want accept at once", i+1, a)
		}
	}
	if a := q.Acquire("CLIENT", addr("10.0.0.6")); a.Verdict != RejectThrottled || a.Delay != time.Second {
		t.Fatalf("10.0.0.6 over the default: %+v, want closed after 1s", a)
	}
	if len(q.ipRates) != 2 {
		t.Fatalf("%d IP sensors, want 2", len(q.ipRates))
	}
	c.advance(time.Hour + 31*time.Second)
	q.Acquire("CLIENT", addr("10.0.0.7"))
	if len(q.ipRates) != 1 {
		t.Fatalf("%d IP sensors after an hour, want 1", len(q.ipRates))
	}
}

// TestWaitForSlot checks max.connections: a full broker makes the client listener wait for a
// release, while the inter-broker listener still connects, and the broker is then told to
// shed a client connection.
func TestWaitForSlot(t *testing.T) {
	q, _ := newConnectionQuotas(t, nil, func(c *ConnectionConfig) { c.MaxConnections = 2 })
	ip := addr("10.0.0.1")
	for range 2 {
		if a := q.Acquire("CLIENT", ip); a.Verdict != Accept {
			t.Fatalf("%+v, want accept", a)
		}
	}
	if a := q.Acquire("CLIENT", ip); a.Verdict != WaitForSlot {
		t.Fatalf("third: %+v, want wait for slot", a)
	}
	if a := q.Acquire("BROKER", ip); a.Verdict != Accept {
		t.Fatalf("inter-broker: %+v, want accept", a)
	}
	if !q.Exceeded("CLIENT") || q.Exceeded("BROKER") {
		t.Fatalf("exceeded: CLIENT %v BROKER %v, want true false", q.Exceeded("CLIENT"), q.Exceeded("BROKER"))
	}
	if err := q.Release("CLIENT", ip); err != nil {
		t.Fatal(err)
	}
	if a := q.Acquire("CLIENT", ip); a.Verdict != WaitForSlot {
		t.Fatalf("3 open of 2: %+v, want wait for slot", a)
	}
	if err := q.Release("BROKER", ip); err != nil {
		t.Fatal(err)
	}
	if a := q.Acquire("CLIENT", ip); a.Verdict != Accept {
		t.Fatalf("after releases: %+v, want accept", a)
	}

	q, _ = newConnectionQuotas(t, nil, func(c *ConnectionConfig) {
		c.Listeners = []ListenerLimits{{Name: "CLIENT", MaxConnections: 1}}
	})
	q.Acquire("CLIENT", ip)
	if a := q.Acquire("CLIENT", ip); a.Verdict != WaitForSlot {
		t.Fatalf("listener max: %+v, want wait for slot", a)
	}
}

// TestConnectionConfigValidate checks Kafka's refusals of connection settings.
func TestConnectionConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mod func(*ConnectionConfig)
		w   string
	}{
		{func(c *ConnectionConfig) { c.MaxConnections = -1 },
			"Invalid value -1 for configuration max.connections: Value must be at least 0"},
		{func(c *ConnectionConfig) { c.MaxConnectionsPerIP = 0 },
			"max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."},
		{func(c *ConnectionConfig) { c.Listeners = []ListenerLimits{{Name: "L", MaxConnections: -2}} },
			"listener L: Invalid max.connections -2"},
		{func(c *ConnectionConfig) { c.Windows = 0 },
			"Invalid value 0 for configuration quota.window.num: Value must be at least 1"},
	} {
		cfg := DefaultConnectionConfig()
		tc.mod(&cfg)
		if err := cfg.Validate(); err == nil || err.Error() != tc.w {
			t.Errorf("got %v, want %q", err, tc.w)
		}
	}
	cfg := DefaultConnectionConfig()
	cfg.MaxConnectionsPerIP = 0
	cfg.PerIPOverrides = map[netip.Addr]int{addr("10.0.0.1"): 3}
	if err := cfg.Validate(); err != nil {
		t.Errorf("zero per IP with overrides: %v", err)
	}
}
