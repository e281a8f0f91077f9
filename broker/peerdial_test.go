package broker

import (
	"bytes"
	"context"
	"crypto/tls"
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
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"ringbroker/internal/testcerts"
	"ringbroker/internal/testutil"
)

// plainJAAS is a PLAIN login module with this broker's own credentials (username, password)
// and the users its listener accepts: broker, admin and alice.
func plainJAAS(password string) string {
	return `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="` + password +
		`" user_broker="broker-secret" user_admin="admin-secret" user_alice="alice-secret";`
}

// peerConfig is a config whose only client listener is SASL_SSL (or what overrides make it),
// with the key and trust stores of ca and server, and overrides applied.
func peerConfig(t *testing.T, ca *testcerts.CA, server testcerts.Pair, overrides ...string) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listeners = []Listener{{Name: "SASL_SSL", Host: "127.0.0.1"}}
	for _, o := range append([]string{
		"inter.broker.listener.name=SASL_SSL",
		"ssl.keystore.type=PEM", "ssl.keystore.location=" + server.KeystoreFile,
		"ssl.truststore.type=PEM", "ssl.truststore.location=" + ca.CertFile,
	}, overrides...) {
		if err := cfg.Override(o); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// TestPeerDialerConfig: what a broker could not authenticate to its peers with is refused at
// start, in a cluster: GSSAPI (Kafka's default) and OAUTHBEARER, a mechanism the listener does
// not enable (Kafka's message), a JAAS config without the broker's credentials, an unknown
// endpoint identification algorithm; a PLAINTEXT inter-broker listener dials plain TCP.
func TestPeerDialerConfig(t *testing.T) {
	ca := testcerts.NewCA(t, t.TempDir())
	server := ca.Server(t, "broker")
	for _, tc := range []struct {
		name      string
		overrides []string
		wErr      string
	}{
		{"GSSAPI by default", []string{"sasl.enabled.mechanisms=PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config=" + plainJAAS("broker-secret")},
			"sasl.mechanism.inter.broker.protocol=GSSAPI: ringbroker's brokers authenticate to each other with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 only"},
		{"OAUTHBEARER", []string{"sasl.enabled.mechanisms=OAUTHBEARER", "sasl.mechanism.inter.broker.protocol=OAUTHBEARER"},
			"GSSAPI and OAUTHBEARER are not supported between brokers"},
		{"not enabled", []string{"sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512", "listener.name.sasl_ssl.plain.sasl.jaas.config=" + plainJAAS("broker-secret")},
			"sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for inter-broker communication (it is SCRAM-SHA-512; the listener enables PLAIN)"},
		{"no credentials", []string{"sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=PLAIN",
			`listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="broker-secret";`},
			"listener.name.sasl_ssl.plain.sasl.jaas.config has no username and password"},
		{"two login modules", []string{"sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=PLAIN",
			"listener.name.sasl_ssl.plain.sasl.jaas.config=" + plainJAAS("broker-secret") + plainJAAS("broker-secret")},
			"JAAS config property contains 2 login modules, should be 1 module"},
		{"endpoint identification", []string{"sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=PLAIN",
			"listener.name.sasl_ssl.plain.sasl.jaas.config=" + plainJAAS("broker-secret"), "ssl.endpoint.identification.algorithm=ldap"},
			"ssl.endpoint.identification.algorithm=ldap: want https or empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := peerConfig(t, ca, server, tc.overrides...)
			cfg.NodeID, cfg.LogDirs = 1, []string{t.TempDir()}
			cfg.QuorumVoters, cfg.ControllerListenerNames = "1@127.0.0.1:1", []string{"CONTROLLER"}
			cfg.Listeners = append(cfg.Listeners, Listener{Name: "CONTROLLER", Host: "127.0.0.1", Port: 1})
			b, err := New(cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				b.Shutdown(context.Background())
				t.Fatalf("New took the config; want %q", tc.wErr)
			}
			if !strings.Contains(err.Error(), tc.wErr) || !strings.Contains(err.Error(), "inter-broker listener SASL_SSL") {
				t.Fatalf("New: %v; want it to name the inter-broker listener and say %q", err, tc.wErr)
			}
		})
	}
	t.Run("PLAINTEXT", func(t *testing.T) {
		cfg := DefaultConfig()
		d, err := newPeerDialer(&cfg, "PLAINTEXT", slog.New(slog.DiscardHandler))
		if err != nil || d.tls != nil || d.mechanism != nil {
			t.Fatalf("dialer of a PLAINTEXT listener: %+v, %v; want one without TLS or SASL", d, err)
		}
	})
}

