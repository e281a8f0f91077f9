package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"ringbroker/internal/testcerts"
)

// TestTLSListeners: an SSL listener requiring client certificates and a SASL_SSL one serve
// produce and fetch (record data read from the segment and encrypted); the certificate's
// subject is the principal (a super user may describe ACLs, another certificate may not), a
// client without a certificate cannot connect, and SASL over TLS authenticates.
func TestTLSListeners(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ca := testcerts.NewCA(t, t.TempDir())
		server, admin, bob := ca.Server(t, "broker"), ca.Client(t, "admin"), ca.Client(t, "bob")
		b := startBroker(t, backend, t.TempDir(),
			"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
			"ssl.keystore.type=PEM", "ssl.keystore.location="+server.KeystoreFile,
			"ssl.truststore.type=PEM", "ssl.truststore.location="+ca.CertFile,
			"listener.name.ssl.ssl.client.auth=required",
			"sasl.enabled.mechanisms=PLAIN",
			`listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`,
			"authorizer.class.name="+standardAuthorizer, "super.users=User:CN=admin,O=ringbroker;User:alice",
		)
		dialer := func(cert *tls.Certificate) kgo.Opt {
			tc := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
			if cert != nil {
				tc.Certificates = []tls.Certificate{*cert}
			}
			return kgo.DialTLSConfig(tc)
		}
		client := func(listener string, opts ...kgo.Opt) *kgo.Client {
			opts = append([]kgo.Opt{kgo.SeedBrokers(b.ListenerAddr(listener).String()), kgo.RequestRetries(0), kgo.DialTimeout(5 * time.Second)}, opts...)
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			return cl
		}
		describeACLs := func(cl *kgo.Client) (int16, error) {
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return 0, err
			}
			return resp.ErrorCode, nil
		}

		adminCl := client("SSL", dialer(&admin.TLS), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("tls"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if code, err := describeACLs(adminCl); err != nil || code != 0 {
			t.Fatalf("DescribeAcls with the super user's certificate: error %d, %v; want allowed", code, err)
		}
		value := make([]byte, 256<<10)
		for i := range value {
			value[i] = byte(i * 7)
		}
		for i := range 20 {
			if err := adminCl.ProduceSync(ctx, &kgo.Record{Topic: "tls", Value: value[i:]}).FirstErr(); err != nil {
				t.Fatalf("produce %d over TLS: %v", i, err)
			}
		}
		got := 0
		for got < 20 {
			fs := adminCl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("fetch over TLS: %v", err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if string(r.Value) != string(value[got:]) {
					t.Fatalf("record %d over TLS: %d bytes that differ from the %d produced", got, len(r.Value), len(value[got:]))
				}
				got++
			})
		}

		if code, err := describeACLs(client("SSL", dialer(&bob.TLS))); err != nil || code != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("DescribeAcls with bob's certificate: error %d, %v; want CLUSTER_AUTHORIZATION_FAILED", code, err)
		}
		if _, err := describeACLs(client("SSL", dialer(nil))); err == nil {
			t.Fatal("a client without a certificate was served on a listener that requires one")
		}
		var opErr *net.OpError
		if _, err := describeACLs(client("SSL")); err == nil || errors.As(err, &opErr) && opErr.Op == "dial" {
			t.Fatalf("a plaintext client of the SSL listener: %v; want a failure after connecting", err)
		}

		alice := client("SASL_SSL", dialer(nil), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
		if code, err := describeACLs(alice); err != nil || code != 0 {
			t.Fatalf("DescribeAcls as alice over SASL_SSL: error %d, %v; want allowed", code, err)
		}
		wrong := client("SASL_SSL", dialer(nil), kgo.SASL(plain.Auth{User: "alice", Pass: "guess"}.AsMechanism()))
		if _, err := describeACLs(wrong); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("a wrong password over SASL_SSL: %v; want SASL_AUTHENTICATION_FAILED", err)
		}
	})
}

// TestPrincipalRules: ssl.principal.mapping.rules as Kafka's documentation shows them.
func TestPrincipalRules(t *testing.T) {
	rules, err := parsePrincipalRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown": "serviceuser",
		"CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown":          "adminuser@admin",
		"CN=kafka1,O=Apache": "kafka1",
		"OU=nobody,O=Apache": "OU=nobody,O=Apache",
	} {
		if got := rules.apply(dn); got != want {
			t.Errorf("%s maps to %q; want %q", dn, got, want)
		}
	}
	if _, err := parsePrincipalRules("RULE:broken"); err == nil {
		t.Error("a rule without its slashes parsed")
	}
}
