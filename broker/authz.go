package broker

import (
	"errors"
	"net"
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

// requestAuthz is one request's principal and client host with the authorizer of the image in
// force when the request asked: the checks of one request (one per topic of a Produce, say)
// cost one identity lookup. The zero value, without an authorizer, allows everything, as Kafka
// without authorizer.class.name.
type requestAuthz struct {
	a    *acl.Authorizer // nil: no authorizer, every action allowed
	p    acl.Principal
	host string
}

// authorizer is the request's requestAuthz: the zero value when no authorizer is configured,
// so that a broker without ACLs pays one nil check.
func (rc *reqCtx) authorizer() requestAuthz {
	b := rc.cs.b
	if b.authz == nil {
		return requestAuthz{}
	}
	p, host := rc.identity()
	return requestAuthz{a: b.authz.of(b.meta.Image()), p: p, host: host}
}

// on reports whether actions are checked at all.
func (z requestAuthz) on() bool { return z.a != nil }

// may reports whether the principal may perform op on the resource named name of type rt (a
// LITERAL resource, as Kafka's AuthHelper.authorize asks).
func (z requestAuthz) may(op acl.Operation, rt acl.ResourceType, name string) bool {
	return z.a == nil || z.a.Authorize(z.p, z.host, op, rt, name)
}

// mayCluster reports whether the principal may perform op on the cluster.
func (z requestAuthz) mayCluster(op acl.Operation) bool {
	return z.may(op, acl.ResourceCluster, acl.ClusterName)
}

// mayAny reports whether the principal may perform op on some resource of type rt, as Kafka's
// authorizeByResourceType (an idempotent producer needs WRITE on some topic).
func (z requestAuthz) mayAny(op acl.Operation, rt acl.ResourceType) bool {
	if z.a == nil {
		return true
	}
	ok, err := z.a.AuthorizeByResourceType(z.p, z.host, op, rt)
	return err == nil && ok
}

// operations is the authorized-operations bit set of the resource (bit n set for the operation
// of code n) over the operations Kafka's AclEntry.supportedOperations lists for its type, as
// AuthHelper.authorizedOperations computes it for Metadata, DescribeCluster, DescribeGroups and
// the others: every supported operation without an authorizer.
func (z requestAuthz) operations(rt acl.ResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOperations(rt) {
		if z.may(op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// supportedOperations are the operations an ACL may grant on a resource of type rt, as Kafka
// 4.1's AclEntry.supportedOperations lists them.
func supportedOperations(rt acl.ResourceType) []acl.Operation {
	switch rt {
	case acl.ResourceTopic:
		return []acl.Operation{acl.OpRead, acl.OpWrite, acl.OpCreate, acl.OpDescribe, acl.OpDelete, acl.OpAlter, acl.OpDescribeConfigs, acl.OpAlterConfigs}
	case acl.ResourceGroup:
		return []acl.Operation{acl.OpRead, acl.OpDescribe, acl.OpDelete, acl.OpDescribeConfigs, acl.OpAlterConfigs}
	case acl.ResourceCluster:
		return []acl.Operation{acl.OpCreate, acl.OpClusterAction, acl.OpDescribeConfigs, acl.OpAlterConfigs, acl.OpIdempotentWrite, acl.OpAlter, acl.OpDescribe}
	case acl.ResourceTransactionalID:
		return []acl.Operation{acl.OpDescribe, acl.OpWrite, acl.OpTwoPhaseCommit}
	case acl.ResourceDelegationToken:
		return []acl.Operation{acl.OpDescribe}
	case acl.ResourceUser:
		return []acl.Operation{acl.OpCreateTokens, acl.OpDescribeTokens}
	}
	return nil
}

// topicNames decides op on each distinct topic name once, as Kafka's filterByAuthorized: a
// request naming a topic in several places (its partitions) asks the authorizer once. The zero
// value allows everything without a map.
type topicNames struct {
	z       requestAuthz
	op      acl.Operation
	decided map[string]bool
}

// topicChecks is a topicNames for op.
func (z requestAuthz) topicChecks(op acl.Operation) topicNames {
	return topicNames{z: z, op: op}
}

// may reports whether op is allowed on topic name.
func (t *topicNames) may(name string) bool {
	if t.z.a == nil {
		return true
	}
	if ok, seen := t.decided[name]; seen {
		return ok
	}
	if t.decided == nil {
		t.decided = make(map[string]bool)
	}
	ok := t.z.may(t.op, acl.ResourceTopic, name)
	t.decided[name] = ok
	return ok
}

// The messages of Kafka's authorization errors (Errors' defaults), which Kafka sends where a
// response carries one (DescribeConfigs, DescribeProducers, the config alterations).
const (
	topicAuthzMessage   = "Topic authorization failed."
	groupAuthzMessage   = "Group authorization failed."
	clusterAuthzMessage = "Cluster authorization failed."
	txnIDAuthzMessage   = "Transactional Id authorization failed."
)

// configRefusal is the error of a config resource (DescribeConfigs, AlterConfigs,
// IncrementalAlterConfigs) the principal may not perform op (DESCRIBE_CONFIGS or ALTER_CONFIGS)
// on, as Kafka's ConfigHelper and ControllerApis decide it: brokers, broker loggers and client
// metrics need op on the cluster, a topic or a group op on itself. Nil when allowed, and for a
// resource type Kafka does not know, which the API refuses on its own.
func (z requestAuthz) configRefusal(op acl.Operation, rt kmsg.ConfigResourceType, name string) *kerr.Error {
	switch rt {
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if !z.mayCluster(op) {
			return kerr.ClusterAuthorizationFailed
		}
	case kmsg.ConfigResourceTypeTopic:
		if !z.may(op, acl.ResourceTopic, name) {
			return kerr.TopicAuthorizationFailed
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !z.may(op, acl.ResourceGroup, name) {
			return kerr.GroupAuthorizationFailed
		}
	}
	return nil
}

// authzMessage is Kafka's default message of an authorization error code.
func authzMessage(code *kerr.Error) string {
	switch code {
	case kerr.TopicAuthorizationFailed:
		return topicAuthzMessage
	case kerr.GroupAuthorizationFailed:
		return groupAuthzMessage
	case kerr.ClusterAuthorizationFailed:
		return clusterAuthzMessage
	case kerr.TransactionalIDAuthorizationFailed:
		return txnIDAuthzMessage
	}
	return code.Description
}

// allowed reports whether the request's principal may perform op on the resource; always true
// without an authorizer.
func (rc *reqCtx) allowed(op acl.Operation, rt acl.ResourceType, name string) bool {
	return rc.authorizer().may(op, rt, name)
}

// allowedCluster reports whether the principal may perform op on the cluster.
func (rc *reqCtx) allowedCluster(op acl.Operation) bool {
	return rc.authorizer().mayCluster(op)
}

// clusterRefusal is the message of the CLUSTER_AUTHORIZATION_FAILED a request without op on the
// cluster gets where Kafka throws its ClusterAuthorizationException ("Request ... needs ALTER
// permission."), naming the API instead of Kafka's dump of the request.
func (rc *reqCtx) clusterRefusal(op acl.Operation) string {
	return "Request " + kmsg.NameForKey(rc.hdr.APIKey) + " needs " + op.String() + " permission."
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
	if ip, ok := peerAddr(cs); ok {
		return acl.HostAddress(ip)
	}
	addr := cs.c.RemoteAddr()
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}
