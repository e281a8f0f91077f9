package broker

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// nrOpenPath holds the kernel's ceiling for RLIMIT_NOFILE (fs.nr_open).
const nrOpenPath = "/proc/sys/fs/nr_open"

// raiseNoFileLimit lifts this process's open-file limit as far as it is permitted: the soft
// limit to the hard one and, when the process may (root or CAP_SYS_RESOURCE), both to the
// kernel's fs.nr_open. Each partition holds a segment file open, so a broker with thousands of
// partitions runs out of descriptors at the usual 1,024–20,000; Kafka tells operators to raise
// the limit, doing it here when allowed spares them that step. It logs what it set and returns
// the new soft limit. A refused raise of the hard limit is not an error: the soft limit still
// goes up to the old hard one.
func raiseNoFileLimit(logger *slog.Logger) (uint64, error) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		return 0, fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	want := old.Max
	if ceiling, err := readNrOpen(); err != nil {
		logger.Debug("read fs.nr_open; keeping the hard open-file limit", "err", err)
	} else if ceiling > want {
		want = ceiling
	}
	if want > old.Max {
		lim := syscall.Rlimit{Cur: want, Max: want}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
			logger.Info("raised the open-file limit (RLIMIT_NOFILE) to fs.nr_open",
				"soft", lim.Cur, "hard", lim.Max, "was_soft", old.Cur, "was_hard", old.Max)
			return lim.Cur, nil
		}
	}
	if old.Cur >= old.Max {
		return old.Cur, nil
	}
	lim := syscall.Rlimit{Cur: old.Max, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return old.Cur, fmt.Errorf("setrlimit RLIMIT_NOFILE soft %d -> %d: %w", old.Cur, old.Max, err)
	}
	logger.Info("raised the soft open-file limit (RLIMIT_NOFILE) to the hard limit",
		"soft", lim.Cur, "hard", lim.Max, "was_soft", old.Cur)
	return lim.Cur, nil
}

// readNrOpen reads fs.nr_open, the most RLIMIT_NOFILE may be set to.
func readNrOpen() (uint64, error) {
	raw, err := os.ReadFile(nrOpenPath)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", nrOpenPath, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s=%q: %w", nrOpenPath, strings.TrimSpace(string(raw)), err)
	}
	return n, nil
}
