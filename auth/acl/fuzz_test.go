package acl

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// FuzzParsePrincipal: ParsePrincipal never panics, accepts exactly the strings with a colon,
// splits at the first one and round-trips through String.
func FuzzParsePrincipal(f *testing.F) {
	for _, s := range []string{"User:alice", "User:*", "alice", "", ":", "User:CN=a:b", "User:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrincipal(s)
		if err != nil {
			if strings.Contains(s, ":") || !errors.Is(err, ErrBadPrincipal) {
				t.Fatalf("ParsePrincipal(%q) refused with %v", s, err)
			}
			return
		}
		if strings.Contains(p.Type, ":") || p.String() != s {
			t.Fatalf("ParsePrincipal(%q) = %+v", s, p)
		}
	})
}

// FuzzValidateCreation: ValidateCreation never panics, returns only *Error, and what it
// accepts is a binding Kafka would store.
func FuzzValidateCreation(f *testing.F) {
	f.Add(int8(2), "foo", int8(3), "User:alice", "*", int8(3), int8(3))
	f.Add(int8(4), "kafka-cluster", int8(4), "User:*", "10.0.0.1", int8(2), int8(2))
	f.Add(int8(1), "", int8(2), "alice", "", int8(1), int8(1))
	f.Add(int8(0), "x", int8(0), ":", "*", int8(0), int8(0))
	f.Fuzz(func(t *testing.T, rt int8, name string, pt int8, principal, host string, op, perm int8) {
		b := Binding{ResourceType(rt), name, PatternType(pt), principal, host, Operation(op), Permission(perm)}
		err := ValidateCreation(b)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code == nil || e.Scope < ScopeEntry || e.Scope > ScopeConnection {
				t.Fatalf("ValidateCreation(%s) = %#v", b, err)
			}
			return
		}
		if !b.ResourceType.known() || b.ResourceType == ResourceAny ||
			(b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed) ||
			!b.Operation.known() || b.Operation == OpAny ||
			(b.Permission != PermissionAllow && b.Permission != PermissionDeny) ||
			b.Name == "" || (b.ResourceType == ResourceCluster && b.Name != ClusterName) ||
			!strings.Contains(b.Principal, ":") {
			t.Fatalf("ValidateCreation accepted %s", b)
		}
	})
}

// FuzzValidateFilter: the filter checks never panic, a delete filter they pass is a describe
// filter they pass, and Matches never panics on any binding.
func FuzzValidateFilter(f *testing.F) {
	f.Add(int8(1), true, "foo", int8(2), false, "", true, "*", int8(1), int8(1), int8(2), "foo", int8(4))
	f.Add(int8(0), false, "", int8(0), true, "User:a", false, "", int8(0), int8(0), int8(9), "", int8(-1))
	f.Fuzz(func(t *testing.T, rt int8, hasName bool, name string, pt int8, hasPrincipal bool, principal string,
		hasHost bool, host string, op, perm int8, brt int8, bname string, bpt int8) {
		fl := Filter{ResourceType: ResourceType(rt), PatternType: PatternType(pt), Operation: Operation(op), Permission: Permission(perm)}
		if hasName {
			fl.Name = &name
		}
		if hasPrincipal {
			fl.Principal = &principal
		}
		if hasHost {
			fl.Host = &host
		}
		descErr, delErr := ValidateDescribeFilter(fl), ValidateDeleteFilter(fl)
		var e *Error
		if descErr != nil && !errors.As(descErr, &e) || delErr != nil && !errors.As(delErr, &e) {
			t.Fatalf("filter %s: errors %v, %v are not *Error", fl, descErr, delErr)
		}
		if delErr == nil && descErr != nil {
			t.Fatalf("filter %s passes delete but not describe: %v", fl, descErr)
		}
		b := Binding{ResourceType(brt), bname, PatternType(bpt), principal, host, Operation(op), Permission(perm)}
		m := fl.Matches(b)
		if m && fl.ResourceType != ResourceAny && fl.ResourceType != b.ResourceType {
			t.Fatalf("%s matches %s of another resource type", fl, b)
		}
	})
}

