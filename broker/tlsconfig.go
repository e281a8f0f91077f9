package broker

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"

	"ringbroker/internal/pkcs8"
)

// serverTLS builds the TLS settings of an SSL or SASL_SSL listener from its ssl.* keys (each
// one possibly set for the listener alone), reading PEM key and trust stores as Kafka does
// with ssl.keystore.type=PEM.
func (c *Config) serverTLS(listener string) (*tls.Config, error) {
	get := func(key string) string { return c.listenerValue(listener, key) }
	cert, err := loadKeystore(get)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", listener, err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}}
	if tc.MinVersion, tc.MaxVersion, err = tlsVersions(splitList(get("ssl.enabled.protocols"))); err != nil {
		return nil, fmt.Errorf("listener %s: ssl.enabled.protocols: %w", listener, err)
	}
	if suites := splitList(get("ssl.cipher.suites")); len(suites) > 0 {
		if tc.CipherSuites, err = cipherSuites(suites); err != nil {
			return nil, fmt.Errorf("listener %s: ssl.cipher.suites: %w", listener, err)
		}
	}
	switch strings.ToLower(get("ssl.client.auth")) {
	case "required":
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	case "requested":
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	default:
		tc.ClientAuth = tls.NoClientCert
	}
	if tc.ClientAuth != tls.NoClientCert {
		pool, err := loadTruststore(get)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", listener, err)
		}
		if pool == nil {
			return nil, fmt.Errorf("listener %s: ssl.client.auth=%s needs ssl.truststore.location or ssl.truststore.certificates", listener, get("ssl.client.auth"))
		}
		tc.ClientCAs = pool
	}
	return tc, nil
}

// loadKeystore reads the listener's private key and certificate chain: a PEM file
// (ssl.keystore.location) or PEM text (ssl.keystore.certificate.chain and ssl.keystore.key).
func loadKeystore(get func(string) string) (tls.Certificate, error) {
	var certPEM, keyPEM []byte
	switch loc := get("ssl.keystore.location"); {
	case loc != "":
		data, err := os.ReadFile(loc)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		if !isPEM(data) {
			return tls.Certificate{}, fmt.Errorf("ssl.keystore.location=%s (ssl.keystore.type=%s) is not PEM; ringbroker reads PEM key stores only (set ssl.keystore.type=PEM)", loc, get("ssl.keystore.type"))
		}
		certPEM, keyPEM = data, data
	case get("ssl.keystore.certificate.chain") != "":
		certPEM, keyPEM = []byte(get("ssl.keystore.certificate.chain")), []byte(get("ssl.keystore.key"))
	default:
		return tls.Certificate{}, fmt.Errorf("no key store: set ssl.keystore.location (PEM) or ssl.keystore.certificate.chain and ssl.keystore.key")
	}
	keyPEM, err := decryptedKeyPEM(keyPEM, get("ssl.key.password"))
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("key store: %w", err)
	}
	return cert, nil
}

// loadTruststore reads the CA certificates client certificates are checked against; nil
// when none is configured.
func loadTruststore(get func(string) string) (*x509.CertPool, error) {
	var data []byte
	switch loc := get("ssl.truststore.location"); {
	case loc != "":
		var err error
		if data, err = os.ReadFile(loc); err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		if !isPEM(data) {
			return nil, fmt.Errorf("ssl.truststore.location=%s is not PEM; ringbroker reads PEM trust stores only (set ssl.truststore.type=PEM)", loc)
		}
	case get("ssl.truststore.certificates") != "":
		data = []byte(get("ssl.truststore.certificates"))
	default:
		return nil, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("trust store: no PEM certificate in it")
	}
	return pool, nil
}

// isPEM reports whether data holds a PEM block.
func isPEM(data []byte) bool {
	b, _ := pem.Decode(data)
	return b != nil
}

// decryptedKeyPEM returns the PEM blocks of data with an encrypted PKCS#8 private key
// ("ENCRYPTED PRIVATE KEY", as Kafka's PEM key stores hold when ssl.key.password is set)
// replaced by the decrypted key; other blocks pass through.
func decryptedKeyPEM(data []byte, password string) ([]byte, error) {
	var out []byte
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "ENCRYPTED PRIVATE KEY" {
			if password == "" {
				return nil, fmt.Errorf("the private key is encrypted and ssl.key.password is not set")
			}
			der, err := pkcs8.Decrypt(b.Bytes, []byte(password))
			if err != nil {
				return nil, fmt.Errorf("decrypt the private key with ssl.key.password: %w", err)
			}
			b = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
		}
		out = append(out, pem.EncodeToMemory(b)...)
	}
	if out == nil {
		return data, nil
	}
	return out, nil
}

// tlsVersions maps ssl.enabled.protocols to the lowest and highest TLS version served.
func tlsVersions(protocols []string) (lo, hi uint16, err error) {
	for _, p := range protocols {
		var v uint16
		switch p {
		case "TLSv1.2":
			v = tls.VersionTLS12
		case "TLSv1.3":
			v = tls.VersionTLS13
		case "TLSv1.1":
			v = tls.VersionTLS11
		case "TLSv1":
			v = tls.VersionTLS10
		default:
			return 0, 0, fmt.Errorf("unknown protocol %q; want TLSv1.2 or TLSv1.3", p)
		}
		if lo == 0 || v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	if lo == 0 {
		return 0, 0, fmt.Errorf("no protocol enabled")
	}
	return lo, hi, nil
}

// cipherSuites maps IANA cipher suite names (as Kafka's ssl.cipher.suites and Go both name
// them) to Go's ids.
func cipherSuites(names []string) ([]uint16, error) {
	byName := map[string]uint16{}
	for _, s := range tls.CipherSuites() {
		byName[s.Name] = s.ID
	}
	var ids []uint16
	for _, n := range names {
		if strings.HasPrefix(n, "TLS_AES_") || strings.HasPrefix(n, "TLS_CHACHA20_") {
			continue // TLS 1.3 suites are always on in Go.
		}
		id, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("unknown or insecure cipher suite %q", n)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
