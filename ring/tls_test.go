package ring

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testPKI is a CA, a server certificate for 127.0.0.1 and a client certificate, made for one test.
type testPKI struct {
	roots    *x509.CertPool
	server   tls.Certificate
	client   tls.Certificate
	clientDN string          // the client certificate's subject, as x509 prints it
	stranger tls.Certificate // a client certificate of another CA
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ring test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("create CA: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{roots: x509.NewCertPool()}
	p.roots.AddCert(ca)
	p.server = issue(t, ca, caKey, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "broker"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	clientSubject := pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"payments"}, Organization: []string{"Example"}}
	p.client = issue(t, ca, caKey, &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      clientSubject,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	p.clientDN = clientSubject.String()

	otherKey := newKey(t)
	otherTmpl := *caTmpl
	otherTmpl.Subject = pkix.Name{CommonName: "another CA"}
	otherDER, err := x509.CreateCertificate(rand.Reader, &otherTmpl, &otherTmpl, &otherKey.PublicKey, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	other, err := x509.ParseCertificate(otherDER)
	if err != nil {
		t.Fatal(err)
	}
	p.stranger = issue(t, other, otherKey, &x509.Certificate{
		SerialNumber: big.NewInt(4),
		Subject:      pkix.Name{CommonName: "mallory"},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return k
}

// issue signs tmpl with the CA and returns it with its new key.
func issue(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, tmpl *x509.Certificate) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatalf("issue %s: %v", tmpl.Subject, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serverTLS is the server side with client authentication auth.
func (p *testPKI) serverTLS(auth tls.ClientAuthType) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.server}, ClientAuth: auth, ClientCAs: p.roots, MinVersion: tls.VersionTLS12}
}

// clientTLS trusts the test CA and presents certs.
func (p *testPKI) clientTLS(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: p.roots, Certificates: certs}
}

// dialTLS connects to s and completes the handshake with cfg.
func dialTLS(t testing.TB, s *Server, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := dialTLSErr(s, cfg)
	if err != nil {
		t.Fatalf("TLS dial %s: %v", s.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func dialTLSErr(s *Server, cfg *tls.Config) (*tls.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", s.Addr().String(), cfg)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// startTLSServer is startServer with the test PKI's server certificate and no client auth
// unless cfg.TLS is set.
func startTLSServer(t testing.TB, p *testPKI, cfg Config, h Handler) *Server {
	t.Helper()
	if cfg.TLS == nil {
		cfg.TLS = p.serverTLS(tls.NoClientCert)
	}
	s := startServer(t, cfg, h)
	if info := s.TLSInfo(); info.Mode != TLSUserSpace {
		t.Fatalf("TLSInfo()=%+v; want mode %s", info, TLSUserSpace)
	}
	return s
}

// waitOpened takes the next connection the echo handler opened.
func waitOpened(t testing.TB, h *echoHandler) Conn {
	t.Helper()
	select {
	case c := <-h.opened:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no OnOpen")
		return nil
	}
}

// TestTLSEcho pipelines frames from 1 byte to 4 MiB over concurrent TLS connections on both
// backends: every echo comes back whole and in order, every done runs once, and the counters
// see plaintext bytes and one handshake per connection.
func TestTLSEcho(t *testing.T) {
	p := newTestPKI(t)
	sizes := []int{1, 2, 3, 100, 1000, 4095, 16383, 16384, 16385, 65536, 65537, 300_000, 1 << 20, 4 << 20}
	conns, smallPerConn := 8, 150
	if raceEnabled {
		conns, smallPerConn = 4, 40
	}
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s := startTLSServer(t, p, Config{Backend: b, Rings: 2}, h)
			var wg sync.WaitGroup
			for ci := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := dialTLSErr(s, p.clientTLS())
					if err != nil {
						t.Errorf("client %d: dial: %v", ci, err)
						return
					}
					if err := echoOver(c, ci, sizes, smallPerConn); err != nil {
						t.Errorf("client %d: %v", ci, err)
					}
				}()
			}
			wg.Wait()
			waitFor(t, 5*time.Second, "all connections closed", func() bool { return h.closes.Load() == int64(conns) })
			h.checkDones(t)
			st := s.Stats()
			t.Logf("stats: %+v", st)
			if st.Accepted != uint64(conns) || st.Open != 0 || st.TLSHandshakes != uint64(conns) || st.TLSHandshakeErrors != 0 {
				t.Errorf("Accepted=%d Open=%d TLSHandshakes=%d TLSHandshakeErrors=%d; want %d, 0, %d, 0",
					st.Accepted, st.Open, st.TLSHandshakes, st.TLSHandshakeErrors, conns, conns)
			}
			if st.BytesIn != st.BytesOut || st.BytesIn == 0 {
				t.Errorf("BytesIn=%d BytesOut=%d; want the same plaintext bytes both ways", st.BytesIn, st.BytesOut)
			}
		})
	}
}

