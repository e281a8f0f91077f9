package broker

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

// authzState is the authorizer built from one image's security state.
type authzState struct {
	sec   *meta.Security
	authz *acl.Authorizer
}

// authzCache rebuilds the authorizer when the metadata image's ACLs change: it is asked at
// every check, so a request that follows a CreateAcls on this broker already sees its ACLs.
type authzCache struct {
	cfg   acl.Config
	state atomic.Pointer[authzState]
	mu    sync.Mutex // serialises rebuilds
}

// newAuthzCache is the authorizer of authorizer.class.name, or nil when none is configured
// (every request is allowed, as Kafka without an authorizer).
func newAuthzCache(cfg SecurityConfig) (*authzCache, error) {
	if cfg.Authorizer == "" {
		return nil, nil
	}
	supers, err := acl.ParseSuperUsers(cfg.SuperUsers)
	if err != nil {
		return nil, err
	}
	return &authzCache{cfg: acl.Config{SuperUsers: supers, AllowEveryoneIfNoACLFound: cfg.AllowEveryoneIfNoACL}}, nil
}

// of is the authorizer for the ACLs of im.
func (c *authzCache) of(im *meta.Image) *acl.Authorizer {
	if st := c.state.Load(); st != nil && st.sec == im.Security {
		return st.authz
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.state.Load(); st != nil && st.sec == im.Security {
		return st.authz
	}
	a := acl.New(c.cfg)
	if im.Security != nil {
		entries := make([]acl.Entry, 0, len(im.Security.ACLs))
		for id, b := range im.Security.ACLs {
			entries = append(entries, acl.Entry{ID: acl.ID(id), Binding: bindingOf(b)})
		}
		// Records were validated when created; a record Load refuses (a duplicate) leaves
		// the others in force.
		if err := a.Load(entries); err != nil {
			for _, e := range entries {
				_ = a.Add(e.ID, e.Binding)
			}
		}
	}
	c.state.Store(&authzState{sec: im.Security, authz: a})
	return a
}

// bindingOf is the authorizer's form of an ACL record.
func bindingOf(a meta.ACL) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceType(a.ResourceType), Name: a.ResourceName, PatternType: acl.PatternType(a.PatternType),
		Principal: a.Principal, Host: a.Host, Operation: acl.Operation(a.Operation), Permission: acl.Permission(a.Permission)}
}

// aclOf is the record form of a binding.
func aclOf(b acl.Binding) *meta.ACL {
	return &meta.ACL{ResourceType: int8(b.ResourceType), ResourceName: b.Name, PatternType: int8(b.PatternType),
		Principal: b.Principal, Host: b.Host, Operation: int8(b.Operation), Permission: int8(b.Permission)}
}

// authorizing reports whether requests are checked against ACLs.
func (b *Broker) authorizing() bool { return b.authz != nil }

// allowed reports whether the request's principal may perform op on the resource; always true
// without an authorizer.
func (rc *reqCtx) allowed(op acl.Operation, rt acl.ResourceType, name string) bool {
	b := rc.cs.b
	if b.authz == nil {
		return true
	}
	p, host := rc.identity()
	return b.authz.of(b.meta.Image()).Authorize(p, host, op, rt, name)
}

// allowedCluster reports whether the principal may perform op on the cluster.
func (rc *reqCtx) allowedCluster(op acl.Operation) bool {
	return rc.allowed(op, acl.ResourceCluster, acl.ClusterName)
}

// allowedAnyOf reports whether the principal may perform op on some resource of type rt, as
// Kafka's authorizeByResourceType (an idempotent producer needs WRITE on some topic).
func (rc *reqCtx) allowedAnyOf(op acl.Operation, rt acl.ResourceType) bool {
	b := rc.cs.b
	if b.authz == nil {
		return true
	}
	p, host := rc.identity()
	ok, err := b.authz.of(b.meta.Image()).AuthorizeByResourceType(p, host, op, rt)
	return err == nil && ok
}

// aclAPIRefusal is why an ACL API may not run: no authorizer (SECURITY_DISABLED), or no op on
// the cluster for the principal; nil when it may.
func (rc *reqCtx) aclAPIRefusal(op acl.Operation) (*kerr.Error, *string) {
	switch {
	case !rc.cs.b.authorizing():
		return kerr.SecurityDisabled, kmsg.StringPtr("No Authorizer is configured.")
	case !rc.allowedCluster(op):
		return kerr.ClusterAuthorizationFailed, nil
	}
	return nil, nil
}

// aclRefusal returns the first of errs that is an *acl.Error of scope, or nil.
func aclRefusal(errs []error, scope acl.Scope) *acl.Error {
	for _, err := range errs {
		var ae *acl.Error
		if errors.As(err, &ae) && ae.Scope == scope {
			return ae
		}
	}
	return nil
}

// identity is the request's principal and client host as ACLs name them.
func (rc *reqCtx) identity() (acl.Principal, string) {
	p, err := acl.ParsePrincipal(rc.cs.auth.who())
	if err != nil {
		p = acl.Principal{Type: "User", Name: "ANONYMOUS"}
	}
	return p, clientHost(rc.cs)
}

// clientHost is the connection's peer address as Kafka prints an InetAddress.
func clientHost(cs *connState) string {
	addr := cs.c.RemoteAddr()
	if ta, ok := addr.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return acl.HostAddress(ip)
		}
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}
