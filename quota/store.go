package quota

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// Store holds the client quotas in force: values by entity and key, as the metadata image's
// ClientQuotasImage does. Set and Remove apply metadata records as they are replayed, without
// validation (Kafka replays records the same way); Plan validates an AlterClientQuotas request
// and says which records to write. Store is safe for concurrent use.
type Store struct {
	mu     sync.RWMutex
	quotas map[Entity]map[string]float64
	// perKey counts the entities that have each key; a kind whose key no entity has is not
	// measured at all, as Kafka records nothing while no quota of a type is set.
	perKey map[string]int
	// byAddr indexes the IP entities whose names parse as addresses, by address.
	byAddr map[netip.Addr][]Entity
}

// NewStore is an empty store.
func NewStore() *Store {
	return &Store{
		quotas: make(map[Entity]map[string]float64),
		perKey: make(map[string]int),
		byAddr: make(map[netip.Addr][]Entity),
	}
}

// Set sets key of e to v (a ClientQuotaRecord without remove).
func (s *Store) Set(e Entity, key string, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vals := s.quotas[e]
	if vals == nil {
		vals = make(map[string]float64)
		s.quotas[e] = vals
		if a, ok := e.addr(); ok {
			s.byAddr[a] = append(s.byAddr[a], e)
		}
	}
	if _, ok := vals[key]; !ok {
		s.perKey[key]++
	}
	vals[key] = v
}

// Remove removes key from e (a ClientQuotaRecord with remove); an entity left without keys is
// dropped.
func (s *Store) Remove(e Entity, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vals := s.quotas[e]
	if _, ok := vals[key]; !ok {
		return
	}
	delete(vals, key)
	if s.perKey[key]--; s.perKey[key] == 0 {
		delete(s.perKey, key)
	}
	if len(vals) == 0 {
		delete(s.quotas, e)
		if a, ok := e.addr(); ok {
			s.byAddr[a] = slices.DeleteFunc(s.byAddr[a], func(x Entity) bool { return x == e })
			if len(s.byAddr[a]) == 0 {
				delete(s.byAddr, a)
			}
		}
	}
}

// Apply applies one change planned by Plan, or read back from a metadata record.
func (s *Store) Apply(c Change) {
	if c.Remove {
		s.Remove(c.Entity, c.Key)
		return
	}
	s.Set(c.Entity, c.Key, c.Value)
}

// Get returns the value of key set on e itself.
func (s *Store) Get(e Entity, key string) (float64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.quotas[e][key]
	return v, ok
}

// Entries returns every entity's values, sorted by entity, for writing a metadata snapshot.
func (s *Store) Entries() []Entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Entry, 0, len(s.quotas))
	for e, vals := range s.quotas {
		out = append(out, Entry{Entity: e, Values: maps.Clone(vals)})
	}
	sortEntries(out)
	return out
}

// enabled reports whether any entity has key.
func (s *Store) enabled(key string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.perKey[key] > 0
}

// SensorKey is the (user, client-id) pair a client is measured under: Kafka's quota metric
// tags. Clients that share a default quota are still measured apart: under <default> users
// each user has its own sensor, under <default> client ids each client id has its own.
// An empty field is a level the quota does not depend on.
type SensorKey struct {
	User, ClientID string
}

// Resolution is the quota that applies to a client for one key.
type Resolution struct {
	// Sensor is the key the client's usage is recorded under.
	Sensor SensorKey
	// Entity is the configured entity the quota comes from; zero when OK is false.
	Entity Entity
	// Quota is the bound; meaningful only when OK.
	Quota float64
	// OK is false when no quota applies: the client is unbounded.
	OK bool
}

