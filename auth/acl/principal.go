package acl

import (
	"errors"
	"fmt"
	"strings"
)

// UserType is the principal type of authenticated users (Kafka's KafkaPrincipal.USER_TYPE).
const UserType = "User"

// WildcardPrincipal is the ACL principal that matches every principal. Only "User:*" is a
// wildcard; "Group:*" names a principal literally.
const WildcardPrincipal = "User:*"

// ErrBadPrincipal reports a principal string without the colon between type and name.
var ErrBadPrincipal = errors.New("expected a string in format principalType:principalName")

// Principal is an authenticated identity (Kafka's KafkaPrincipal): a type such as "User" and
// a name. Two principals are equal when both fields are; case matters.
type Principal struct {
	Type string
	Name string
}

// String returns "Type:Name", the form ACLs and super.users name principals in.
func (p Principal) String() string { return p.Type + ":" + p.Name }

// ParsePrincipal splits "Type:Name" at its first colon, as Kafka's
// SecurityUtils.parseKafkaPrincipal does: the name may contain colons and either part may be
// empty, but a string without a colon is refused.
func ParsePrincipal(s string) (Principal, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok {
		return Principal{}, fmt.Errorf("parse principal %q: %w but got %s", s, ErrBadPrincipal, s)
	}
	return Principal{Type: typ, Name: name}, nil
}