// TestTLSFill receives large frames over TLS straight into the handler's buffers.
func TestTLSFill(t *testing.T) {
	p := newTestPKI(t)
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newFrameHandler(t)
			s := startTLSServer(t, p, Config{Backend: b, Rings: 1, RecvBufferSize: 16 << 10}, h)
			c := dialTLS(t, s, p.clientTLS())
			go writeFrames(t, c, flowSizes)
			checkFrames(t, h, flowSizes)
			if st := s.Stats(); st.Fills == 0 {
				t.Errorf("Fills=0; want the large frames received by fills (stats %+v)", st)
			}
		})
	}
}

// TestTLSPauseResume pauses after every frame, or leaves the rest of chunks unconsumed, and
// resumes from other goroutines: over TLS too every byte arrives once, in order.
func TestTLSPauseResume(t *testing.T) {
	p := newTestPKI(t)
	for _, b := range backends {
		for _, partial := range []bool{false, true} {
			name := string(b) + "/pause-after-frame"
			if partial {
				name = string(b) + "/partial-consume"
			}
			t.Run(name, func(t *testing.T) {
				h := newFrameHandler(t)
				h.pauseEvery, h.partial, h.resumeDelay = !partial, partial, time.Millisecond
				s := startTLSServer(t, p, Config{Backend: b, Rings: 1, RecvBufferSize: 16 << 10}, h)
				c := dialTLS(t, s, p.clientTLS())
				sizes := append([]int{}, flowSizes...)
				for i := range 200 {
					sizes = append(sizes, 1+i%50)
				}
				go writeFrames(t, c, sizes)
				checkFrames(t, h, sizes)
				if h.resumes.Load() == 0 || s.Stats().Pauses == 0 {
					t.Fatalf("no pauses happened (resumes %d, stats %+v)", h.resumes.Load(), s.Stats())
				}
			})
		}
	}
}

// writeTestFile writes n bytes of a known pattern into a new file and opens it.
func writeTestFile(t testing.TB, n int) ([]byte, *os.File) {
	t.Helper()
	content := make([]byte, n)
	for i := range content {
		content[i] = byte(i*7 + i>>13)
	}
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return content, f
}

