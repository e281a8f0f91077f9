package acl

import (
	"net/netip"
	"strconv"
)

// HostAddress formats a client address the way Kafka compares it with the host of an ACL,
// Java's InetAddress.getHostAddress: IPv4 (and IPv4-mapped IPv6) dotted, IPv6 as eight
// groups of lowercase hex without leading zeros and without "::" shortening
// ("0:0:0:0:0:0:0:1"), followed by "%zone" when there is one. An ACL whose host was written
// "::1" therefore never matches, in Kafka as here. The broker computes it once per connection.
func HostAddress(addr netip.Addr) string {
	if addr.Is4() || addr.Is4In6() {
		return addr.Unmap().String()
	}
	if !addr.IsValid() {
		return ""
	}
	b := addr.As16()
	out := make([]byte, 0, 39+1+len(addr.Zone()))
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			out = append(out, ':')
		}
		out = strconv.AppendUint(out, uint64(b[i])<<8|uint64(b[i+1]), 16)
	}
	if z := addr.Zone(); z != "" {
		out = append(out, '%')
		out = append(out, z...)
	}
	return string(out)
}
