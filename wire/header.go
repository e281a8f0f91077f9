package wire

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxAPIKeys bounds the API keys looked up in kmsg; a test checks that kmsg
// defines none at or above it.
const maxAPIKeys = 256

// apiInfo is what header parsing needs to know about one API key.
type apiInfo struct {
	known bool
	max   int16
	// flexFrom is the first flexible version, or -1 if none is.
	flexFrom int16
}

// apiTable is built once from kmsg and never written afterwards: a read-only
// lookup that saves allocating a kmsg request per header parsed.
var apiTable = buildAPITable()

func buildAPITable() (t [maxAPIKeys]apiInfo) {
	for k := range t {
		req := kmsg.RequestForKey(int16(k))
		if req == nil {
			continue
		}
		info := apiInfo{known: true, max: req.MaxVersion(), flexFrom: -1}
		for v := int16(0); v <= info.max; v++ {
			req.SetVersion(v)
			if req.IsFlexible() {
				info.flexFrom = v
				break
			}
		}
		t[k] = info
	}
	return t
}

// MaxVersion returns kmsg's highest version for key, or -1 if the key is
// unknown.
func MaxVersion(key int16) int16 {
	if key < 0 || int(key) >= maxAPIKeys || !apiTable[key].known {
		return -1
	}
	return apiTable[key].max
}

// IsFlexible reports whether version of key uses KIP-482 flexible encoding
// (compact strings and arrays, tagged fields, request header v2). Versions
// above kmsg's maximum are flexible when the maximum is: flexibility never
// goes away once introduced.
func IsFlexible(key, version int16) bool {
	if key < 0 || int(key) >= maxAPIKeys || !apiTable[key].known {
		return false
	}
	f := apiTable[key].flexFrom
	return f >= 0 && version >= f
}

// RequestHeader is a parsed Kafka request header.
type RequestHeader struct {
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	// ClientID is "" for a null client id. It aliases the frame.
	ClientID string
	// Flexible reports request header v2; the response header is then v1,
	// except for ApiVersions, whose response header is always v0.
	Flexible bool
}

const (
	apiKeyControlledShutdown = 7
	apiKeyAPIVersions        = 18
	// headerFixedBytes is key, version and correlation id.
	headerFixedBytes = 8
)

// ParseRequestHeader parses the header at the start of frame and returns it
// with the body that follows. Header v0 (ControlledShutdown v0) has no
// client id; v1 adds a nullable int16-length client id; v2, used by flexible
// versions, adds tagged fields, which are skipped. The client id aliases
// frame.
//
// For an unknown key or a version above kmsg's maximum the error is an
// *UnsupportedRequestError and the returned header holds at least the key,
// version and correlation id, so the broker can answer or close. Truncated
// or malformed input returns an error wrapping ErrTruncated.
func ParseRequestHeader(frame []byte) (RequestHeader, []byte, error) {
	var h RequestHeader
	if len(frame) < headerFixedBytes {
		return h, nil, fmt.Errorf("request header: len(frame)=%d, want at least %d: %w",
			len(frame), headerFixedBytes, ErrTruncated)
	}
	h.APIKey = int16(binary.BigEndian.Uint16(frame))
	h.APIVersion = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	max := MaxVersion(h.APIKey)
	if max < 0 {
		return h, nil, &UnsupportedRequestError{APIKey: h.APIKey, APIVersion: h.APIVersion,
			CorrelationID: h.CorrelationID, MaxVersion: -1}
	}
	var unsupported error
	if h.APIVersion < 0 || h.APIVersion > max {
		unsupported = &UnsupportedRequestError{APIKey: h.APIKey, APIVersion: h.APIVersion,
			CorrelationID: h.CorrelationID, MaxVersion: max}
	}
	h.Flexible = IsFlexible(h.APIKey, h.APIVersion)
	rest := frame[headerFixedBytes:]
	if h.APIKey == apiKeyControlledShutdown && h.APIVersion == 0 {
		return h, rest, unsupported
	}
	clientID, rest, err := readNullableString(rest)
	if err != nil {
		if unsupported != nil {
			return h, nil, unsupported
		}
		return h, nil, fmt.Errorf("request header key %d version %d: client id: %w", h.APIKey, h.APIVersion, err)
	}
	h.ClientID = clientID
	if h.Flexible {
		rest, err = skipTags(rest)
		if err != nil {
			if unsupported != nil {
				return h, nil, unsupported
			}
			return h, nil, fmt.Errorf("request header key %d version %d: tagged fields: %w", h.APIKey, h.APIVersion, err)
		}
	}
	return h, rest, unsupported
}

// readNullableString reads an int16-length string; length -1 is null and
// returns "". The string aliases b.
func readNullableString(b []byte) (string, []byte, error) {
	if len(b) < 2 {
		return "", nil, fmt.Errorf("string length: len=%d, want 2: %w", len(b), ErrTruncated)
	}
	n := int16(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n == -1 {
		return "", b, nil
	}
	if n < 0 || int(n) > len(b) {
		return "", nil, fmt.Errorf("string length %d, %d bytes left: %w", n, len(b), ErrTruncated)
	}
	return unsafeString(b[:n]), b[n:], nil
}

// skipTags skips a tagged-field section: a uvarint count, then per field a
// uvarint tag, a uvarint size and size bytes.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return nil, fmt.Errorf("tag count (varint status %d, value %d, %d bytes): %w", n, count, len(b), ErrTruncated)
	}
	b = b[n:]
	for i := uint64(0); i < count; i++ {
		_, n = binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("tag %d of %d: tag id: %w", i, count, ErrTruncated)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("tag %d of %d: size %d, %d bytes left: %w", i, count, size, len(b)-max(n, 0), ErrTruncated)
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// unsafeString views b as a string without copying; b must not change while
// the string is in use.
func unsafeString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