// TestTLSSendFileRanges sends memory pieces and file ranges interleaved over TLS while the peer
// reads slowly at first: the ranges are read from the file and encrypted, and the peer gets
// exactly the bytes, in order; every done runs once.
func TestTLSSendFileRanges(t *testing.T) {
	p := newTestPKI(t)
	content, f := writeTestFile(t, 12<<20)
	fd := int(f.Fd())
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := recordingHandler{conns: make(chan Conn, 1)}
			s := startTLSServer(t, p, Config{Backend: b, Rings: 1}, h)
			c := dialTLS(t, s, p.clientTLS())
			sc := <-h.conns
			var want []byte
			var dones atomic.Int64
			const sends = 40
			for i := range sends {
				off := int64(i) * 300_000
				n := 100_000 + i*1000
				head := []byte{byte(i), 1, 2, 3}
				big := bytes.Repeat([]byte{byte(i)}, 20_000) // encrypted from where it is
				ps := []Piece{Bytes(head), FileRange(fd, off, n), Bytes([]byte("tail")), FileRange(fd, off+7, 10), Bytes(big)}
				want = append(want, head...)
				want = append(want, content[off:off+int64(n)]...)
				want = append(want, "tail"...)
				want = append(want, content[off+7:off+17]...)
				want = append(want, big...)
				if err := sc.Send(ps, func() { dones.Add(1) }); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			time.Sleep(50 * time.Millisecond) // let the socket buffer fill
			got := make([]byte, len(want))
			if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("read %d bytes: %v", len(want), err)
			}
			if !bytes.Equal(got, want) {
				i := 0
				for i < len(got) && got[i] == want[i] {
					i++
				}
				t.Fatalf("received bytes differ from byte %d of %d", i, len(want))
			}
			waitFor(t, 5*time.Second, "every done", func() bool { return dones.Load() == sends })
			if st := s.Stats(); st.BytesOut != uint64(len(want)) {
				t.Errorf("BytesOut=%d; want the %d plaintext bytes sent", st.BytesOut, len(want))
			}
		})
	}
}

// TestTLSFileRangePastEOF: a file range longer than its file closes the connection with an
// error naming the read, and still runs done.
func TestTLSFileRangePastEOF(t *testing.T) {
	p := newTestPKI(t)
	_, f := writeTestFile(t, 1000)
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s := startTLSServer(t, p, Config{Backend: b, Rings: 1}, h)
			c := dialTLS(t, s, p.clientTLS())
			sc := waitOpened(t, h)
			done := make(chan struct{})
			if err := sc.Send([]Piece{Bytes([]byte("x")), FileRange(int(f.Fd()), 500, 1000)}, func() { close(done) }); err != nil {
				t.Fatal(err)
			}
			_, _ = readToEnd(c, 5*time.Second)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("done never ran")
			}
			waitFor(t, 5*time.Second, "OnClose", func() bool { return h.closes.Load() == 1 })
			err, _ := h.closeErr(sc.ID())
			if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "read 1000 bytes at 500") {
				t.Errorf("OnClose err=%v; want the short file read", err)
			}
		})
	}
}

