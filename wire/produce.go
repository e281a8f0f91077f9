package wire

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DecodeProduce decodes a Produce request body (version 3 or later) into req, reusing the
// topic and partition slices req holds from an earlier request, so that decoding requests of
// a steady shape allocates nothing (kmsg's reader makes new partition slices every time).
// Each partition's Records and the topic names alias body, as with kmsg's unsafe reader, so
// no record byte is copied: body must outlive req's use and stay unchanged meanwhile. It
// accepts what kmsg's reader accepts and yields the same fields; unknown tagged fields are
// skipped rather than kept.
func DecodeProduce(req *kmsg.ProduceRequest, body []byte, version int16) error {
	if version < 3 {
		return fmt.Errorf("produce v%d: only versions 3 and later are decoded", version)
	}
	r := bodyReader{Reader: kbin.Reader{Src: body}, flexible: version >= 9}
	req.Version = version
	req.TransactionID = r.nullableString()
	req.Acks = r.Int16()
	req.TimeoutMillis = r.Int32()
	// Each topic takes at least 2 bytes (18 with its id from v13), each partition 6: a count
	// the rest of the body cannot hold is refused before anything is sized by it.
	topicMin := int64(2)
	if version >= 13 {
		topicMin = 18
	}
	n := r.arrayLen()
	if !r.Ok() || int64(n)*topicMin > int64(len(r.Src)) {
		return fmt.Errorf("produce v%d body of %d bytes: %w", version, len(body), kbin.ErrNotEnoughData)
	}
	req.Topics = resize(req.Topics, n)
	for i := range req.Topics {
		t := &req.Topics[i]
		t.Topic, t.TopicID, t.UnknownTags = "", [16]byte{}, kmsg.Tags{}
		if version <= 12 {
			t.Topic = r.str()
		} else {
			t.TopicID = r.Uuid()
		}
		n := r.arrayLen()
		if !r.Ok() || int64(n)*6 > int64(len(r.Src)) {
			return fmt.Errorf("produce v%d body of %d bytes, topic %d: %w", version, len(body), i, kbin.ErrNotEnoughData)
		}
		t.Partitions = resize(t.Partitions, n)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition = r.Int32()
			p.Records = r.nullableBytes()
			p.UnknownTags = kmsg.Tags{}
			r.skipTags()
		}
		r.skipTags()
	}
	req.UnknownTags = kmsg.Tags{}
	r.skipTags()
	if err := r.Complete(); err != nil {
		return fmt.Errorf("produce v%d body of %d bytes: %w", version, len(body), err)
	}
	return nil
}

// resize is s with length n (none for a negative, null, count), keeping s's backing array and
// the elements in it when it is large enough.
func resize[T any](s []T, n int32) []T {
	if n <= 0 {
		return s[:0]
	}
	if int(n) <= cap(s) {
		return s[:n]
	}
	return append(s[:cap(s)], make([]T, int(n)-cap(s))...)
}

// bodyReader reads the fields of a request body the way kmsg's unsafe reader does: strings and
// bytes alias the source; flexible versions use compact lengths and tagged fields.
type bodyReader struct {
	kbin.Reader
	flexible bool
}

// arrayLen reads an array length: compact (unsigned varint, plus one) when flexible, int32
// before.
func (r *bodyReader) arrayLen() int32 {
	if r.flexible {
		return r.CompactArrayLen()
	}
	return r.ArrayLen()
}

// length reads the length of a string (int16 before flexible versions) or of bytes (int32);
// negative means null.
func (r *bodyReader) length(bytes bool) int {
	switch {
	case r.flexible:
		return int(r.Uvarint()) - 1
	case bytes:
		return int(r.Int32())
	}
	return int(r.Int16())
}

// str reads a non-null string.
func (r *bodyReader) str() string { return kbin.UnsafeString(r.Span(r.length(false))) }

// nullableString reads a nullable string; only a non-null one allocates (its pointer).
func (r *bodyReader) nullableString() *string {
	l := r.length(false)
	if l < 0 {
		return nil
	}
	s := kbin.UnsafeString(r.Span(l))
	return &s
}

// nullableBytes reads nullable bytes.
func (r *bodyReader) nullableBytes() []byte {
	l := r.length(true)
	if l < 0 {
		return nil
	}
	return r.Span(l)
}

// skipTags skips a tagged-field section in flexible versions: a count, then a key, a size and
// that many bytes each.
func (r *bodyReader) skipTags() {
	if !r.flexible {
		return
	}
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint()
		r.Span(int(r.Uvarint()))
	}
}
