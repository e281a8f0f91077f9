package broker

import (
	"fmt"
	"regexp"
	"strings"
)

// principalRules are ssl.principal.mapping.rules, as Kafka's SslPrincipalMapper: each rule is
// DEFAULT (the whole distinguished name) or RULE:pattern/replacement/ with an optional L or U
// to lower or upper the result; the first rule whose pattern matches the name maps it.
type principalRules []principalRule

type principalRule struct {
	dflt        bool
	pattern     *regexp.Regexp
	replacement string
	toLower     bool
	toUpper     bool
}

// ruleSyntax matches one rule of the list, as Kafka's RULE_PARSER.
var ruleSyntax = regexp.MustCompile(`^\s*(DEFAULT|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?)\s*(,\s*|$)`)

// parsePrincipalRules parses ssl.principal.mapping.rules.
func parsePrincipalRules(val string) (principalRules, error) {
	var out principalRules
	rest := strings.TrimSpace(val)
	if rest == "" {
		rest = "DEFAULT"
	}
	for rest != "" {
		m := ruleSyntax.FindStringSubmatch(rest)
		if m == nil {
			return nil, fmt.Errorf("invalid rule at %q", rest)
		}
		rest = rest[len(m[0]):]
		if m[1] == "DEFAULT" {
			out = append(out, principalRule{dflt: true})
			continue
		}
		re, err := regexp.Compile(m[2])
		if err != nil {
			return nil, fmt.Errorf("rule pattern %q: %w", m[2], err)
		}
		out = append(out, principalRule{pattern: re, replacement: javaReplacement(m[4]), toLower: m[6] == "L", toUpper: m[6] == "U"})
	}
	return out, nil
}

// javaReplacement turns a Java replacement ($1, \$) into Go's regexp template (${1}, $$).
func javaReplacement(r string) string {
	var sb strings.Builder
	for i := 0; i < len(r); i++ {
		switch c := r[i]; {
		case c == '\\' && i+1 < len(r):
			i++
			if r[i] == '$' {
				sb.WriteString("$$")
			} else {
				sb.WriteByte(r[i])
			}
		case c == '$':
			j := i + 1
			for j < len(r) && r[j] >= '0' && r[j] <= '9' {
				j++
			}
			sb.WriteString("${" + r[i+1:j] + "}")
			i = j - 1
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

// apply maps a distinguished name; a name no rule matches stays as it is, as Kafka.
func (rs principalRules) apply(dn string) string {
	for _, r := range rs {
		if r.dflt {
			return dn
		}
		m := r.pattern.FindStringSubmatchIndex(dn)
		if m == nil || m[0] != 0 || m[1] != len(dn) {
			continue // Kafka's Matcher.matches: the whole name
		}
		out := string(r.pattern.ExpandString(nil, r.replacement, dn, m))
		switch {
		case r.toLower:
			out = strings.ToLower(out)
		case r.toUpper:
			out = strings.ToUpper(out)
		}
		return out
	}
	return dn
}
