package quota

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// describeStore holds one entity of each shape, valued 1 to 7 so results are easy to name.
func describeStore() *Store {
	s := NewStore()
	for i, e := range []Entity{
		{User: NameOf("alice")},                          // 1
		{User: DefaultName()},                            // 2
		{User: NameOf("alice"), ClientID: NameOf("app")}, // 3
		{ClientID: NameOf("app")},                        // 4
		{ClientID: DefaultName()},                        // 5
		{IP: NameOf("1.2.3.4")},                          // 6
		{IP: DefaultName()},                              // 7
	} {
		s.Set(e, KeyProducerByteRate, float64(i+1))
	}
	return s
}

func str(s string) *string { return &s }

// TestDescribeFilters checks Kafka's filter semantics: exact names, defaults, any specified
// name (named or default), and strict.
func TestDescribeFilters(t *testing.T) {
	s := describeStore()
	for _, tc := range []struct {
		name string
		f    Filter
		w    []float64 // the values of the entities returned, sorted
	}{
		{"no components", Filter{}, []float64{1, 2, 3, 4, 5, 6, 7}},
		{"no components, strict", Filter{Strict: true}, nil},
		{"user exact", Filter{Components: []FilterComponent{{EntityUser, MatchExact, str("alice")}}}, []float64{1, 3}},
		{"user exact, strict", Filter{Components: []FilterComponent{{EntityUser, MatchExact, str("alice")}}, Strict: true}, []float64{1}},
		{"user default", Filter{Components: []FilterComponent{{EntityUser, MatchDefault, nil}}}, []float64{2}},
		{"user specified", Filter{Components: []FilterComponent{{EntityUser, MatchSpecified, nil}}}, []float64{1, 2, 3}},
		{"user specified, strict", Filter{Components: []FilterComponent{{EntityUser, MatchSpecified, nil}}, Strict: true}, []float64{1, 2}},
		{"user and client specified, strict", Filter{Components: []FilterComponent{
			{EntityUser, MatchSpecified, nil}, {EntityClientID, MatchSpecified, nil}}, Strict: true}, []float64{3}},
		{"client exact", Filter{Components: []FilterComponent{{EntityClientID, MatchExact, str("app")}}}, []float64{3, 4}},
		{"client default, strict", Filter{Components: []FilterComponent{{EntityClientID, MatchDefault, nil}}, Strict: true}, []float64{5}},
		{"ip specified", Filter{Components: []FilterComponent{{EntityIP, MatchSpecified, nil}}}, []float64{6, 7}},
		{"ip exact", Filter{Components: []FilterComponent{{EntityIP, MatchExact, str("1.2.3.4")}}}, []float64{6}},
		{"no such user", Filter{Components: []FilterComponent{{EntityUser, MatchExact, str("bob")}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Describe(tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var vals []float64
			for _, e := range got {
				vals = append(vals, e.Values[KeyProducerByteRate])
			}
			slices.Sort(vals)
			if !slices.Equal(vals, tc.w) {
				t.Fatalf("got %v, want %v", vals, tc.w)
			}
		})
	}
}

// TestDescribeErrors checks the refusals of malformed filters, with Kafka's codes and messages.
func TestDescribeErrors(t *testing.T) {
	s := describeStore()
	for _, tc := range []struct {
		comps []FilterComponent
		wCode *kerr.Error
		wMsg  string
	}{
		{[]FilterComponent{{"", MatchSpecified, nil}}, kerr.InvalidRequest, "Invalid empty entity type."},
		{[]FilterComponent{{EntityUser, MatchSpecified, nil}, {EntityUser, MatchDefault, nil}}, kerr.InvalidRequest,
			"Entity type user cannot appear more than once in the filter."},
		{[]FilterComponent{{"group", MatchSpecified, nil}}, kerr.UnsupportedVersion, "Unsupported entity type group"},
		{[]FilterComponent{{EntityUser, MatchExact, nil}}, kerr.InvalidRequest,
			"Request specified MATCH_TYPE_EXACT, but set match string to null."},
		{[]FilterComponent{{EntityUser, MatchDefault, str("x")}}, kerr.InvalidRequest,
			"Request specified MATCH_TYPE_DEFAULT, but also specified a match string."},
		{[]FilterComponent{{EntityUser, MatchSpecified, str("x")}}, kerr.InvalidRequest,
			"Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."},
		{[]FilterComponent{{EntityUser, 7, nil}}, kerr.InvalidRequest, "Unknown match type 7"},
		{[]FilterComponent{{EntityIP, MatchSpecified, nil}, {EntityClientID, MatchDefault, nil}}, kerr.InvalidRequest,
			"Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."},
	} {
		_, err := s.Describe(Filter{Components: tc.comps})
		var qe *Error
		if !errors.As(err, &qe) || !errors.Is(err, tc.wCode) || qe.Message != tc.wMsg {
			t.Errorf("%+v: got %v, want %s %q", tc.comps, err, tc.wCode.Message, tc.wMsg)
		}
	}
}
