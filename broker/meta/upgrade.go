package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"ringbroker/internal/crc32c"
	"ringbroker/internal/fsutil"
	"ringbroker/raft"
)

// oneFileLogName is the metadata log of a single node before a single node became a one-voter
// Raft quorum: one file of entries, each the length of its payload (4 bytes, big endian), the
// CRC32C of the payload (4 bytes) and the payload, a group of records as EncodeRecords writes
// it. Only upgradeOneFileLog reads it; nothing writes it any more.
const oneFileLogName = "metadata.log"

// oneFileMaxEntry bounds one entry of a one-file log, as its writer did, so that a corrupt
// length cannot make the upgrade allocate without limit.
const oneFileMaxEntry = 64 << 20

// upgradeOneFileLog rewrites a single node's one-file metadata log found in dir as the Raft
// log of the one-voter quorum voters: the Raft bootstrap entries, then every entry of the
// old log in order, all committed. The old file is removed once the new log is durable; until
// then anything else in dir was left by an upgrade that did not finish and is replaced, so a
// crash at any point leaves a dir that upgrades again. A dir without the old file is left
// alone. The records are checked against an image first: a log the old code would have
// refused to open is refused here, and nothing is written.
func upgradeOneFileLog(dir string, voters []uint64, clusterID string, logger *slog.Logger) error {
	path := filepath.Join(dir, oneFileLogName)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read one-file metadata log %s: %w", path, err)
	}
	if len(voters) != 1 {
		return fmt.Errorf("%s is the metadata log of a single node from before the single node became a one-voter Raft quorum; "+
			"it upgrades only to a quorum of this node alone, not to %d voters: start this node once without "+
			"controller.quorum.voters (and process.roles) to upgrade it, or move %s away to start with empty metadata", path, len(voters), dir)
	}
	payloads, valid := parseOneFileLog(data)
	if valid < len(data) {
		logger.Warn("one-file metadata log: dropping a torn tail", "path", path, "valid_bytes", valid, "file_bytes", len(data))
	}
	im := EmptyImage(clusterID)
	for i, p := range payloads {
		recs, err := DecodeRecords(p)
		if err == nil {
			im, err = im.Apply(int64(i), recs)
		}
		if err != nil {
			return fmt.Errorf("upgrade one-file metadata log %s: entry %d: %w", path, i, err)
		}
	}
	if err := clearUnfinishedUpgrade(dir); err != nil {
		return err
	}
	st := raft.BootstrapState(voters, nil)
	ents := st.Entries
	for _, p := range payloads {
		ents = append(ents, raft.Entry{Index: uint64(len(ents) + 1), Term: st.HardState.Term, Type: raft.EntryNormal, Data: entryData(UUID{}, p)})
	}
	hs := raft.HardState{Term: st.HardState.Term, Commit: uint64(len(ents))}
	storage, _, err := raft.OpenDiskStorage(dir, raft.DiskOptions{Logger: logger})
	if err != nil {
		return fmt.Errorf("upgrade one-file metadata log %s: %w", path, err)
	}
	err = storage.Append(&hs, ents)
	if cerr := storage.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("upgrade one-file metadata log %s: write the Raft log: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("upgrade one-file metadata log: remove %s: %w", path, err)
	}
	if err := fsutil.SyncDir(dir); err != nil {
		return fmt.Errorf("upgrade one-file metadata log: %w", err)
	}
	logger.Info("upgraded the one-file metadata log to a one-voter Raft log", "dir", dir,
		"entries", len(payloads), "topics", len(im.Topics), "brokers", len(im.Brokers))
	return nil
}

// parseOneFileLog returns the payloads of the intact entries of a one-file log and the length
// of that valid prefix. A short or corrupt entry ends it, as a crash in the middle of an append
// leaves one at the tail.
func parseOneFileLog(b []byte) ([][]byte, int) {
	var out [][]byte
	off := 0
	for len(b)-off >= 8 {
		n := binary.BigEndian.Uint32(b[off:])
		if n > oneFileMaxEntry || uint64(len(b)-off-8) < uint64(n) {
			break
		}
		p := b[off+8 : off+8+int(n)]
		if crc32c.Checksum(p) != binary.BigEndian.Uint32(b[off+4:]) {
			break
		}
		out = append(out, p)
		off += 8 + int(n)
	}
	return out, off
}

// clearUnfinishedUpgrade removes everything in dir but the one-file log: under the old format
// the dir held nothing else, so the rest was written by an upgrade that did not finish.
func clearUnfinishedUpgrade(dir string) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("upgrade one-file metadata log: list %s: %w", dir, err)
	}
	for _, de := range des {
		if de.Name() == oneFileLogName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, de.Name())); err != nil {
			return fmt.Errorf("upgrade one-file metadata log: remove what an unfinished upgrade left: %w", err)
		}
	}
	return nil
}
