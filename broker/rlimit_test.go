package broker

import (
	"bytes"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestRaiseNoFileLimit checks that the broker's start-up raise leaves the soft open-file limit
// at the hard one, and, when the process may raise its hard limit (CAP_SYS_RESOURCE, which a
// container's root may lack), at fs.nr_open.
func TestRaiseNoFileLimit(t *testing.T) {
	var before syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &before); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	got, err := raiseNoFileLimit(slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var after syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &after); err != nil {
		t.Fatal(err)
	}
	if got != after.Cur || after.Cur != after.Max || after.Max < before.Max {
		t.Fatalf("returned %d, limit now soft %d hard %d (was hard %d); want soft = hard >= old hard", got, after.Cur, after.Max, before.Max)
	}
	ceiling, err := readNrOpen()
	if err != nil {
		t.Fatal(err)
	}
	if hasCapSysResource(t) {
		if after.Max != ceiling {
			t.Fatalf("with CAP_SYS_RESOURCE the hard limit is %d, want fs.nr_open %d", after.Max, ceiling)
		}
		if before.Max < ceiling && !strings.Contains(logs.String(), "fs.nr_open") {
			t.Fatalf("raise not logged: %q", logs.String())
		}
	}
	again, err := raiseNoFileLimit(slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || again != got {
		t.Fatalf("second raise = %d, %v; want %d, nil", again, err, got)
	}
}

// hasCapSysResource reports whether CAP_SYS_RESOURCE (bit 24) is in this process's effective
// capability set, read from /proc/self/status.
func hasCapSysResource(t *testing.T) bool {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				t.Fatalf("parse %q: %v", line, err)
			}
			return caps&(1<<24) != 0
		}
	}
	t.Fatal("no CapEff line in /proc/self/status")
	return false
}
