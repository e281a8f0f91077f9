package bench

import (
	"encoding/binary"
	"fmt"
	"time"
)

// StampSize is the number of leading value bytes that carry a record's
// intended send time, so a consumer can measure end-to-end latency from the
// schedule rather than from when the producer got around to sending.
const StampSize = 8

// PutStamp writes t as big-endian Unix nanoseconds into dst[:StampSize].
// dst must be at least StampSize long.
func PutStamp(dst []byte, t time.Time) {
	binary.BigEndian.PutUint64(dst[:StampSize], uint64(t.UnixNano()))
}

// ReadStamp returns the intended send time carried in a record value. The
// value comes from the broker and may be anything: a short value is an error.
func ReadStamp(value []byte) (time.Time, error) {
	if len(value) < StampSize {
		return time.Time{}, fmt.Errorf("read stamp: value has %d bytes; want at least %d", len(value), StampSize)
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(value))), nil
}
