package acl

import (
	"net/netip"
	"testing"
)

// TestHostAddress holds HostAddress to Java's InetAddress.getHostAddress forms.
func TestHostAddress(t *testing.T) {
	tests := []struct{ in, want string }{
		{"192.168.1.1", "192.168.1.1"},
		{"::ffff:10.0.0.1", "10.0.0.1"},
		{"::1", "0:0:0:0:0:0:0:1"},
		{"2001:db8::ff00:42:8329", "2001:db8:0:0:0:ff00:42:8329"},
		{"fe80::1%eth0", "fe80:0:0:0:0:0:0:1%eth0"},
		{"::", "0:0:0:0:0:0:0:0"},
	}
	for _, tt := range tests {
		if got := HostAddress(netip.MustParseAddr(tt.in)); got != tt.want {
			t.Errorf("HostAddress(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := HostAddress(netip.Addr{}); got != "" {
		t.Errorf("HostAddress(zero) = %q, want empty", got)
	}
}
