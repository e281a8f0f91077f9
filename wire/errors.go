package wire

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringbroker/internal/codec"
)

// ErrFrameTooLarge is returned by FrameReader when a frame's size prefix is
// negative or above the configured maximum. The connection must be closed:
// the stream cannot be resynchronised.
var ErrFrameTooLarge = errors.New("frame size out of range")

// ErrStopFeed, returned by a FrameReader's emit, stops Feed after that
// frame without an error: Feed reports the bytes consumed so far, and the
// caller feeds the rest later (a connection at its in-flight limit).
var ErrStopFeed = errors.New("stop feeding frames")

// ErrTruncated reports input that ends before a field it must contain.
var ErrTruncated = errors.New("truncated")

// ErrUnknownAPIKey reports a request whose API key kmsg does not know; Kafka
// closes the connection for these.
var ErrUnknownAPIKey = errors.New("unknown api key")

// ErrUnsupportedVersion reports a request version above kmsg's maximum for a
// known key; the broker answers ApiVersions with UNSUPPORTED_VERSION and
// closes the connection for other keys.
var ErrUnsupportedVersion = errors.New("unsupported api version")

// ErrDecompressedTooLarge reports decompressed output that would exceed the
// caller's limit; nothing beyond the limit (plus one read) is allocated. It is
// internal/codec's sentinel, so errors.Is matches either name.
var ErrDecompressedTooLarge = codec.ErrDecompressedTooLarge

// ErrUnknownCodec reports a compression codec id outside 0..4 (internal/codec's
// sentinel).
var ErrUnknownCodec = codec.ErrUnknownCodec

// UnsupportedRequestError carries what the broker needs to answer a request
// it cannot decode: the key, version and correlation id read from the header.
// It matches ErrUnknownAPIKey or ErrUnsupportedVersion with errors.Is.
type UnsupportedRequestError struct {
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	// MaxVersion is kmsg's highest version for APIKey, or -1 when the key
	// is unknown.
	MaxVersion int16
}

// Error describes the key and version that were rejected.
func (e *UnsupportedRequestError) Error() string {
	if e.MaxVersion < 0 {
		return fmt.Sprintf("api key %d (version %d, correlation id %d): %v",
			e.APIKey, e.APIVersion, e.CorrelationID, ErrUnknownAPIKey)
	}
	return fmt.Sprintf("api key %d version %d (max %d, correlation id %d): %v",
		e.APIKey, e.APIVersion, e.MaxVersion, e.CorrelationID, ErrUnsupportedVersion)
}

// Is lets errors.Is match the sentinel that describes the failure.
func (e *UnsupportedRequestError) Is(target error) bool {
	if e.MaxVersion < 0 {
		return target == ErrUnknownAPIKey
	}
	return target == ErrUnsupportedVersion
}

// BatchError reports an invalid record batch in a record set. Code is the
// Kafka error the broker answers with; errors.Is(err, kerr.CorruptMessage)
// and friends work through Unwrap.
type BatchError struct {
	// Index is the batch's position in the record set, from 0.
	Index int
	// Pos is the batch's byte offset in the record set.
	Pos int
	// Code is the Kafka error code for this failure.
	Code *kerr.Error
	// Reason is a static description of the check that failed.
	Reason string
	// Got and Want are the offending and expected values of the check.
	Got, Want int64
}

// Error describes the batch, the failed check and the values involved.
func (e *BatchError) Error() string {
	return fmt.Sprintf("record batch %d at byte %d: %s (got %d, want %d): %s",
		e.Index, e.Pos, e.Reason, e.Got, e.Want, e.Code.Message)
}

// Unwrap returns the Kafka error so errors.Is/As reach it.
func (e *BatchError) Unwrap() error { return e.Code }

// ErrorCode maps an error from this package to the Kafka error code to send:
// the code of a wrapped *kerr.Error, UNSUPPORTED_VERSION for unsupported
// requests, CORRUPT_MESSAGE for other decoding failures, 0 for nil.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if errors.Is(err, ErrUnsupportedVersion) {
		return kerr.UnsupportedVersion.Code
	}
	if errors.Is(err, ErrUnknownAPIKey) {
		return kerr.InvalidRequest.Code
	}
	if errors.Is(err, ErrUnknownCodec) {
		return kerr.UnsupportedCompressionType.Code
	}
	return kerr.CorruptMessage.Code
}
