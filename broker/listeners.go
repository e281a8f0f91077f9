package broker

import (
	"crypto/tls"
	"fmt"
	"strings"
)

// listenerSec is how one listener's connections are secured: its security protocol, the TLS
// settings of SSL and SASL_SSL listeners, and the SASL mechanisms of SASL ones.
type listenerSec struct {
	name     string
	protocol string
	// tls is nil on PLAINTEXT and SASL_PLAINTEXT listeners.
	tls *tls.Config
	// sasl is nil on PLAINTEXT and SSL listeners.
	sasl *saslListener
	// principalRules map client certificates' names to principals.
	principalRules principalRules
}

// authenticates reports whether connections must complete a SASL exchange before anything
// but ApiVersions and the SASL requests is served.
func (l *listenerSec) authenticates() bool { return l != nil && l.sasl != nil }

// listenerSecurity builds the security of every listener of the config; SCRAM credentials
// come from scram.
func (c *Config) listenerSecurity(scram *scramFromImage) (map[string]*listenerSec, error) {
	out := map[string]*listenerSec{}
	for _, l := range c.Listeners {
		proto, err := c.listenerProtocol(l.Name)
		if err != nil {
			return nil, err
		}
		sec := &listenerSec{name: l.Name, protocol: proto}
		if sec.principalRules, err = parsePrincipalRules(c.listenerValue(l.Name, "ssl.principal.mapping.rules")); err != nil {
			return nil, fmt.Errorf("listener %s: ssl.principal.mapping.rules: %w", l.Name, err)
		}
		if proto == protoSSL || proto == protoSaslSSL {
			if sec.tls, err = c.serverTLS(l.Name); err != nil {
				return nil, err
			}
		}
		if proto == protoSaslPlaintext || proto == protoSaslSSL {
			if sec.sasl, err = c.saslListener(l.Name, scram); err != nil {
				return nil, err
			}
		}
		out[l.Name] = sec
	}
	return out, nil
}

// listenerName is the name of the listener the connection came in on; "" for connections
// made inside the process without one.
func (cs *connState) listenerName() string {
	if cs == nil || cs.listener == nil {
		return ""
	}
	return cs.listener.name
}

// endpoints lists the advertised listeners, hosts resolved as registration needs them.
func (b *Broker) endpoints() []Listener {
	out := make([]Listener, len(b.cfg.AdvertisedListeners))
	for i, l := range b.cfg.AdvertisedListeners {
		out[i] = resolveAdvertisedHost(l)
	}
	return out
}

// advertisedListener is the advertised listener of the given name; ok is false when
// advertised.listeners leaves that listener out.
func (b *Broker) advertisedListener(name string) (Listener, bool) {
	for _, l := range b.endpoints() {
		if strings.EqualFold(l.Name, name) {
			return l, true
		}
	}
	return Listener{}, false
}

// checkAdvertised refuses advertised listeners that are not listeners, as Kafka.
func (c *Config) checkAdvertised() error {
	for _, a := range c.AdvertisedListeners {
		found := false
		for _, l := range c.Listeners {
			found = found || l.Name == a.Name
		}
		if !found {
			return fmt.Errorf("advertised.listeners has %s, which is not in listeners", a)
		}
	}
	return nil
}

// tlsPrincipal is the principal of a TLS client that presented a certificate: User: and its
// subject's distinguished name as ssl.principal.mapping.rules maps it (RFC 2253, as Kafka's
// DefaultKafkaPrincipalBuilder); "" without a certificate.
func (l *listenerSec) tlsPrincipal(st *tls.ConnectionState) string {
	if l == nil || st == nil || len(st.PeerCertificates) == 0 {
		return ""
	}
	dn := st.PeerCertificates[0].Subject.ToRDNSequence().String()
	return "User:" + l.principalRules.apply(dn)
}
