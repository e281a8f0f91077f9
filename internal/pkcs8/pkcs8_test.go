package pkcs8

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
)

func readBlock(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s: no PEM block", name)
	}
	return b.Bytes
}

// TestDecrypt: keys written by openssl pkcs8 -topk8 -v2 decrypt to the unencrypted key they
// were made from; a wrong password is refused.
func TestDecrypt(t *testing.T) {
	want := readBlock(t, "plain.pem")
	for _, name := range []string{"aes256-sha256.pem", "aes128-sha1.pem"} {
		t.Run(name, func(t *testing.T) {
			got, err := Decrypt(readBlock(t, name), []byte("s3cret"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("decrypted %d bytes that differ from the plain key (%d bytes)", len(got), len(want))
			}
			if _, err := x509.ParsePKCS8PrivateKey(got); err != nil {
				t.Fatalf("decrypted key does not parse: %v", err)
			}
			if _, err := Decrypt(readBlock(t, name), []byte("wrong")); err == nil {
				t.Fatal("a wrong password decrypted the key")
			}
		})
	}
}

// FuzzDecrypt: no input panics or runs without bound.
func FuzzDecrypt(f *testing.F) {
	data, err := os.ReadFile("testdata/aes128-sha1.pem")
	if err != nil {
		f.Fatal(err)
	}
	b, _ := pem.Decode(data)
	f.Add(b.Bytes, []byte("s3cret"))
	f.Add([]byte{0x30, 0x00}, []byte(""))
	f.Fuzz(func(t *testing.T, der, password []byte) {
		_, _ = Decrypt(der, password)
	})
}