// TestTLSBadHandshakes: plaintext bytes, a too old TLS version, a silent client and a client
// stalling mid-ClientHello are each closed without a Handler call (the silent ones after the
// handshake timeout), while a healthy TLS connection keeps echoing throughout.
func TestTLSBadHandshakes(t *testing.T) {
	p := newTestPKI(t)
	const timeout = 400 * time.Millisecond
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			// One ring: had a handshake run on its thread, the stalled ones would stop the healthy client.
			s := startTLSServer(t, p, Config{Backend: b, Rings: 1, HandshakeTimeout: timeout}, h)
			healthy := dialTLS(t, s, p.clientTLS())
			roundTrip(t, healthy, 0)
			stop := make(chan struct{})
			var rounds atomic.Int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 1; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					roundTrip(t, healthy, i)
					rounds.Add(1)
				}
			}()

			// A Kafka ApiVersions request sent in the clear to the TLS port.
			plain := dial(t, s)
			if _, err := plain.Write([]byte{0, 0, 0, 14, 0, 18, 0, 3, 0, 0, 0, 1, 0, 4, 'k', 'c', 'a', 't'}); err != nil {
				t.Fatal(err)
			}
			// A client that only speaks TLS 1.1, below the server's minimum.
			old := p.clientTLS()
			old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
			_, oldErr := dialTLSErr(s, old)
			// A silent client, and one that stops after a few bytes of its ClientHello.
			start, before := time.Now(), rounds.Load()
			silent := dial(t, s)
			stall := dial(t, s)
			if _, err := stall.Write([]byte{22, 3, 1, 0, 200, 1, 0}); err != nil {
				t.Fatal(err)
			}

			if oldErr == nil || !strings.Contains(oldErr.Error(), "protocol version") {
				t.Errorf("TLS 1.1 client: handshake err=%v; want a protocol version alert", oldErr)
			}
			if got, err := readToEnd(plain, 5*time.Second); len(got) != 0 || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("plaintext client: read %q, %v; want the connection closed", got, err)
			}
			for name, c := range map[string]*net.TCPConn{"silent": silent, "stalled": stall} {
				if _, err := readToEnd(c, 5*time.Second); errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("%s client: still open after 5 s; want it closed after %v", name, timeout)
				}
			}
			if d := time.Since(start); d < timeout {
				t.Errorf("silent clients closed after %v; want the handshake timeout %v first", d, timeout)
			}
			if rounds.Load() == before {
				t.Errorf("no healthy round trip while the silent handshakes hung")
			}
			waitFor(t, 5*time.Second, "every failure counted", func() bool { return s.Stats().TLSHandshakeErrors == 4 })
			close(stop)
			wg.Wait()
			roundTrip(t, healthy, 1000)
			st := s.Stats()
			if st.TLSHandshakeTimeouts != 2 || st.TLSHandshakes != 1 || st.Accepted != 5 || st.Open != 1 {
				t.Errorf("stats %+v; want 2 timeouts, 1 handshake, 5 accepted, 1 open", st)
			}
			if n := h.opens.Load(); n != 1 {
				t.Errorf("OnOpen calls=%d; want 1, only the healthy client", n)
			}
			if n := h.closes.Load(); n != 0 {
				t.Errorf("OnClose calls=%d; want 0", n)
			}
			t.Logf("%d healthy round trips meanwhile", rounds.Load())
		})
	}
}

// TestTLSClientAuth: with client certificates required a client without one, or with one of
// another CA, fails the handshake; with one the handler sees its subject, the version and the
// cipher suite in Conn.TLS. With certificates requested a client may come without.
func TestTLSClientAuth(t *testing.T) {
	p := newTestPKI(t)
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s := startTLSServer(t, p, Config{Backend: b, Rings: 1, TLS: p.serverTLS(tls.RequireAndVerifyClientCert)}, h)

			for _, tc := range []struct {
				name  string
				cfg   *tls.Config
				alert string
			}{
				{"no cert, TLS 1.3", p.clientTLS(), "certificate required"},
				{"no cert, TLS 1.2", &tls.Config{RootCAs: p.roots, MaxVersion: tls.VersionTLS12}, "handshake failure"},
				{"cert of another CA", &tls.Config{RootCAs: p.roots, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
					return &p.stranger, nil // even though the server names its CA
				}}, "unknown certificate authority"},
			} {
				// In TLS 1.3 the client finishes first; the server's alert comes with the first read.
				c, err := dialTLSErr(s, tc.cfg)
				if err == nil {
					_ = c.SetDeadline(time.Now().Add(5 * time.Second))
					_, _ = c.Write(frame(1, 10))
					_, err = c.Read(make([]byte, 10))
					c.Close()
				}
				if err == nil || !strings.Contains(err.Error(), tc.alert) {
					t.Errorf("%s: err=%v; want the alert %q", tc.name, err, tc.alert)
				}
			}
			waitFor(t, 5*time.Second, "3 failed handshakes", func() bool { return s.Stats().TLSHandshakeErrors == 3 })
			if n := h.opens.Load(); n != 0 {
				t.Fatalf("OnOpen calls=%d after refused handshakes; want 0", n)
			}

			c := dialTLS(t, s, p.clientTLS(p.client))
			roundTrip(t, c, 1)
			st := waitOpened(t, h).TLS()
			if st == nil || len(st.PeerCertificates) != 1 {
				t.Fatalf("Conn.TLS()=%+v; want the client's certificate", st)
			}
			if dn := st.PeerCertificates[0].Subject.String(); dn != p.clientDN {
				t.Errorf("peer subject %q; want %q", dn, p.clientDN)
			}
			if st.Version != tls.VersionTLS13 || st.CipherSuite == 0 || !st.HandshakeComplete {
				t.Errorf("Conn.TLS() version %x suite %s complete %v; want TLS 1.3, a suite, complete",
					st.Version, tls.CipherSuiteName(st.CipherSuite), st.HandshakeComplete)
			}
			if cs := c.ConnectionState(); cs.CipherSuite != st.CipherSuite {
				t.Errorf("server suite %s, client suite %s", tls.CipherSuiteName(st.CipherSuite), tls.CipherSuiteName(cs.CipherSuite))
			}
		})
	}
	t.Run("requested", func(t *testing.T) {
		h := newEchoHandler(t)
		s := startTLSServer(t, p, Config{Backend: Netpoll, TLS: p.serverTLS(tls.VerifyClientCertIfGiven)}, h)
		roundTrip(t, dialTLS(t, s, p.clientTLS()), 1)
		if st := waitOpened(t, h).TLS(); st == nil || len(st.PeerCertificates) != 0 {
			t.Errorf("no client cert: Conn.TLS()=%+v; want a state without peer certificates", st)
		}
		roundTrip(t, dialTLS(t, s, p.clientTLS(p.client)), 2)
		if st := waitOpened(t, h).TLS(); st == nil || len(st.PeerCertificates) != 1 {
			t.Errorf("with client cert: Conn.TLS()=%+v; want its certificate", st)
		}
	})
}