// tlsPeer serves TLS handshakes with cfg on host, reporting each client's certificates (nil
// for a handshake that failed) on the channel returned.
func tlsPeer(t *testing.T, host string, cfg *tls.Config) (string, <-chan [][]byte) {
	t.Helper()
	ln, err := tls.Listen("tcp", net.JoinHostPort(host, "0"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan [][]byte, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			tc.SetDeadline(time.Now().Add(5 * time.Second))
			var certs [][]byte
			if tc.Handshake() == nil {
				certs = [][]byte{}
				for _, pc := range tc.ConnectionState().PeerCertificates {
					certs = append(certs, pc.Raw)
				}
				// Drain until the client closes, so its handshake completes on its side too.
				io.Copy(io.Discard, tc)
			}
			c.Close()
			got <- certs
		}
	}()
	return ln.Addr().String(), got
}

// TestPeerDialTLS: an SSL inter-broker dialer trusts what its trust store signed and checks the
// peer's host name with ssl.endpoint.identification.algorithm=https (not when it is empty),
// refuses an untrusted peer as a failed authentication that it logs, and presents its key
// store's certificate to a peer that asks for one.
func TestPeerDialTLS(t *testing.T) {
	ca, other := testcerts.NewCA(t, t.TempDir()), testcerts.NewCA(t, t.TempDir())
	server, stranger := ca.Server(t, "broker"), other.Server(t, "stranger")
	var logged bytes.Buffer
	dialer := func(overrides ...string) *peerDialer {
		cfg := peerConfig(t, ca, server, append([]string{"inter.broker.listener.name=SSL"}, overrides...)...)
		cfg.Listeners = []Listener{{Name: "SSL", Host: "127.0.0.1"}}
		d, err := newPeerDialer(&cfg, "SSL", slog.New(slog.NewTextHandler(&logged, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	dial := func(d *peerDialer, addr string) error {
		c, err := d.dial(2, addr, 5*time.Second)
		if err == nil {
			if _, ok := c.(*tls.Conn); !ok {
				t.Fatalf("dial %s: a %T, want a TLS connection", addr, c)
			}
			c.Close()
		}
		return err
	}
	https, noHostCheck := dialer(), dialer("ssl.endpoint.identification.algorithm=")

	// The certificate names 127.0.0.1, not 127.0.0.2.
	trusted := &tls.Config{Certificates: []tls.Certificate{server.TLS}}
	addr, _ := tlsPeer(t, "127.0.0.1", trusted)
	if err := dial(https, addr); err != nil {
		t.Fatalf("dial a trusted peer by the address its certificate names: %v", err)
	}
	misnamed, _ := tlsPeer(t, "127.0.0.2", trusted)
	var ae *peerAuthError
	if err := dial(https, misnamed); !errors.As(err, &ae) || !strings.Contains(err.Error(), "failed authentication due to: SSL handshake failed") {
		t.Fatalf("dial %s with host name checks: %v; want an SSL handshake failure", misnamed, err)
	}
	if err := dial(noHostCheck, misnamed); err != nil {
		t.Fatalf("dial %s without host name checks: %v", misnamed, err)
	}

	untrusted, _ := tlsPeer(t, "127.0.0.1", &tls.Config{Certificates: []tls.Certificate{stranger.TLS}})
	for _, d := range []*peerDialer{https, noHostCheck} {
		logged.Reset()
		err := dial(d, untrusted)
		want := fmt.Sprintf("connection to node 2 (%s) failed authentication due to: SSL handshake failed", untrusted)
		if !errors.As(err, &ae) || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("dial a peer signed by another CA: %v; want %q", err, want)
		}
		if !strings.Contains(logged.String(), "failed authentication") {
			t.Fatalf("the failed authentication was not logged: %q", logged.String())
		}
	}

	mtls, certs := tlsPeer(t, "127.0.0.1", &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientAuth: tls.RequireAnyClientCert})
	if err := dial(https, mtls); err != nil {
		t.Fatalf("dial a peer requiring a client certificate: %v", err)
	}
	if got := <-certs; len(got) == 0 || !bytes.Equal(got[0], server.TLS.Certificate[0]) {
		t.Fatalf("the peer got client certificates %d; want the key store's", len(got))
	}
}

// TestPeerDialSASL dials a broker's SASL_SSL listener as another broker would: with PLAIN and
// SCRAM-SHA-512 it authenticates as User:broker (a super user; alice is not), a wrong password
// fails with Kafka's message naming the peer, a mechanism the peer does not enable fails as
// Kafka's client says, and a refused connection stays a refusal (which the fetcher reports).
func TestPeerDialSASL(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ca := testcerts.NewCA(t, t.TempDir())
		server := ca.Server(t, "broker")
		b := startBroker(t, io, t.TempDir(),
			"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
			"ssl.keystore.type=PEM", "ssl.keystore.location="+server.KeystoreFile,
			"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
			"listener.name.sasl_ssl.plain.sasl.jaas.config="+plainJAAS("broker-secret"),
			"authorizer.class.name="+standardAuthorizer, "super.users=User:broker;User:ANONYMOUS",
		)
		altered, err := kadm.NewClient(newClient(t, b)).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
			{User: "broker", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "broker-scram-secret"},
		})
		if err == nil {
			err = altered.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		addr := b.ListenerAddr("SASL_SSL").String()
		dialer := func(mechanism, jaas string) *peerDialer {
			cfg := peerConfig(t, ca, server, "sasl.enabled.mechanisms="+mechanism, "sasl.mechanism.inter.broker.protocol="+mechanism,
				"listener.name.sasl_ssl."+strings.ToLower(mechanism)+".sasl.jaas.config="+jaas)
			d, err := newPeerDialer(&cfg, "SASL_SSL", slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		scramJAAS := func(user, password string) string {
			return `org.apache.kafka.common.security.scram.ScramLoginModule required username="` + user + `" password="` + password + `";`
		}
		// describeACLs runs DescribeAcls, which needs DESCRIBE on the cluster, on a connection
		// d dialed.
		describeACLs := func(d *peerDialer) (int16, error) {
			conn, err := d.dial(1, addr, 10*time.Second)
			if err != nil {
				return 0, err
			}
			defer conn.Close()
			req := kmsg.NewPtrDescribeACLsRequest()
			req.Version = 1
			req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			resp := kmsg.NewPtrDescribeACLsResponse()
			c := &replicaClient{conn: conn, format: kmsg.NewRequestFormatter()}
			if err := c.roundTrip(req, resp, 10*time.Second); err != nil {
				return 0, err
			}
			return resp.ErrorCode, nil
		}

		for _, d := range []*peerDialer{dialer("PLAIN", plainJAAS("broker-secret")), dialer("SCRAM-SHA-512", scramJAAS("broker", "broker-scram-secret"))} {
			if code, err := describeACLs(d); err != nil || code != 0 {
				t.Fatalf("DescribeAcls as the broker with %s: error %d, %v; want allowed", d.mechanism.Name(), code, err)
			}
		}
		alice := dialer("PLAIN", strings.Replace(plainJAAS("alice-secret"), `username="broker"`, `username="alice"`, 1))
		if code, err := describeACLs(alice); err != nil || code != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("DescribeAcls as alice: error %d, %v; want CLUSTER_AUTHORIZATION_FAILED", code, err)
		}

		for _, tc := range []struct {
			d      *peerDialer
			reason string
		}{
			{dialer("PLAIN", plainJAAS("guess")), "Authentication failed: Invalid username or password"},
			{dialer("SCRAM-SHA-512", scramJAAS("broker", "guess")), "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"},
			{dialer("SCRAM-SHA-256", scramJAAS("broker", "broker-scram-secret")), "Client SASL mechanism 'SCRAM-SHA-256' not enabled in the server, enabled mechanisms are [PLAIN, SCRAM-SHA-512]"},
		} {
			start := time.Now()
			_, err := describeACLs(tc.d)
			want := fmt.Sprintf("connection to node 1 (%s) failed authentication due to: %s", addr, tc.reason)
			var ae *peerAuthError
			if !errors.As(err, &ae) || err.Error() != want {
				t.Fatalf("%s: %v; want %q", tc.d.mechanism.Name(), err, want)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("%s: the failure took %v", tc.d.mechanism.Name(), took)
			}
		}

		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := ln.Addr().String()
		ln.Close()
		if _, err := dialer("PLAIN", plainJAAS("broker-secret")).dial(1, closed, time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial a closed port: %v; want ECONNREFUSED", err)
		}
	})
}

