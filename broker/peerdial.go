package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"ringbroker/auth/sasl"
)

// peerDialer opens this broker's connections to other brokers (replica fetchers, transaction
// markers and verifications) secured as the inter-broker listener is, since that listener is
// where the other brokers take them: as Kafka's brokers, a TLS client handshake on SSL and
// SASL_SSL with the listener's trust store (and its key store when the peer asks for a client
// certificate), then on SASL_PLAINTEXT and SASL_SSL a SASL exchange with
// sasl.mechanism.inter.broker.protocol and the username and password of the listener's JAAS
// config for that mechanism. A nil *peerDialer connects in plaintext.
type peerDialer struct {
	// self is this broker's node id, in the client id of the SASL requests.
	self int32
	// tls is the client side of an SSL or SASL_SSL listener; nil on the others. Each dial uses a
	// copy naming the peer's host when verifyHost.
	tls *tls.Config
	// verifyHost: ssl.endpoint.identification.algorithm=https, the peer's certificate must name
	// the host it was dialed at.
	verifyHost bool
	// mechanism authenticates on SASL_PLAINTEXT and SASL_SSL; nil on the others.
	mechanism kgosasl.Mechanism
	logger    *slog.Logger
}

// newPeerDialer builds the dialer of connections to the brokers' listener named listener from
// its settings, refusing at start what could not authenticate: a mechanism ringbroker cannot
// speak as a client (GSSAPI, OAUTHBEARER), one the listener does not enable, or a JAAS config
// without this broker's username and password.
func newPeerDialer(c *Config, listener string, logger *slog.Logger) (*peerDialer, error) {
	proto, err := c.listenerProtocol(listener)
	if err != nil {
		return nil, err
	}
	d := &peerDialer{self: c.NodeID, logger: logger}
	if proto == protoSSL || proto == protoSaslSSL {
		if d.tls, d.verifyHost, err = c.peerTLS(listener); err != nil {
			return nil, fmt.Errorf("inter-broker listener %s: %w", listener, err)
		}
	}
	if proto == protoSaslPlaintext || proto == protoSaslSSL {
		if d.mechanism, err = c.peerMechanism(listener); err != nil {
			return nil, fmt.Errorf("inter-broker listener %s: %w", listener, err)
		}
	}
	return d, nil
}

// peerTLS is the TLS client side of listener: its trust store (none: the system's roots), its
// key store as the client certificate, its protocols and cipher suites, and whether the peer's
// host name is checked (ssl.endpoint.identification.algorithm).
func (c *Config) peerTLS(listener string) (*tls.Config, bool, error) {
	get := func(key string) string { return c.listenerValue(listener, key) }
	roots, err := loadTruststore(get)
	if err != nil {
		return nil, false, err
	}
	cert, err := loadKeystore(get)
	if err != nil {
		return nil, false, err
	}
	// The key store's certificate goes to peers whose ssl.client.auth asks for one, as Kafka's
	// brokers present theirs.
	tc := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}
	if tc.MinVersion, tc.MaxVersion, err = tlsVersions(splitList(get("ssl.enabled.protocols"))); err != nil {
		return nil, false, fmt.Errorf("ssl.enabled.protocols: %w", err)
	}
	if suites := splitList(get("ssl.cipher.suites")); len(suites) > 0 {
		if tc.CipherSuites, err = cipherSuites(suites); err != nil {
			return nil, false, fmt.Errorf("ssl.cipher.suites: %w", err)
		}
	}
	switch alg := get("ssl.endpoint.identification.algorithm"); strings.ToLower(alg) {
	case "https":
		return tc, true, nil
	case "":
		// The chain is still checked against the trust store, only not the host name, as
		// Kafka's trust manager does with the algorithm empty.
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = func(st tls.ConnectionState) error { return verifyChain(st, roots) }
		return tc, false, nil
	default:
		return nil, false, fmt.Errorf("ssl.endpoint.identification.algorithm=%s: want https or empty", alg)
	}
}

