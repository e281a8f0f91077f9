package quota

import (
	"errors"
	"maps"
	"net/netip"
	"testing"
)

// TestParseOverrides checks Kafka's parsing of max.connections.per.ip.overrides.
func TestParseOverrides(t *testing.T) {
	for _, tc := range []struct {
		in   string
		w    map[string]int
		wErr string
	}{
		{in: "", w: map[string]int{}},
		{in: "127.0.0.1:5", w: map[string]int{"127.0.0.1": 5}},
		{in: " host1 : 10 , ::1:3 ,  ", w: map[string]int{"host1": 10, "::1": 3}},
		{in: "a:1,a:2", w: map[string]int{"a": 2}},
		{in: "a:+7,b:-1", w: map[string]int{"a": 7, "b": -1}},
		{in: ":5", w: map[string]int{"": 5}},
		{in: " , ", w: map[string]int{}},
		{in: "a:1,,b:2", wErr: `Error parsing configuration property 'max.connections.per.ip.overrides': begin 0, end -1, length 0 (no ':' in "")`},
		{in: "nocolon", wErr: `Error parsing configuration property 'max.connections.per.ip.overrides': begin 0, end -1, length 7 (no ':' in "nocolon")`},
		{in: "a:x", wErr: `Error parsing configuration property 'max.connections.per.ip.overrides': For input string: "x"`},
		{in: "a:99999999999", wErr: `Error parsing configuration property 'max.connections.per.ip.overrides': For input string: "99999999999"`},
		{in: "hostName#:100,ok:1,b@d:2", wErr: "max.connections.per.ip.overrides contains invalid addresses : hostName#,b@d"},
	} {
		got, err := ParseOverrides(tc.in)
		if tc.wErr != "" {
			if err == nil || err.Error() != tc.wErr {
				t.Errorf("%q: got %v %v, want error %q", tc.in, got, err, tc.wErr)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tc.w) {
			t.Errorf("%q: got %v %v, want %v", tc.in, got, err, tc.w)
		}
	}
}

// TestResolveOverrides checks that literals are parsed, mapped IPv4 unmapped, and other hosts
// go to the resolver.
func TestResolveOverrides(t *testing.T) {
	lookup := func(h string) (netip.Addr, error) {
		if h == "broker1" {
			return netip.MustParseAddr("192.168.0.1"), nil
		}
		return netip.Addr{}, errors.New("no such host")
	}
	got, err := ResolveOverrides(map[string]int{"10.0.0.1": 1, "[::1]": 2, "::ffff:10.0.0.2": 3, "broker1": 4}, lookup)
	w := map[netip.Addr]int{addr("10.0.0.1"): 1, addr("::1"): 2, addr("10.0.0.2"): 3, addr("192.168.0.1"): 4}
	if err != nil || !maps.Equal(got, w) {
		t.Fatalf("got %v %v, want %v", got, err, w)
	}
	if _, err := ResolveOverrides(map[string]int{"nohost": 1}, lookup); err == nil {
		t.Fatal("unresolvable host accepted")
	}
	if _, err := ResolveOverrides(map[string]int{"broker1": 1}, nil); err == nil {
		t.Fatal("host name accepted without a resolver")
	}
}