// TestSASLResponseErrors: the handshake and authentication failures a peer answers read as
// Kafka's SaslClientAuthenticator words them.
func TestSASLResponseErrors(t *testing.T) {
	hs := kmsg.NewPtrSASLHandshakeResponse()
	hs.SupportedMechanisms = []string{"PLAIN", "SCRAM-SHA-512"}
	for code, want := range map[int16]string{
		0:                                  "",
		kerr.UnsupportedSaslMechanism.Code: "Client SASL mechanism 'SCRAM-SHA-256' not enabled in the server, enabled mechanisms are [PLAIN, SCRAM-SHA-512]",
		kerr.IllegalSaslState.Code:         "Unexpected handshake request with client mechanism SCRAM-SHA-256, enabled mechanisms are [PLAIN, SCRAM-SHA-512]",
		kerr.UnknownServerError.Code:       "Unknown error code UNKNOWN_SERVER_ERROR, client mechanism is SCRAM-SHA-256, enabled mechanisms are [PLAIN, SCRAM-SHA-512]",
	} {
		hs.ErrorCode = code
		err := handshakeError("SCRAM-SHA-256", hs)
		var ae *peerAuthError
		if want == "" && err != nil || want != "" && (!errors.As(err, &ae) || ae.reason != want) {
			t.Errorf("handshake error %d: %v; want %q", code, err, want)
		}
	}
	auth := kmsg.NewPtrSASLAuthenticateResponse()
	if err := authenticateError(auth); err != nil {
		t.Errorf("authenticate without an error: %v", err)
	}
	auth.ErrorCode = kerr.SaslAuthenticationFailed.Code
	var ae *peerAuthError
	if err := authenticateError(auth); !errors.As(err, &ae) || ae.reason != kerr.SaslAuthenticationFailed.Description || !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("authenticate failed without a message: %v; want the error's description", err)
	}
	auth.ErrorMessage = kmsg.StringPtr("Authentication failed: Invalid username or password")
	if err := authenticateError(auth); !errors.As(err, &ae) || ae.reason != *auth.ErrorMessage {
		t.Errorf("authenticate failed with a message: %v; want the message", err)
	}
}

