package quota

import (
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"
)

// MatchType is how a DescribeClientQuotas filter component matches an entity type's name.
type MatchType int8

// The match types of DescribeClientQuotas (DescribeClientQuotasRequest.MATCH_TYPE_*).
const (
	// MatchExact matches the given name only.
	MatchExact MatchType = 0
	// MatchDefault matches the default (<default>) only.
	MatchDefault MatchType = 1
	// MatchSpecified matches any entity that has the type, named or default (as Kafka's
	// metadata image does).
	MatchSpecified MatchType = 2
)

// FilterComponent is one component of a DescribeClientQuotas filter.
type FilterComponent struct {
	EntityType string
	MatchType  MatchType
	// Match is the name for MatchExact; it must be nil for the other match types.
	Match *string
}

// Filter is a DescribeClientQuotas request: its components, and strict, which keeps only
// entities with no parts beyond the components' types.
type Filter struct {
	Components []FilterComponent
	Strict     bool
}

// Describe answers DescribeClientQuotas for f as Kafka's ClientQuotasImage.describe: an entity
// matches when it has every component's type with a matching name. Without components it
// returns every entity, or none when strict. A malformed filter is an *Error with Kafka's code
// and message (INVALID_REQUEST, or UNSUPPORTED_VERSION for an unknown entity type), for the
// response's top-level error.
func (s *Store) Describe(f Filter) ([]Entry, error) {
	exact, typed, err := compileFilter(f)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Entry
	for e, vals := range s.quotas {
		if matches(e, exact, typed, f.Strict) {
			out = append(out, Entry{Entity: e, Values: maps.Clone(vals)})
		}
	}
	sortEntries(out)
	return out, nil
}

// compileFilter validates the components in Kafka's order and splits them into exact matches
// (type to name, Default for MATCH_TYPE_DEFAULT) and type matches.
func compileFilter(f Filter) (map[string]Name, map[string]bool, error) {
	exact := make(map[string]Name)
	typed := make(map[string]bool)
	for _, c := range f.Components {
		t := c.EntityType
		if t == "" {
			return nil, nil, invalidRequest("Invalid empty entity type.")
		}
		if _, dup := exact[t]; dup || typed[t] {
			return nil, nil, invalidRequest("Entity type %s cannot appear more than once in the filter.", t)
		}
		if t != EntityUser && t != EntityClientID && t != EntityIP {
			return nil, nil, &Error{Code: kerr.UnsupportedVersion, Message: "Unsupported entity type " + t}
		}
		switch c.MatchType {
		case MatchExact:
			if c.Match == nil {
				return nil, nil, invalidRequest("Request specified MATCH_TYPE_EXACT, but set match string to null.")
			}
			exact[t] = NameOf(*c.Match)
		case MatchDefault:
			if c.Match != nil {
				return nil, nil, invalidRequest("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
			}
			exact[t] = DefaultName()
		case MatchSpecified:
			if c.Match != nil {
				return nil, nil, invalidRequest("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
			typed[t] = true
		default:
			return nil, nil, invalidRequest("Unknown match type %d", c.MatchType)
		}
	}
	_, exIP := exact[EntityIP]
	_, exUser := exact[EntityUser]
	_, exClient := exact[EntityClientID]
	if (exIP || typed[EntityIP]) && (exUser || typed[EntityUser] || exClient || typed[EntityClientID]) {
		return nil, nil, invalidRequest("Invalid entity filter component combination. IP filter component " +
			"should not be used with user or clientId filter component.")
	}
	return exact, typed, nil
}

// matches is Kafka's filter test of one entity.
func matches(e Entity, exact map[string]Name, typed map[string]bool, strict bool) bool {
	if strict && e.size() != len(exact)+len(typed) {
		return false
	}
	for t, n := range exact {
		if e.part(t) != n {
			return false
		}
	}
	for t := range typed {
		if e.part(t).Kind == Absent {
			return false
		}
	}
	return true
}
