package broker

// SaslAuthenticate (key 36), versions 0-2.
//
// Behavior: steps the SASL exchange that SaslHandshake began with the client's bytes and
// answers the server's. When the exchange completes the connection runs as User:<authorized
// id> and takes frames up to socket.request.max.bytes. A failed exchange answers
// SASL_AUTHENTICATION_FAILED with Kafka's message and closes the connection
// connection.failed.authentication.delay.ms later. A re-authentication (KIP-368) must end with
// the principal the connection had. Before a SaslHandshake the request closes the connection
// unanswered; out of an exchange (no SASL on the listener, or already authenticated) it gets
// ILLEGAL_SASL_STATE and the connection stays open, both as Kafka.
//
// Version notes: v1 adds session_lifetime_ms: with connections.max.reauth.ms set, the client
// must re-authenticate within it, or before its OAuth or delegation token expires if that is
// sooner (an expired session is closed at its next request). v2 is flexible.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/sasl"
)

var saslAuthenticateAPI = &api{key: kmsg.SASLAuthenticate, minVersion: 0, maxVersion: 2, keepsRequest: true, handle: handleSaslAuthenticate}

func handleSaslAuthenticate(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.SASLAuthenticateRequest)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	a := rc.cs.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.exchange == nil {
		if a.stage != saslDone {
			// Before a handshake Kafka's SaslServerAuthenticator takes only ApiVersions and
			// SaslHandshake, and closes the connection on anything else without an answer.
			rc.reject(errors.New("SaslAuthenticate before a SaslHandshake chose a mechanism"))
			return
		}
		// Out of an exchange (a listener without SASL, or an authenticated connection that is
		// not re-authenticating) Kafka's request handler answers and keeps the connection.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate request received after successful authentication")
		rc.respond(resp)
		return
	}
	reply, done, err := a.exchange.Step(req.SASLAuthBytes)
	if err == nil && done {
		err = a.complete(b, rc, resp)
	}
	if err != nil {
		a.exchange = nil
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(saslClientMessage(err, a.reauth))
		b.logger.Info("authentication failed", "listener", rc.cs.listenerName(), "remote", rc.cs.c.RemoteAddr().String(), "mechanism", a.mech, "err", err)
		b.metrics.authFailed()
		time.AfterFunc(b.cfg.Security.FailedAuthDelay, func() { rc.respondAndClose(resp) })
		return
	}
	resp.SASLAuthBytes = reply
	rc.respond(resp)
}

// complete records a finished exchange: the principal, the session's end, and the frame
// limit of an authenticated connection.
func (a *connAuth) complete(b *Broker, rc *reqCtx, resp *kmsg.SASLAuthenticateResponse) error {
	principal := "User:" + a.exchange.Principal()
	if a.reauth && principal != a.principal {
		return errors.New("Cannot change principals during re-authentication from " + a.principal + ": " + principal)
	}
	a.expires = time.Time{}
	if life := b.cfg.Security.MaxReauth; life > 0 && rc.hdr.APIVersion >= 1 {
		// A session lasts connections.max.reauth.ms, or until its OAuth or delegation token
		// expires if that is sooner, as Kafka's SaslServerAuthenticator.
		now := time.Now()
		if ob, ok := a.exchange.(*sasl.OAuthBearerServer); ok && ob.Token() != nil && !ob.Token().Expiry.IsZero() {
			life = min(life, max(ob.Token().Expiry.Sub(now), time.Millisecond))
		}
		if sc, ok := a.exchange.(*sasl.ScramServer); ok && sc.TokenAuthenticated() {
			life = min(life, max(sc.TokenExpiry().Sub(now), time.Millisecond))
		}
		resp.SessionLifetimeMillis = life.Milliseconds()
		a.expires = now.Add(life)
	}
	sc, isScram := a.exchange.(*sasl.ScramServer)
	a.byToken = isScram && sc.TokenAuthenticated()
	a.principal, a.authMech, a.stage, a.reauth, a.exchange = principal, a.mech, saslDone, false, nil
	a.open.Store(a.expires.IsZero())
	rc.cs.frames.SetMaxFrameBytes(int32(b.cfg.SocketRequestMax))
	b.metrics.authSucceeded()
	return nil
}