// responseFrame is resp as a peer sends it: size, correlation id, header tags when flexible,
// body.
func responseFrame(corr int32, resp kmsg.Response) []byte {
	body := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if resp.IsFlexible() {
		body = append(body, 0)
	}
	body = resp.AppendTo(body)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// playPeer answers a connection's writes with peer's bytes, then closes; it returns the
// client end, with a deadline, and what the client wrote, complete once the client closed.
func playPeer(peer []byte) (net.Conn, <-chan []byte) {
	client, server := net.Pipe()
	wrote := make(chan []byte, 1)
	go func() {
		data, _ := io.ReadAll(server)
		wrote <- data
	}()
	go func() {
		server.Write(peer)
		server.Close()
	}()
	client.SetDeadline(time.Now().Add(5 * time.Second))
	return client, wrote
}

// saslOKFrames are a peer's answers to a SASL exchange that succeeds in one step.
func saslOKFrames() []byte {
	hs := kmsg.NewPtrSASLHandshakeResponse()
	hs.SetVersion(peerSaslHandshakeVersion)
	hs.SupportedMechanisms = []string{"PLAIN"}
	auth := kmsg.NewPtrSASLAuthenticateResponse()
	auth.SetVersion(peerSaslAuthenticateVersion)
	return append(responseFrame(1, hs), responseFrame(2, auth)...)
}

// TestPeerSASLExchange: against a peer that takes PLAIN, the exchange sends the mechanism's
// name and then the PLAIN message with the broker's credentials, and succeeds.
func TestPeerSASLExchange(t *testing.T) {
	client, wrote := playPeer(saslOKFrames())
	p := &peerSASL{conn: client, format: kmsg.NewRequestFormatter()}
	err := p.authenticate(plain.Auth{User: "broker", Pass: "secret"}.AsMechanism(), "peer:9092")
	client.Close()
	if err != nil || p.corr != 2 {
		t.Fatalf("exchange: %v after %d round trips; want success after 2", err, p.corr)
	}
	sent := <-wrote
	for _, want := range []string{"PLAIN", "\x00broker\x00secret"} {
		if !bytes.Contains(sent, []byte(want)) {
			t.Fatalf("the peer got %q; want it to hold %q", sent, want)
		}
	}
}

// FuzzPeerSASLExchange plays a peer answering the SASL exchange of a broker's connection with
// arbitrary bytes: the exchange ends, with an error or with the peer's consent (after a
// handshake and at least one authentication step), never with a panic or a hang.
func FuzzPeerSASLExchange(f *testing.F) {
	ok := saslOKFrames()
	f.Add(false, ok)
	f.Add(true, ok)
	hs := kmsg.NewPtrSASLHandshakeResponse()
	hs.SetVersion(peerSaslHandshakeVersion)
	f.Add(true, append(responseFrame(1, hs), responseFrame(2, &kmsg.SASLAuthenticateResponse{Version: 2, SASLAuthBytes: []byte("r=abc,s=c2FsdA==,i=4096")})...))
	hs.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	f.Add(false, responseFrame(1, hs))
	f.Add(false, []byte{0x7f, 0xff, 0xff, 0xff})
	f.Add(false, append(ok[:len(ok)-1], 1, 2, 3))
	f.Fuzz(func(t *testing.T, useScram bool, peer []byte) {
		client, _ := playPeer(peer)
		defer client.Close()
		var m kgosasl.Mechanism = plain.Auth{User: "broker", Pass: "secret"}.AsMechanism()
		if useScram {
			m = scram.Auth{User: "broker", Pass: "secret"}.AsSha512Mechanism()
		}
		p := &peerSASL{conn: client, format: kmsg.NewRequestFormatter()}
		err := p.authenticate(m, "peer:9092")
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the exchange hung: %v", err)
		}
		if err == nil && p.corr < 2 {
			t.Fatalf("the exchange succeeded after %d responses; want a handshake and an authentication", p.corr)
		}
	})
}

