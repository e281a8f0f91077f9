package log

import (
	"encoding/binary"
	"fmt"
)

// rawRecord is one record of a v2 batch, sliced from the (decompressed) payload.
type rawRecord struct {
	whole       []byte // the record including its length prefix
	attrs       byte
	tsDelta     int64
	offsetDelta int32
	key         []byte // nil when the key is null
	tombstone   bool   // the value is null
	value       []byte // nil when the value is null
	afterTs     []byte // the bytes after the timestamp delta: offset delta to the end
}

// nextRecord parses the record at the start of p and returns it with its total length. It
// checks every length against p and never panics on malformed input.
func nextRecord(p []byte) (rawRecord, int, error) {
	length, n := binary.Varint(p)
	if n <= 0 || length < 1 || length > int64(len(p)-n) {
		return rawRecord{}, 0, fmt.Errorf("record length %d (varint status %d) with %d bytes left", length, n, len(p))
	}
	total := n + int(length)
	body := p[n:total]
	r := rawRecord{whole: p[:total], attrs: body[0]}
	pos := 1
	var m int
	if r.tsDelta, m = binary.Varint(body[pos:]); m <= 0 {
		return rawRecord{}, 0, fmt.Errorf("record timestamp delta: varint status %d", m)
	}
	pos += m
	r.afterTs = body[pos:]
	od, m := binary.Varint(body[pos:])
	if m <= 0 || od < 0 || od > 1<<31-1 {
		return rawRecord{}, 0, fmt.Errorf("record offset delta %d: varint status %d", od, m)
	}
	r.offsetDelta = int32(od)
	pos += m
	keyLen, m := binary.Varint(body[pos:])
	if m <= 0 || keyLen < -1 || keyLen > int64(len(body)-pos-m) {
		return rawRecord{}, 0, fmt.Errorf("record key length %d (varint status %d) with %d bytes left", keyLen, m, len(body)-pos)
	}
	pos += m
	if keyLen >= 0 {
		r.key = body[pos : pos+int(keyLen)]
		pos += int(keyLen)
	}
	valLen, m := binary.Varint(body[pos:])
	if m <= 0 || valLen < -1 || valLen > int64(len(body)-pos-m) {
		return rawRecord{}, 0, fmt.Errorf("record value length %d (varint status %d) with %d bytes left", valLen, m, len(body)-pos)
	}
	r.tombstone = valLen < 0
	if valLen >= 0 {
		r.value = body[pos+m : pos+m+int(valLen)]
	}
	return r, total, nil
}

// appendRebased appends r with its timestamp delta replaced by tsDelta; the rest of the record
// is copied.
func appendRebased(dst []byte, r *rawRecord, tsDelta int64) []byte {
	var tmp [binary.MaxVarintLen64]byte
	tsLen := binary.PutVarint(tmp[:], tsDelta)
	dst = binary.AppendVarint(dst, int64(1+tsLen+len(r.afterTs)))
	dst = append(dst, r.attrs)
	dst = append(dst, tmp[:tsLen]...)
	return append(dst, r.afterTs...)
}
