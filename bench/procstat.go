package bench

import (
	"bytes"
	"errors"
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
	// RSSBytes is the current resident set size: anonymous memory plus
	// mapped file pages (a broker that reads segments through mmap has the
	// page-cache pages it touched here) plus shared memory.
	RSSBytes uint64
	// AnonRSSBytes is the anonymous part of RSSBytes (RssAnon: heap, stacks,
	// private buffers), the memory the process cannot give back to the page
	// cache; 0 on kernels before 4.5, which do not report it.
	AnonRSSBytes uint64
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
	rss, err := parseProcStatusKB(status, "VmRSS")
	if err != nil {
		return ProcSample{}, fmt.Errorf("read proc pid=%d: %w", pid, err)
	}
	anon, err := parseProcStatusKB(status, "RssAnon")
	if err != nil && !errors.Is(err, errNoField) {
		return ProcSample{}, fmt.Errorf("read proc pid=%d: %w", pid, err)
	}
	return ProcSample{CPUSeconds: cpu, RSSBytes: rss, AnonRSSBytes: anon}, nil
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

// errNoField is returned by parseProcStatusKB when the field is absent.
var errNoField = errors.New("no such field")

// parseProcStatusKB returns a "<field>: <n> kB" value of /proc/<pid>/status in bytes.
func parseProcStatusKB(status []byte, field string) (uint64, error) {
	prefix := []byte(field + ":")
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("parse status %s %q: want \"<n> kB\"", field, bytes.TrimSpace(rest))
		}
		kb, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse status %s %q: %w", field, f[0], err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("parse status: %s: %w (a kernel thread or a zombie?)", field, errNoField)
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// MachineSample is one reading of the whole machine's CPU time from /proc/stat, summed over
// its cores.
type MachineSample struct {
	// BusySeconds is CPU time spent on anything but idle and iowait: every process, the
	// kernel's threads and its interrupt handling (loopback networking runs in softirq).
	BusySeconds float64
	// TotalSeconds is all CPU time, busy or not.
	TotalSeconds float64
	// Cores is the number of cores counted.
	Cores int
}

// ReadMachine samples the machine's CPU time from /proc/stat. With the load generator on
// the broker's machine, it tells whether a run's ceiling was the broker's or the machine's.
func ReadMachine() (MachineSample, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineSample{}, fmt.Errorf("read machine cpu: %w", err)
	}
	s, err := parseProcStatMachine(stat)
	if err != nil {
		return MachineSample{}, fmt.Errorf("read machine cpu: %w", err)
	}
	return s, nil
}

// parseProcStatMachine reads the aggregate "cpu" line of /proc/stat (user, nice, system, idle,
// iowait, irq, softirq and steal ticks; guest time is already inside user) and counts the
// per-core "cpuN" lines.
func parseProcStatMachine(stat []byte) (MachineSample, error) {
	var s MachineSample
	found := false
	for line := range bytes.Lines(stat) {
		if rest, ok := bytes.CutPrefix(line, []byte("cpu")); ok && len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9' {
			s.Cores++
			continue
		}
		rest, ok := bytes.CutPrefix(line, []byte("cpu "))
		if !ok {
			continue
		}
		fields := bytes.Fields(rest)
		const idle, iowait, counted = 3, 4, 8
		if len(fields) < counted {
			return MachineSample{}, fmt.Errorf("parse /proc/stat cpu line: %d fields; want at least %d", len(fields), counted)
		}
		var total, notBusy uint64
		for i, f := range fields[:counted] {
			n, err := strconv.ParseUint(string(f), 10, 64)
			if err != nil {
				return MachineSample{}, fmt.Errorf("parse /proc/stat cpu field %d %q: %w", i+1, f, err)
			}
			total += n
			if i == idle || i == iowait {
				notBusy += n
			}
		}
		s.BusySeconds, s.TotalSeconds, found = float64(total-notBusy)/userHZ, float64(total)/userHZ, true
	}
	if !found || s.Cores == 0 {
		return MachineSample{}, fmt.Errorf("parse /proc/stat: aggregate cpu line found: %t, %d per-core lines", found, s.Cores)
	}
	return s, nil
}
