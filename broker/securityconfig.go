package broker

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// SecurityConfig is how the listeners authenticate clients and how requests are authorized:
// Kafka's listener.security.protocol.map, ssl.*, sasl.* and authorizer keys. Every ssl.* and
// sasl.* key may be set for one listener alone as listener.name.<listener>.<key> (the
// listener name in lower case, as Kafka), kept in ListenerProps.
type SecurityConfig struct {
	// ProtocolMap (listener.security.protocol.map) maps listener names to security protocols.
	ProtocolMap map[string]string
	// InterBrokerListener (inter.broker.listener.name) is the listener other brokers reach this
	// one on; empty: the listener named after security.inter.broker.protocol.
	InterBrokerListener string
	// InterBrokerProtocol (security.inter.broker.protocol) names the inter-broker listener when
	// InterBrokerListener is empty.
	InterBrokerProtocol string

	SaslMechanisms           []string // sasl.enabled.mechanisms
	InterBrokerSaslMechanism string   // sasl.mechanism.inter.broker.protocol
	// SaslMaxReceive (sasl.server.max.receive.size) caps the frames a connection may send before
	// it has authenticated, so a peer cannot make the broker allocate on its say-so.
	SaslMaxReceive int32
	// MaxReauth (connections.max.reauth.ms, KIP-368): 0 keeps an authenticated session for the
	// connection's life; otherwise a client must re-authenticate within it or be disconnected.
	MaxReauth time.Duration
	// FailedAuthDelay (connection.failed.authentication.delay.ms) delays closing a connection
	// whose authentication failed, slowing a password-guessing client down.
	FailedAuthDelay time.Duration
	// AuthTimeout (connections.authentication.timeout.ms, ringbroker's own) closes a
	// connection of a SASL listener that has not authenticated that long after it connected,
	// so a peer trickling bytes (slow loris) cannot hold a connection before authenticating.
	AuthTimeout time.Duration

	SSLKeystoreType          string // ssl.keystore.type
	SSLKeystoreLocation      string // ssl.keystore.location
	SSLKeystorePassword      string // ssl.keystore.password
	SSLKeyPassword           string // ssl.key.password
	SSLKeystoreCertChain     string // ssl.keystore.certificate.chain
	SSLKeystoreKey           string // ssl.keystore.key
	SSLTruststoreType        string // ssl.truststore.type
	SSLTruststoreLocation    string // ssl.truststore.location
	SSLTruststorePassword    string // ssl.truststore.password
	SSLTruststoreCerts       string // ssl.truststore.certificates
	SSLClientAuth            string // ssl.client.auth: none, requested or required
	SSLEnabledProtocols      []string
	SSLProtocol              string   // ssl.protocol
	SSLCipherSuites          []string // ssl.cipher.suites; empty: Go's defaults
	SSLPrincipalMappingRules string   // ssl.principal.mapping.rules
	// SSLEndpointIdentification (ssl.endpoint.identification.algorithm) is a client setting
	// that applies to a broker's TLS connections to other brokers: https checks the peer's
	// host name.
	SSLEndpointIdentification string

	// Authorizer (authorizer.class.name): empty allows every request, as Kafka without an
	// authorizer; Kafka's StandardAuthorizer enforces ACLs.
	Authorizer           string
	SuperUsers           string // super.users: principals separated by ';'
	AllowEveryoneIfNoACL bool   // allow.everyone.if.no.acl.found

	// The OAUTHBEARER validation settings (sasl.oauthbearer.*): signed tokens are checked
	// against the JWKS at OAuthJWKSURL when it is set.
	OAuthJWKSURL     string
	OAuthAudience    []string
	OAuthIssuer      string
	OAuthSubClaim    string
	OAuthScopeClaim  string
	OAuthClockSkew   time.Duration
	OAuthJWKSRefresh time.Duration

	// The delegation token settings (delegation.token.*, KIP-48): TokenSecret keys the
	// tokens' HMACs, and tokens are disabled without it.
	TokenSecret        string
	TokenMaxLifetime   time.Duration
	TokenExpiryTime    time.Duration
	TokenCheckInterval time.Duration

	// ListenerProps holds the listener.name.<listener>.<key> settings by their full key.
	ListenerProps map[string]string
}

