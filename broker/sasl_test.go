package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// saslBroker runs a broker with a PLAINTEXT listener (for administration) and a
// SASL_PLAINTEXT one offering PLAIN (user admin) and both SCRAM mechanisms.
func saslBroker(t *testing.T, io string, overrides ...string) *Broker {
	t.Helper()
	return startBroker(t, io, t.TempDir(), append([]string{
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";`,
	}, overrides...)...)
}

// saslClient is a client of the broker's SASL_PLAINTEXT listener authenticating with m.
func saslClient(t *testing.T, b *Broker, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return saslClientOn(t, b, "SASL_PLAINTEXT", m, opts...)
}

// saslClientOn is a client of the broker's listener authenticating with m.
func saslClientOn(t *testing.T, b *Broker, listener string, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.ListenerAddr(listener).String()), kgo.SASL(m), kgo.RequestRetries(0)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestSASLAuthentication: PLAIN users from the listener's JAAS config and SCRAM users created
// with AlterUserScramCredentials authenticate and produce and consume over the SASL listener,
// whose Metadata names its own port; wrong passwords and unknown users get
// SASL_AUTHENTICATION_FAILED.
func TestSASLAuthentication(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, io string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b := saslBroker(t, io)
		adm := kadm.NewClient(newClient(t, b))
		altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
			{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"},
			{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "bob-secret"},
		})
		if err == nil {
			err = altered.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		described, err := adm.DescribeUserSCRAMs(ctx, "alice", "bob")
		if err != nil {
			t.Fatal(err)
		}
		if d := described["bob"]; d.Err != nil || len(d.CredInfos) != 1 || d.CredInfos[0].Mechanism != kadm.ScramSha512 || d.CredInfos[0].Iterations != 8192 {
			t.Fatalf("DescribeUserScramCredentials of bob: %+v", d)
		}
		// Kafka's messages are empty where nothing failed, not null.
		dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		dresp, err := dreq.RequestWith(ctx, newClient(t, b))
		if err != nil || dresp.ErrorMessage == nil || *dresp.ErrorMessage != "" || len(dresp.Results) == 0 ||
			dresp.Results[0].ErrorMessage == nil || *dresp.Results[0].ErrorMessage != "" {
			t.Fatalf("DescribeUserScramCredentials of every user: %v %+v; want empty messages, as Kafka", err, dresp)
		}
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, "secured"); err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(b.ListenerAddr("SASL_PLAINTEXT").String())

		for _, c := range []struct {
			name string
			mech sasl.Mechanism
		}{
			{"PLAIN", plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()},
			{"SCRAM-SHA-256", scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()},
			{"SCRAM-SHA-512", scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()},
		} {
			cl := saslClient(t, b, c.mech, kgo.ConsumeTopics("secured"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("%s: Metadata: %v", c.name, err)
			}
			if len(md.Brokers) != 1 || strconv.Itoa(int(md.Brokers[0].Port)) != port {
				t.Fatalf("%s: Metadata lists %+v; want the SASL listener's port %s", c.name, md.Brokers, port)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secured", Value: []byte(c.name)}).FirstErr(); err != nil {
				t.Fatalf("%s: produce: %v", c.name, err)
			}
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil || fs.NumRecords() == 0 {
				t.Fatalf("%s: fetch: %d records, err %v", c.name, fs.NumRecords(), err)
			}
		}

		for _, c := range []struct {
			name string
			mech sasl.Mechanism
		}{
			{"PLAIN wrong password", plain.Auth{User: "admin", Pass: "guess"}.AsMechanism()},
			{"PLAIN unknown user", plain.Auth{User: "mallory", Pass: "x"}.AsMechanism()},
			{"SCRAM wrong password", scram.Auth{User: "alice", Pass: "guess"}.AsSha256Mechanism()},
			{"SCRAM unknown user", scram.Auth{User: "mallory", Pass: "x"}.AsSha512Mechanism()},
			{"SCRAM wrong mechanism for the user", scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()},
		} {
			_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, saslClient(t, b, c.mech))
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("%s: %v; want SASL_AUTHENTICATION_FAILED", c.name, err)
			}
		}
	})
}