// verifyChain checks the peer's certificate chain against roots (nil: the system's), whatever
// names it holds.
func verifyChain(st tls.ConnectionState, roots *x509.CertPool) error {
	if len(st.PeerCertificates) == 0 {
		return errors.New("the peer presented no certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
	for _, ic := range st.PeerCertificates[1:] {
		opts.Intermediates.AddCert(ic)
	}
	_, err := st.PeerCertificates[0].Verify(opts)
	return err
}

// peerMechanism is the SASL client of sasl.mechanism.inter.broker.protocol with the username
// and password options of listener.name.<listener>.<mechanism>.sasl.jaas.config, as Kafka's
// PlainLoginModule and ScramLoginModule take a broker's own credentials.
func (c *Config) peerMechanism(listener string) (kgosasl.Mechanism, error) {
	mech := c.Security.InterBrokerSaslMechanism
	switch mech {
	case sasl.MechanismPlain, sasl.MechanismScramSHA256, sasl.MechanismScramSHA512:
	default:
		return nil, fmt.Errorf("sasl.mechanism.inter.broker.protocol=%s: ringbroker's brokers authenticate to each other with %s, %s or %s only (GSSAPI and OAUTHBEARER are not supported between brokers); set it to one of them",
			mech, sasl.MechanismPlain, sasl.MechanismScramSHA256, sasl.MechanismScramSHA512)
	}
	if enabled := splitList(c.listenerValue(listener, "sasl.enabled.mechanisms")); !slices.Contains(enabled, mech) {
		return nil, fmt.Errorf("sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for inter-broker communication (it is %s; the listener enables %s)",
			mech, strings.Join(enabled, ","))
	}
	key := listenerPropPrefix + strings.ToLower(listener) + "." + strings.ToLower(mech) + ".sasl.jaas.config"
	mod, err := sasl.ParseJAASModule(c.listenerValue(listener, strings.ToLower(mech)+".sasl.jaas.config"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	user, pass := mod.Options["username"], mod.Options["password"]
	if user == "" || pass == "" {
		return nil, fmt.Errorf("%s has no username and password for this broker's connections to other brokers: add username=\"<user>\" password=\"<password>\" to %s", key, mod.Class)
	}
	switch mech {
	case sasl.MechanismPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case sasl.MechanismScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
}

// dialPeerTCP opens the TCP connection under a connection to another broker. The liveness
// probes use it alone: they ask only whether anything listens at addr.
func dialPeerTCP(addr string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, timeout)
}

// dial connects to broker node at addr (host:port of its inter-broker listener) and secures the
// connection, all within timeout; the connection returned has no deadline. A refused or failed
// TCP connection is returned as net.DialTimeout returns it; a failed TLS handshake or SASL
// exchange is a *peerAuthError, and is logged, as Kafka's NetworkClient logs one.
func (d *peerDialer) dial(node int32, addr string, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	conn, err := dialPeerTCP(addr, timeout)
	if err != nil || d == nil || (d.tls == nil && d.mechanism == nil) {
		return conn, err
	}
	secured, err := d.secure(conn, node, addr, deadline)
	if err != nil {
		conn.Close()
		var ae *peerAuthError
		if errors.As(err, &ae) {
			d.logger.Error("connection to another broker failed authentication", "node", node, "addr", addr, "err", ae.reason)
		}
		return nil, err
	}
	if err := secured.SetDeadline(time.Time{}); err != nil {
		secured.Close()
		return nil, fmt.Errorf("connection to node %d (%s): clear deadline: %w", node, addr, err)
	}
	return secured, nil
}

// secure runs the TLS handshake and the SASL exchange on conn, by deadline.
func (d *peerDialer) secure(conn net.Conn, node int32, addr string, deadline time.Time) (net.Conn, error) {
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("connection to node %d (%s): set deadline: %w", node, addr, err)
	}
	if d.tls != nil {
		tc := d.tls
		if d.verifyHost {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, fmt.Errorf("connection to node %d: address %q: %w", node, addr, err)
			}
			tc = tc.Clone()
			tc.ServerName = host
		}
		tlsConn := tls.Client(conn, tc)
		if err := tlsConn.Handshake(); err != nil {
			if isConnectionError(err) {
				return nil, fmt.Errorf("connection to node %d (%s): TLS handshake: %w", node, addr, err)
			}
			return nil, &peerAuthError{node: node, addr: addr, reason: "SSL handshake failed: " + err.Error(), err: err}
		}
		conn = tlsConn
	}
	if d.mechanism != nil {
		ex := &peerSASL{conn: conn, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID("ringbroker-broker-" + strconv.Itoa(int(d.self))))}
		if err := ex.authenticate(d.mechanism, addr); err != nil {
			var ae *peerAuthError
			if errors.As(err, &ae) {
				ae.node, ae.addr = node, addr
				return nil, ae
			}
			return nil, fmt.Errorf("connection to node %d (%s): SASL: %w", node, addr, err)
		}
	}
	return conn, nil
}

// isConnectionError reports whether err is the connection failing (closed, reset, timed out)
// rather than the peer refusing to be trusted or to trust this broker.
func isConnectionError(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}

// peerAuthError is a connection to another broker that failed authentication: its TLS
// handshake or its SASL exchange. Its text is Kafka's NetworkClient's.
type peerAuthError struct {
	node   int32
	addr   string
	reason string // Kafka's exception message
	err    error  // the cause, if any
}

// Error says which broker refused, and why.
func (e *peerAuthError) Error() string {
	return fmt.Sprintf("connection to node %d (%s) failed authentication due to: %s", e.node, e.addr, e.reason)
}

// Unwrap returns the cause.
func (e *peerAuthError) Unwrap() error { return e.err }

// saslResponseMax bounds the SaslHandshake and SaslAuthenticate responses read from a peer:
// before the exchange ends, the peer has not proven who it is (on SASL_PLAINTEXT nothing has),
// so it may not make this broker allocate more than that on its say-so. A PLAIN or SCRAM
// response is well under 1 KiB.
const saslResponseMax = 64 << 10

// The versions of the SASL requests a broker sends: SaslHandshake v1 is the one followed by
// SaslAuthenticate, whose v2 (flexible) Kafka's brokers take since 2.5 and ringbroker serves.
const (
	peerSaslHandshakeVersion    = 1
	peerSaslAuthenticateVersion = 2
)

// peerSASL is the client side of a SASL exchange on a connection to another broker.
type peerSASL struct {
	conn   net.Conn
	format *kmsg.RequestFormatter
	corr   int32
	buf    []byte
}

// authenticate runs SaslHandshake with m's name, then SaslAuthenticate with each message of m
// until m is done and has nothing more to send. The connection's deadline bounds it.
func (p *peerSASL) authenticate(m kgosasl.Mechanism, addr string) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = peerSaslHandshakeVersion
	hs.Mechanism = m.Name()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := p.roundTrip(hs, hsResp); err != nil {
		return err
	}
	if err := handshakeError(m.Name(), hsResp); err != nil {
		return err
	}
	session, msg, err := m.Authenticate(context.Background(), addr)
	if err != nil {
		return &peerAuthError{reason: evaluationFailure(err), err: err}
	}
	for done := false; !done || len(msg) > 0; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = peerSaslAuthenticateVersion
		req.SASLAuthBytes = msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := p.roundTrip(req, resp); err != nil {
			return err
		}
		if err := authenticateError(resp); err != nil {
			return err
		}
		msg = nil
		if !done {
			if done, msg, err = session.Challenge(resp.SASLAuthBytes); err != nil {
				return &peerAuthError{reason: evaluationFailure(err), err: err}
			}
		}
	}
	return nil
}

