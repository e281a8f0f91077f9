package broker

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
	"ringbroker/quota"
	"ringbroker/wire"
)

// QuotaConfig is the sampling of client quotas and the connection limits: Kafka's
// quota.window.*, max.connections* and max.connection.creation.rate keys.
type QuotaConfig struct {
	Windows             int           // quota.window.num
	WindowSize          time.Duration // quota.window.size.seconds
	MaxConnections      int           // max.connections
	MaxConnectionsPerIP int           // max.connections.per.ip
	PerIPOverrides      string        // max.connections.per.ip.overrides
	MaxCreationRate     int           // max.connection.creation.rate
}

// quotaConfigDefs are the keys of QuotaConfig.
var quotaConfigDefs = []brokerConfigDef{
	intDef("quota.window.num", kindInt, "11", func(c *Config) *int { return &c.Quotas.Windows }, atLeast(1),
		"the samples client quota rates are measured over"),
	secondsDef("quota.window.size.seconds", kindInt, "1", func(c *Config) *time.Duration { return &c.Quotas.WindowSize }, atLeast(1),
		"the span of one client quota sample"),
	intDef("max.connections", kindInt, "2147483647", func(c *Config) *int { return &c.Quotas.MaxConnections }, atLeast(0),
		"connections over all listeners (but the inter-broker one); more wait unread until one closes"),
	intDef("max.connections.per.ip", kindInt, "2147483647", func(c *Config) *int { return &c.Quotas.MaxConnectionsPerIP }, atLeast(0),
		"connections from one address; more are closed"),
	stringDef("max.connections.per.ip.overrides", "", func(c *Config) *string { return &c.Quotas.PerIPOverrides }, checkPerIPOverrides,
		"host:count,... : per-address exceptions to max.connections.per.ip"),
	intDef("max.connection.creation.rate", kindInt, "2147483647", func(c *Config) *int { return &c.Quotas.MaxCreationRate }, atLeast(0),
		"new connections per second over all listeners (but the inter-broker one); faster ones are held before they are served"),
}

func checkPerIPOverrides(val string) error {
	_, err := quota.ParseOverrides(val)
	return err
}

// clientQuotas enforces the client quotas of the metadata image and the connection limits.
type clientQuotas struct {
	store  *quota.Store
	client *quota.ClientQuotas
	conns  *quota.ConnectionQuotas

	// synced is the image security state the store was last brought up to; keys says which
	// quota keys some entity sets then (a bit per quota.Kind), so that a client without
	// quotas costs two atomic loads per request.
	synced atomic.Pointer[meta.Security]
	keys   atomic.Uint32

	mu sync.Mutex
	// applied is what the store holds, by meta.QuotaEntityKey.
	applied map[string]meta.ClientQuota
	// waiting are connections held unread at max.connections, retried as others close.
	waiting []*connState
}

// newClientQuotas builds the quota state of cfg.
func newClientQuotas(cfg Config, interBroker string) (*clientQuotas, error) {
	q := &clientQuotas{store: quota.NewStore(), applied: map[string]meta.ClientQuota{}}
	var err error
	qc := quota.DefaultConfig()
	qc.Windows, qc.WindowSize = cfg.Quotas.Windows, cfg.Quotas.WindowSize
	if q.client, err = quota.NewClientQuotas(q.store, qc, nil); err != nil {
		return nil, err
	}
	cc := quota.DefaultConnectionConfig()
	cc.MaxConnections, cc.MaxConnectionsPerIP, cc.MaxConnectionCreationRate = cfg.Quotas.MaxConnections, cfg.Quotas.MaxConnectionsPerIP, cfg.Quotas.MaxCreationRate
	cc.Windows, cc.WindowSize, cc.InterBrokerListener = cfg.Quotas.Windows, cfg.Quotas.WindowSize, interBroker
	hosts, err := quota.ParseOverrides(cfg.Quotas.PerIPOverrides)
	if err != nil {
		return nil, err
	}
	if cc.PerIPOverrides, err = quota.ResolveOverrides(hosts, lookupHost); err != nil {
		return nil, err
	}
	for _, l := range cfg.Listeners {
		ll := quota.ListenerLimits{Name: l.Name}
		for key, field := range map[string]*int{"max.connections": &ll.MaxConnections, "max.connection.creation.rate": &ll.MaxConnectionCreationRate} {
			if v, ok := cfg.Security.ListenerProps[listenerPropPrefix+strings.ToLower(l.Name)+"."+key]; ok {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("listener.name.%s.%s=%q; want a non-negative integer", strings.ToLower(l.Name), key, v)
				}
				*field = n
			}
		}
		cc.Listeners = append(cc.Listeners, ll)
	}
	if err := cc.Validate(); err != nil {
		return nil, err
	}
	if q.conns, err = quota.NewConnectionQuotas(cc, q.store, nil); err != nil {
		return nil, err
	}
	return q, nil
}

