package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint")
	for _, want := range []string{"first", "second, longer"} {
		if err := WriteFileAtomic(path, []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("read back %q, %v; want %q", got, err, want)
		}
		if _, err := os.Stat(path + TmpSuffix); !os.IsNotExist(err) {
			t.Fatalf("temporary file left behind: %v", err)
		}
	}
}

func TestWriteFileAtomicMissingDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "checkpoint")
	if err := WriteFileAtomic(path, []byte("x")); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}
