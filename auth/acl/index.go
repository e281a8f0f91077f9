package acl

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// entry is a stored ACL with what Authorize needs of it parsed once.
type entry struct {
	id ID
	b  Binding
	// principal is b.Principal split at its first colon; principalOK is false when it has
	// no colon (possible only in records Kafka before 4.0 wrote), and then the entry applies
	// to no one.
	principal   Principal
	principalOK bool
}

func newEntry(id ID, b Binding) *entry {
	p, err := ParsePrincipal(b.Principal)
	return &entry{id: id, b: b, principal: p, principalOK: err == nil}
}

// compareEntries orders entries as Kafka's StandardAcl.compareTo orders its ACLs, which is
// the order DescribeAcls lists them in: resource type, resource name in REVERSE, pattern
// type, operation, principal, host, permission. Names compare bytewise (Java compares UTF-16
// units; the orders differ only between characters above U+FFFF and U+E000..U+FFFF).
func compareEntries(x, y *entry) int {
	a, b := &x.b, &y.b
	if c := cmp.Compare(a.ResourceType, b.ResourceType); c != 0 {
		return c
	}
	if c := strings.Compare(b.Name, a.Name); c != 0 {
		return c
	}
	if c := cmp.Compare(a.PatternType, b.PatternType); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Operation, b.Operation); c != 0 {
		return c
	}
	if c := strings.Compare(a.Principal, b.Principal); c != 0 {
		return c
	}
	if c := strings.Compare(a.Host, b.Host); c != 0 {
		return c
	}
	return cmp.Compare(a.Permission, b.Permission)
}

// typeIndex holds the ACLs of one resource type by the names they apply to. It is never
// modified once published; a change copies the maps it touches.
type typeIndex struct {
	// literal maps a LITERAL name, "*" included, to its ACLs.
	literal map[string][]*entry
	// prefixed maps a PREFIXED name to its ACLs.
	prefixed map[string][]*entry
	// prefixLens lists the distinct lengths of the keys of prefixed, ascending, so that a
	// resource name is checked against name[:l] for each l: one map probe per length.
	prefixLens []int
}

// emptyIndex is the index of a resource type without ACLs.
func emptyIndex() *typeIndex { return &typeIndex{} }

// with returns a copy of ti with e added. Only LITERAL and PREFIXED ACLs are indexed: no
// other pattern type can match a resource.
func (ti *typeIndex) with(e *entry) *typeIndex {
	n := *ti
	switch e.b.PatternType {
	case PatternLiteral:
		n.literal = maps.Clone(ti.literal)
		if n.literal == nil {
			n.literal = make(map[string][]*entry)
		}
		n.literal[e.b.Name] = append(slices.Clip(ti.literal[e.b.Name]), e)
	case PatternPrefixed:
		n.prefixed = maps.Clone(ti.prefixed)
		if n.prefixed == nil {
			n.prefixed = make(map[string][]*entry)
		}
		n.prefixed[e.b.Name] = append(slices.Clip(ti.prefixed[e.b.Name]), e)
		l := len(e.b.Name)
		if i, found := slices.BinarySearch(ti.prefixLens, l); !found {
			n.prefixLens = slices.Insert(slices.Clone(ti.prefixLens), i, l)
		}
	}
	return &n
}

// without returns a copy of ti with e removed.
func (ti *typeIndex) without(e *entry) *typeIndex {
	n := *ti
	switch e.b.PatternType {
	case PatternLiteral:
		n.literal = maps.Clone(ti.literal)
		removeFrom(n.literal, e)
	case PatternPrefixed:
		n.prefixed = maps.Clone(ti.prefixed)
		if removeFrom(n.prefixed, e) {
			n.prefixLens = keyLengths(n.prefixed)
		}
	}
	return &n
}