// Vocabularies small enough that fuzzed ACLs and queries collide often.
var (
	fzNames      = [...]string{"", "a", "ab", "abc", "*", "b", "ba", "*a"}
	fzPrincipals = [...]string{"User:alice", "User:bob", WildcardPrincipal, "Group:*", "alice", "Group:alice"}
	fzHosts      = [...]string{Wildcard, "h1", "h2"}
	fzOps        = [...]Operation{OpAll, OpRead, OpWrite, OpDescribe, OpAlter, OpDescribeConfigs, OpAlterConfigs, OpCreate}
	fzWho        = [...]Principal{{"User", "alice"}, {"User", "bob"}, {"Group", "alice"}, {"User", "*"}}
	fzTypes      = [...]ResourceType{ResourceTopic, ResourceGroup}
)

// modelAuthorize restates Kafka's rules over a plain list, without any index: the
// reference the indexed Authorize is held to.
func modelAuthorize(cfg Config, acls map[ID]Binding, p Principal, host string, op Operation, rt ResourceType, name string) bool {
	for _, su := range cfg.SuperUsers {
		if su.String() == p.String() {
			return true
		}
	}
	found, allowed := false, false
	for _, b := range acls {
		if b.ResourceType != rt {
			continue
		}
		applies := b.PatternType == PatternLiteral && (b.Name == name || b.Name == Wildcard) ||
			b.PatternType == PatternPrefixed && strings.HasPrefix(name, b.Name)
		if !applies {
			continue
		}
		found = true
		ap, err := ParsePrincipal(b.Principal)
		if err != nil || (ap != p && ap != (Principal{"User", "*"})) {
			continue
		}
		if b.Host != Wildcard && b.Host != host {
			continue
		}
		implied := b.Permission == PermissionAllow &&
			(op == OpDescribe && (b.Operation == OpRead || b.Operation == OpWrite || b.Operation == OpDelete || b.Operation == OpAlter) ||
				op == OpDescribeConfigs && b.Operation == OpAlterConfigs)
		if b.Operation != OpAll && b.Operation != op && !implied {
			continue
		}
		if b.Permission != PermissionAllow {
			return false
		}
		allowed = true
	}
	if allowed {
		return true
	}
	return !found && cfg.AllowEveryoneIfNoACLFound
}

// runModel decodes data into a sequence of Add, Remove and Load calls and, after each,
// holds every query of a grid and the listing to the model.
func runModel(t *testing.T, data []byte) {
	if len(data) == 0 {
		return
	}
	cfg := Config{AllowEveryoneIfNoACLFound: data[0]&1 != 0}
	if data[0]&2 != 0 {
		cfg.SuperUsers = []Principal{{"User", "bob"}}
	}
	data = data[1:]
	a := New(cfg)
	model := make(map[ID]Binding)
	next := 0
	for len(data) >= 3 {
		c0, c1, c2 := data[0], data[1], data[2]
		data = data[3:]
		switch c0 % 8 {
		case 6: // remove the c1-th ACL, or an unknown id
			var id ID
			i := int(c1)
			for k := range model {
				if i == 0 {
					id = k
					break
				}
				i--
			}
			_, err := a.Remove(id)
			if _, ok := model[id]; ok != (err == nil) {
				t.Fatalf("Remove(%s): %v, model has it: %v", id, err, ok)
			}
			delete(model, id)
		case 7: // reload what there is
			entries := make([]Entry, 0, len(model))
			for id, b := range model {
				entries = append(entries, Entry{id, b})
			}
			if err := a.Load(entries); err != nil {
				t.Fatalf("Load: %v", err)
			}
		default:
			pt := PatternLiteral
			switch c1 >> 6 {
			case 1:
				pt = PatternPrefixed
			case 2: // stored, as a record could hold them, but never applying
				pt = PatternMatch
				if c2&0x80 != 0 {
					pt = 9
				}
			}
			perm := PermissionAllow
			if c2&1 != 0 {
				perm = PermissionDeny
			}
			b := Binding{fzTypes[c0>>3&1], fzNames[c1&7], pt, fzPrincipals[int(c1>>3&7)%len(fzPrincipals)],
				fzHosts[int(c2>>1&3)%len(fzHosts)], fzOps[c2>>3&7], perm}
			id := idOf(next)
			next++
			dup := false
			for _, x := range model {
				dup = dup || x == b
			}
			err := a.Add(id, b)
			if dup != (err != nil) {
				t.Fatalf("Add(%s): %v, duplicate in model: %v", b, err, dup)
			}
			if err == nil {
				model[id] = b
			}
		}
		checkIndex(t, a.snap.Load())
		if a.Count() != len(model) {
			t.Fatalf("Count() = %d, model %d", a.Count(), len(model))
		}
		for _, x := range a.Match(anyFilter) {
			if model[x.ID] != x.Binding {
				t.Fatalf("Match lists %s %s, model has %s", x.ID, x.Binding, model[x.ID])
			}
		}
		for _, rt := range fzTypes {
			for _, name := range fzNames {
				for _, who := range fzWho {
					for _, op := range fzOps[1:] {
						for _, host := range fzHosts[1:] {
							got := a.Authorize(who, host, op, rt, name)
							if want := modelAuthorize(cfg, model, who, host, op, rt, name); got != want {
								t.Fatalf("Authorize(%s, %s, %s, %s %q) = %v, model says %v; ACLs %v",
									who, host, op, rt, name, got, want, a.Describe(anyFilter))
							}
						}
					}
				}
			}
		}
	}
}

