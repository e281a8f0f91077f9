// Package fsutil holds the durable file operations that the partition log and the Raft log
// both need: fsync of a directory, so that created, renamed and removed names survive a crash,
// and the atomic replacement of a small file.
package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// TmpSuffix marks a file WriteFileAtomic is writing; a crash may leave one behind, which the
// owner of the directory removes when it opens it.
const TmpSuffix = ".tmp"

// SyncDir fsyncs the directory dir, making the names created, renamed or removed in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir for fsync: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

// WriteFileAtomic replaces path with data durably: it writes path+TmpSuffix, fsyncs it,
// renames it over path and fsyncs the directory. A reader sees the old contents or the new,
// never a mix; on failure the temporary file is removed.
func WriteFileAtomic(path string, data []byte) error {
	tmp := path + TmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		rerr := os.Remove(tmp)
		if errors.Is(rerr, fs.ErrNotExist) {
			rerr = nil
		}
		return errors.Join(fmt.Errorf("write %s: %w", path, err), rerr)
	}
	return SyncDir(filepath.Dir(path))
}
