package acl

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// Config keys, as Kafka's StandardAuthorizer names them.
const (
	// SuperUsersKey lists principals allowed everything, separated by semicolons.
	SuperUsersKey = "super.users"
	// AllowEveryoneIfNoACLFoundKey allows an action on a resource no ACL applies to. Kafka
	// reads it with Boolean.parseBoolean after trimming: "true" in any case is true, any
	// other text false, never an error.
	AllowEveryoneIfNoACLFoundKey = "allow.everyone.if.no.acl.found"
)

// Config is the authorizer's static configuration.
type Config struct {
	// SuperUsers are allowed every operation on every resource, whatever the ACLs say.
	SuperUsers []Principal
	// AllowEveryoneIfNoACLFound allows an action when no ACL at all applies to its resource
	// (Kafka's allow.everyone.if.no.acl.found, default false). An ACL for another principal,
	// host or operation on the resource still counts as one.
	AllowEveryoneIfNoACLFound bool
}

// ParseSuperUsers parses a super.users value as Kafka's StandardAuthorizer does: entries
// separated by ";", each trimmed of spaces, empty ones skipped, every other one a principal
// "Type:Name".
func ParseSuperUsers(v string) ([]Principal, error) {
	var out []Principal
	for _, part := range strings.Split(v, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := ParsePrincipal(part)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", SuperUsersKey, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// ErrUnknownID reports a removal of an ACL id the authorizer does not hold.
var ErrUnknownID = errors.New("no ACL with this id")

// ErrDuplicate reports an addition whose id, or whose binding, the authorizer already holds;
// Kafka's AclCache refuses both.
var ErrDuplicate = errors.New("ACL already present")

// Authorizer decides actions against a set of ACLs with the semantics of Kafka's
// StandardAuthorizer. The broker feeds it the ACL records of the metadata log in order (Add,
// Remove, Load); any number of goroutines call Authorize meanwhile. Authorize takes no lock:
// it reads an immutable snapshot that each change replaces.
type Authorizer struct {
	snap atomic.Pointer[snapshot]

	// mu serializes changes; the fields below it are the writer's and readers never see them.
	mu sync.Mutex
	// byID and byBinding index the entries of the current snapshot.
	byID      map[ID]*entry
	byBinding map[Binding]ID
}

// New returns an authorizer without ACLs.
func New(cfg Config) *Authorizer {
	a := &Authorizer{byID: make(map[ID]*entry), byBinding: make(map[Binding]ID)}
	s := &snapshot{allowIfNoACL: cfg.AllowEveryoneIfNoACLFound}
	for _, p := range cfg.SuperUsers {
		s.superUsers = append(s.superUsers, p.String())
	}
	for i := range s.types {
		s.types[i] = emptyIndex()
	}
	a.snap.Store(s)
	return a
}

// Add stores b under id, as replaying an AccessControlEntryRecord does. It refuses an id or a
// binding already present, as Kafka's AclCache does; bindings are otherwise taken as they
// come, valid or not, since the log is the truth.
func (a *Authorizer) Add(id ID, b Binding) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.checkNew(id, b); err != nil {
		return err
	}
	e := newEntry(id, b)
	a.byID[id] = e
	a.byBinding[b] = id
	a.snap.Store(a.snap.Load().withEntry(e))
	return nil
}

func (a *Authorizer) checkNew(id ID, b Binding) error {
	if _, ok := a.byID[id]; ok {
		return fmt.Errorf("add ACL %s %s: id %w", id, b, ErrDuplicate)
	}
	if other, ok := a.byBinding[b]; ok {
		return fmt.Errorf("add ACL %s %s: binding %w as %s", id, b, ErrDuplicate, other)
	}
	return nil
}

// Remove deletes the ACL stored under id, as replaying a RemoveAccessControlEntryRecord
// does, and returns its binding.
func (a *Authorizer) Remove(id ID) (Binding, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byID[id]
	if !ok {
		return Binding{}, fmt.Errorf("remove ACL %s: %w", id, ErrUnknownID)
	}
	delete(a.byID, id)
	delete(a.byBinding, e.b)
	a.snap.Store(a.snap.Load().withoutEntry(e))
	return e.b, nil
}

// Load replaces every ACL with acls at once, as loading a metadata snapshot does (Kafka's
// loadSnapshot). Adding one by one copies the index each time; Load builds it once. On an
// error nothing changes.
func (a *Authorizer) Load(acls []Entry) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	byID := make(map[ID]*entry, len(acls))
	byBinding := make(map[Binding]ID, len(acls))
	entries := make([]*entry, 0, len(acls))
	for _, x := range acls {
		if _, ok := byID[x.ID]; ok {
			return fmt.Errorf("load ACL %s %s: id %w", x.ID, x.Binding, ErrDuplicate)
		}
		if other, ok := byBinding[x.Binding]; ok {
			return fmt.Errorf("load ACL %s %s: binding %w as %s", x.ID, x.Binding, ErrDuplicate, other)
		}
		e := newEntry(x.ID, x.Binding)
		byID[x.ID] = e
		byBinding[x.Binding] = x.ID
		entries = append(entries, e)
	}
	a.byID, a.byBinding = byID, byBinding
	a.snap.Store(a.snap.Load().rebuilt(entries))
	return nil
}

