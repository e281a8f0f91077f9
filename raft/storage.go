package raft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"ringbroker/internal/crc32c"
	"ringbroker/internal/fsutil"
)

// Disk layout of DiskStorage, inside its directory:
//
//	wal-<seq:016x>.log              log segments, appended in sequence order
//	snap-<index:016x>.snap          snapshots; the newest valid one is used
//
// A segment is a sequence of records: length (4 bytes, of type and payload), CRC32C of type
// and payload (4 bytes), type (1 byte), payload. An entry record whose index is at or below
// the last entry replayed replaces the entries from there on (a follower's overwritten
// suffix). A hard state record replaces the hard state. Every new segment starts with the
// current hard state, so older segments can be deleted once a snapshot covers their entries.
// A snapshot names the first segment to replay: older ones hold nothing it needs, and after
// a snapshot from the leader they hold a stale log that must not come back.
const (
	walPrefix  = "wal-"
	walSuffix  = ".log"
	snapPrefix = "snap-"
	snapSuffix = ".snap"
	// recordHeader: length, CRC32C.
	recordHeader = 8
	// maxRecordBytes bounds one record so a corrupt length cannot make recovery allocate
	// without limit.
	maxRecordBytes = 256 << 20
	// defaultSegmentBytes is the size after which appends roll to a new segment.
	defaultSegmentBytes = 64 << 20
	// snapMagic starts every snapshot file.
	snapMagic = "RBRAFTSNAP1\n"
)

const (
	recEntry     byte = 1 // payload: encoded Entry
	recHardState byte = 2 // payload: term, vote, commit
)

// DiskOptions tunes a DiskStorage. Zero fields take defaults.
type DiskOptions struct {
	// SegmentBytes rolls the log to a new segment once the active one is this large (64 MiB).
	SegmentBytes int64
	// Logger receives recovery warnings (torn tails truncated); nil discards them.
	Logger *slog.Logger
}

type segment struct {
	seq      uint64
	maxIndex uint64 // highest entry index written to the segment; 0 for none
}

// DiskStorage is the durable log of one core: entries and hard state in CRC-checked
// segments, fsynced before Append returns, plus snapshot files. It is not safe for
// concurrent use.
type DiskStorage struct {
	dir    string
	opts   DiskOptions
	f      *os.File // active segment: segs[len(segs)-1]
	size   int64    // bytes in the active segment
	segs   []segment
	hs     HardState
	snap   *Snapshot
	last   uint64 // last entry index held
	buf    []byte
	logger *slog.Logger
}

// OpenDiskStorage opens (or creates) the storage in dir and returns what it recovered. A
// torn or corrupt tail of the newest segment, left by a crash in the middle of a write, is
// truncated at the first bad record; a bad record in an older segment is an error, since
// its data was once acknowledged.
func OpenDiskStorage(dir string, opts DiskOptions) (*DiskStorage, State, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = defaultSegmentBytes
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, State{}, fmt.Errorf("raft storage: create %s: %w", dir, err)
	}
	s := &DiskStorage{dir: dir, opts: opts, logger: logger}
	st, err := s.recover()
	if err != nil {
		if s.f != nil {
			s.f.Close()
		}
		return nil, State{}, err
	}
	return s, st, nil
}