// The security protocols of Kafka's SecurityProtocol.
const (
	protoPlaintext     = "PLAINTEXT"
	protoSSL           = "SSL"
	protoSaslPlaintext = "SASL_PLAINTEXT"
	protoSaslSSL       = "SASL_SSL"
)

// listenerPropPrefix starts the keys that set a security key for one listener alone.
const listenerPropPrefix = "listener.name."

// securityConfigDefs are the keys of SecurityConfig.
var securityConfigDefs = []brokerConfigDef{
	stringDef("listener.security.protocol.map", "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
		func(c *Config) *string { return &c.protocolMapText }, checkProtocolMap,
		"LISTENER:PROTOCOL,... : the security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) of each listener name; an unmapped controller listener is PLAINTEXT, and the controller listener must be PLAINTEXT (ringbroker refuses to start otherwise)"),
	stringDef("inter.broker.listener.name", "", func(c *Config) *string { return &c.Security.InterBrokerListener }, nil,
		"the listener other brokers connect to; empty: the one named after security.inter.broker.protocol, else the first client listener"),
	stringDef("security.inter.broker.protocol", protoPlaintext, func(c *Config) *string { return &c.Security.InterBrokerProtocol }, checkProtocol,
		"names the inter-broker listener when inter.broker.listener.name is not set"),
	listDef("sasl.enabled.mechanisms", "GSSAPI", func(c *Config) *[]string { return &c.Security.SaslMechanisms }, nil,
		"the SASL mechanisms SASL listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (GSSAPI, Kafka's default, is not served: set this on SASL listeners)"),
	stringDef("sasl.mechanism.inter.broker.protocol", "GSSAPI", func(c *Config) *string { return &c.Security.InterBrokerSaslMechanism }, nil,
		"the SASL mechanism of inter-broker connections on a SASL inter-broker listener"),
	intDef("sasl.server.max.receive.size", kindInt, "524288", func(c *Config) *int32 { return &c.Security.SaslMaxReceive }, atLeast(1),
		"the largest frame a connection may send before it has authenticated"),
	msDef("connections.max.reauth.ms", kindLong, "0", func(c *Config) *time.Duration { return &c.Security.MaxReauth }, atLeast(0),
		"the longest an authenticated SASL session lasts before the client must re-authenticate (KIP-368); 0: the connection's life"),
	msDef("connection.failed.authentication.delay.ms", kindInt, "100", func(c *Config) *time.Duration { return &c.Security.FailedAuthDelay }, atLeast(0),
		"how long a connection whose authentication failed is held before it is closed"),
	msDef("connections.authentication.timeout.ms", kindLong, "10000", func(c *Config) *time.Duration { return &c.Security.AuthTimeout }, atLeast(1),
		"ringbroker's own: a connection of a SASL listener that has not authenticated this long after connecting is closed"),
	stringDef("ssl.keystore.type", "JKS", func(c *Config) *string { return &c.Security.SSLKeystoreType }, nil,
		"the key store format; ringbroker reads PEM (JKS and PKCS12 are refused at start)"),
	stringDef("ssl.keystore.location", "", func(c *Config) *string { return &c.Security.SSLKeystoreLocation }, nil,
		"a PEM file with the listener's private key and certificate chain"),
	stringDef("ssl.keystore.password", "", func(c *Config) *string { return &c.Security.SSLKeystorePassword }, nil,
		"the key store password (not used for PEM files)").secret(),
	stringDef("ssl.key.password", "", func(c *Config) *string { return &c.Security.SSLKeyPassword }, nil,
		"the password of an encrypted PKCS#8 private key").secret(),
	stringDef("ssl.keystore.certificate.chain", "", func(c *Config) *string { return &c.Security.SSLKeystoreCertChain }, nil,
		"the certificate chain in PEM, instead of ssl.keystore.location").secret(),
	stringDef("ssl.keystore.key", "", func(c *Config) *string { return &c.Security.SSLKeystoreKey }, nil,
		"the private key in PEM, instead of ssl.keystore.location").secret(),
	stringDef("ssl.truststore.type", "JKS", func(c *Config) *string { return &c.Security.SSLTruststoreType }, nil,
		"the trust store format; ringbroker reads PEM"),
	stringDef("ssl.truststore.location", "", func(c *Config) *string { return &c.Security.SSLTruststoreLocation }, nil,
		"a PEM file of the CA certificates client certificates are checked against"),
	stringDef("ssl.truststore.password", "", func(c *Config) *string { return &c.Security.SSLTruststorePassword }, nil,
		"the trust store password (not used for PEM files)").secret(),
	stringDef("ssl.truststore.certificates", "", func(c *Config) *string { return &c.Security.SSLTruststoreCerts }, nil,
		"the trusted CA certificates in PEM, instead of ssl.truststore.location").secret(),
	stringDef("ssl.client.auth", "none", func(c *Config) *string { return &c.Security.SSLClientAuth }, checkClientAuth,
		"whether TLS clients must present a certificate: required, requested or none"),
	listDef("ssl.enabled.protocols", "TLSv1.2,TLSv1.3", func(c *Config) *[]string { return &c.Security.SSLEnabledProtocols }, nil,
		"the TLS versions served"),
	stringDef("ssl.protocol", "TLSv1.3", func(c *Config) *string { return &c.Security.SSLProtocol }, nil,
		"the TLS protocol of the SSL context (Go negotiates among ssl.enabled.protocols)"),
	listDef("ssl.cipher.suites", "", func(c *Config) *[]string { return &c.Security.SSLCipherSuites }, nil,
		"TLS 1.2 cipher suites by their IANA names; empty: Go's defaults (TLS 1.3 suites are not configurable)"),
	stringDef("ssl.principal.mapping.rules", "DEFAULT", func(c *Config) *string { return &c.Security.SSLPrincipalMappingRules }, checkPrincipalRules,
		"how a client certificate's distinguished name becomes a principal name: DEFAULT (the whole DN) or RULE:pattern/replacement/[LU],..."),
	stringDef("ssl.endpoint.identification.algorithm", "https", func(c *Config) *string { return &c.Security.SSLEndpointIdentification }, nil,
		"https: a broker's TLS connections to other brokers check that the peer's certificate names the host dialed; empty: only that it is trusted"),
	stringDef("authorizer.class.name", "", func(c *Config) *string { return &c.Security.Authorizer }, checkAuthorizer,
		"empty: no authorization; org.apache.kafka.metadata.authorizer.StandardAuthorizer: Kafka's ACLs"),
	stringDef("super.users", "", func(c *Config) *string { return &c.Security.SuperUsers }, nil,
		"principals allowed everything, separated by ';' (User:admin;User:ops)"),
	boolDef("allow.everyone.if.no.acl.found", "false", func(c *Config) *bool { return &c.Security.AllowEveryoneIfNoACL },
		"whether a resource without any ACL is open to everyone"),
}