// TestPlaintextConnTLSNil: Conn.TLS is nil on a plaintext listener, whose TLSInfo says so.
func TestPlaintextConnTLSNil(t *testing.T) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s := startServer(t, Config{Backend: b, Rings: 1}, h)
			roundTrip(t, dial(t, s), 1)
			if st := waitOpened(t, h).TLS(); st != nil {
				t.Errorf("Conn.TLS()=%+v on plaintext; want nil", st)
			}
			if info := s.TLSInfo(); info != (TLSInfo{Mode: TLSOff}) {
				t.Errorf("TLSInfo()=%+v; want mode off", info)
			}
		})
	}
}

// TestTLSCloseFromOtherGoroutine: data sent just before Close arrives whole, then the peer
// reads a clean end of stream; OnClose reports nil and later Sends fail.
func TestTLSCloseFromOtherGoroutine(t *testing.T) {
	p := newTestPKI(t)
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s := startTLSServer(t, p, Config{Backend: b, Rings: 1}, h)
			cl := dialTLS(t, s, p.clientTLS())
			sc := waitOpened(t, h)
			payload := frame(1, 3<<20)
			if err := h.send(sc, [][]byte{payload[:1000], payload[1000:]}); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if err := sc.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := sc.Send(pieces([]byte("late")), nil); !errors.Is(err, ErrClosed) {
				t.Fatalf("Send after Close: %v; want ErrClosed", err)
			}
			got, err := readToEnd(cl, 10*time.Second)
			if err != nil {
				t.Fatalf("client read: %v after %d bytes; want a clean end", err, len(got))
			}
			if !bytes.Equal(got, payload) {
				t.Fatalf("client got %d bytes; want the %d queued before Close", len(got), len(payload))
			}
			waitFor(t, 5*time.Second, "OnClose", func() bool { return h.closes.Load() == 1 })
			if err, _ := h.closeErr(sc.ID()); err != nil {
				t.Errorf("OnClose err=%v; want nil for a local Close", err)
			}
			h.checkDones(t)
		})
	}
}

// rawRecorder keeps every byte read through it: the TLS records as they came off the wire.
type rawRecorder struct {
	net.Conn
	got []byte
}