// TestSASLPreAuthentication: before authenticating, a client of the SASL listener gets
// ApiVersions answered, is disconnected for any other request, and a frame announcing
// 100 MiB closes the connection without the broker waiting for (or allocating) it.
func TestSASLPreAuthentication(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		b := saslBroker(t, backend)
		addr := b.ListenerAddr("SASL_PLAINTEXT").String()
		send := func(frame []byte) (net.Conn, []byte, error) {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(frame); err != nil {
				return c, nil, err
			}
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				return c, nil, err
			}
			body := make([]byte, binary.BigEndian.Uint32(size[:]))
			_, err = io.ReadFull(c, body)
			return c, body, err
		}
		request := func(req kmsg.Request) []byte {
			body := req.AppendTo(nil)
			hdr := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
			hdr = binary.BigEndian.AppendUint16(hdr, uint16(req.GetVersion()))
			hdr = binary.BigEndian.AppendUint32(hdr, 7)
			hdr = append(hdr, 0xff, 0xff) // null client id
			if req.IsFlexible() {
				hdr = append(hdr, 0)
			}
			frame := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)+len(body)))
			return append(append(frame, hdr...), body...)
		}
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version = 0
		if _, body, err := send(request(av)); err != nil || len(body) < 6 || binary.BigEndian.Uint16(body[4:6]) != 0 {
			t.Fatalf("ApiVersions before authenticating: %x, %v; want an answer without error", body, err)
		}
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 1
		if _, body, err := send(request(md)); err == nil {
			t.Fatalf("Metadata before authenticating was answered (%d bytes); want the connection closed", len(body))
		}
		huge := binary.BigEndian.AppendUint32(nil, 100<<20)
		if _, _, err := send(append(huge, make([]byte, 1024)...)); err == nil {
			t.Fatal("a frame announcing 100 MiB before authenticating was answered; want the connection closed")
		}
	})
}

// TestSASLReauthentication: with connections.max.reauth.ms the broker gives sessions a
// lifetime (KIP-368); a client that re-authenticates keeps its connection working past it.
func TestSASLReauthentication(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, backend string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b := saslBroker(t, backend, "connections.max.reauth.ms=1000")
		cl := saslClient(t, b, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism(), kgo.AllowAutoTopicCreation())
		var auths, conns uint64
		for i := range 4 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte{byte(i)}}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
			if i == 0 {
				auths, conns = b.metrics.authOK.Get(), b.metrics.accepted.Get()
			}
			time.Sleep(700 * time.Millisecond)
		}
		if n, c := b.metrics.authOK.Get(), b.metrics.accepted.Get(); n <= auths || c != conns {
			t.Fatalf("after 2 s of 1 s sessions: %d authentications (%d after the first produce), %d connections (%d); want more authentications on the same connections", n, auths, c, conns)
		}
	})
}

// TestSASLAuthenticationTimeout: a connection of a SASL listener that trickles bytes without
// authenticating (slow loris) is closed at connections.authentication.timeout.ms, while a
// client that authenticates keeps working.
func TestSASLAuthenticationTimeout(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, backend string) {
		b := saslBroker(t, backend, "connections.authentication.timeout.ms=1000")
		c, err := net.DialTimeout("tcp", b.ListenerAddr("SASL_PLAINTEXT").String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		closed := false
		frame := []byte{0, 0, 0, 40, 0, 18, 0, 3}
		for i := 0; time.Since(start) < 5*time.Second; i++ {
			if _, err := c.Write(frame[i%len(frame) : i%len(frame)+1]); err != nil {
				closed = true
				break
			}
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); err == io.EOF {
				closed = true
				break
			}
		}
		if !closed {
			t.Fatal("a connection trickling bytes without authenticating was still open after 5 s; want it closed after 1 s")
		}
		if d := time.Since(start); d < 900*time.Millisecond {
			t.Fatalf("closed after %v, before the 1 s timeout", d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl := saslClient(t, b, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
		node := cl.Broker(int(b.cfg.NodeID))
		if _, err := node.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatal(err)
		}
		conns := b.metrics.accepted.Get()
		time.Sleep(1500 * time.Millisecond)
		if _, err := node.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatalf("an authenticated client past the timeout: %v", err)
		}
		if n := b.metrics.accepted.Get(); n != conns {
			t.Fatalf("the authenticated client reconnected (%d connections, %d before): its connection was closed at the timeout", n, conns)
		}
	})
}
