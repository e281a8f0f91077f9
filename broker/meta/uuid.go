package meta

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// UUID is a Kafka uuid (topic ids, cluster ids), printed in Kafka's URL-safe base64 form.
type UUID [16]byte

// NewUUID returns a random uuid that, like Kafka's Uuid.randomUuid, is neither zero nor the
// reserved metadata topic id, and does not print with a leading '-' (command-line tools would
// take it for a flag).
func NewUUID() UUID {
	for {
		var u UUID
		if _, err := rand.Read(u[:]); err != nil {
			panic(fmt.Sprintf("crypto/rand failed: %v", err))
		}
		if !u.IsZero() && u != (UUID{15: 1}) && u.String()[0] != '-' {
			return u
		}
	}
}

// IsZero reports whether u is the zero uuid, which Kafka uses for "no topic id".
func (u UUID) IsZero() bool { return u == UUID{} }

// String renders u as Kafka does: URL-safe base64 without padding.
func (u UUID) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// ParseUUID parses Kafka's base64 form.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return u, fmt.Errorf("parse uuid %q: want 22 base64 characters", s)
	}
	copy(u[:], b)
	return u, nil
}

// MarshalText implements encoding.TextMarshaler.
func (u UUID) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (u *UUID) UnmarshalText(b []byte) error {
	p, err := ParseUUID(string(b))
	if err != nil {
		return err
	}
	*u = p
	return nil
}