// removeFrom takes e out of its bucket in m, which the caller owns, and reports whether the
// bucket is gone.
func removeFrom(m map[string][]*entry, e *entry) bool {
	old := m[e.b.Name]
	bucket := make([]*entry, 0, len(old))
	for _, x := range old {
		if x != e {
			bucket = append(bucket, x)
		}
	}
	if len(bucket) == 0 {
		delete(m, e.b.Name)
		return true
	}
	m[e.b.Name] = bucket
	return false
}

func keyLengths(m map[string][]*entry) []int {
	var lens []int
	for k := range m {
		lens = append(lens, len(k))
	}
	slices.Sort(lens)
	return slices.Compact(lens)
}

// snapshot is one immutable state of the authorizer. Readers load it atomically and never
// lock; writers build a new one and swap it in.
type snapshot struct {
	// superUsers holds the super users as "Type:Name" strings: Kafka compares the text, not
	// the parsed principal, so a type containing a colon splits differently but still matches.
	superUsers   []string
	allowIfNoACL bool
	// sorted holds every ACL in compareEntries order.
	sorted []*entry
	// types indexes the ACLs by resource type code; entries of codes outside 0..7 are only in
	// sorted.
	types [numResourceTypes]*typeIndex
}

// withEntry returns a copy of s with e added.
func (s *snapshot) withEntry(e *entry) *snapshot {
	n := *s
	i, _ := slices.BinarySearchFunc(s.sorted, e, compareEntries)
	n.sorted = slices.Insert(slices.Clone(s.sorted), i, e)
	if rt := e.b.ResourceType; rt >= 0 && rt < numResourceTypes {
		n.types[rt] = s.types[rt].with(e)
	}
	return &n
}

// withoutEntry returns a copy of s with e removed.
func (s *snapshot) withoutEntry(e *entry) *snapshot {
	n := *s
	i, _ := slices.BinarySearchFunc(s.sorted, e, compareEntries)
	n.sorted = slices.Delete(slices.Clone(s.sorted), i, i+1)
	if rt := e.b.ResourceType; rt >= 0 && rt < numResourceTypes {
		n.types[rt] = s.types[rt].without(e)
	}
	return &n
}

// typeRange returns the entries of resource type rt, a subslice of sorted.
func (s *snapshot) typeRange(rt ResourceType) []*entry {
	lo, _ := slices.BinarySearchFunc(s.sorted, rt, func(e *entry, t ResourceType) int {
		return cmp.Compare(e.b.ResourceType, t)
	})
	hi, _ := slices.BinarySearchFunc(s.sorted, rt+1, func(e *entry, t ResourceType) int {
		return cmp.Compare(e.b.ResourceType, t)
	})
	return s.sorted[lo:hi]
}

// rebuilt returns a copy of s holding exactly entries, indexed from scratch.
func (s *snapshot) rebuilt(entries []*entry) *snapshot {
	n := *s
	slices.SortFunc(entries, compareEntries)
	n.sorted = entries
	for i := range n.types {
		n.types[i] = emptyIndex()
	}
	for _, e := range entries {
		rt := e.b.ResourceType
		if rt < 0 || rt >= numResourceTypes {
			continue
		}
		ti := n.types[rt]
		switch e.b.PatternType {
		case PatternLiteral:
			if ti.literal == nil {
				ti.literal = make(map[string][]*entry)
			}
			ti.literal[e.b.Name] = append(ti.literal[e.b.Name], e)
		case PatternPrefixed:
			if ti.prefixed == nil {
				ti.prefixed = make(map[string][]*entry)
			}
			ti.prefixed[e.b.Name] = append(ti.prefixed[e.b.Name], e)
		}
	}
	for _, ti := range n.types {
		ti.prefixLens = keyLengths(ti.prefixed)
	}
	return &n
}

// isSuperUser reports whether p.String() is a super user, without building that string.
func (s *snapshot) isSuperUser(p Principal) bool {
	for _, su := range s.superUsers {
		if len(su) == len(p.Type)+1+len(p.Name) && su[:len(p.Type)] == p.Type &&
			su[len(p.Type)] == ':' && su[len(p.Type)+1:] == p.Name {
			return true
		}
	}
	return false
}