// securedCluster makes every node of an in-process cluster serve clients and brokers on one
// SASL_SSL listener (the controller listener stays PLAINTEXT) signed by ca, with PLAIN between
// brokers as User:broker, SCRAM-SHA-512 for clients too, and ACLs with super users broker and
// admin; password gives each node's own inter-broker password, in start order.
func securedCluster(t *testing.T, ca *testcerts.CA, server testcerts.Pair, io string, password func() string) func(*Config) {
	return func(c *Config) {
		c.IO = io
		c.Listeners = []Listener{{Name: "SASL_SSL", Host: "127.0.0.1"}}
		for _, o := range []string{
			"inter.broker.listener.name=SASL_SSL",
			"ssl.keystore.type=PEM", "ssl.keystore.location=" + server.KeystoreFile,
			"ssl.truststore.type=PEM", "ssl.truststore.location=" + ca.CertFile,
			"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol=PLAIN",
			"listener.name.sasl_ssl.plain.sasl.jaas.config=" + plainJAAS(password()),
			"authorizer.class.name=" + standardAuthorizer, "super.users=User:broker;User:admin",
		} {
			if err := c.Override(o); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// securedClient is a client of bs over TLS trusting ca, authenticating with m.
func securedClient(t *testing.T, ca *testcerts.CA, bs []*Broker, m kgosasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{clusterSeeds(bs), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool()}), kgo.SASL(m)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestSecuredInterBrokerCluster runs 3 nodes whose only listener for clients and brokers is
// SASL_SSL, brokers authenticating with PLAIN as User:broker, the one super user besides the
// admin client: an RF 3 topic produced to with acks=all is on every replica, byte for byte; a
// transaction over partitions led by different nodes commits (its markers travel between
// brokers) and reads back read_committed with SCRAM-SHA-512; after the leader of
// a partition shuts down, the others take writes and replicate them.
func TestSecuredInterBrokerCluster(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, io string) {
		ca := testcerts.NewCA(t, t.TempDir())
		server := ca.Server(t, "broker")
		bs := startInProcessCluster(t, 3, fastReplication, securedCluster(t, ca, server, io, func() string { return "broker-secret" }))
		waitUnfenced(t, bs)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		admin := plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()
		adm := kadm.NewClient(securedClient(t, ca, bs, admin))
		if _, err := adm.CreateTopic(ctx, 3, 3, nil, "secured"); err != nil {
			t.Fatal(err)
		}
		altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "admin", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "admin-scram"}})
		if err == nil {
			err = altered.Error()
		}
		if err != nil {
			t.Fatal(err)
		}

		producer := securedClient(t, ca, bs, admin, kgo.DefaultProduceTopic("secured"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		produceValues(ctx, t, producer, 0, 30)
		waitReplicasEqual(t, bs, "secured", 3)
		tp := bs[0].meta.Image().Topics["secured"]
		leaders := map[int32]bool{}
		for _, pm := range tp.Partitions {
			leaders[pm.Leader] = true
			if len(pm.ISR) != 3 {
				t.Fatalf("partition %d: ISR %v; want all 3 replicas", pm.Index, pm.ISR)
			}
		}
		if len(leaders) < 2 {
			t.Fatalf("every partition is led by the same node (%v): no marker would travel", leaders)
		}

		txn := securedClient(t, ca, bs, admin, kgo.DefaultProduceTopic("secured"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.TransactionalID("secured-txn"), kgo.RequestRetries(20))
		testutil.WaitFor(t, 30*time.Second, func() error { return txn.BeginTransaction() })
		produceValues(ctx, t, txn, 30, 60)
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit: %v", err)
		}
		waitReplicasEqual(t, bs, "secured", 3)
		consumeValues(ctx, t, securedClient(t, ca, bs, scram.Auth{User: "admin", Pass: "admin-scram"}.AsSha512Mechanism(),
			kgo.ConsumeTopics("secured"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), 60)

		old := tp.Partitions[0].Leader
		rest := stopOne(ctx, t, bs, bs[slices.IndexFunc(bs, func(b *Broker) bool { return b.cfg.NodeID == old })])
		produceValues(ctx, t, producer, 60, 90)
		waitReplicasEqual(t, rest, "secured", 2)
		if now := rest[0].meta.Image().Topics["secured"].Partitions[0].Leader; now == old {
			t.Fatalf("partition 0 is still led by node %d, which shut down", old)
		}
	})
}

// consumeValues reads the decimal values 0..n-1 from cl, each once.
func consumeValues(ctx context.Context, t *testing.T, cl *kgo.Client, n int) {
	t.Helper()
	seen := map[int]bool{}
	for len(seen) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(seen), n, err)
		}
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume after %d records: %v", len(seen), err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v, err := strconv.Atoi(string(r.Value))
			if err != nil || v < 0 || v >= n || seen[v] {
				t.Fatalf("record %q at %d/%d: unparsable, unexpected or repeated", r.Value, r.Partition, r.Offset)
			}
			seen[v] = true
		})
	}
}