// Resolve finds the quota for key that applies to the user principal name user connected with
// clientID, by Kafka's precedence (the most specific first):
//
//	/config/users/<user>/clients/<client-id>
//	/config/users/<user>/clients/<default>
//	/config/users/<user>
//	/config/users/<default>/clients/<client-id>
//	/config/users/<default>/clients/<default>
//	/config/users/<default>
//	/config/clients/<client-id>
//	/config/clients/<default>
//
// As Kafka's DefaultQuotaCallback, it first picks the sensor key from the levels that exist,
// then looks the bound up from the sensor key, so an empty client id only sees user-level
// quotas and an empty user only client-id-level ones.
func (s *Store) Resolve(key, user, clientID string) Resolution {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sk := s.sensorKey(key, user, clientID)
	e, v, ok := s.limit(key, sk)
	return Resolution{Sensor: sk, Entity: e, Quota: v, OK: ok}
}

// has reports whether e has key.
func (s *Store) has(e Entity, key string) bool {
	_, ok := s.quotas[e][key]
	return ok
}

// sensorKey is DefaultQuotaCallback.quotaMetricTags with several levels of quotas in use. With
// one level in use Kafka takes a shortcut whose keys differ only for clients no quota applies to.
func (s *Store) sensorKey(key, user, clientID string) SensorKey {
	u, c, d := NameOf(user), NameOf(clientID), DefaultName()
	switch {
	case s.has(Entity{User: u, ClientID: c}, key), s.has(Entity{User: u, ClientID: d}, key):
		return SensorKey{User: user, ClientID: clientID}
	case s.has(Entity{User: u}, key):
		return SensorKey{User: user}
	case s.has(Entity{User: d, ClientID: c}, key), s.has(Entity{User: d, ClientID: d}, key):
		return SensorKey{User: user, ClientID: clientID}
	case s.has(Entity{User: d}, key):
		return SensorKey{User: user}
	}
	return SensorKey{ClientID: clientID}
}

// limit is DefaultQuotaCallback.quotaLimit: the bound for a sensor key, looked up at the levels
// its non-empty fields select.
func (s *Store) limit(key string, sk SensorKey) (Entity, float64, bool) {
	var candidates []Entity
	u, c, d := NameOf(sk.User), NameOf(sk.ClientID), DefaultName()
	switch {
	case sk.User != "" && sk.ClientID != "":
		candidates = []Entity{{User: u, ClientID: c}, {User: u, ClientID: d}, {User: d, ClientID: c}, {User: d, ClientID: d}}
	case sk.User != "":
		candidates = []Entity{{User: u}, {User: d}}
	case sk.ClientID != "":
		candidates = []Entity{{ClientID: c}, {ClientID: d}}
	}
	for _, e := range candidates {
		if v, ok := s.quotas[e][key]; ok {
			return e, v, true
		}
	}
	return Entity{}, 0, false
}

// IPConnectionRate returns the connection_creation_rate that applies to ip: the one set for
// the IP entity naming it, else the default IP entity's (ConnectionQuotas.connectionRateForIp).
// IP entities are matched by address, so "::1" and "0:0:0:0:0:0:0:1" are one entity; entities
// named by host name are not resolved and never match.
func (s *Store) IPConnectionRate(ip netip.Addr) (float64, bool) {
	ip = ip.Unmap()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.perKey[KeyConnectionCreationRate] == 0 {
		return 0, false
	}
	for _, e := range s.byAddr[ip] {
		if v, ok := s.quotas[e][KeyConnectionCreationRate]; ok {
			return v, true
		}
	}
	v, ok := s.quotas[Entity{IP: DefaultName()}][KeyConnectionCreationRate]
	return v, ok
}

// addr is the address an IP entity names, when its name is an IP literal.
func (e Entity) addr() (netip.Addr, bool) {
	if e.IP.Kind != Named || e.User.Kind != Absent || e.ClientID.Kind != Absent {
		return netip.Addr{}, false
	}
	a, err := parseIP(e.IP.Name)
	return a, err == nil
}

// parseIP parses an IP literal, with or without brackets around an IPv6 address, as an
// unmapped address.
func parseIP(s string) (netip.Addr, error) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	return a.Unmap(), err
}

// Entry is one entity with its quota values, as DescribeClientQuotas answers.
type Entry struct {
	Entity Entity
	Values map[string]float64
}

// sortEntries orders entries by their entities' rendering, so answers are deterministic.
func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Entity.String(), b.Entity.String()) })
}