func (s *DiskStorage) recover() (State, error) {
	names, err := os.ReadDir(s.dir)
	if err != nil {
		return State{}, fmt.Errorf("raft storage: list %s: %w", s.dir, err)
	}
	var snaps []string
	var segSeqs []uint64
	for _, de := range names {
		n := de.Name()
		switch {
		case strings.HasPrefix(n, snapPrefix) && strings.HasSuffix(n, snapSuffix):
			snaps = append(snaps, n)
		case strings.HasPrefix(n, walPrefix) && strings.HasSuffix(n, walSuffix):
			var seq uint64
			if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimPrefix(n, walPrefix), walSuffix), "%016x", &seq); err != nil {
				return State{}, fmt.Errorf("raft storage: segment name %s: %w", n, err)
			}
			segSeqs = append(segSeqs, seq)
		}
	}
	// Newest valid snapshot first.
	slices.Sort(snaps)
	var firstSeg uint64
	for i := len(snaps) - 1; i >= 0; i-- {
		snap, first, err := readSnapshot(filepath.Join(s.dir, snaps[i]))
		if err != nil {
			s.logger.Warn("raft storage: skipping unreadable snapshot", "file", snaps[i], "err", err)
			continue
		}
		s.snap, firstSeg = snap, first
		break
	}
	slices.Sort(segSeqs)
	var st State
	if s.snap != nil {
		st.Snapshot = s.snap
		s.last = s.snap.Meta.Index
	}
	base := s.last
	for i, seq := range segSeqs {
		if seq < firstSeg {
			continue
		}
		lastSeg := i == len(segSeqs)-1
		seg, valid, err := s.replaySegment(seq, lastSeg, base, &st)
		if err != nil {
			return State{}, err
		}
		s.segs = append(s.segs, seg)
		if lastSeg {
			if err := s.openActive(seq, valid); err != nil {
				return State{}, err
			}
		}
	}
	st.HardState = s.hs
	if len(st.Entries) > 0 {
		s.last = st.Entries[len(st.Entries)-1].Index
	}
	if s.f == nil {
		next := uint64(1)
		if len(segSeqs) > 0 {
			next = segSeqs[len(segSeqs)-1] + 1
		}
		if err := s.roll(next); err != nil {
			return State{}, err
		}
	}
	return st, nil
}

// replaySegment reads one segment into st and returns the length of its valid prefix.
func (s *DiskStorage) replaySegment(seq uint64, isLast bool, base uint64, st *State) (segment, int64, error) {
	path := s.segPath(seq)
	f, err := os.Open(path)
	if err != nil {
		return segment{}, 0, fmt.Errorf("raft storage: open %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return segment{}, 0, fmt.Errorf("raft storage: read %s: %w", path, err)
	}
	seg := segment{seq: seq}
	var off int64
	for int(off) < len(data) {
		typ, payload, n, bad := parseRecord(data[off:])
		if bad != "" {
			if !isLast {
				return seg, 0, fmt.Errorf("raft storage: %s at offset %d: %s in a segment that is not the last", path, off, bad)
			}
			s.logger.Warn("raft storage: truncating torn tail", "file", path, "offset", off, "bytes", int64(len(data))-off, "reason", bad)
			break
		}
		if err := s.replayRecord(typ, payload, base, st, &seg); err != nil {
			return seg, 0, fmt.Errorf("raft storage: %s at offset %d: %w", path, off, err)
		}
		off += int64(n)
	}
	return seg, off, nil
}

// parseRecord returns the record at the start of b and its total length, or why it is bad.
func parseRecord(b []byte) (typ byte, payload []byte, n int, bad string) {
	if len(b) < recordHeader+1 {
		return 0, nil, 0, fmt.Sprintf("short header (%d bytes)", len(b))
	}
	length := binary.BigEndian.Uint32(b[0:4])
	if length == 0 || length > maxRecordBytes {
		return 0, nil, 0, fmt.Sprintf("record length %d out of range", length)
	}
	if uint64(len(b)-recordHeader) < uint64(length) {
		return 0, nil, 0, fmt.Sprintf("record of %d bytes cut at %d", length, len(b)-recordHeader)
	}
	body := b[recordHeader : recordHeader+int(length)]
	if crc32c.Checksum(body) != binary.BigEndian.Uint32(b[4:8]) {
		return 0, nil, 0, "CRC mismatch"
	}
	return body[0], body[1:], recordHeader + int(length), ""
}

func (s *DiskStorage) replayRecord(typ byte, payload []byte, base uint64, st *State, seg *segment) error {
	switch typ {
	case recHardState:
		if len(payload) != 24 {
			return fmt.Errorf("hard state record of %d bytes; want 24", len(payload))
		}
		s.hs = HardState{Term: binary.BigEndian.Uint64(payload), Vote: binary.BigEndian.Uint64(payload[8:]), Commit: binary.BigEndian.Uint64(payload[16:])}
	case recEntry:
		d := &decoder{b: payload}
		e := d.entry()
		if d.err != nil {
			return d.err
		}
		seg.maxIndex = max(seg.maxIndex, e.Index)
		if e.Index <= base {
			return nil // covered by the snapshot
		}
		next := base + uint64(len(st.Entries)) + 1
		if e.Index > next {
			return fmt.Errorf("entry %d after entry %d: a gap in the log", e.Index, next-1)
		}
		st.Entries = append(st.Entries[:e.Index-base-1], e)
	default:
		return fmt.Errorf("record type %d unknown", typ)
	}
	return nil
}

func (s *DiskStorage) segPath(seq uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%s%016x%s", walPrefix, seq, walSuffix))
}

// openActive opens segment seq for appending, cutting it to its valid length.
func (s *DiskStorage) openActive(seq uint64, valid int64) error {
	path := s.segPath(seq)
	f, err := os.OpenFile(path, os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("raft storage: open %s: %w", path, err)
	}
	if err := f.Truncate(valid); err != nil {
		f.Close()
		return fmt.Errorf("raft storage: truncate %s to %d: %w", path, valid, err)
	}
	if err := fdatasync(f); err != nil {
		f.Close()
		return fmt.Errorf("raft storage: sync %s: %w", path, err)
	}
	if _, err := f.Seek(valid, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("raft storage: seek %s: %w", path, err)
	}
	s.f, s.size = f, valid
	return nil
}

// roll closes the active segment and starts segment seq with the current hard state.
func (s *DiskStorage) roll(seq uint64) error {
	path := s.segPath(seq)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("raft storage: create %s: %w", path, err)
	}
	rec := appendRecord(nil, recHardState, appendHardState(nil, s.hs))
	if _, err := f.Write(rec); err != nil {
		f.Close()
		return fmt.Errorf("raft storage: write %s: %w", path, err)
	}
	if err := fdatasync(f); err != nil {
		f.Close()
		return fmt.Errorf("raft storage: sync %s: %w", path, err)
	}
	if err := syncDir(s.dir); err != nil {
		f.Close()
		return err
	}
	if s.f != nil {
		if err := s.f.Close(); err != nil {
			f.Close()
			return fmt.Errorf("raft storage: close segment: %w", err)
		}
	}
	s.f, s.size = f, int64(len(rec))
	s.segs = append(s.segs, segment{seq: seq})
	return nil
}

