package broker

// SaslHandshake (key 17), version 1, advertised from 0.
//
// Behavior: on a SASL listener, picks the mechanism the client's SaslAuthenticate requests
// then step through (connauth.go); the response lists the listener's enabled mechanisms. A
// mechanism not enabled gets UNSUPPORTED_SASL_MECHANISM and the connection is closed, as
// Kafka's SaslServerAuthenticator. On an authenticated connection a handshake starts a
// re-authentication (KIP-368) when sessions expire (connections.max.reauth.ms > 0), with the
// mechanism used first; otherwise, and on listeners without SASL, ILLEGAL_SASL_STATE.
//
// Version notes: v0 (raw SASL tokens after the handshake, for clients before Kafka 1.0) is not
// served: a v0 request closes the connection. Every client since sends v1 and
// SaslAuthenticate, but ApiVersions lists v0-1 as Apache Kafka 4.x does, because librdkafka
// enables SASL handshakes only when the range includes v0 (its RD_KAFKA_FEATURE_SASL_HANDSHAKE);
// without it kcat fails with "SASL Handshake not supported by broker".

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var saslHandshakeAPI = &api{key: kmsg.SASLHandshake, minVersion: 1, advertiseFromZero: true, maxVersion: 1, keepsRequest: true, handle: handleSaslHandshake}

func handleSaslHandshake(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.SASLHandshakeRequest)
	resp := kmsg.NewPtrSASLHandshakeResponse()
	a := rc.cs.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sasl == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		rc.respond(resp)
		return
	}
	resp.SupportedMechanisms = a.sasl.mechanisms
	reauth := false
	switch a.stage {
	case saslAwaitAuthenticate:
		// A second handshake before authenticating breaks the exchange.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		rc.respondAndClose(resp)
		return
	case saslDone:
		if a.expires.IsZero() {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			rc.respond(resp)
			return
		}
		reauth = true
	}
	if !slices.Contains(a.sasl.mechanisms, req.Mechanism) || (reauth && req.Mechanism != a.authMech) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		rc.respondAndClose(resp)
		return
	}
	exchange, err := a.sasl.newServer(req.Mechanism)
	if err != nil {
		b.logger.Warn("SASL mechanism unavailable", "mechanism", req.Mechanism, "err", err)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		rc.respondAndClose(resp)
		return
	}
	a.mech, a.exchange, a.reauth = req.Mechanism, exchange, reauth
	if !reauth {
		a.stage = saslAwaitAuthenticate
	}
	rc.respond(resp)
}