func (r *rawRecorder) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	r.got = append(r.got, b[:n]...)
	return n, err
}

// TestTLSCloseNotify: Close ends the stream with a close_notify alert after the queued data.
// TLS 1.2 leaves a record's type in clear, so the client can see the last one is an alert.
func TestTLSCloseNotify(t *testing.T) {
	p := newTestPKI(t)
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s := startTLSServer(t, p, Config{Backend: b, Rings: 1}, h)
			raw := &rawRecorder{Conn: dial(t, s)}
			cfg := p.clientTLS()
			cfg.MaxVersion, cfg.ServerName = tls.VersionTLS12, "127.0.0.1"
			c := tls.Client(raw, cfg)
			if err := c.Handshake(); err != nil {
				t.Fatalf("handshake: %v", err)
			}
			sc := waitOpened(t, h)
			if err := sc.Send(pieces([]byte("bye")), nil); err != nil {
				t.Fatal(err)
			}
			sc.Close()
			if got, err := readToEnd(c, 5*time.Second); err != nil || string(got) != "bye" {
				t.Fatalf("client read %q, %v; want \"bye\" and a clean end", got, err)
			}
			var last byte
			for rec := raw.got; len(rec) >= 5; {
				n := 5 + int(rec[3])<<8 + int(rec[4])
				if n > len(rec) {
					t.Fatalf("truncated record of %d bytes, %d left", n, len(rec))
				}
				last, rec = rec[0], rec[n:]
			}
			if last != 21 {
				t.Errorf("last record type %d; want 21, an alert (close_notify)", last)
			}
		})
	}
}

// TestTLSPeerCloses: the peer's close_notify, or its FIN at a record boundary, reaches OnClose
// as io.EOF; a peer that resets mid-stream reaches it as an error.
func TestTLSPeerCloses(t *testing.T) {
	p := newTestPKI(t)
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			s := startTLSServer(t, p, Config{Backend: b, Rings: 1}, h)
			notify := dialTLS(t, s, p.clientTLS())
			roundTrip(t, notify, 1)
			idNotify := waitOpened(t, h).ID()
			notify.Close()

			fin := dialTLS(t, s, p.clientTLS())
			roundTrip(t, fin, 2)
			idFin := waitOpened(t, h).ID()
			fin.NetConn().Close()

			waitFor(t, 5*time.Second, "OnClose", func() bool { return h.closes.Load() == 2 })
			for _, id := range []uint64{idNotify, idFin} {
				if err, _ := h.closeErr(id); !errors.Is(err, io.EOF) {
					t.Errorf("conn %d OnClose err=%v; want io.EOF", id, err)
				}
			}
		})
	}
}

// TestTLSShutdown: idle TLS connections, one with a large queued send, and one still in its
// handshake; Shutdown delivers the send, closes everything at once (not after the handshake
// timeout) and calls OnClose for every opened connection.
func TestTLSShutdown(t *testing.T) {
	p := newTestPKI(t)
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			cfg := Config{Addr: "127.0.0.1:0", Backend: b, Rings: 2, Logger: quietLogger(), TLS: p.serverTLS(tls.NoClientCert)}
			s, err := Listen(cfg, h)
			if b == Uring && errors.Is(err, errUnavailable) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			const idle = 4
			var clients []*tls.Conn
			for i := range idle {
				c := dialTLS(t, s, p.clientTLS())
				roundTrip(t, c, i)
				clients = append(clients, c)
				waitOpened(t, h)
			}
			busy := dialTLS(t, s, p.clientTLS())
			busyConn := waitOpened(t, h)
			handshaking := dial(t, s)
			waitFor(t, 5*time.Second, "the silent client accepted", func() bool { return s.Stats().Accepted == idle+2 })
			payload := frame(9, 2<<20)
			if err := h.send(busyConn, [][]byte{payload}); err != nil {
				t.Fatal(err)
			}
			got := make(chan []byte, 1)
			go func() {
				b, _ := readToEnd(busy, 10*time.Second)
				got <- b
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			if err := s.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Shutdown took %v; want it not to wait for the handshake timeout", d)
			}
			if g := <-got; !bytes.Equal(g, payload) {
				t.Errorf("busy client got %d bytes; want %d", len(g), len(payload))
			}
			if n := h.closes.Load(); n != idle+1 {
				t.Errorf("OnClose calls=%d; want %d", n, idle+1)
			}
			for i, c := range clients {
				if b, err := readToEnd(c, 5*time.Second); err != nil || len(b) != 0 {
					t.Errorf("idle client %d: read %d bytes, err %v; want a clean end", i, len(b), err)
				}
			}
			if _, err := readToEnd(handshaking, 5*time.Second); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("the client in its handshake is still open after Shutdown")
			}
			if st := s.Stats(); st.Open != 0 {
				t.Errorf("Open=%d after Shutdown", st.Open)
			}
			h.checkDones(t)
		})
	}
}

