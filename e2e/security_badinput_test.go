package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// hugeFrame is the size the pre-authentication frame announces: 100 MiB, just above
	// socket.request.max.bytes' default and far above sasl.server.max.receive.size's 512 KiB.
	hugeFrame = 100 << 20
	// rssSlack is how much the broker's resident memory may grow while it refuses the huge
	// frame; allocating and filling the frame's buffer would take about hugeFrame.
	rssSlack = 32 << 20
	// bystanderTopic is where the well-behaved client produces after each bad input.
	bystanderTopic = "security-bystander"
)

// TestSecurityBadInput sends hostile input to the TLS and SASL listeners before any
// authentication: garbage instead of a TLS handshake, garbage and out-of-order requests in
// the SASL handshake, SASL tokens that are not PLAIN or SCRAM messages, and a frame
// announcing 100 MiB. Each gets Kafka's answer (the connection closed, after an error code
// where Kafka sends one), the 100 MiB frame is refused without the broker's memory growing by
// its size, and after each a client authenticating with SCRAM over TLS still produces.
func TestSecurityBadInput(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		s := startSecured(t, tg)
		s.CreateTopic(t, bystanderTopic, 1)
		run := func(name string, fn func(t *testing.T)) {
			t.Run(name, func(t *testing.T) {
				fn(t)
				s.bystander(t)
			})
		}

		for _, l := range []struct{ name, addr string }{{"SASL_SSL", s.saslSSL}, {"SSL", s.ssl}} {
			run("TLS garbage on "+l.name, func(t *testing.T) {
				hello := append([]byte{0x16, 0x03, 0x01, 0x01, 0x00}, randomBytes(t, 256)...) // a handshake record of garbage
				apiVersions := kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e")).AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
				for _, garbage := range [][]byte{append([]byte("x"), randomBytes(t, 1023)...), hello, apiVersions} {
					c := dialTCP(t, l.addr)
					writeRaw(t, c, garbage)
					expectClosedAfterAny(t, c)
				}
			})
		}

		for _, l := range []struct {
			name string
			dial func(t *testing.T) net.Conn
		}{
			{"SASL_PLAINTEXT", func(t *testing.T) net.Conn { return dialTCP(t, s.saslPlaintext) }},
			{"SASL_SSL", func(t *testing.T) net.Conn { return s.dialTLS(t, s.saslSSL) }},
		} {
			run("SASL garbage on "+l.name, func(t *testing.T) {
				t.Run("garbage SaslHandshake", func(t *testing.T) {
					// SaslHandshake v1 whose mechanism string runs far past the frame.
					req := []byte{0, 17, 0, 1, 0, 0, 0, 1, 0, 3, 'e', '2', 'e', 0x7f, 0xff, 'P', 'L'}
					c := l.dial(t)
					writeRaw(t, c, append(binary.BigEndian.AppendUint32(nil, uint32(len(req))), req...))
					expectClosed(t, c)
				})
				t.Run("request before handshake", func(t *testing.T) {
					c := l.dial(t)
					writeRaw(t, c, kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e")).AppendRequest(nil, kmsg.NewPtrMetadataRequest(), 1))
					expectClosed(t, c)
				})
				t.Run("SaslAuthenticate before handshake", func(t *testing.T) {
					c := l.dial(t)
					req := kmsg.NewPtrSASLAuthenticateRequest()
					req.Version = 1
					req.SASLAuthBytes = []byte("\x00" + plainUser + "\x00" + plainPassword)
					writeRaw(t, c, kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e")).AppendRequest(nil, req, 1))
					expectClosed(t, c)
				})
				t.Run("unknown mechanism", func(t *testing.T) {
					c := l.dial(t)
					resp := saslHandshake(t, c, "GSSAPI", 1)
					if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
						t.Fatalf("SaslHandshake GSSAPI: error code %d, want %d (UNSUPPORTED_SASL_MECHANISM)", resp.ErrorCode, kerr.UnsupportedSaslMechanism.Code)
					}
					expectClosed(t, c)
				})
				for _, c := range []struct {
					mechanism, message string
				}{
					// PlainSaslServer's message for a token without two NUL separators.
					{"PLAIN", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"},
					{"SCRAM-SHA-256", scramFailedMessage + "SCRAM-SHA-256"},
				} {
					t.Run("garbage "+c.mechanism+" token", func(t *testing.T) {
						conn := l.dial(t)
						if resp := saslHandshake(t, conn, c.mechanism, 1); resp.ErrorCode != 0 {
							t.Fatalf("SaslHandshake %s: error code %d", c.mechanism, resp.ErrorCode)
						}
						garbage := bytes.ReplaceAll(randomBytes(t, 300), []byte{0}, []byte{1})
						resp := saslAuthenticate(t, conn, garbage, 2)
						if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
							t.Fatalf("SaslAuthenticate with garbage: error code %d, want %d (SASL_AUTHENTICATION_FAILED)", resp.ErrorCode, kerr.SaslAuthenticationFailed.Code)
						}
						if resp.ErrorMessage == nil || *resp.ErrorMessage != c.message {
							t.Fatalf("SaslAuthenticate with garbage: message %q, want %q", deref(resp.ErrorMessage), c.message)
						}
						expectClosed(t, conn)
					})
				}
			})

			run("100 MiB frame on "+l.name, func(t *testing.T) {
				var before int64
				if s.Kind() == "ringbroker" {
					before = vmRSS(t, s.pid())
				}
				c := l.dial(t)
				sent := sendHugeFrame(c)
				expectClosedAfterAny(t, c)
				t.Logf("the broker closed the connection; %d bytes of the frame were written", sent)
				if s.Kind() != "ringbroker" {
					return
				}
				after := vmRSS(t, s.pid())
				t.Logf("broker RSS %d KiB before, %d KiB after", before>>10, after>>10)
				if after-before > rssSlack {
					t.Fatalf("broker RSS grew by %d KiB (from %d KiB) while it refused a frame announcing %d bytes; want under %d KiB",
						(after-before)>>10, before>>10, hugeFrame, rssSlack>>10)
				}
			})
		}

		// Out of the handshake, Kafka's request handler answers SaslAuthenticate itself, with
		// ILLEGAL_SASL_STATE, and keeps the connection.
		run("SaslAuthenticate out of the handshake", func(t *testing.T) {
			token := []byte("\x00" + plainUser + "\x00" + plainPassword)
			check := func(t *testing.T, c net.Conn, corr int32) {
				t.Helper()
				resp := saslAuthenticate(t, c, token, corr)
				const want = "SaslAuthenticate request received after successful authentication"
				if resp.ErrorCode != kerr.IllegalSaslState.Code || deref(resp.ErrorMessage) != want {
					t.Fatalf("SaslAuthenticate: error code %d message %q; want %d (ILLEGAL_SASL_STATE) and %q",
						resp.ErrorCode, deref(resp.ErrorMessage), kerr.IllegalSaslState.Code, want)
				}
				// The connection still serves requests.
				apiVersions := kmsg.NewPtrApiVersionsRequest()
				apiVersions.Version = 3
				apiVersions.ClientSoftwareName, apiVersions.ClientSoftwareVersion = "e2e", "1.0"
				roundTrip(t, c, apiVersions, corr+1)
			}
			t.Run("PLAINTEXT", func(t *testing.T) { check(t, dialTCP(t, s.Addr()), 1) })
			t.Run("authenticated", func(t *testing.T) {
				c := dialTCP(t, s.saslPlaintext)
				if resp := saslHandshake(t, c, "PLAIN", 1); resp.ErrorCode != 0 {
					t.Fatalf("SaslHandshake PLAIN: error code %d", resp.ErrorCode)
				}
				if resp := saslAuthenticate(t, c, token, 2); resp.ErrorCode != 0 {
					t.Fatalf("SaslAuthenticate PLAIN: error code %d message %q", resp.ErrorCode, deref(resp.ErrorMessage))
				}
				check(t, c, 3)
			})
		})

		if !s.Alive() {
			t.Fatalf("broker process died")
		}
	})
}

