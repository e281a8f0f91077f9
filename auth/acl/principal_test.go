package acl

import (
	"errors"
	"slices"
	"testing"
)

func TestParsePrincipal(t *testing.T) {
	tests := []struct {
		in    string
		want  Principal
		wbad  bool
		wtext string
	}{
		{in: "User:alice", want: Principal{"User", "alice"}},
		{in: "User:*", want: Principal{"User", "*"}},
		// Split at the first colon: a name may hold colons (SSL distinguished names).
		{in: "User:CN=a:b,O=c", want: Principal{"User", "CN=a:b,O=c"}},
		{in: "User:", want: Principal{"User", ""}},
		{in: ":alice", want: Principal{"", "alice"}},
		{in: ":", want: Principal{"", ""}},
		{in: "alice", wbad: true},
		{in: "", wbad: true},
	}
	for _, tt := range tests {
		got, err := ParsePrincipal(tt.in)
		if tt.wbad {
			if !errors.Is(err, ErrBadPrincipal) {
				t.Errorf("ParsePrincipal(%q) error %v, want ErrBadPrincipal", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParsePrincipal(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if got.String() != tt.in {
			t.Errorf("ParsePrincipal(%q).String() = %q", tt.in, got.String())
		}
	}
}

// TestParseSuperUsers follows Kafka's StandardAuthorizerTest.testGetConfiguredSuperUsers:
// entries split at ";", trimmed, empty ones skipped, a bad one refused.
func TestParseSuperUsers(t *testing.T) {
	tests := []struct {
		in   string
		want []Principal
		wbad bool
	}{
		{in: "", want: nil},
		{in: " ", want: nil},
		{in: "User:bob;User:alice ", want: []Principal{{"User", "bob"}, {"User", "alice"}}},
		{in: ";  User:bob  ;  User:alice ", want: []Principal{{"User", "bob"}, {"User", "alice"}}},
		{in: "bob;:alice", wbad: true},
	}
	for _, tt := range tests {
		got, err := ParseSuperUsers(tt.in)
		if tt.wbad {
			if !errors.Is(err, ErrBadPrincipal) {
				t.Errorf("ParseSuperUsers(%q) error %v, want ErrBadPrincipal", tt.in, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseSuperUsers(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}