// TestTLSShutdownForced: a TLS peer that never reads holds the drain until ctx ends; Shutdown
// then closes forcibly, reports ctx's error and still calls every done.
func TestTLSShutdownForced(t *testing.T) {
	p := newTestPKI(t)
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			h := newEchoHandler(t)
			cfg := Config{Addr: "127.0.0.1:0", Backend: b, Rings: 1, Logger: quietLogger(), TLS: p.serverTLS(tls.NoClientCert)}
			s, err := Listen(cfg, h)
			if b == Uring && errors.Is(err, errUnavailable) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			dialTLS(t, s, p.clientTLS())
			sc := waitOpened(t, h)
			big := make([]byte, 4<<20)
			for range 8 {
				if err := h.send(sc, [][]byte{big}); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Shutdown=%v; want DeadlineExceeded", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("forced Shutdown took %v", d)
			}
			if n := h.closes.Load(); n != 1 {
				t.Errorf("OnClose calls=%d; want 1", n)
			}
			h.checkDones(t)
		})
	}
}

// TestTLSManyRings: TLS connections accepted by four io_uring rings keep the accepting ring as
// their Loop and count in its stats.
func TestTLSManyRings(t *testing.T) {
	p := newTestPKI(t)
	h := newEchoHandler(t)
	s := startTLSServer(t, p, Config{Backend: Uring, Rings: 4}, h)
	const n = 32
	perLoop := make([]uint64, 4)
	for i := range n {
		roundTrip(t, dialTLS(t, s, p.clientTLS()), i)
		l := waitOpened(t, h).Loop()
		if l < 0 || l >= 4 {
			t.Fatalf("Loop()=%d; want 0..3", l)
		}
		perLoop[l]++
	}
	rs := s.RingStats()
	used := 0
	for i, st := range rs {
		if st.TLSHandshakes != perLoop[i] || st.Accepted != perLoop[i] {
			t.Errorf("ring %d: TLSHandshakes=%d Accepted=%d; want %d, the connections with Loop()=%d", i, st.TLSHandshakes, st.Accepted, perLoop[i], i)
		}
		if perLoop[i] > 0 {
			used++
		}
	}
	if used < 2 {
		t.Errorf("connections per ring %v; want the kernel to spread them", perLoop)
	}
}

