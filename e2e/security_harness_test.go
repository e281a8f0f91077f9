package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"ringbroker/internal/brokertest"
	"ringbroker/internal/testcerts"
	"ringbroker/internal/testutil"
)

// The users of a secured broker. PLAIN users live in the listeners' JAAS config, SCRAM users
// in the metadata log, where startSecured creates them through the admin API.
const (
	plainUser     = "alice"
	plainPassword = "alice-secret"
	scramUser     = "bob"
	scramPassword = "bob-secret"
	// scramIterations is the iteration count of the SCRAM credentials, Kafka's documented
	// example (its minimum is 4096).
	scramIterations = 8192
	// mtlsClientCN is the common name of the client certificate, whose principal is
	// User:CN=e2e-client,O=ringbroker.
	mtlsClientCN = "e2e-client"
)

// securedBroker is a broker with a listener of each security protocol beside the PLAINTEXT
// one the harness probes: SASL_SSL and SASL_PLAINTEXT offering PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512, and SSL with ssl.client.auth=required. One CA signs the broker's
// certificate and the client certificate.
type securedBroker struct {
	*Broker
	// saslSSL, ssl and saslPlaintext are the host:port of the listeners of those protocols.
	saslSSL, ssl, saslPlaintext string
	ca                          *testcerts.CA
	// client is the certificate mTLS clients present on the SSL listener.
	client testcerts.Pair
}

// startSecured starts the target's broker with the secured listeners and creates the SCRAM
// user, returning once that user can authenticate.
func startSecured(t *testing.T, tg target, overrides ...string) *securedBroker {
	t.Helper()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir)
	server := ca.Server(t, "broker")
	s := &securedBroker{ca: ca, client: ca.Client(t, mtlsClientCN)}
	port, saslSSL, ssl, saslPlaintext := brokertest.FreePort(t), brokertest.FreePort(t), brokertest.FreePort(t), brokertest.FreePort(t)
	s.saslSSL, s.ssl, s.saslPlaintext = loopback(saslSSL), loopback(ssl), loopback(saslPlaintext)
	clientListeners := []string{
		"PLAINTEXT://" + loopback(port),
		"SASL_SSL://" + s.saslSSL,
		"SSL://" + s.ssl,
		"SASL_PLAINTEXT://" + s.saslPlaintext,
	}
	plainJAAS := fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_%s="%s";`,
		plainUser, plainPassword)
	// Kafka needs a JAAS entry per mechanism and listener; for SCRAM it names the login
	// module only, as the credentials are in the metadata log.
	const scramJAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
	lines := []string{
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + server.KeystoreFile,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + ca.CertFile,
		"listener.name.ssl.ssl.client.auth=required",
	}
	for _, l := range []string{"sasl_ssl", "sasl_plaintext"} {
		lines = append(lines,
			"listener.name."+l+".plain.sasl.jaas.config="+plainJAAS,
			"listener.name."+l+".scram-sha-256.sasl.jaas.config="+scramJAAS,
			"listener.name."+l+".scram-sha-512.sasl.jaas.config="+scramJAAS,
		)
	}
	if brokerKind() == "kafka" {
		controller := brokertest.FreePort(t)
		lines = append(lines,
			"listeners="+strings.Join(append(clientListeners, "CONTROLLER://"+loopback(controller)), ","),
			"advertised.listeners="+strings.Join(clientListeners, ","),
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
		)
		s.Broker = startKafkaOn(t, port, controller, append(lines, overrides...)...)
	} else {
		// The ringbroker targets are named after their I/O backend.
		lines = append(lines, "listeners="+strings.Join(clientListeners, ","))
		s.Broker = startRingbrokerOn(t, tg.name, port, append(lines, overrides...)...)
	}
	s.createScramUser(t)
	return s
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// createScramUser gives scramUser SCRAM-SHA-256 and SCRAM-SHA-512 credentials with
// kafka-configs over the PLAINTEXT listener, one mechanism per run (Kafka refuses a request
// altering a user twice), then waits until each authenticates on the SASL_PLAINTEXT listener
// (credentials reach the listeners through the metadata log).
func (s *securedBroker) createScramUser(t *testing.T) {
	t.Helper()
	for _, m := range []struct {
		name string
		mech sasl.Mechanism
	}{
		{"SCRAM-SHA-256", scramSHA256(scramUser, scramPassword)},
		{"SCRAM-SHA-512", scramSHA512(scramUser, scramPassword)},
	} {
		cfg := fmt.Sprintf("%s=[iterations=%d,password=%s]", m.name, scramIterations, scramPassword)
		out := runJava(t, "kafka.admin.ConfigCommand", "--bootstrap-server", s.Addr(),
			"--alter", "--add-config", cfg, "--entity-type", "users", "--entity-name", scramUser).stdout
		if want := "Completed updating config for user " + scramUser; !strings.Contains(out, want) {
			t.Fatalf("kafka-configs --add-config %s printed %q, want %q", cfg, out, want)
		}
		testutil.WaitFor(t, 30*time.Second, func() error {
			return pingOnce(s.saslPlaintext, kgo.SASL(m.mech))
		})
	}
}

// tlsConfig is the client side of the broker's TLS listeners: trusting the test CA and,
// with mtls, presenting the client certificate.
func (s *securedBroker) tlsConfig(mtls bool) *tls.Config {
	c := &tls.Config{RootCAs: s.ca.Pool(), MinVersion: tls.VersionTLS12}
	if mtls {
		c.Certificates = []tls.Certificate{s.client.TLS}
	}
	return c
}

// franz returns a franz-go client bootstrapped at addr, closed when the test ends.
func franz(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatalf("new client for %s: %v", addr, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// pingOnce opens a client on addr, sends one Metadata request and closes it: the error is
// the first the client met, authentication included.
func pingOnce(addr string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		return fmt.Errorf("new client for %s: %w", addr, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

func plainAuth(user, pass string) sasl.Mechanism {
	return plain.Auth{User: user, Pass: pass}.AsMechanism()
}

func scramSHA256(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
}

func scramSHA512(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
}

// javaProps writes a Java client config file with the given key=value lines and returns
// its path.
func javaProps(t *testing.T, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".properties")
	writeFile(t, path, strings.Join(lines, "\n")+"\n")
	return path
}

// vmRSS is the resident set size of process pid in bytes, from /proc/<pid>/status.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read status of pid %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("pid %d: VmRSS line %q: %v", pid, line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("pid %d: no VmRSS in /proc/%d/status", pid, pid)
	return 0
}
