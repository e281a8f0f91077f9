package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// userHZ is the kernel's clock tick for /proc CPU times (USER_HZ), fixed at
// 100 by the Linux user-space ABI.
const userHZ = 100

// ProcSample is one reading of a process's resource use from /proc.
type ProcSample struct {
	// CPUSeconds is user plus system CPU time consumed so far.
	CPUSeconds float64
	// RSSBytes is the current resident set size.
	RSSBytes uint64
}

// ReadProc samples process pid from /proc/<pid>/stat and /proc/<pid>/status.
// It lets a run report the broker's CPU and memory without an agent, for any
// broker (a JVM or ringbroker) running on this machine.
func ReadProc(pid int) (ProcSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcSample{}, fmt.Errorf("read proc pid=%d: %w", pid, err)
	}
	cpu, err := parseProcStatCPU(stat)
	if err != nil {
		return ProcSample{}, fmt.Errorf("read proc pid=%d: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcSample{}, fmt.Errorf("read proc pid=%d: %w", pid, err)
	}
	rss, err := parseProcStatusRSS(status)
	if err != nil {
		return ProcSample{}, fmt.Errorf("read proc pid=%d: %w", pid, err)
	}
	return ProcSample{CPUSeconds: cpu, RSSBytes: rss}, nil
}

// parseProcStatCPU returns utime+stime in seconds from a /proc/<pid>/stat
// line. The command name may hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseProcStatCPU(stat []byte) (float64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse stat %q: no ')' after the command name", truncate(stat, 64))
	}
	fields := bytes.Fields(stat[i+1:])
	// fields[0] is the state (field 3 of proc(5)); utime and stime are fields 14 and 15.
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("parse stat: %d fields after the command name; want more than %d", len(fields), stime)
	}
	u, err := strconv.ParseUint(string(fields[utime]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse stat utime %q: %w", fields[utime], err)
	}
	s, err := strconv.ParseUint(string(fields[stime]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse stat stime %q: %w", fields[stime], err)
	}
	return float64(u+s) / userHZ, nil
}

// parseProcStatusRSS returns VmRSS in bytes from /proc/<pid>/status.
func parseProcStatusRSS(status []byte) (uint64, error) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("parse status VmRSS %q: want \"<n> kB\"", bytes.TrimSpace(rest))
		}
		kb, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse status VmRSS %q: %w", f[0], err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("parse status: no VmRSS line (a kernel thread or a zombie?)")
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