// standardAuthorizer is the authorizer.class.name of Kafka's KRaft ACL authorizer.
const standardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

func checkAuthorizer(val string) error {
	switch val {
	case "", standardAuthorizer, "kafka.security.authorizer.AclAuthorizer":
		return nil
	}
	return fmt.Errorf("ringbroker has only Kafka's StandardAuthorizer (%s)", standardAuthorizer)
}

func checkPrincipalRules(val string) error {
	_, err := parsePrincipalRules(val)
	return err
}

func checkClientAuth(val string) error {
	switch strings.ToLower(val) {
	case "none", "requested", "required":
		return nil
	}
	return fmt.Errorf("want none, requested or required")
}

func checkProtocol(val string) error {
	switch strings.ToUpper(val) {
	case protoPlaintext, protoSSL, protoSaslPlaintext, protoSaslSSL:
		return nil
	}
	return fmt.Errorf("unknown security protocol %q; want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", val)
}

func checkProtocolMap(val string) error {
	_, err := parseProtocolMap(val)
	return err
}

// parseProtocolMap parses listener.security.protocol.map.
func parseProtocolMap(val string) (map[string]string, error) {
	m := map[string]string{}
	for _, item := range splitList(val) {
		name, proto, ok := strings.Cut(item, ":")
		name, proto = strings.TrimSpace(name), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("entry %q; want LISTENER:PROTOCOL", item)
		}
		if err := checkProtocol(proto); err != nil {
			return nil, fmt.Errorf("listener %s: %w", name, err)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("listener %s is mapped twice", name)
		}
		m[name] = proto
	}
	return m, nil
}

