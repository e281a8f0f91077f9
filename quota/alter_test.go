package quota

import (
	"math"
	"slices"
	"testing"
)

// user is a request entity of one user.
func user(n string) []EntityPart { return []EntityPart{{Type: EntityUser, Name: &n}} }

// TestPlanValidation checks each of Kafka's refusals of an AlterClientQuotas entry, and what a
// valid entry plans.
func TestPlanValidation(t *testing.T) {
	alice := Entity{User: NameOf("alice")}
	for _, tc := range []struct {
		name     string
		entity   []EntityPart
		ops      []Op
		wErr     string // "" for success
		wChanges []Change
	}{
		{"set", user("alice"), []Op{{Key: KeyProducerByteRate, Value: 2048}}, "",
			[]Change{{Entity: alice, Key: KeyProducerByteRate, Value: 2048}}},
		{"same value again writes nothing", user("alice"), []Op{{Key: KeyConsumerByteRate, Value: 1000}}, "", nil},
		{"remove a set key", user("alice"), []Op{{Key: KeyConsumerByteRate, Remove: true}}, "",
			[]Change{{Entity: alice, Key: KeyConsumerByteRate, Remove: true}}},
		{"remove an unset key, even an unknown one", user("alice"), []Op{{Key: "bogus", Remove: true}}, "", nil},
		{"double key", user("alice"), []Op{{Key: KeyRequestPercentage, Value: 12.5}}, "",
			[]Change{{Entity: alice, Key: KeyRequestPercentage, Value: 12.5}}},
		{"unknown key", user("alice"), []Op{{Key: "bogus", Value: 1}}, "Invalid configuration key bogus", nil},
		{"ip key on a user", user("alice"), []Op{{Key: KeyConnectionCreationRate, Value: 1}},
			"Invalid configuration key connection_creation_rate", nil},
		{"user key on an ip", []EntityPart{{Type: EntityIP, Name: str("1.2.3.4")}}, []Op{{Key: KeyProducerByteRate, Value: 1}},
			"Invalid configuration key producer_byte_rate", nil},
		{"zero", user("alice"), []Op{{Key: KeyProducerByteRate, Value: 0}}, "Quota producer_byte_rate must be greater than 0", nil},
		{"negative", user("alice"), []Op{{Key: KeyRequestPercentage, Value: -1}}, "Quota request_percentage must be greater than 0", nil},
		{"NaN", user("alice"), []Op{{Key: KeyRequestPercentage, Value: math.NaN()}}, "Quota request_percentage must be greater than 0", nil},
		{"fraction of a long", user("alice"), []Op{{Key: KeyProducerByteRate, Value: 1.5}}, "producer_byte_rate cannot be a fractional value.", nil},
		{"too large a long", user("alice"), []Op{{Key: KeyConsumerByteRate, Value: 1e19}},
			"Proposed value for consumer_byte_rate is too large for a LONG.", nil},
		{"too large an int", []EntityPart{{Type: EntityIP}}, []Op{{Key: KeyConnectionCreationRate, Value: 3e9}},
			"Proposed value for connection_creation_rate is too large for an INT.", nil},
		{"a bad op voids the good ones", user("alice"), []Op{{Key: KeyProducerByteRate, Value: 5}, {Key: KeyConsumerByteRate, Value: 0}},
			"Quota consumer_byte_rate must be greater than 0", nil},
		{"empty entity", nil, []Op{{Key: KeyProducerByteRate, Value: 1}}, "Invalid empty client quota entity", nil},
		{"unknown entity type", []EntityPart{{Type: "group", Name: str("g")}}, nil, "Unhandled client quota entity type: group", nil},
		{"empty name", user(""), nil, "Empty user not supported", nil},
		{"ip with user", []EntityPart{{Type: EntityIP}, {Type: EntityUser, Name: str("a")}}, nil,
			"Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId", nil},
		{"bad ip", []EntityPart{{Type: EntityIP, Name: str("no-such-host")}}, nil,
			"no-such-host is not a valid IP or resolvable host.", nil},
		{"ip default", []EntityPart{{Type: EntityIP}}, []Op{{Key: KeyConnectionCreationRate, Value: 10}}, "",
			[]Change{{Entity: Entity{IP: DefaultName()}, Key: KeyConnectionCreationRate, Value: 10}}},
		{"bracketed ipv6", []EntityPart{{Type: EntityIP, Name: str("[::1]")}}, []Op{{Key: KeyConnectionCreationRate, Value: 10}}, "",
			[]Change{{Entity: Entity{IP: NameOf("[::1]")}, Key: KeyConnectionCreationRate, Value: 10}}},
		{"a type given twice keeps the last name", []EntityPart{{Type: EntityUser, Name: str("x")}, {Type: EntityUser, Name: str("alice")}},
			[]Op{{Key: KeyProducerByteRate, Value: 7}}, "", []Change{{Entity: alice, Key: KeyProducerByteRate, Value: 7}}},
		{"duplicate key", user("alice"), []Op{{Key: KeyProducerByteRate, Value: 1}, {Key: KeyProducerByteRate, Value: 2}},
			"Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore()
			s.Set(alice, KeyConsumerByteRate, 1000)
			res, changes := s.Plan([]Alteration{{Entity: tc.entity, Ops: tc.ops}}, nil)
			if len(res) != 1 {
				t.Fatalf("got %d results, want 1", len(res))
			}
			gotErr := ""
			if res[0].Err != nil {
				gotErr = res[0].Err.Message
			}
			if gotErr != tc.wErr || !slices.Equal(changes, tc.wChanges) {
				t.Fatalf("got %q %v, want %q %v", gotErr, changes, tc.wErr, tc.wChanges)
			}
		})
	}
}

