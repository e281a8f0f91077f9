package quota

import (
	"slices"
	"strconv"
	"strings"
)

// The entity types of client quotas, as Kafka's ClientQuotaEntity names them.
const (
	EntityUser     = "user"
	EntityClientID = "client-id"
	EntityIP       = "ip"
)

// NameKind says which of the three forms one part of an entity takes.
type NameKind uint8

// The forms of an entity part: absent from the entity, a given name, or the default
// (<default> in Kafka's config paths, a null name on the wire).
const (
	Absent NameKind = iota
	Named
	Default
)

// Name is one part of an entity: the user, client-id or ip component. A user named
// "<default>" is a name like any other, not the default (as in Kafka since KAFKA-18808).
type Name struct {
	Kind NameKind
	// Name is the user principal name, client id or IP; set only when Kind is Named.
	Name string
}

// NameOf is the part naming n.
func NameOf(n string) Name { return Name{Kind: Named, Name: n} }

// DefaultName is the default part (<default>).
func DefaultName() Name { return Name{Kind: Default} }

// String is the name, <default>, or empty when absent.
func (n Name) String() string {
	switch n.Kind {
	case Named:
		return n.Name
	case Default:
		return "<default>"
	}
	return ""
}

// wire is the part's name as the protocol carries it: nil for the default.
func (n Name) wire() *string {
	if n.Kind == Named {
		s := n.Name
		return &s
	}
	return nil
}

// Entity is what a client quota is set for: a user and/or a client id, or an IP. Its zero value
// is the empty entity, which holds no quotas. Entity is comparable and keys the Store.
type Entity struct {
	User, ClientID, IP Name
}

// Parts lists the entity's present parts in the order user, client-id, ip, as the protocol
// carries them (a nil name is the default).
func (e Entity) Parts() []EntityPart {
	var ps []EntityPart
	for _, p := range [...]struct {
		typ string
		n   Name
	}{{EntityUser, e.User}, {EntityClientID, e.ClientID}, {EntityIP, e.IP}} {
		if p.n.Kind != Absent {
			ps = append(ps, EntityPart{Type: p.typ, Name: p.n.wire()})
		}
	}
	return ps
}

// size is the number of present parts.
func (e Entity) size() int {
	n := 0
	for _, p := range [...]Name{e.User, e.ClientID, e.IP} {
		if p.Kind != Absent {
			n++
		}
	}
	return n
}

// part returns the part of the given entity type.
func (e Entity) part(typ string) Name {
	switch typ {
	case EntityUser:
		return e.User
	case EntityClientID:
		return e.ClientID
	case EntityIP:
		return e.IP
	}
	return Name{}
}

// String renders the entity as Kafka's ClientQuotaEntity.toString does, which Kafka's error
// messages quote: ClientQuotaEntity(entries={user=alice, client-id=null}).
func (e Entity) String() string { return entityString(e.Parts()) }

// EntityPart is one (entity type, name) pair of a request's entity; a nil Name is the default.
type EntityPart struct {
	Type string
	Name *string
}

// entityString renders parts as Kafka's ClientQuotaEntity.toString (Kafka's HashMap order may
// differ).
func entityString(parts []EntityPart) string {
	var b strings.Builder
	b.WriteString("ClientQuotaEntity(entries={")
	for i, p := range parts {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.Type)
		b.WriteByte('=')
		if p.Name == nil {
			b.WriteString("null")
		} else {
			b.WriteString(*p.Name)
		}
	}
	b.WriteString("})")
	return b.String()
}

// collapse folds a request entity's parts into a map as Kafka's AlterClientQuotasRequest.entries
// does: a type given twice keeps its last name. Types keep the order of their first appearance.
func collapse(parts []EntityPart) []EntityPart {
	out := make([]EntityPart, 0, len(parts))
	idx := make(map[string]int, len(parts))
	for _, p := range parts {
		if i, ok := idx[p.Type]; ok {
			out[i].Name = p.Name
			continue
		}
		idx[p.Type] = len(out)
		out = append(out, p)
	}
	return out
}

// rawKey identifies a collapsed request entity, including types Entity cannot hold, so that
// Kafka's per-entity results (a map keyed by ClientQuotaEntity) can be kept. Every field is
// length-prefixed, so distinct entities never share a key.
func rawKey(parts []EntityPart) string {
	sorted := append([]EntityPart(nil), parts...)
	slices.SortFunc(sorted, func(a, b EntityPart) int { return strings.Compare(a.Type, b.Type) })
	var b strings.Builder
	for _, p := range sorted {
		b.WriteString(strconv.Itoa(len(p.Type)))
		b.WriteByte(':')
		b.WriteString(p.Type)
		if p.Name == nil {
			b.WriteByte('d')
			continue
		}
		b.WriteByte('n')
		b.WriteString(strconv.Itoa(len(*p.Name)))
		b.WriteByte(':')
		b.WriteString(*p.Name)
	}
	return b.String()
}