func appendHardState(b []byte, hs HardState) []byte {
	b = binary.BigEndian.AppendUint64(b, hs.Term)
	b = binary.BigEndian.AppendUint64(b, hs.Vote)
	return binary.BigEndian.AppendUint64(b, hs.Commit)
}

func appendRecord(b []byte, typ byte, payload []byte) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)+1))
	b = binary.BigEndian.AppendUint32(b, 0)
	b = append(b, typ)
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b[start+4:], crc32c.Checksum(b[start+recordHeader:]))
	return b
}

// Append writes ents (dropping any stored entries from ents[0].Index on) and then hs (if not
// nil), and fsyncs before returning: after it returns, a crash loses neither.
func (s *DiskStorage) Append(hs *HardState, ents []Entry) error { return s.append(hs, ents, true) }

// append is Append with the fsync optional, for writes whose loss is harmless.
func (s *DiskStorage) append(hs *HardState, ents []Entry, sync bool) error {
	if s.f == nil {
		return errors.New("raft storage: closed")
	}
	if len(ents) == 0 && hs == nil {
		return nil
	}
	if len(ents) > 0 {
		first := ents[0].Index
		if first <= s.snapIndex() || first > s.last+1 {
			return fmt.Errorf("raft storage: append at %d outside (%d, %d]", first, s.snapIndex(), s.last+1)
		}
	}
	b := s.buf[:0]
	var payload []byte
	for _, e := range ents {
		payload = appendEntry(payload[:0], e)
		b = appendRecord(b, recEntry, payload)
	}
	if hs != nil {
		b = appendRecord(b, recHardState, appendHardState(payload[:0], *hs))
	}
	s.buf = b
	if _, err := s.f.Write(b); err != nil {
		return fmt.Errorf("raft storage: write %d bytes to segment %d: %w", len(b), s.segs[len(s.segs)-1].seq, err)
	}
	if sync {
		if err := fdatasync(s.f); err != nil {
			return fmt.Errorf("raft storage: sync segment %d: %w", s.segs[len(s.segs)-1].seq, err)
		}
	}
	s.size += int64(len(b))
	if len(ents) > 0 {
		s.last = ents[len(ents)-1].Index
		seg := &s.segs[len(s.segs)-1]
		seg.maxIndex = max(seg.maxIndex, s.last)
	}
	if hs != nil {
		s.hs = *hs
	}
	if s.size >= s.opts.SegmentBytes {
		return s.roll(s.segs[len(s.segs)-1].seq + 1)
	}
	return nil
}