// handshakeError is the failure a SaslHandshake response says, in the words of Kafka's
// SaslClientAuthenticator; nil when the peer took mechanism.
func handshakeError(mechanism string, resp *kmsg.SASLHandshakeResponse) error {
	enabled := "[" + strings.Join(resp.SupportedMechanisms, ", ") + "]"
	var reason string
	switch resp.ErrorCode {
	case 0:
		return nil
	case kerr.UnsupportedSaslMechanism.Code:
		reason = fmt.Sprintf("Client SASL mechanism '%s' not enabled in the server, enabled mechanisms are %s", mechanism, enabled)
	case kerr.IllegalSaslState.Code:
		reason = fmt.Sprintf("Unexpected handshake request with client mechanism %s, enabled mechanisms are %s", mechanism, enabled)
	default:
		reason = fmt.Sprintf("Unknown error code %s, client mechanism is %s, enabled mechanisms are %s", kerr.TypedErrorForCode(resp.ErrorCode).Message, mechanism, enabled)
	}
	return &peerAuthError{reason: reason, err: kerr.TypedErrorForCode(resp.ErrorCode)}
}

// authenticateError is the failure a SaslAuthenticate response says: the peer's message, or
// the error code's own when it sent none, as Kafka's client raises it; nil on success.
func authenticateError(resp *kmsg.SASLAuthenticateResponse) error {
	if resp.ErrorCode == 0 {
		return nil
	}
	ke := kerr.TypedErrorForCode(resp.ErrorCode)
	reason := ke.Description
	if resp.ErrorMessage != nil {
		reason = *resp.ErrorMessage
	}
	return &peerAuthError{reason: reason, err: ke}
}

// evaluationFailure is Kafka's client message for a SASL message this broker could not answer.
func evaluationFailure(err error) string {
	return "An error: (" + err.Error() + ") occurred when evaluating SASL token received from the Kafka Broker. Kafka Client will go to AUTH_FAILED state."
}

// roundTrip writes req and reads its response into resp.
func (p *peerSASL) roundTrip(req kmsg.Request, resp kmsg.Response) error {
	name := kmsg.NameForKey(req.Key())
	p.corr++
	p.buf = p.format.AppendRequest(p.buf[:0], req, p.corr)
	if _, err := p.conn.Write(p.buf); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	var size [4]byte
	if _, err := io.ReadFull(p.conn, size[:]); err != nil {
		return fmt.Errorf("read %s response size: %w", name, err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > saslResponseMax {
		return fmt.Errorf("%s response of %d bytes; want 4 to %d", name, n, saslResponseMax)
	}
	p.buf = slices.Grow(p.buf[:0], int(n))[:n]
	if _, err := io.ReadFull(p.conn, p.buf); err != nil {
		return fmt.Errorf("read %s response: %w", name, err)
	}
	return decodePeerResponse(p.buf, p.corr, req.GetVersion(), resp)
}

// decodePeerResponse decodes frame (a response without its size) into resp at version,
// checking that it answers correlation id corr.
func decodePeerResponse(frame []byte, corr int32, version int16, resp kmsg.Response) error {
	name := kmsg.NameForKey(resp.Key())
	if len(frame) < 4 {
		return fmt.Errorf("%s response of %d bytes; want at least 4", name, len(frame))
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		return fmt.Errorf("%s response has correlation id %d, want %d", name, got, corr)
	}
	resp.SetVersion(version)
	body := frame[4:]
	if resp.IsFlexible() {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return fmt.Errorf("%s response header: tagged fields cut short", name)
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("decode %s response: %w", name, err)
	}
	return nil
}