// bystander connects a new client to the SASL_SSL listener with SCRAM-SHA-512 and produces a
// record: the broker still serves well-behaved clients.
func (s *securedBroker) bystander(t *testing.T) {
	t.Helper()
	cl := franz(t, s.saslSSL, kgo.DialTLSConfig(s.tlsConfig(false)), kgo.SASL(scramSHA512(scramUser, scramPassword)),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: bystanderTopic, Value: []byte(t.Name())}).FirstErr(); err != nil {
		t.Fatalf("a well-behaved client after the bad input: produce: %v", err)
	}
	cl.Close()
}

// dialTCP opens a TCP connection to addr, closed when the test ends.
func dialTCP(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dialTLS opens a TLS connection to addr and completes the handshake.
func (s *securedBroker) dialTLS(t *testing.T, addr string) net.Conn {
	t.Helper()
	cfg := s.tlsConfig(false)
	cfg.ServerName, _, _ = net.SplitHostPort(addr)
	c := tls.Client(dialTCP(t, addr), cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.HandshakeContext(ctx); err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	return c
}

// saslHandshake sends SaslHandshake v1 for mechanism and returns the response.
func saslHandshake(t *testing.T, c net.Conn, mechanism string, corr int32) *kmsg.SASLHandshakeResponse {
	t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version = 1
	req.Mechanism = mechanism
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = 1
	if err := resp.ReadFrom(roundTrip(t, c, req, corr)); err != nil {
		t.Fatalf("decode SaslHandshake v1 response: %v", err)
	}
	return resp
}

// saslAuthenticate sends SaslAuthenticate v1 with token and returns the response.
func saslAuthenticate(t *testing.T, c net.Conn, token []byte, corr int32) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version = 1
	req.SASLAuthBytes = token
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = 1
	if err := resp.ReadFrom(roundTrip(t, c, req, corr)); err != nil {
		t.Fatalf("decode SaslAuthenticate v1 response: %v", err)
	}
	return resp
}

// sendHugeFrame writes the size of a hugeFrame-byte frame and then its body, 1 MiB at a time,
// until a write fails (the broker closed the connection) or the whole body is written; it
// returns the bytes written. A broker that buffered the frame would take all of them.
func sendHugeFrame(c net.Conn) int {
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	sent := 0
	_ = c.SetWriteDeadline(time.Now().Add(closeTimeout))
	if _, err := c.Write(binary.BigEndian.AppendUint32(nil, hugeFrame)); err != nil {
		return sent
	}
	for sent < hugeFrame {
		n, err := c.Write(chunk)
		sent += n
		if err != nil {
			break
		}
	}
	return sent
}

// expectClosedAfterAny fails unless the peer closes c within closeTimeout; what it sends first
// (a TLS alert) is read and dropped.
func expectClosedAfterAny(t *testing.T, c net.Conn) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(closeTimeout)); err != nil {
		t.Fatalf("set read deadline: %v", err)
	}
	n, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open %v after the bad input (read %d bytes)", closeTimeout, n)
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random bytes: %v", err)
	}
	return b
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}