func (s *DiskStorage) snapIndex() uint64 {
	if s.snap == nil {
		return 0
	}
	return s.snap.Meta.Index
}

// InstallSnapshot makes a snapshot received from the leader durable; it replaces the whole
// stored log.
func (s *DiskStorage) InstallSnapshot(snap *Snapshot) error {
	if err := s.roll(s.segs[len(s.segs)-1].seq + 1); err != nil {
		return err
	}
	first := s.segs[len(s.segs)-1].seq
	if err := s.writeSnapshot(snap, first); err != nil {
		return err
	}
	s.last = snap.Meta.Index
	return nil
}

// SaveSnapshot makes a locally taken snapshot durable and deletes the segments and older
// snapshots it makes unnecessary. The entries after the snapshot stay.
func (s *DiskStorage) SaveSnapshot(snap *Snapshot) error {
	if snap.Meta.Index > s.last || snap.Meta.Index <= s.snapIndex() {
		return fmt.Errorf("raft storage: snapshot at %d outside (%d, %d]", snap.Meta.Index, s.snapIndex(), s.last)
	}
	if err := s.roll(s.segs[len(s.segs)-1].seq + 1); err != nil {
		return err
	}
	first := s.segs[len(s.segs)-1].seq
	for _, seg := range s.segs {
		if seg.maxIndex > snap.Meta.Index {
			first = seg.seq
			break
		}
	}
	return s.writeSnapshot(snap, first)
}

// writeSnapshot writes snap durably (temporary file, fsync, rename, fsync of the
// directory), then deletes segments before firstSeg and older snapshot files.
func (s *DiskStorage) writeSnapshot(snap *Snapshot, firstSeg uint64) error {
	b := []byte(snapMagic)
	b = binary.BigEndian.AppendUint64(b, firstSeg)
	b = appendSnapshotMeta(b, snap.Meta)
	b = binary.BigEndian.AppendUint32(b, uint32(len(snap.Data)))
	b = append(b, snap.Data...)
	b = binary.BigEndian.AppendUint32(b, crc32c.Checksum(b))
	name := fmt.Sprintf("%s%016x%s", snapPrefix, snap.Meta.Index, snapSuffix)
	path := filepath.Join(s.dir, name)
	if err := fsutil.WriteFileAtomic(path, b); err != nil {
		return fmt.Errorf("raft storage: snapshot: %w", err)
	}
	s.snap = snap
	// The snapshot is durable: what it replaces can go.
	kept := s.segs[:0]
	for _, seg := range s.segs {
		if seg.seq >= firstSeg {
			kept = append(kept, seg)
			continue
		}
		if err := os.Remove(s.segPath(seg.seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("raft storage: remove segment %d: %w", seg.seq, err)
		}
	}
	s.segs = kept
	names, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("raft storage: list %s: %w", s.dir, err)
	}
	for _, de := range names {
		n := de.Name()
		if strings.HasPrefix(n, snapPrefix) && n != name {
			if err := os.Remove(filepath.Join(s.dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("raft storage: remove old snapshot %s: %w", n, err)
			}
		}
	}
	return nil
}

// readSnapshot loads a snapshot file and the first segment it names.
func readSnapshot(path string) (*Snapshot, uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("read snapshot %s: %w", path, err)
	}
	if len(b) < len(snapMagic)+4 || string(b[:len(snapMagic)]) != snapMagic {
		return nil, 0, fmt.Errorf("snapshot %s: bad magic or too short (%d bytes)", path, len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32c.Checksum(body) != sum {
		return nil, 0, fmt.Errorf("snapshot %s: CRC mismatch", path)
	}
	d := &decoder{b: body, off: len(snapMagic)}
	first := d.u64("first segment")
	snap := &Snapshot{Meta: d.snapshotMeta()}
	snap.Data = d.bytes("snapshot data")
	if d.err != nil {
		return nil, 0, fmt.Errorf("snapshot %s: %w", path, d.err)
	}
	return snap, first, nil
}

// Close closes the active segment; Append fails afterwards.
func (s *DiskStorage) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return fmt.Errorf("raft storage: close: %w", err)
	}
	return nil
}

func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// syncDir fsyncs dir, making the names created or removed in it durable.
func syncDir(dir string) error {
	if err := fsutil.SyncDir(dir); err != nil {
		return fmt.Errorf("raft storage: %w", err)
	}
	return nil
}