// TestTLSConfig: a TLS config without certificates and a negative timeout are refused; the
// timeout defaults to 10 s; Listen works on a clone of the config.
func TestTLSConfig(t *testing.T) {
	p := newTestPKI(t)
	h := newEchoHandler(t)
	if _, err := Listen(Config{Addr: "127.0.0.1:0", TLS: &tls.Config{}, Logger: quietLogger()}, h); err == nil || !strings.Contains(err.Error(), "Certificates") {
		t.Errorf("Listen with a TLS config without certificates: err=%v; want it refused", err)
	}
	if _, err := Listen(Config{Addr: "127.0.0.1:0", TLS: p.serverTLS(tls.NoClientCert), HandshakeTimeout: -time.Second}, h); err == nil || !strings.Contains(err.Error(), "HandshakeTimeout=-1s") {
		t.Errorf("Listen with HandshakeTimeout -1s: err=%v; want it refused", err)
	}
	orig := p.serverTLS(tls.NoClientCert)
	got, err := Config{TLS: orig}.withDefaults()
	if err != nil || got.HandshakeTimeout != 10*time.Second || got.TLS == orig || len(got.TLS.Certificates) != 1 {
		t.Errorf("withDefaults()=%+v, %v; want a 10 s timeout and a clone of the config", got, err)
	}
}

// TestKernelTLSProbe: the kTLS probe agrees with the ULPs the kernel lists, and a TLS
// listener's TLSInfo says records are in user space and why.
func TestKernelTLSProbe(t *testing.T) {
	ulps, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_ulp")
	if err != nil {
		t.Skipf("no tcp_available_ulp: %v", err)
	}
	listed := slices.Contains(strings.Fields(string(ulps)), "tls")
	perr := probeKernelTLS()
	t.Logf("tcp_available_ulp=%q probe=%v", strings.TrimSpace(string(ulps)), perr)
	switch {
	case listed && perr != nil:
		t.Errorf("probe=%v though the kernel lists the tls ULP", perr)
	case perr != nil && !errors.Is(perr, unix.ENOENT):
		t.Errorf("probe=%v; want nil or ENOENT", perr)
	}
	info := tlsInfo(&tls.Config{})
	if info.Mode != TLSUserSpace || info.Reason == "" || perr != nil && !strings.Contains(info.Reason, "TCP_ULP") {
		t.Errorf("tlsInfo=%+v; want user space with the probe's answer", info)
	}
}

// FuzzTLSHandshake feeds arbitrary first bytes from a client to a TLS listener: the server
// closes the connection without any Handler call and without hanging, counting a failed
// handshake.
func FuzzTLSHandshake(f *testing.F) {
	p := newTestPKI(f)
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 14, 0, 18, 0, 3, 0, 0, 0, 1, 0, 4, 'k', 'c', 'a', 't'})
	f.Add([]byte{22, 3, 1, 0, 200, 1, 0})
	f.Add([]byte{22, 3, 3, 0, 5, 1, 0, 0, 1, 0})
	f.Add([]byte{21, 3, 3, 0, 2, 2, 40})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	h := newEchoHandler(f)
	s := startTLSServer(f, p, Config{Backend: Netpoll, HandshakeTimeout: 2 * time.Second}, h)
	var tries uint64 // the fuzz function runs one input at a time
	f.Fuzz(func(t *testing.T, in []byte) {
		// Each try comes from a random loopback address: the server closes first, and reusing
		// a port its TIME_WAIT still holds costs a SYN retransmit (1 s).
		local := &net.TCPAddr{IP: net.IPv4(127, byte(1+mrand.IntN(254)), byte(mrand.IntN(256)), byte(1+mrand.IntN(254)))}
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: local}
		c, err := d.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatalf("dial from %s: %v", local, err)
		}
		defer c.Close()
		if _, err := c.Write(in); err != nil {
			return // the server may have closed already
		}
		_ = c.(*net.TCPConn).CloseWrite()
		if _, err := readToEnd(c, 5*time.Second); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("connection still open 5 s after %d bytes and EOF", len(in))
		}
		// Wait for the server to be done with it, so the coverage of each try is its own.
		tries++
		waitFor(t, 5*time.Second, "the failed handshake counted", func() bool { return s.Stats().TLSHandshakeErrors == tries })
		if n := h.opens.Load(); n != 0 {
			t.Fatalf("OnOpen called %d times for garbage handshakes", n)
		}
	})
}
