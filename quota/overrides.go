package quota

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf16"
)

// overridesKey is the config key ParseOverrides reads.
const overridesKey = "max.connections.per.ip.overrides"

// ParseOverrides parses max.connections.per.ip.overrides ("host:count,ip:count") as Kafka
// does (Csv.parseCsvMap, then Integer.parseInt and Utils.validHostPattern): pairs split at
// commas with the spaces around them, trailing empty pairs dropped, each pair split at its last
// colon so IPv6 addresses work, key and count trimmed, a later pair for the same host winning.
// Hosts may contain only letters, digits and "-%._:". The hosts are returned as written; see
// ResolveOverrides.
func ParseOverrides(s string) (map[string]int, error) {
	out := make(map[string]int)
	if s == "" {
		return out, nil
	}
	type pair struct{ host, count string }
	var pairs []pair
	for _, p := range splitCSV(s) {
		i := strings.LastIndexByte(p, ':')
		if i < 0 {
			return nil, fmt.Errorf("Error parsing configuration property '%s': begin 0, end -1, length %d (no ':' in %q)",
				overridesKey, len(utf16.Encode([]rune(p))), p)
		}
		pairs = append(pairs, pair{javaTrim(p[:i]), javaTrim(p[i+1:])})
	}
	for _, p := range pairs {
		n, err := strconv.ParseInt(p.count, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("Error parsing configuration property '%s': For input string: %q", overridesKey, p.count)
		}
		out[p.host] = int(n)
	}
	var invalid []string
	for _, p := range pairs {
		if !validHostPattern(p.host) {
			invalid = append(invalid, p.host)
		}
	}
	if len(invalid) > 0 {
		return nil, fmt.Errorf("%s contains invalid addresses : %s", overridesKey, strings.Join(invalid, ","))
	}
	return out, nil
}

// splitCSV is Java's s.split("\\s*,\\s*"): the whitespace around each comma goes with it, and
// trailing empty strings are dropped.
func splitCSV(s string) []string {
	parts := strings.Split(s, ",")
	for i := range parts {
		if i > 0 {
			parts[i] = strings.TrimLeft(parts[i], javaSpace)
		}
		if i < len(parts)-1 {
			parts[i] = strings.TrimRight(parts[i], javaSpace)
		}
	}
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// javaSpace is the regular expression class \s of Java.
const javaSpace = " \t\n\x0b\f\r"

// javaTrim is Java's String.trim: it strips characters up to and including the space.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// validHostPattern is Kafka's Utils.validHostPattern.
func validHostPattern(h string) bool {
	for _, r := range h {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case strings.ContainsRune("-%._:", r):
		default:
			return false
		}
	}
	return true
}

// ResolveOverrides turns parsed overrides into addresses for ConnectionConfig.PerIPOverrides.
// IP literals are parsed here; other hosts go to lookup (Kafka's InetAddress.getByName), which
// may be nil when every host is a literal.
func ResolveOverrides(hosts map[string]int, lookup func(host string) (netip.Addr, error)) (map[netip.Addr]int, error) {
	out := make(map[netip.Addr]int, len(hosts))
	for h, n := range hosts {
		a, err := parseIP(h)
		if err != nil {
			if lookup == nil {
				return nil, fmt.Errorf("%s: host %q is not an IP address and no resolver was given", overridesKey, h)
			}
			if a, err = lookup(h); err != nil {
				return nil, fmt.Errorf("%s: resolve %q: %w", overridesKey, h, err)
			}
		}
		out[a.Unmap()] = n
	}
	return out, nil
}