// lookupHost resolves a host name of max.connections.per.ip.overrides.
func lookupHost(host string) (netip.Addr, error) {
	addrs, err := net.LookupIP(host)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("resolve %s: %v", host, err)
	}
	a, _ := netip.AddrFromSlice(addrs[0])
	return a.Unmap(), nil
}

// sync brings the store up to the client quotas of im.
func (q *clientQuotas) sync(im *meta.Image) {
	if q.synced.Load() == im.Security {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.synced.Load() == im.Security {
		return
	}
	var now map[string]meta.ClientQuota
	if im.Security != nil {
		now = im.Security.Quotas
	}
	for key, old := range q.applied {
		for k := range old.Values {
			if _, still := now[key].Values[k]; !still {
				q.store.Remove(quotaEntity(old.Entity), k)
			}
		}
	}
	for _, cq := range now {
		e := quotaEntity(cq.Entity)
		for k, v := range cq.Values {
			q.store.Set(e, k, v)
		}
	}
	var keys uint32
	for _, cq := range now {
		for _, k := range []quota.Kind{quota.Produce, quota.Fetch, quota.Request, quota.ControllerMutation} {
			if _, ok := cq.Values[k.Key()]; ok {
				keys |= 1 << k
			}
		}
	}
	q.applied = now
	q.keys.Store(keys)
	q.synced.Store(im.Security)
}

// limits reports whether some entity has a quota of kind k, with the store synced to im.
func (q *clientQuotas) limits(im *meta.Image, k quota.Kind) bool {
	q.sync(im)
	return q.keys.Load()&(1<<k) != 0
}

// quotaEntity is the quota package's form of a stored entity.
func quotaEntity(parts []meta.QuotaEntityPart) quota.Entity {
	var e quota.Entity
	for _, p := range parts {
		n := quota.DefaultName()
		if p.Name != nil {
			n = quota.NameOf(*p.Name)
		}
		switch p.Type {
		case quota.EntityUser:
			e.User = n
		case quota.EntityClientID:
			e.ClientID = n
		case quota.EntityIP:
			e.IP = n
		}
	}
	return e
}

// quotaUser is the user part of a principal ("User:alice" is alice), as Kafka's quota
// entities name users.
func quotaUser(principal string) string {
	_, name, ok := strings.Cut(principal, ":")
	if !ok {
		return principal
	}
	return name
}

// record measures value of kind k for the request's client and returns the throttle time,
// zero for requests of other brokers.
func (rc *reqCtx) recordQuota(k quota.Kind, value float64) time.Duration {
	b := rc.cs.b
	if !b.clientQuotas.limits(b.meta.Image(), k) {
		return 0
	}
	return b.clientQuotas.client.Record(k, quotaUser(rc.cs.auth.who()), rc.hdr.ClientID, value)
}

// unrecordQuota takes back a value recordQuota recorded, for a fetch answered empty.
func (rc *reqCtx) unrecordQuota(k quota.Kind, value float64) {
	rc.cs.b.clientQuotas.client.Unrecord(k, quotaUser(rc.cs.auth.who()), rc.hdr.ClientID, value)
}

// quotaWindowMax is the most of kind k the request's client may take at once without being
// throttled; ok is false when no quota of the kind applies to it.
func (rc *reqCtx) quotaWindowMax(k quota.Kind) (float64, bool) {
	b := rc.cs.b
	if !b.clientQuotas.limits(b.meta.Image(), k) {
		return 0, false
	}
	return b.clientQuotas.client.MaxValueInWindow(k, quotaUser(rc.cs.auth.who()), rc.hdr.ClientID)
}

// admit applies the connection limits to a new connection: it is served, held unread (for a
// creation-rate delay, or until a slot frees at max.connections), or closed.
func (q *clientQuotas) admit(cs *connState) {
	b := cs.b
	ip, ok := peerAddr(cs)
	if !ok {
		return
	}
	q.sync(b.meta.Image())
	cs.quotaIP = ip
	a := q.conns.Acquire(cs.listenerName(), ip)
	switch a.Verdict {
	case quota.Accept:
		cs.counted.Store(true)
		if a.Delay > 0 {
			cs.muteFor(a.Delay)
		}
	case quota.WaitForSlot:
		cs.mute()
		q.mu.Lock()
		q.waiting = append(q.waiting, cs)
		q.mu.Unlock()
	default:
		b.logger.Info("connection refused", "listener", cs.listenerName(), "remote", cs.c.RemoteAddr().String(), "reason", a.Err)
		cs.mute()
		if a.Delay <= 0 {
			// Closed from OnOpen, the connection never has a request served: both backends
			// see the Close before they deliver its first bytes (a Close from a timer could
			// come after them, and its first request be answered).
			cs.c.Close()
			return
		}
		time.AfterFunc(a.Delay, func() { cs.c.Close() })
	}
}

// release gives back a closed connection's place and lets a waiting one in.
func (q *clientQuotas) release(cs *connState) {
	if !cs.counted.Load() {
		q.mu.Lock()
		for i, w := range q.waiting {
			if w == cs {
				q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
				break
			}
		}
		q.mu.Unlock()
		return
	}
	_ = q.conns.Release(cs.listenerName(), cs.quotaIP)
	q.mu.Lock()
	var next *connState
	if len(q.waiting) > 0 {
		next, q.waiting = q.waiting[0], q.waiting[1:]
	}
	q.mu.Unlock()
	if next != nil {
		a := q.conns.Acquire(next.listenerName(), next.quotaIP)
		if a.Verdict == quota.Accept {
			next.counted.Store(true)
			next.unmuteAfter(a.Delay)
			return
		}
		q.mu.Lock()
		q.waiting = append([]*connState{next}, q.waiting...)
		q.mu.Unlock()
	}
}

// peerAddr is the connection's peer address.
func peerAddr(cs *connState) (netip.Addr, bool) {
	ta, ok := cs.c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(ta.IP)
	return a.Unmap(), ok
}

// measuresRequests reports whether a request's handler time counts against a
// request_percentage quota, and for which user and client id (copied from the frame). Requests
// of other brokers (a follower fetches over its connection) are not measured, as Kafka exempts
// cluster actions.
func (q *clientQuotas) measuresRequests(cs *connState, hdr wire.RequestHeader) (bool, string, string) {
	if cs.follower.Load() > 0 || !q.limits(cs.b.meta.Image(), quota.Request) {
		return false, "", ""
	}
	return true, quotaUser(cs.auth.who()), strings.Clone(hdr.ClientID)
}

// throttle puts a quota's throttle time in resp and holds the connection unread for it (the
// response itself goes out at once, as Kafka since KIP-219).
func (rc *reqCtx) throttle(resp kmsg.Response, d time.Duration) {
	if d <= 0 {
		return
	}
	if tr, ok := resp.(kmsg.SetThrottleResponse); ok {
		tr.SetThrottle(int32(min(d.Milliseconds(), math.MaxInt32)))
	}
	rc.cs.muteFor(d)
}

// mutations is the controller_mutation_rate quota of a CreateTopics, DeleteTopics or
// CreatePartitions request: strict from the versions Kafka makes it strict (a topic over it
// is refused with THROTTLING_QUOTA_EXCEEDED), permissive before (only throttled). A request
// is not limited when no entity has the quota, or when it only validates.
type mutations struct {
	q *quota.MutationQuota // nil: not limited
}

// mutationQuota is the request's controller mutation quota.
func (rc *reqCtx) mutationQuota(validateOnly bool) mutations {
	b := rc.cs.b
	if validateOnly || !b.clientQuotas.limits(b.meta.Image(), quota.ControllerMutation) {
		return mutations{}
	}
	strict := quota.StrictMutationQuota(rc.hdr.APIKey, rc.hdr.APIVersion)
	return mutations{q: b.clientQuotas.client.NewMutationQuota(quotaUser(rc.cs.auth.who()), strings.Clone(rc.hdr.ClientID), strict)}
}

// take records n partitions created or deleted; false when a strict quota refuses them.
func (m mutations) take(n int) bool {
	return m.q == nil || m.q.Record(n) == nil
}

// throttle is the throttle time to answer with, in milliseconds; the connection is held
// unread for it, as for the other quotas.
func (m mutations) throttle(rc *reqCtx) int32 {
	if m.q == nil {
		return 0
	}
	d := m.q.ThrottleTime()
	if d > 0 {
		rc.cs.muteFor(d)
	}
	return int32(min(d.Milliseconds(), math.MaxInt32))
}

// throttledMessage is Kafka's message for a topic refused by a strict mutation quota.
const throttledMessage = "The throttling quota has been exceeded."
