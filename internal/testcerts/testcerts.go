// Package testcerts makes a throwaway certificate authority and certificates signed by it for
// tests of TLS listeners: PEM files in a directory, as Kafka's ssl.keystore.type=PEM and
// ssl.truststore.type=PEM take them, for the broker and for Java, librdkafka, Python and Go
// clients alike.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority whose certificates tests trust.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is the CA certificate in PEM: a trust store.
	CertFile string
	dir      string
}

// Pair is a certificate and its key, in one PEM file (KeystoreFile: key, then certificate
// chain) and in two (CertFile, KeyFile), with the Go form in TLS.
type Pair struct {
	KeystoreFile string
	CertFile     string
	KeyFile      string
	TLS          tls.Certificate
}

// NewCA makes a CA whose files go in dir.
func NewCA(t testing.TB, dir string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ringbroker test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, CertFile: filepath.Join(dir, "ca.pem"), dir: dir}
	write(t, ca.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// Pool is a pool holding the CA, for Go clients.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Server issues a server certificate for 127.0.0.1 and localhost, named name in its files.
func (ca *CA) Server(t testing.TB, name string) Pair {
	t.Helper()
	return ca.issue(t, name, pkix.Name{CommonName: "localhost", Organization: []string{"ringbroker"}}, x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate with subject CN=cn,O=ringbroker (principal
// "User:CN=cn,O=ringbroker" under Kafka's default mapping).
func (ca *CA) Client(t testing.TB, cn string) Pair {
	t.Helper()
	return ca.issue(t, cn, pkix.Name{CommonName: cn, Organization: []string{"ringbroker"}}, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(t testing.TB, name string, subject pkix.Name, usage x509.ExtKeyUsage) Pair {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	p := Pair{
		KeystoreFile: filepath.Join(ca.dir, name+"-keystore.pem"),
		CertFile:     filepath.Join(ca.dir, name+"-cert.pem"),
		KeyFile:      filepath.Join(ca.dir, name+"-key.pem"),
	}
	write(t, p.KeystoreFile, append(append([]byte{}, keyPEM...), certPEM...))
	write(t, p.CertFile, certPEM)
	write(t, p.KeyFile, keyPEM)
	if p.TLS, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return p
}

func write(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