// Find returns the id a binding identical to b is stored under. CreateAcls uses it to
// succeed without a new record when the ACL exists, as Kafka does.
func (a *Authorizer) Find(b Binding) (ID, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id, ok := a.byBinding[b]
	return id, ok
}

// Count returns the number of ACLs.
func (a *Authorizer) Count() int { return len(a.snap.Load().sorted) }

// Describe returns the bindings f matches, in the order Kafka's DescribeAcls lists them.
func (a *Authorizer) Describe(f Filter) []Binding {
	var out []Binding
	for _, e := range a.snap.Load().sorted {
		if f.Matches(e.b) {
			out = append(out, e.b)
		}
	}
	return out
}

// Match returns the ACLs f matches with their ids, for DeleteAcls: the broker writes one
// removal record per id (an ACL two filters match is removed once, and listed under both).
func (a *Authorizer) Match(f Filter) []Entry {
	var out []Entry
	for _, e := range a.snap.Load().sorted {
		if f.Matches(e.b) {
			out = append(out, Entry{ID: e.id, Binding: e.b})
		}
	}
	return out
}

// Authorize decides whether principal p, connected from host, may perform op on the resource
// of type rt named name, as Kafka's StandardAuthorizer does:
//
//   - a super user may do anything;
//   - the ACLs that apply are those of the resource's type whose pattern covers name: the
//     LITERAL one of that name, the LITERAL "*", and every PREFIXED one that is a prefix of
//     name;
//   - of those, an ACL matches when its principal is p or "User:*", its host is host or "*",
//     and its operation is op or ALL; an ALLOW ACL for READ, WRITE, DELETE or ALTER also
//     matches DESCRIBE and one for ALTER_CONFIGS also matches DESCRIBE_CONFIGS, while a DENY
//     ACL implies nothing;
//   - a matching DENY denies, whatever allows; otherwise a matching ALLOW allows;
//   - with no matching ACL the action is denied, unless no ACL applies to the resource at
//     all and AllowEveryoneIfNoACLFound is set.
//
// host is the client's address as Kafka prints it; see HostAddress. Authorize does not
// allocate.
func (a *Authorizer) Authorize(p Principal, host string, op Operation, rt ResourceType, name string) bool {
	s := a.snap.Load()
	if s.isSuperUser(p) {
		return true
	}
	if rt < 0 || rt >= numResourceTypes {
		// No ACL can name a type outside Kafka's enumeration.
		return s.allowIfNoACL
	}
	ti := s.types[rt]
	var m matcher
	m.check(ti.literal[name], p, host, op)
	if name != Wildcard {
		m.check(ti.literal[Wildcard], p, host, op)
	}
	for _, l := range ti.prefixLens {
		if l > len(name) || m.denied {
			break
		}
		m.check(ti.prefixed[name[:l]], p, host, op)
	}
	switch {
	case m.denied:
		return false
	case m.allowed:
		return true
	case m.found:
		return false
	}
	return s.allowIfNoACL
}

// matcher accumulates what the ACLs of a resource say about one action.
type matcher struct {
	found   bool // some ACL applies to the resource
	allowed bool // some ACL allows the action
	denied  bool // some ACL denies it
}

func (m *matcher) check(acls []*entry, p Principal, host string, op Operation) {
	for _, e := range acls {
		m.found = true
		if !e.matches(p, host, op) {
			continue
		}
		// Like Kafka, anything not ALLOW denies: a stored UNKNOWN permission cannot allow.
		if e.b.Permission != PermissionAllow {
			m.denied = true
			return
		}
		m.allowed = true
	}
}

// matches reports whether e's principal, host and operation match the action; the resource
// is the caller's to match. It is Kafka's StandardAuthorizerData.findResult.
func (e *entry) matches(p Principal, host string, op Operation) bool {
	if !e.principalOK || (e.principal != p && (e.principal.Type != UserType || e.principal.Name != Wildcard)) {
		return false
	}
	if e.b.Host != Wildcard && e.b.Host != host {
		return false
	}
	aclOp := e.b.Operation
	if aclOp == OpAll || aclOp == op {
		return true
	}
	if e.b.Permission != PermissionAllow {
		return false
	}
	switch op {
	case OpDescribe:
		return aclOp == OpRead || aclOp == OpWrite || aclOp == OpDelete || aclOp == OpAlter
	case OpDescribeConfigs:
		return aclOp == OpAlterConfigs
	}
	return false
}

