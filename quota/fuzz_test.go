package quota

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

// FuzzParseOverrides checks that any overrides value parses or fails cleanly, and that what
// parses prints back to a value that parses the same.
func FuzzParseOverrides(f *testing.F) {
	for _, s := range []string{"", "127.0.0.1:5", " h : 1 , ::1:3 ,", "a:1,,b:2", "x", "a:+1", "#:1", ":", ",,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseOverrides(s)
		if err != nil {
			return
		}
		var parts []string
		for h, n := range m {
			if !validHostPattern(h) {
				t.Fatalf("%q: invalid host %q accepted", s, h)
			}
			parts = append(parts, fmt.Sprintf("%s:%d", h, n))
		}
		again, err := ParseOverrides(strings.Join(parts, ","))
		if err != nil || !maps.Equal(m, again) {
			t.Fatalf("%q: %v printed as %q parses to %v %v", s, m, strings.Join(parts, ","), again, err)
		}
	})
}

// decodeParts reads an entity from "type=name;type;..." (a part without '=' is the default).
func decodeParts(s string) []EntityPart {
	if s == "" {
		return nil
	}
	var ps []EntityPart
	for _, p := range strings.Split(s, ";") {
		if typ, name, ok := strings.Cut(p, "="); ok {
			ps = append(ps, EntityPart{Type: typ, Name: &name})
		} else {
			ps = append(ps, EntityPart{Type: p})
		}
	}
	return ps
}

// FuzzAlterEntity plans one AlterClientQuotas entry from fuzzed entity, key and value: it must
// not panic, an entity ValidateEntity accepts must survive a round trip through Parts, and a
// planned change must satisfy the rules Plan enforces.
func FuzzAlterEntity(f *testing.F) {
	f.Add("user=alice", "producer_byte_rate", 1024.0, false)
	f.Add("user;client-id=app", "request_percentage", 12.5, false)
	f.Add("ip=1.2.3.4", "connection_creation_rate", 3.0, false)
	f.Add("ip;user=x", "connection_creation_rate", 3.0, true)
	f.Add("group=g", "x", -1.0, false)
	f.Add("user=;user=a", "consumer_byte_rate", 1e19, false)
	f.Fuzz(func(t *testing.T, entity, key string, value float64, remove bool) {
		parts := collapse(decodeParts(entity))
		e, verr := ValidateEntity(parts, nil)
		if verr == nil {
			back, err := ValidateEntity(e.Parts(), nil)
			if err != nil || back != e {
				t.Fatalf("%q: %v round-trips to %v %v", entity, e, back, err)
			}
		}
		s := NewStore()
		res, changes := s.Plan([]Alteration{{Entity: decodeParts(entity), Ops: []Op{{Key: key, Value: value, Remove: remove}}}}, nil)
		if len(res) != 1 {
			t.Fatalf("%d results for one entry", len(res))
		}
		if verr != nil && res[0].Err == nil {
			t.Fatalf("entity refused by ValidateEntity (%v) but planned", verr)
		}
		for _, c := range changes {
			if _, ok := keyType(c.Entity.IP.Kind != Absent, c.Key); !ok || !(c.Value > 0) || c.Remove {
				t.Fatalf("planned an invalid change %+v", c)
			}
			s.Apply(c)
		}
	})
}

// FuzzDescribeFilter describes a fixed store with fuzzed filters: it must not panic, and each
// entity returned must match every component (and have no other part, when strict).
func FuzzDescribeFilter(f *testing.F) {
	f.Add("user", int8(0), "alice", false, "client-id", int8(2), "", true, false)
	f.Add("ip", int8(1), "", true, "user", int8(2), "", true, true)
	f.Add("", int8(9), "x", false, "group", int8(0), "y", false, false)
	s := describeStore()
	f.Fuzz(func(t *testing.T, t1 string, m1 int8, n1 string, nil1 bool, t2 string, m2 int8, n2 string, nil2 bool, strict bool) {
		comp := func(typ string, m int8, n string, isNil bool) FilterComponent {
			c := FilterComponent{EntityType: typ, MatchType: MatchType(m)}
			if !isNil {
				c.Match = &n
			}
			return c
		}
		filter := Filter{Components: []FilterComponent{comp(t1, m1, n1, nil1), comp(t2, m2, n2, nil2)}, Strict: strict}
		got, err := s.Describe(filter)
		if err != nil {
			return
		}
		for _, entry := range got {
			if strict && entry.Entity.size() != len(filter.Components) {
				t.Fatalf("strict filter %+v returned %v", filter, entry.Entity)
			}
			for _, c := range filter.Components {
				p := entry.Entity.part(c.EntityType)
				ok := p.Kind != Absent
				switch c.MatchType {
				case MatchExact:
					ok = p == NameOf(*c.Match)
				case MatchDefault:
					ok = p.Kind == Default
				}
				if !ok {
					t.Fatalf("filter %+v returned %v", filter, entry.Entity)
				}
			}
		}
	})
}
