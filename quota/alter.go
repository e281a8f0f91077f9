package quota

import (
	"maps"
	"math"
)

// Op is one operation of an AlterClientQuotas entry: set Key to Value, or remove Key.
type Op struct {
	Key    string
	Value  float64
	Remove bool
}

// Alteration is one entry of an AlterClientQuotas request, as it came off the wire.
type Alteration struct {
	Entity []EntityPart
	Ops    []Op
}

// AlterResult is the outcome for one distinct entity of the request, for the response entry.
type AlterResult struct {
	// Entity is the entity as the request named it, a type given twice keeping its last name.
	Entity []EntityPart
	// Err is nil on success, else INVALID_REQUEST with Kafka's message.
	Err *Error
}

// Change is one quota record to write to the metadata log and then Apply on every node.
type Change struct {
	Entity Entity
	Key    string
	Value  float64
	Remove bool
}

// Plan validates an AlterClientQuotas request against the quotas in force, as Kafka's
// ClientQuotaControlManager.alterClientQuotas, and returns one result per distinct entity (in
// the order entities first appear) and the changes to write. It changes nothing: the caller
// writes the changes, unless the request is validate_only, and applies them as they commit.
//
// Per entity: the types must be user, client-id or ip, names non-empty, ip alone and a valid
// IP; keys must belong to the entity (producer_byte_rate, consumer_byte_rate,
// request_percentage, controller_mutation_rate for users and client ids,
// connection_creation_rate for IPs), values above zero, and integral for the long and int keys.
// A removal is not validated and only written when the key is set. An entity with an invalid
// op gets no changes. As in Kafka, an entity given twice is answered "Ignoring duplicate
// entity", yet the changes of its first entry stay planned; a key given twice in one entry
// ends the same way, with no changes.
//
// resolvable decides whether an IP entity name that is not an IP literal names a resolvable
// host (Kafka calls InetAddress.getByName); nil refuses every host name.
func (s *Store) Plan(alts []Alteration, resolvable func(host string) bool) ([]AlterResult, []Change) {
	var (
		changes []Change
		order   []string
		results = make(map[string]*AlterResult)
	)
	put := func(key string, parts []EntityPart, err *Error) {
		r := results[key]
		if r == nil {
			r = &AlterResult{Entity: parts}
			results[key] = r
			order = append(order, key)
		}
		r.Err = err
	}
	for _, a := range alts {
		parts := collapse(a.Entity)
		key := rawKey(parts)
		entityText := entityString(parts)
		ops := make([]Op, 0, len(a.Ops))
		seen := make(map[string]bool, len(a.Ops))
		for _, op := range a.Ops {
			if seen[op.Key] {
				put(key, parts, invalidRequest("Duplicate quota key %s not updating quota for this entity %s", op.Key, entityText))
				continue
			}
			seen[op.Key] = true
			ops = append(ops, op)
		}
		if _, done := results[key]; done {
			put(key, parts, invalidRequest("Ignoring duplicate entity %s", entityText))
			continue
		}
		planned, err := s.planEntity(parts, ops, resolvable)
		if err != nil {
			put(key, parts, err)
			continue
		}
		changes = append(changes, planned...)
		put(key, parts, nil)
	}
	out := make([]AlterResult, len(order))
	for i, k := range order {
		out[i] = *results[k]
	}
	return out, changes
}

// planEntity is alterClientQuotaEntity: it validates one entity and its ops and returns its
// changes.
func (s *Store) planEntity(parts []EntityPart, ops []Op, resolvable func(string) bool) ([]Change, *Error) {
	e, err := validateEntity(parts, resolvable)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	current := maps.Clone(s.quotas[e])
	s.mu.RUnlock()
	var changes []Change
	for _, op := range ops {
		if op.Remove {
			if _, ok := current[op.Key]; ok {
				changes = append(changes, Change{Entity: e, Key: op.Key, Remove: true})
			}
			continue
		}
		if err := validateValue(e.IP.Kind != Absent, op.Key, op.Value); err != nil {
			return nil, err
		}
		if cur, ok := current[op.Key]; !ok || cur != op.Value {
			changes = append(changes, Change{Entity: e, Key: op.Key, Value: op.Value})
		}
	}
	return changes, nil
}

// ValidateEntity checks a request's entity as Kafka's validateEntity and
// configKeysForEntityType do, in their order, and returns it as an Entity. parts should be
// collapsed already (a type given twice keeps its last name, as Kafka reads the request into a
// map); a repeated type is refused. resolvable is as for Plan. A refusal is an *Error.
func ValidateEntity(parts []EntityPart, resolvable func(host string) bool) (Entity, error) {
	e, err := validateEntity(parts, resolvable)
	if err != nil {
		return Entity{}, err
	}
	return e, nil
}

// validateEntity is ValidateEntity with the concrete error type Plan keeps.
func validateEntity(parts []EntityPart, resolvable func(host string) bool) (Entity, *Error) {
	if len(parts) == 0 {
		return Entity{}, invalidRequest("Invalid empty client quota entity")
	}
	var e Entity
	for _, p := range parts {
		n := DefaultName()
		if p.Name != nil {
			n = NameOf(*p.Name)
		}
		var slot *Name
		switch p.Type {
		case EntityUser:
			slot = &e.User
		case EntityClientID:
			slot = &e.ClientID
		case EntityIP:
			slot = &e.IP
		default:
			return Entity{}, invalidRequest("Unhandled client quota entity type: %s", p.Type)
		}
		if slot.Kind != Absent {
			return Entity{}, invalidRequest("Invalid client quota entity, duplicate entity entry %s", p.Type)
		}
		*slot = n
		if p.Name != nil && *p.Name == "" {
			return Entity{}, invalidRequest("Empty %s not supported", p.Type)
		}
	}
	if e.IP.Kind != Absent {
		if e.User.Kind != Absent || e.ClientID.Kind != Absent {
			// Kafka's message lacks the space between "should" and "not"; kept as sent.
			return Entity{}, invalidRequest("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
		}
		if e.IP.Kind == Named && !validIPEntity(e.IP.Name, resolvable) {
			return Entity{}, invalidRequest("%s is not a valid IP or resolvable host.", e.IP.Name)
		}
	}
	return e, nil
}

// validIPEntity accepts an IP literal, or a host name resolvable says resolves.
func validIPEntity(name string, resolvable func(string) bool) bool {
	if _, err := parseIP(name); err == nil {
		return true
	}
	return resolvable != nil && resolvable(name)
}

// validateValue is Kafka's validateQuotaKeyValue. NaN is refused as not greater than zero,
// where Kafka's comparison lets it through.
func validateValue(ip bool, key string, v float64) *Error {
	t, ok := keyType(ip, key)
	if !ok {
		return invalidRequest("Invalid configuration key %s", key)
	}
	if !(v > 0) {
		return invalidRequest("Quota %s must be greater than 0", key)
	}
	switch t {
	case typeDouble:
		return nil
	case typeInt:
		if v > math.MaxInt32 {
			return invalidRequest("Proposed value for %s is too large for an INT.", key)
		}
	case typeLong:
		if v > math.MaxInt64 {
			return invalidRequest("Proposed value for %s is too large for a LONG.", key)
		}
	}
	if math.Abs(math.Mod(v, 1)) > 1e-6 {
		return invalidRequest("%s cannot be a fractional value.", key)
	}
	return nil
}
