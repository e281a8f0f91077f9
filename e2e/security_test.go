package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's SaslAuthenticate error messages (SASL_AUTHENTICATION_FAILED): PlainSaslServer's for
// PLAIN, and SaslServerAuthenticator's for a SCRAM exchange that failed, which names the
// mechanism but never says whether the user exists.
const (
	plainFailedMessage = "Authentication failed: Invalid username or password"
	scramFailedMessage = "Authentication failed during authentication due to invalid credentials with SASL mechanism "
)

// TestSecurity runs real clients against the TLS and SASL listeners of one broker: the Java
// clients over SASL_SSL with SCRAM-SHA-512 and over SSL with mTLS, kcat (librdkafka) over
// SASL_SSL with PLAIN, franz-go with SCRAM-SHA-256 over SASL_SSL and kafka-python with PLAIN
// over SASL_PLAINTEXT, each producing records and reading exactly those back. Then wrong
// passwords and unknown users, through franz-go, the Java Admin client and kcat, are refused
// with SASL_AUTHENTICATION_FAILED and Kafka's message, and an mTLS listener refuses a client
// without a certificate.
func TestSecurity(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startSecured(t, tg, "group.initial.rebalance.delay.ms=0")

		t.Run("java SASL_SSL SCRAM-SHA-512", func(t *testing.T) {
			props := javaProps(t, "scram",
				"bootstrap.servers="+s.saslSSL,
				"security.protocol=SASL_SSL",
				"sasl.mechanism=SCRAM-SHA-512",
				scramJAASLine(scramUser, scramPassword),
				"ssl.truststore.type=PEM",
				"ssl.truststore.location="+s.ca.CertFile)
			javaRoundTrip(t, s, props, "java-scram")
		})

		t.Run("java SSL mTLS", func(t *testing.T) {
			props := javaProps(t, "mtls",
				"bootstrap.servers="+s.ssl,
				"security.protocol=SSL",
				"ssl.truststore.type=PEM",
				"ssl.truststore.location="+s.ca.CertFile,
				"ssl.keystore.type=PEM",
				"ssl.keystore.location="+s.client.KeystoreFile)
			javaRoundTrip(t, s, props, "java-mtls")
		})

		t.Run("kcat SASL_SSL PLAIN", func(t *testing.T) {
			const topic = "kcat-sasl"
			s.CreateTopic(t, topic, 1)
			auth := s.kcatArgs(plainUser, plainPassword)
			var in bytes.Buffer
			for i := range clientRecords {
				fmt.Fprintf(&in, "k%d\tv%d\n", i, i)
			}
			runKcatStdin(t, in.Bytes(), append(auth, "-P", "-t", topic, "-p", "0", "-K", "\t", "-X", "acks=all")...)
			out := runKcat(t, append(auth, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", `%k\t%s\n`)...).stdout
			if out != in.String() {
				t.Fatalf("kcat read back %d bytes (%q...), want the %d produced lines in order", len(out), head([]byte(out)), clientRecords)
			}
		})

		t.Run("franz-go SASL_SSL SCRAM-SHA-256", func(t *testing.T) {
			const topic = "franz-scram"
			cl := franz(t, s.saslSSL, kgo.DialTLSConfig(s.tlsConfig(false)), kgo.SASL(scramSHA256(scramUser, scramPassword)),
				kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Metadata names the listener the client came in on.
			md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("Metadata over SASL_SSL: %v", err)
			}
			if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, strconv.Itoa(int(md.Brokers[0].Port))) != s.saslSSL {
				t.Fatalf("Metadata over SASL_SSL lists brokers %+v; want the SASL_SSL listener %s", md.Brokers, s.saslSSL)
			}
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
				t.Fatalf("create topic %s over SASL_SSL: %v", topic, err)
			}
			s.WaitTopic(t, topic, 3)
			franzRoundTrip(t, cl, topic)
		})

		t.Run("kafka-python SASL_PLAINTEXT PLAIN", func(t *testing.T) {
			out := runScript(t, []string{
				"PYTHONPATH=" + filepath.Join(repoRoot(), pythonClients),
				"SECURITY_PROTOCOL=SASL_PLAINTEXT", "SASL_MECHANISM=PLAIN",
				"SASL_USERNAME=" + plainUser, "SASL_PASSWORD=" + plainPassword,
			}, s.saslPlaintext, "py-sasl", "python3", filepath.Join("testdata", "clients", "kafka_python_roundtrip.py"))
			checkScript(t, s.Broker, "py-sasl", out)
		})

		t.Run("franz-go refused", func(t *testing.T) {
			tlsOpt := kgo.DialTLSConfig(s.tlsConfig(false))
			for _, c := range []struct {
				name string
				addr string
				opts []kgo.Opt
				want string
			}{
				{"SCRAM-SHA-256 wrong password", s.saslPlaintext, []kgo.Opt{kgo.SASL(scramSHA256(scramUser, "wrong"))}, scramFailedMessage + "SCRAM-SHA-256"},
				{"SCRAM-SHA-256 unknown user", s.saslPlaintext, []kgo.Opt{kgo.SASL(scramSHA256("mallory", scramPassword))}, scramFailedMessage + "SCRAM-SHA-256"},
				{"SCRAM-SHA-512 wrong password", s.saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(scramSHA512(scramUser, "wrong"))}, scramFailedMessage + "SCRAM-SHA-512"},
				{"SCRAM-SHA-512 PLAIN user", s.saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(scramSHA512(plainUser, plainPassword))}, scramFailedMessage + "SCRAM-SHA-512"},
				{"PLAIN wrong password", s.saslPlaintext, []kgo.Opt{kgo.SASL(plainAuth(plainUser, "wrong"))}, plainFailedMessage},
				{"PLAIN unknown user", s.saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(plainAuth("mallory", plainPassword))}, plainFailedMessage},
			} {
				t.Run(c.name, func(t *testing.T) {
					err := pingOnce(c.addr, c.opts...)
					if !errors.Is(err, kerr.SaslAuthenticationFailed) {
						t.Fatalf("ping with bad credentials: %v; want SASL_AUTHENTICATION_FAILED", err)
					}
					if !strings.Contains(err.Error(), c.want) {
						t.Fatalf("ping with bad credentials: %q; want the message %q", err, c.want)
					}
				})
			}
		})

		t.Run("java refused", func(t *testing.T) {
			props := javaProps(t, "badscram",
				"bootstrap.servers="+s.saslSSL,
				"security.protocol=SASL_SSL",
				"sasl.mechanism=SCRAM-SHA-512",
				scramJAASLine(scramUser, "wrong"),
				"ssl.truststore.type=PEM",
				"ssl.truststore.location="+s.ca.CertFile)
			out := runJava(t, secureClient, "authfail", props).stdout
			if want := "AUTHFAIL " + scramFailedMessage + "SCRAM-SHA-512"; strings.TrimSpace(out) != want {
				t.Fatalf("SecureClient authfail printed %q, want %q", out, want)
			}
		})

		t.Run("kcat refused", func(t *testing.T) {
			args := append(s.kcatArgs(plainUser, "wrong"), "-L", "-m", "3")
			res, err := runCmdErr(kcatTimeout, "kcat", args...)
			if err == nil {
				t.Fatalf("kcat -L with a wrong password succeeded:\n%s", res.stdout)
			}
			if want := "SASL authentication error: " + plainFailedMessage; !strings.Contains(res.stderr, want) {
				t.Fatalf("kcat -L with a wrong password: %v; stderr lacks %q:\n%s", err, want, tail(res.stderr, 4<<10))
			}
		})

		t.Run("mTLS without certificate refused", func(t *testing.T) {
			if err := pingOnce(s.ssl, kgo.DialTLSConfig(s.tlsConfig(false))); err == nil {
				t.Fatalf("a client without a certificate got Metadata on the listener with ssl.client.auth=required")
			}
			if err := pingOnce(s.ssl, kgo.DialTLSConfig(s.tlsConfig(true))); err != nil {
				t.Fatalf("a client with a certificate after one without: %v", err)
			}
		})
	})
}

