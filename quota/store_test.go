package quota

import (
	"net/netip"
	"testing"
)

// precedenceLevel is one of Kafka's levels for alice connecting as client app, with the
// sensor key it measures under.
type precedenceLevel struct {
	e  Entity
	wk SensorKey
}

// precedenceLevels are the eight levels, most specific first.
func precedenceLevels() []precedenceLevel {
	return []precedenceLevel{
		{Entity{User: NameOf("alice"), ClientID: NameOf("app")}, SensorKey{"alice", "app"}},
		{Entity{User: NameOf("alice"), ClientID: DefaultName()}, SensorKey{"alice", "app"}},
		{Entity{User: NameOf("alice")}, SensorKey{"alice", ""}},
		{Entity{User: DefaultName(), ClientID: NameOf("app")}, SensorKey{"alice", "app"}},
		{Entity{User: DefaultName(), ClientID: DefaultName()}, SensorKey{"alice", "app"}},
		{Entity{User: DefaultName()}, SensorKey{"alice", ""}},
		{Entity{ClientID: NameOf("app")}, SensorKey{"", "app"}},
		{Entity{ClientID: DefaultName()}, SensorKey{"", "app"}},
	}
}

// TestResolvePrecedence sets all eight levels and removes them from the most specific down:
// each time the next level must apply, with Kafka's sensor key for it.
func TestResolvePrecedence(t *testing.T) {
	s := NewStore()
	levels := precedenceLevels()
	for i, l := range levels {
		s.Set(l.e, KeyProducerByteRate, float64(100*(i+1)))
		s.Set(l.e, KeyConsumerByteRate, 7) // another key never interferes
	}
	for i, l := range levels {
		r := s.Resolve(KeyProducerByteRate, "alice", "app")
		if !r.OK || r.Entity != l.e || r.Quota != float64(100*(i+1)) || r.Sensor != l.wk {
			t.Fatalf("level %d: got %+v, want entity %v quota %d sensor %+v", i+1, r, l.e, 100*(i+1), l.wk)
		}
		s.Remove(l.e, KeyProducerByteRate)
	}
	r := s.Resolve(KeyProducerByteRate, "alice", "app")
	if r.OK || r.Sensor != (SensorKey{"", "app"}) {
		t.Fatalf("no level left: got %+v, want unbounded under (\"\", app)", r)
	}
}

// TestResolveCases covers who a quota applies to and which clients share a sensor.
func TestResolveCases(t *testing.T) {
	for _, tc := range []struct {
		name         string
		set          []Entity
		user, client string
		wOK          bool
		wEntity      Entity
		wSensor      SensorKey
	}{
		{
			name: "client default measures each client id apart",
			set:  []Entity{{ClientID: DefaultName()}}, user: "bob", client: "c1",
			wOK: true, wEntity: Entity{ClientID: DefaultName()}, wSensor: SensorKey{"", "c1"},
		},
		{
			name: "user default measures each user apart, clients of a user together",
			set:  []Entity{{User: DefaultName()}}, user: "bob", client: "c1",
			wOK: true, wEntity: Entity{User: DefaultName()}, wSensor: SensorKey{"bob", ""},
		},
		{
			name: "another user's quota does not apply",
			set:  []Entity{{User: NameOf("alice")}}, user: "bob", client: "c1",
			wSensor: SensorKey{"", "c1"},
		},
		{
			name: "a user named <default> is not the default",
			set:  []Entity{{User: NameOf("<default>")}}, user: "bob", client: "c1",
			wSensor: SensorKey{"", "c1"},
		},
		{
			name: "user quota beats client quota",
			set:  []Entity{{User: NameOf("bob")}, {ClientID: NameOf("c1")}}, user: "bob", client: "c1",
			wOK: true, wEntity: Entity{User: NameOf("bob")}, wSensor: SensorKey{"bob", ""},
		},
		{
			// Kafka's quirk: the sensor key drops the empty client id, and the lookup by
			// sensor key then only sees user-level entities.
			name: "empty client id escapes a (user, <default>) quota",
			set:  []Entity{{User: NameOf("bob"), ClientID: DefaultName()}}, user: "bob", client: "",
			wSensor: SensorKey{"bob", ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore()
			for i, e := range tc.set {
				s.Set(e, KeyProducerByteRate, float64(1000*(i+1)))
			}
			r := s.Resolve(KeyProducerByteRate, tc.user, tc.client)
			if r.OK != tc.wOK || r.Entity != tc.wEntity || r.Sensor != tc.wSensor {
				t.Fatalf("got %+v, want ok %v entity %v sensor %+v", r, tc.wOK, tc.wEntity, tc.wSensor)
			}
		})
	}
}

// TestStoreSetRemove checks the bookkeeping of replayed records: Get, Entries, and that a
// kind counts as enabled only while some entity has its key.
func TestStoreSetRemove(t *testing.T) {
	s := NewStore()
	alice := Entity{User: NameOf("alice")}
	s.Apply(Change{Entity: alice, Key: KeyProducerByteRate, Value: 10})
	s.Apply(Change{Entity: alice, Key: KeyProducerByteRate, Value: 20})
	if v, ok := s.Get(alice, KeyProducerByteRate); !ok || v != 20 {
		t.Fatalf("Get = %v %v, want 20 true", v, ok)
	}
	if !s.enabled(KeyProducerByteRate) || s.enabled(KeyConsumerByteRate) {
		t.Fatal("enabled: want producer only")
	}
	s.Apply(Change{Entity: alice, Key: KeyProducerByteRate, Remove: true})
	s.Remove(alice, KeyProducerByteRate) // removing again is harmless
	if s.enabled(KeyProducerByteRate) || len(s.Entries()) != 0 {
		t.Fatalf("after remove: enabled %v entries %v, want none", s.enabled(KeyProducerByteRate), s.Entries())
	}
}

// TestIPConnectionRate checks the IP lookup: exact address (in any textual form), then the
// default IP entity.
func TestIPConnectionRate(t *testing.T) {
	s := NewStore()
	if _, ok := s.IPConnectionRate(netip.MustParseAddr("10.0.0.1")); ok {
		t.Fatal("rate with no quotas")
	}
	s.Set(Entity{IP: NameOf("0:0:0:0:0:0:0:1")}, KeyConnectionCreationRate, 3)
	s.Set(Entity{IP: NameOf("10.0.0.1")}, KeyConnectionCreationRate, 4)
	s.Set(Entity{IP: DefaultName()}, KeyConnectionCreationRate, 9)
	for _, tc := range []struct {
		ip string
		w  float64
	}{
		{"::1", 3},
		{"10.0.0.1", 4},
		{"::ffff:10.0.0.1", 4},
		{"10.0.0.2", 9},
	} {
		if v, ok := s.IPConnectionRate(netip.MustParseAddr(tc.ip)); !ok || v != tc.w {
			t.Errorf("%s: got %v %v, want %v", tc.ip, v, ok, tc.w)
		}
	}
	s.Remove(Entity{IP: NameOf("0:0:0:0:0:0:0:1")}, KeyConnectionCreationRate)
	if v, _ := s.IPConnectionRate(netip.MustParseAddr("::1")); v != 9 {
		t.Errorf("::1 after removal: got %v, want the default 9", v)
	}
}
