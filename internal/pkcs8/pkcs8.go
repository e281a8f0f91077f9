// Package pkcs8 decrypts PKCS#8 EncryptedPrivateKeyInfo (RFC 5958) protected with PBES2
// (RFC 8018: PBKDF2 and AES-CBC), the form of the "ENCRYPTED PRIVATE KEY" PEM blocks that
// Kafka's PEM key stores hold with ssl.key.password and that `openssl pkcs8 -topk8 -v2 aes-256-cbc`
// writes. Go's crypto/x509 reads only unencrypted PKCS#8.
package pkcs8

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

// maxIterations bounds PBKDF2's work so a crafted key cannot stall the process.
const maxIterations = 1 << 20

type encryptedPrivateKeyInfo struct {
	Algo          algorithmIdentifier
	EncryptedData []byte
}

type algorithmIdentifier struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type pbes2Params struct {
	KeyDerivationFunc algorithmIdentifier
	EncryptionScheme  algorithmIdentifier
}

type pbkdf2Params struct {
	Salt           []byte
	IterationCount int
	KeyLength      int                 `asn1:"optional"`
	PRF            algorithmIdentifier `asn1:"optional"`
}

// Decrypt returns the DER PKCS#8 PrivateKeyInfo inside der, an EncryptedPrivateKeyInfo,
// decrypted with password.
func Decrypt(der, password []byte) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil {
		return nil, fmt.Errorf("parse EncryptedPrivateKeyInfo: %w", err)
	} else if len(rest) > 0 {
		return nil, fmt.Errorf("parse EncryptedPrivateKeyInfo: %d trailing bytes", len(rest))
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encryption scheme %v; only PBES2 is supported", info.Algo.Algorithm)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algo.Parameters.FullBytes, &params); err != nil {
		return nil, fmt.Errorf("parse PBES2 parameters: %w", err)
	}
	if !params.KeyDerivationFunc.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("key derivation %v; only PBKDF2 is supported", params.KeyDerivationFunc.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KeyDerivationFunc.Parameters.FullBytes, &kdf); err != nil {
		return nil, fmt.Errorf("parse PBKDF2 parameters: %w", err)
	}
	if kdf.IterationCount < 1 || kdf.IterationCount > maxIterations {
		return nil, fmt.Errorf("PBKDF2 iteration count %d; want 1..%d", kdf.IterationCount, maxIterations)
	}
	prf, err := prfHash(kdf.PRF.Algorithm)
	if err != nil {
		return nil, err
	}
	keyLen, err := aesKeyLen(params.EncryptionScheme.Algorithm)
	if err != nil {
		return nil, err
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.EncryptionScheme.Parameters.FullBytes, &iv); err != nil {
		return nil, fmt.Errorf("parse the cipher's IV: %w", err)
	}
	if len(iv) != aes.BlockSize {
		return nil, fmt.Errorf("IV of %d bytes; want %d", len(iv), aes.BlockSize)
	}
	data := info.EncryptedData
	if len(data) == 0 || len(data)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("encrypted key of %d bytes; want a non-zero multiple of %d", len(data), aes.BlockSize)
	}
	key, err := pbkdf2.Key(prf, string(password), kdf.Salt, kdf.IterationCount, keyLen)
	if err != nil {
		return nil, fmt.Errorf("derive the key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("cipher: %w", err)
	}
	out := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, data)
	pad := int(out[len(out)-1])
	if pad < 1 || pad > aes.BlockSize {
		return nil, errWrongPassword
	}
	for _, p := range out[len(out)-pad:] {
		if int(p) != pad {
			return nil, errWrongPassword
		}
	}
	out = out[:len(out)-pad]
	var probe asn1.RawValue
	if _, err := asn1.Unmarshal(out, &probe); err != nil {
		return nil, errWrongPassword
	}
	return out, nil
}

var errWrongPassword = errors.New("wrong password (the decrypted key is not valid)")

func prfHash(oid asn1.ObjectIdentifier) (func() hash.Hash, error) {
	switch {
	case len(oid) == 0, oid.Equal(oidHMACSHA1):
		return sha1.New, nil
	case oid.Equal(oidHMACSHA256):
		return sha256.New, nil
	case oid.Equal(oidHMACSHA512):
		return sha512.New, nil
	}
	return nil, fmt.Errorf("PBKDF2 PRF %v; want HMAC with SHA-1, SHA-256 or SHA-512", oid)
}

func aesKeyLen(oid asn1.ObjectIdentifier) (int, error) {
	switch {
	case oid.Equal(oidAES128CBC):
		return 16, nil
	case oid.Equal(oidAES192CBC):
		return 24, nil
	case oid.Equal(oidAES256CBC):
		return 32, nil
	}
	return 0, fmt.Errorf("cipher %v; want AES-128/192/256-CBC", oid)
}