// TestPlanDuplicateEntity checks Kafka's answer to one entity in two entries: one result,
// "Ignoring duplicate entity", while the first entry's change stays planned.
func TestPlanDuplicateEntity(t *testing.T) {
	s := NewStore()
	res, changes := s.Plan([]Alteration{
		{Entity: user("alice"), Ops: []Op{{Key: KeyProducerByteRate, Value: 1}}},
		{Entity: user("bob"), Ops: []Op{{Key: KeyProducerByteRate, Value: 2}}},
		{Entity: user("alice"), Ops: []Op{{Key: KeyProducerByteRate, Value: 3}}},
	}, nil)
	if len(res) != 2 || res[0].Err == nil || res[0].Err.Message != "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})" ||
		res[1].Err != nil {
		t.Fatalf("results %+v", res)
	}
	wChanges := []Change{
		{Entity: Entity{User: NameOf("alice")}, Key: KeyProducerByteRate, Value: 1},
		{Entity: Entity{User: NameOf("bob")}, Key: KeyProducerByteRate, Value: 2},
	}
	if !slices.Equal(changes, wChanges) {
		t.Fatalf("changes %v, want %v", changes, wChanges)
	}
}

// TestPlanResolvable checks that host names are IP entities only when the resolver says so,
// and that applied changes read back.
func TestPlanResolvable(t *testing.T) {
	s := NewStore()
	host := []EntityPart{{Type: EntityIP, Name: str("broker.example")}}
	ops := []Op{{Key: KeyConnectionCreationRate, Value: 5}}
	res, changes := s.Plan([]Alteration{{Entity: host, Ops: ops}}, func(h string) bool { return h == "broker.example" })
	if res[0].Err != nil || len(changes) != 1 {
		t.Fatalf("got %+v %v, want success", res, changes)
	}
	s.Apply(changes[0])
	if v, ok := s.Get(Entity{IP: NameOf("broker.example")}, KeyConnectionCreationRate); !ok || v != 5 {
		t.Fatalf("Get = %v %v", v, ok)
	}
}
