package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/big"
)

// Kafka's iteration bounds for SCRAM-SHA-256 and SCRAM-SHA-512 credentials (ScramMechanism,
// ScramControlManager). A server refuses to authenticate with fewer than the minimum; the
// controller refuses AlterUserScramCredentials outside the bounds.
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

// The errors Kafka's controller answers AlterUserScramCredentials with, as UNACCEPTABLE_CREDENTIAL
// (93), for iterations outside the bounds. CheckScramIterations wraps them with the values.
var (
	ErrTooFewIterations  = errors.New("Too few iterations")
	ErrTooManyIterations = errors.New("Too many iterations")
)

// CheckScramIterations returns an error wrapping ErrTooFewIterations or ErrTooManyIterations when
// iterations is outside [ScramMinIterations, ScramMaxIterations].
func CheckScramIterations(iterations int) error {
	if iterations < ScramMinIterations {
		return fmt.Errorf("%w: %d, the minimum is %d", ErrTooFewIterations, iterations, ScramMinIterations)
	}
	if iterations > ScramMaxIterations {
		return fmt.Errorf("%w: %d, the maximum is %d", ErrTooManyIterations, iterations, ScramMaxIterations)
	}
	return nil
}

// Credential is a user's SCRAM credential for one mechanism, as Kafka stores it
// (UserScramCredentialRecord): the salt and iteration count sent to the client, StoredKey =
// H(HMAC(SaltedPassword, "Client Key")) to check its proof, and ServerKey =
// HMAC(SaltedPassword, "Server Key") to sign the server's final message.
type Credential struct {
	// Salt is the salt of the salted password, sent to the client.
	Salt []byte
	// Iterations is the iteration count of the salted password, sent to the client.
	Iterations int
	// StoredKey is H(ClientKey), against which the client's proof is checked.
	StoredKey []byte
	// ServerKey signs the server-final message, proving the server knows the credential.
	ServerKey []byte
}

// scramHash returns the hash of a SCRAM mechanism.
func scramHash(mechanism string) (func() hash.Hash, error) {
	switch mechanism {
	case MechanismScramSHA256:
		return sha256.New, nil
	case MechanismScramSHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("%w %s", ErrUnsupportedMechanism, mechanism)
}

// CredentialFromSaltedPassword derives the credential of mechanism from a salted password,
// SaltedPassword = Hi(password, salt, iterations), which is what AlterUserScramCredentials
// carries. It checks the iterations against Kafka's bounds and nothing else: Kafka's controller
// stores whatever salt and salted password an admin client sends (one that was not derived from a
// password never authenticates), and clients and test suites rely on that.
func CredentialFromSaltedPassword(mechanism string, saltedPassword, salt []byte, iterations int) (Credential, error) {
	h, err := scramHash(mechanism)
	if err != nil {
		return Credential{}, err
	}
	if err := CheckScramIterations(iterations); err != nil {
		return Credential{}, err
	}
	clientKey := hmacSum(h, saltedPassword, []byte("Client Key"))
	stored := h()
	stored.Write(clientKey)
	return Credential{
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  stored.Sum(nil),
		ServerKey:  hmacSum(h, saltedPassword, []byte("Server Key")),
	}, nil
}

// SaltedPassword returns Hi(password, salt, iterations) of mechanism (RFC 5802), PBKDF2 with the
// mechanism's HMAC. Like Kafka, it uses the password's UTF-8 bytes without SASLprep.
func SaltedPassword(mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	h, err := scramHash(mechanism)
	if err != nil {
		return nil, err
	}
	if err := CheckScramIterations(iterations); err != nil {
		return nil, err
	}
	sp, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return nil, fmt.Errorf("%s salted password: %w", mechanism, err)
	}
	return sp, nil
}

// CredentialFromPassword derives the credential of mechanism from a plain password, for tests and
// for credentials given in configuration.
func CredentialFromPassword(mechanism, password string, salt []byte, iterations int) (Credential, error) {
	sp, err := SaltedPassword(mechanism, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return CredentialFromSaltedPassword(mechanism, sp, salt, iterations)
}

// NewScramSalt returns a random salt read from rand as Kafka's ScramFormatter makes them: the
// base-36 text of a 130-bit random number.
func NewScramSalt(rand io.Reader) ([]byte, error) {
	s, err := randomBase36(rand)
	if err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// randomBase36 returns the base-36 text of a 130-bit number read from rand, Kafka's
// ScramFormatter.secureRandomString.
func randomBase36(rand io.Reader) (string, error) {
	var b [17]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return base36(b), nil
}

// base36 returns the base-36 text of the low 130 bits of b.
func base36(b [17]byte) string {
	b[0] &= 0x03
	return new(big.Int).SetBytes(b[:]).Text(36)
}

// hmacSum returns HMAC(key, msg) with hash h.
func hmacSum(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}