// TestInterBrokerWrongPassword: a node whose inter-broker password is wrong cannot follow: its
// leaders refuse it (counted as failed authentications), it leaves the ISR of the partitions it
// follows and never returns, holding none of their records, while acks=all produce completes
// without it; the other nodes still replicate from it the partitions it leads.
func TestInterBrokerWrongPassword(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, t.TempDir())
	server := ca.Server(t, "broker")
	// startInProcessCluster builds the nodes' configs in node id order: node 3 gets the wrong
	// password.
	started := 0
	password := func() string {
		started++
		if started == 3 {
			return "wrong-secret"
		}
		return "broker-secret"
	}
	bs := startInProcessCluster(t, 3, fastReplication, securedCluster(t, ca, server, "netpoll", password))
	waitUnfenced(t, bs)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()
	adm := kadm.NewClient(securedClient(t, ca, bs, admin))
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "lonely"); err != nil {
		t.Fatal(err)
	}
	producer := securedClient(t, ca, bs, admin, kgo.DefaultProduceTopic("lonely"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceCtx, produceCancel := context.WithTimeout(ctx, 30*time.Second)
	defer produceCancel()
	produceValues(produceCtx, t, producer, 0, 30)

	id := bs[0].meta.Image().Topics["lonely"].ID
	// excluded checks that node 3 is out of the ISR of, and holds nothing of, every partition
	// another node leads, and in the ISR of those it leads.
	excluded := func() error {
		for _, pm := range bs[0].meta.Image().Topics["lonely"].Partitions {
			in := slices.Contains(pm.ISR, 3)
			if pm.Leader == 3 {
				if !in || len(pm.ISR) != 3 {
					return fmt.Errorf("partition %d led by node 3: ISR %v; want all 3", pm.Index, pm.ISR)
				}
				continue
			}
			if in {
				return fmt.Errorf("partition %d led by node %d: ISR %v still has node 3", pm.Index, pm.Leader, pm.ISR)
			}
			p := bs[2].parts.Load().lookupID(id, pm.Index)
			if p == nil {
				return fmt.Errorf("partition %d: node 3 has no replica open", pm.Index)
			}
			if end := p.log().LogEndOffset(); end != 0 {
				return fmt.Errorf("partition %d: node 3 holds %d records", pm.Index, end)
			}
		}
		return nil
	}
	testutil.WaitFor(t, 30*time.Second, excluded)
	// Node 3 keeps trying and keeps failing for longer than it would take to rejoin.
	before := bs[0].metrics.authFailedC.Get() + bs[1].metrics.authFailedC.Get()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(2 * bs[0].cfg.ReplicaLagTimeMax); time.Now().Before(end); <-tick.C {
		if err := excluded(); err != nil {
			t.Fatal(err)
		}
	}
	if after := bs[0].metrics.authFailedC.Get() + bs[1].metrics.authFailedC.Get(); after <= before {
		t.Fatalf("the leaders counted %d failed authentications, as many as before: node 3 stopped trying", after)
	}
}