// probeName is the resource name Kafka's authorizeByResourceType first authorizes, so that
// super users and allow.everyone.if.no.acl.found apply to it.
const probeName = "hardcode"

// AuthorizeByResourceType reports whether p, from host, may perform op on at least one
// resource of type rt, as the default Authorizer.authorizeByResourceType Kafka's
// StandardAuthorizer inherits decides it (used for IDEMPOTENT_WRITE and "may write to some
// topic" checks):
//
//   - if Authorize allows op on a resource named "hardcode", yes (super users; an ALLOW on
//     "*"; no ACL on such a name with allow.everyone.if.no.acl.found);
//   - otherwise, of the ACLs of type rt whose principal is p or "User:*", whose host is host
//     or "*" and whose operation is op or ALL exactly (no implied operations here): a DENY
//     on LITERAL "*" denies; an ALLOW on LITERAL "*" allows; an ALLOW on a name allows unless
//     a DENY PREFIXED is a prefix of that name, or, for a LITERAL ALLOW, a LITERAL DENY names
//     it too.
//
// It refuses, as Kafka does, rt ANY or UNKNOWN and op ANY or UNKNOWN.
func (a *Authorizer) AuthorizeByResourceType(p Principal, host string, op Operation, rt ResourceType) (bool, error) {
	if err := checkByResourceTypeArgs(op, rt); err != nil {
		return false, err
	}
	if a.Authorize(p, host, op, rt, probeName) {
		return true, nil
	}
	denyLiteral := make(map[string]struct{})
	denyPrefixed := make(map[string]struct{})
	var allowLiteral, allowPrefixed []string
	wildcardAllow := false
	for _, e := range a.snap.Load().typeRange(rt) {
		if !e.principalOK || (e.principal != p && e.b.Principal != WildcardPrincipal) {
			continue
		}
		if e.b.Host != host && e.b.Host != Wildcard {
			continue
		}
		if e.b.Operation != op && e.b.Operation != OpAll {
			continue
		}
		switch {
		case e.b.Permission == PermissionDeny && e.b.PatternType == PatternLiteral:
			if e.b.Name == Wildcard {
				return false, nil
			}
			denyLiteral[e.b.Name] = struct{}{}
		case e.b.Permission == PermissionDeny && e.b.PatternType == PatternPrefixed:
			denyPrefixed[e.b.Name] = struct{}{}
		case e.b.Permission == PermissionAllow && e.b.PatternType == PatternLiteral:
			if e.b.Name == Wildcard {
				wildcardAllow = true
				continue
			}
			allowLiteral = append(allowLiteral, e.b.Name)
		case e.b.Permission == PermissionAllow && e.b.PatternType == PatternPrefixed:
			allowPrefixed = append(allowPrefixed, e.b.Name)
		}
	}
	if wildcardAllow {
		return true, nil
	}
	for _, name := range allowLiteral {
		if _, ok := denyLiteral[name]; !ok && !prefixDenied(name, denyPrefixed) {
			return true, nil
		}
	}
	for _, name := range allowPrefixed {
		if !prefixDenied(name, denyPrefixed) {
			return true, nil
		}
	}
	return false, nil
}

// prefixDenied reports whether a non-empty prefix of name, name included, is in deny.
func prefixDenied(name string, deny map[string]struct{}) bool {
	for l := 1; l <= len(name); l++ {
		if _, ok := deny[name[:l]]; ok {
			return true
		}
	}
	return false
}

// ErrBadArgument reports an AuthorizeByResourceType call with a filter value or an unknown
// value where a concrete one is needed (Kafka throws IllegalArgumentException).
var ErrBadArgument = errors.New("bad argument")

func checkByResourceTypeArgs(op Operation, rt ResourceType) error {
	switch {
	case rt == ResourceAny:
		return fmt.Errorf("authorize by resource type %s: %w: Must specify a non-filter resource type for authorizeByResourceType", rt, ErrBadArgument)
	case !rt.known():
		return fmt.Errorf("authorize by resource type %d: %w: Unknown resource type", rt, ErrBadArgument)
	case op == OpAny:
		return fmt.Errorf("authorize by resource type, operation %s: %w: Must specify a non-filter operation type for authorizeByResourceType", op, ErrBadArgument)
	case !op.known():
		return fmt.Errorf("authorize by resource type, operation %d: %w: Unknown operation type", op, ErrBadArgument)
	}
	return nil
}
