package raft

import (
	"encoding/binary"
	"fmt"
)

// Binary encodings of entries, snapshots and messages, shared by the disk log and the
// transport. Integers are big-endian; byte strings and lists carry a 4-byte length.

// maxDecodeLen bounds one length field so corrupt input cannot make a decoder allocate
// without limit.
const maxDecodeLen = 1 << 30

func appendEntry(b []byte, e Entry) []byte {
	b = binary.BigEndian.AppendUint64(b, e.Index)
	b = binary.BigEndian.AppendUint64(b, e.Term)
	b = append(b, byte(e.Type))
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.Data)))
	return append(b, e.Data...)
}

func appendIDs(b []byte, ids []uint64) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		b = binary.BigEndian.AppendUint64(b, id)
	}
	return b
}

func appendSnapshotMeta(b []byte, m SnapshotMeta) []byte {
	b = binary.BigEndian.AppendUint64(b, m.Index)
	b = binary.BigEndian.AppendUint64(b, m.Term)
	b = appendIDs(b, m.Conf.Voters)
	return appendIDs(b, m.Conf.Learners)
}

const (
	flagReject = 1 << iota
	flagTransfer
	flagSnapshot
)

// AppendMessage appends m's encoding to b.
func AppendMessage(b []byte, m Message) []byte {
	b = append(b, byte(m.Type))
	for _, v := range [...]uint64{m.To, m.From, m.Term, m.LogTerm, m.Index, m.Commit, m.RejectHint} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	var flags byte
	if m.Reject {
		flags |= flagReject
	}
	if m.Transfer {
		flags |= flagTransfer
	}
	if m.Snapshot != nil {
		flags |= flagSnapshot
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Entries)))
	for _, e := range m.Entries {
		b = appendEntry(b, e)
	}
	if m.Snapshot != nil {
		b = appendSnapshotMeta(b, m.Snapshot.Meta)
		b = binary.BigEndian.AppendUint32(b, uint32(len(m.Snapshot.Data)))
		b = append(b, m.Snapshot.Data...)
	}
	return b
}

// decoder reads the encodings above, recording the first error instead of panicking.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(what string, n int) {
	if d.err == nil {
		d.err = fmt.Errorf("decode %s at offset %d: need %d bytes, have %d", what, d.off, n, len(d.b)-d.off)
	}
}

func (d *decoder) take(what string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b)-d.off < n {
		d.fail(what, n)
		return nil
	}
	out := d.b[d.off : d.off+n]
	d.off += n
	return out
}

func (d *decoder) u8(what string) byte {
	if p := d.take(what, 1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u32(what string) uint32 {
	if p := d.take(what, 4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if p := d.take(what, 8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// count reads a list length, refusing one that cannot fit in the rest of the input.
func (d *decoder) count(what string, minElem int) int {
	n := d.u32(what)
	if d.err == nil && (n > maxDecodeLen || int(n)*minElem > len(d.b)-d.off) {
		d.err = fmt.Errorf("decode %s at offset %d: %d elements cannot fit in %d bytes", what, d.off, n, len(d.b)-d.off)
		return 0
	}
	return int(n)
}

// bytes reads a length-prefixed byte string, copied so the input buffer can be reused.
func (d *decoder) bytes(what string) []byte {
	n := d.count(what, 1)
	p := d.take(what, n)
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

func (d *decoder) entry() Entry {
	e := Entry{Index: d.u64("entry index"), Term: d.u64("entry term"), Type: EntryType(d.u8("entry type"))}
	e.Data = d.bytes("entry data")
	return e
}

func (d *decoder) ids(what string) []uint64 {
	n := d.count(what, 8)
	if n == 0 {
		return nil
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = d.u64(what)
	}
	return ids
}

func (d *decoder) snapshotMeta() SnapshotMeta {
	m := SnapshotMeta{Index: d.u64("snapshot index"), Term: d.u64("snapshot term")}
	m.Conf.Voters = d.ids("snapshot voters")
	m.Conf.Learners = d.ids("snapshot learners")
	return m
}

// DecodeMessage parses an encoded message. Entry and snapshot data are copied out of b.
func DecodeMessage(b []byte) (Message, error) {
	d := &decoder{b: b}
	m := Message{Type: MessageType(d.u8("message type"))}
	for _, p := range [...]*uint64{&m.To, &m.From, &m.Term, &m.LogTerm, &m.Index, &m.Commit, &m.RejectHint} {
		*p = d.u64("message header")
	}
	flags := d.u8("message flags")
	if d.err == nil && flags&^(flagReject|flagTransfer|flagSnapshot) != 0 {
		return Message{}, fmt.Errorf("decode message: unknown flags %#x", flags)
	}
	m.Reject, m.Transfer = flags&flagReject != 0, flags&flagTransfer != 0
	if n := d.count("message entries", 21); n > 0 {
		m.Entries = make([]Entry, n)
		for i := range m.Entries {
			m.Entries[i] = d.entry()
		}
	}
	if flags&flagSnapshot != 0 {
		m.Snapshot = &Snapshot{Meta: d.snapshotMeta()}
		m.Snapshot.Data = d.bytes("snapshot data")
	}
	if d.err == nil && d.off != len(b) {
		d.err = fmt.Errorf("decode message: %d trailing bytes", len(b)-d.off)
	}
	if d.err != nil {
		return Message{}, d.err
	}
	if m.Type >= numMessageTypes {
		return Message{}, fmt.Errorf("decode message: type %d unknown", m.Type)
	}
	return m, nil
}
