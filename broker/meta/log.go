package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// LogFileName is the file of the single-voter metadata log inside its directory.
const LogFileName = "metadata.log"

// entryHeaderBytes is the size of an entry header: payload length, then CRC32C of the payload.
const entryHeaderBytes = 8

// maxEntryBytes bounds one entry so a corrupt length cannot make recovery allocate without limit.
const maxEntryBytes = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Log is the metadata log of a single voter: each Commit is one entry, fsynced before it is
// applied, so an image that was ever published survives a crash. The Raft issue replaces this
// storage with a quorum; callers keep using Commit and Image.
type Log struct {
	mu     sync.Mutex // serialises Commit; guards f and next
	f      *os.File
	next   int64 // offset of the next entry
	image  atomic.Pointer[Image]
	logger *slog.Logger
}

// OpenLog opens or creates the metadata log in dir, replays it into an image, and truncates a
// torn or corrupt tail left by a crash.
func OpenLog(dir, clusterID string, logger *slog.Logger) (*Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create metadata log dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, LogFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open metadata log %s: %w", path, err)
	}
	l := &Log{f: f, logger: logger}
	im := EmptyImage(clusterID)
	valid, err := replay(f, func(payload []byte) error {
		recs, err := DecodeRecords(payload)
		if err != nil {
			return err
		}
		next, err := im.Apply(l.next, recs)
		if err != nil {
			return fmt.Errorf("apply metadata entry %d: %w", l.next, err)
		}
		im = next
		l.next++
		return nil
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("replay metadata log %s: %w", path, err)
	}
	if st, err := f.Stat(); err == nil && st.Size() > valid {
		logger.Warn("truncating metadata log tail", "path", path, "valid_bytes", valid, "file_bytes", st.Size())
		if err := f.Truncate(valid); err != nil {
			f.Close()
			return nil, fmt.Errorf("truncate metadata log %s to %d: %w", path, valid, err)
		}
	}
	if _, err := f.Seek(valid, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("seek metadata log %s: %w", path, err)
	}
	l.image.Store(im)
	return l, nil
}

// replay calls fn with each intact entry's payload and returns the length of the valid prefix.
// A short or corrupt entry ends the replay; an error from fn aborts it.
func replay(r io.Reader, fn func([]byte) error) (int64, error) {
	var valid int64
	var hdr [entryHeaderBytes]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return valid, nil
		}
		n := binary.BigEndian.Uint32(hdr[0:4])
		sum := binary.BigEndian.Uint32(hdr[4:8])
		if n > maxEntryBytes {
			return valid, nil
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return valid, nil
		}
		if crc32.Checksum(payload, castagnoli) != sum {
			return valid, nil
		}
		if err := fn(payload); err != nil {
			return valid, err
		}
		valid += entryHeaderBytes + int64(n)
	}
}

// Image returns the current image. It never returns nil.
func (l *Log) Image() *Image { return l.image.Load() }

// Commit appends recs as one entry, makes it durable, applies it and publishes the new image.
// Records that do not apply to the current image are refused and nothing is written.
func (l *Log) Commit(recs []Record) (*Image, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil, errors.New("metadata log is closed")
	}
	next, err := l.Image().Apply(l.next, recs)
	if err != nil {
		return nil, err
	}
	payload, err := EncodeRecords(recs)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, entryHeaderBytes, entryHeaderBytes+len(payload))
	binary.BigEndian.PutUint32(buf[0:4], uint32(len(payload)))
	binary.BigEndian.PutUint32(buf[4:8], crc32.Checksum(payload, castagnoli))
	buf = append(buf, payload...)
	if _, err := l.f.Write(buf); err != nil {
		return nil, fmt.Errorf("append metadata entry %d: %w", l.next, err)
	}
	if err := l.f.Sync(); err != nil {
		return nil, fmt.Errorf("sync metadata entry %d: %w", l.next, err)
	}
	l.next++
	l.image.Store(next)
	return next, nil
}

// Close closes the log file. Commit fails afterwards.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("close metadata log: %w", err)
	}
	return nil
}
