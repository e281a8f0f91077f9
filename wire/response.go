package wire

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AppendResponse appends a complete response frame to dst: the 4-byte size,
// the response header and resp encoded at h.APIVersion. The header is v0
// (correlation id) for non-flexible requests and for every ApiVersions
// response, v1 (correlation id and empty tagged fields) otherwise. resp's
// version is set to h.APIVersion.
func AppendResponse(dst []byte, h RequestHeader, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.CorrelationID))
	if h.Flexible && resp.Key() != apiKeyAPIVersions {
		dst = append(dst, 0)
	}
	resp.SetVersion(h.APIVersion)
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// AppendAPIVersionsUnsupported appends the frame Kafka sends for an
// ApiVersions request whose version is above the broker's maximum: header
// v0 and a v0 body with UNSUPPORTED_VERSION and the full key list, so the
// client can retry with a version both sides know.
func AppendAPIVersionsUnsupported(dst []byte, correlationID int32, keys ...kmsg.ApiVersionsResponseApiKey) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(kerr.UnsupportedVersion.Code))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(keys)))
	for _, k := range keys {
		dst = binary.BigEndian.AppendUint16(dst, uint16(k.ApiKey))
		dst = binary.BigEndian.AppendUint16(dst, uint16(k.MinVersion))
		dst = binary.BigEndian.AppendUint16(dst, uint16(k.MaxVersion))
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