// setListenerProp keeps a listener.name.<listener>.<key> setting. The key after the listener
// must be a security key (or <mechanism>.sasl.jaas.config), as Kafka takes only those per
// listener here.
func (c *Config) setListenerProp(key, val string) error {
	rest := strings.TrimPrefix(key, listenerPropPrefix)
	listener, sub, ok := strings.Cut(rest, ".")
	if !ok || listener == "" || sub == "" {
		return fmt.Errorf("want %s<listener>.<key>", listenerPropPrefix)
	}
	if !listenerScopedKey(sub) {
		return fmt.Errorf("%s cannot be set per listener; ringbroker takes ssl.*, sasl.*, connections.max.reauth.ms and <mechanism>.sasl.jaas.config there", sub)
	}
	if c.Security.ListenerProps == nil {
		c.Security.ListenerProps = map[string]string{}
	}
	c.Security.ListenerProps[listenerPropPrefix+strings.ToLower(listener)+"."+sub] = val
	return nil
}

// listenerScopedKey reports whether key may follow listener.name.<listener>.
func listenerScopedKey(key string) bool {
	switch {
	case strings.HasSuffix(key, ".sasl.jaas.config"),
		strings.HasPrefix(key, "ssl."), strings.HasPrefix(key, "sasl."),
		key == "connections.max.reauth.ms", key == "max.connections", key == "max.connection.creation.rate":
		return true
	}
	return false
}

// listenerValue is key's value for listener: its listener.name.<listener>.<key> setting, or
// the broker-wide value.
func (c *Config) listenerValue(listener, key string) string {
	if v, ok := c.Security.ListenerProps[listenerPropPrefix+strings.ToLower(listener)+"."+key]; ok {
		return v
	}
	if d, ok := lookupBrokerConfig(key); ok && d.get != nil {
		return d.get(c)
	}
	return ""
}

// listenerProtocol is the security protocol of the listener named name.
func (c *Config) listenerProtocol(name string) (string, error) {
	m, err := parseProtocolMap(c.protocolMapText)
	if err != nil {
		return "", err
	}
	if p, ok := m[name]; ok {
		return p, nil
	}
	for _, ctrl := range c.ControllerListenerNames {
		if ctrl == name {
			return protoPlaintext, nil
		}
	}
	known := make([]string, 0, len(m))
	for k := range m {
		known = append(known, k)
	}
	sort.Strings(known)
	return "", fmt.Errorf("no security protocol for listener %s: add it to listener.security.protocol.map (it maps %s)", name, strings.Join(known, ", "))
}

// interBrokerListener is the name of the listener other brokers use.
func (c *Config) interBrokerListener() (string, error) {
	if n := c.Security.InterBrokerListener; n != "" {
		for _, l := range c.Listeners {
			if l.Name == n {
				return n, nil
			}
		}
		return "", fmt.Errorf("inter.broker.listener.name=%s is not one of the listeners", n)
	}
	for _, l := range c.Listeners {
		if p, err := c.listenerProtocol(l.Name); err == nil && p == strings.ToUpper(c.Security.InterBrokerProtocol) {
			return l.Name, nil
		}
	}
	return c.Listeners[0].Name, nil
}