// scramJAASLine is the Java client's sasl.jaas.config for a SCRAM user.
func scramJAASLine(user, pass string) string {
	return fmt.Sprintf(`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, user, pass)
}

// secureClient is the Java program the security tests run: e2e/testdata/SecureClient.java,
// compiled by TestMain.
const secureClient = "SecureClient"

// javaRoundTrip runs SecureClient.java's roundtrip with the client settings in props and
// checks that it read back the clientRecords records it wrote and the broker holds no others.
func javaRoundTrip(t *testing.T, s *securedBroker, props, topic string) {
	t.Helper()
	out := runJava(t, secureClient, "roundtrip", props, topic, fmt.Sprint(clientRecords)).stdout
	checkScript(t, s.Broker, topic, out)
}

// kcatArgs are kcat's options for the SASL_SSL listener with PLAIN credentials.
func (s *securedBroker) kcatArgs(user, pass string) []string {
	return []string{"-b", s.saslSSL,
		"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=PLAIN",
		"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass,
		"-X", "ssl.ca.location=" + s.ca.CertFile}
}

// franzRoundTrip produces clientRecords records to topic with cl and consumes them back
// with the same client, each exactly once and with its value.
func franzRoundTrip(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, clientRecords)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records: %v", len(recs), err)
	}
	seen := map[string]bool{}
	for len(seen) < clientRecords {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(seen), clientRecords, err)
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		for _, r := range fs.Records() {
			k := string(r.Key)
			if want := "v" + strings.TrimPrefix(k, "k"); string(r.Value) != want || seen[k] {
				t.Fatalf("record %q at %d@%d: value %q (want %q), seen before %v", k, r.Partition, r.Offset, r.Value, want, seen[k])
			}
			seen[k] = true
		}
	}
}

// runCmdErr runs a client command that may fail and returns its output and exit error.
func runCmdErr(timeout time.Duration, name string, args ...string) (cmdResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return cmdResult{stdout: stdout.String(), stderr: stderr.String()}, err
}
