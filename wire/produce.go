package wire

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DecodeProduce decodes a Produce request body at version with kmsg's
// unsafe reader: each partition's Records and the topic names alias body,
// so no record byte is copied. body must outlive the returned request and
// stay unchanged while it is in use.
func DecodeProduce(body []byte, version int16) (*kmsg.ProduceRequest, error) {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	if err := req.UnsafeReadFrom(body); err != nil {
		return nil, fmt.Errorf("produce v%d body of %d bytes: %w", version, len(body), err)
	}
	return req, nil
}