// FuzzAuthorize holds the indexed Authorize, through any sequence of changes, to the model.
func FuzzAuthorize(f *testing.F) {
	f.Add([]byte{0, 0, 0x49, 0x11, 1, 0x41, 0x18, 6, 0, 0, 7, 0, 0})
	f.Add([]byte{1, 8, 0x04, 0x09, 0, 0x7f, 0xff, 2, 0x80, 0x20})
	f.Fuzz(func(t *testing.T, data []byte) {
		// At most 16 steps: every step checks the whole query grid, and an input the fuzzer
		// grows without bound would outlast a short fuzzing run in one exec.
		const maxSteps = 16
		if len(data) > 1+3*maxSteps {
			data = data[:1+3*maxSteps]
		}
		runModel(t, data)
	})
}

// TestAuthorizeMatchesModel runs the model comparison on seeded random inputs, so plain
// go test covers it beyond the fuzz corpus.
func TestAuthorizeMatchesModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		data := make([]byte, 1+3*r.IntN(40))
		for i := range data {
			data[i] = byte(r.UintN(256))
		}
		runModel(t, data)
	}
}

// checkIndex verifies the invariants of a snapshot: sorted is strictly ordered, and the index
// of each resource type holds exactly its LITERAL and PREFIXED entries, without empty buckets,
// with prefixLens the distinct lengths of the PREFIXED names.
func checkIndex(t *testing.T, s *snapshot) {
	t.Helper()
	for i := 1; i < len(s.sorted); i++ {
		if compareEntries(s.sorted[i-1], s.sorted[i]) >= 0 {
			t.Fatalf("sorted out of order at %d: %s, %s", i, s.sorted[i-1].b, s.sorted[i].b)
		}
	}
	for rt, ti := range s.types {
		indexed := 0
		for _, m := range []map[string][]*entry{ti.literal, ti.prefixed} {
			for name, bucket := range m {
				if len(bucket) == 0 {
					t.Fatalf("%s: empty bucket %q", ResourceType(rt), name)
				}
				for _, e := range bucket {
					if int(e.b.ResourceType) != rt || e.b.Name != name {
						t.Fatalf("%s bucket %q holds %s", ResourceType(rt), name, e.b)
					}
				}
				indexed += len(bucket)
			}
		}
		want := 0
		for _, e := range s.sorted {
			if int(e.b.ResourceType) == rt && (e.b.PatternType == PatternLiteral || e.b.PatternType == PatternPrefixed) {
				want++
			}
		}
		if indexed != want {
			t.Fatalf("%s: %d entries indexed, %d in sorted", ResourceType(rt), indexed, want)
		}
		if got := keyLengths(ti.prefixed); !slices.Equal(got, ti.prefixLens) {
			t.Fatalf("%s: prefixLens %v, want %v", ResourceType(rt), ti.prefixLens, got)
		}
	}
}
