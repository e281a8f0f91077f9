package broker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/sasl"
)

// anonymous is the principal of a connection that has not authenticated (PLAINTEXT, or SSL
// without a client certificate), as Kafka's KafkaPrincipal.ANONYMOUS.
const anonymous = "User:ANONYMOUS"

// saslStage is where a connection of a SASL listener stands in its authentication.
type saslStage uint8

const (
	// saslAwaitHandshake: nothing but ApiVersions and SaslHandshake is served.
	saslAwaitHandshake saslStage = iota
	// saslAwaitAuthenticate: a mechanism is chosen; SaslAuthenticate steps its exchange.
	saslAwaitAuthenticate
	// saslDone: authenticated; every API is served until the session expires.
	saslDone
)

// connAuth is who a connection's requests run as and, on a SASL listener, how far its
// authentication has come. Requests of a connection run one at a time, but on different
// workers, so it is guarded by a mutex.
type connAuth struct {
	// open is set while every request may run without a look at the rest: no SASL exchange
	// pending and no session expiry. It keeps the per-request check lock-free.
	open atomic.Bool

	mu sync.Mutex
	// principal is "Type:name"; anonymous until authenticated.
	principal string
	// sasl is the listener's SASL settings; nil on a listener without SASL.
	sasl  *saslListener
	stage saslStage
	// mech and exchange are the mechanism and its server side while a client authenticates.
	mech     string
	exchange sasl.Server
	// authMech is the mechanism the connection authenticated with; a re-authentication must
	// use it again and end with the same principal (KIP-368).
	authMech string
	// byToken: the connection authenticated with a delegation token, so it may not use the
	// delegation token APIs (KIP-48).
	byToken bool
	// expires is when the authenticated session ends (KIP-368); zero: never.
	expires time.Time
	// reauth: an authenticated connection is authenticating again; its other requests are
	// still served meanwhile.
	reauth bool
}

// newConnAuth is the authentication state of a new connection of listener l, whose TLS peer,
// if any, was identified as tlsPrincipal ("" for none).
func newConnAuth(l *listenerSec, tlsPrincipal string) *connAuth {
	a := &connAuth{principal: anonymous, stage: saslDone}
	if tlsPrincipal != "" {
		a.principal = tlsPrincipal
	}
	if l != nil && l.sasl != nil {
		a.sasl, a.stage = l.sasl, saslAwaitHandshake
	}
	a.open.Store(a.stage == saslDone)
	return a
}

// authenticated reports whether the connection has completed a SASL exchange (or needs none).
func (a *connAuth) authenticated() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stage == saslDone
}

// who is the connection's principal now.
func (a *connAuth) who() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.principal
}

// admits reports whether the connection may run a request of API key now: before a SASL
// connection authenticates only ApiVersions and the SASL requests are served (anything else
// closes it, as Kafka's SaslServerAuthenticator), and an expired session is closed at its
// next request other than a re-authentication (KIP-368).
func (a *connAuth) admits(key int16, now time.Time) bool {
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		// The SASL requests answer ILLEGAL_SASL_STATE themselves where they do not belong.
		return true
	}
	if a.open.Load() {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stage != saslDone && !a.reauth {
		return false
	}
	return a.expires.IsZero() || now.Before(a.expires)
}
