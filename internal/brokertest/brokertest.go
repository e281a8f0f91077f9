// Package brokertest starts real ringbroker processes for the tests that need one: the load
// generator's (bench, cmd/ringbench), tested against the broker they are built to measure, and
// the end-to-end suite (e2e), which also uses its readiness check, free ports and log tails, and
// with the broker's own tests its reading of partition sizes from disk.
// Everything runs over real sockets and files, not against a stand-in. Build compiles
// ./cmd/ringbroker into a temp directory; Start runs it on a free loopback port with a temp log
// directory and no metrics endpoint.
package brokertest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/recordbatch"
)

const (
	// buildTimeout bounds `go build` of the broker on a busy machine.
	buildTimeout = 5 * time.Minute
	// readyTimeout bounds how long the broker may take to answer Metadata.
	readyTimeout = 30 * time.Second
	// stopTimeout bounds a clean shutdown after SIGTERM.
	stopTimeout = 30 * time.Second
	// pollEvery is how often readiness is re-checked.
	pollEvery = 20 * time.Millisecond
	// logTail is how much of the broker's log a failed test prints.
	logTail = 16 << 10
)

// Broker is one running ringbroker process, killed when the test ends.
type Broker struct {
	// Addr is the host:port of its PLAINTEXT listener.
	Addr string
	// PID is the process id, for --broker-pid style sampling.
	PID int

	t    testing.TB
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
}

// Build compiles ./cmd/ringbroker of this module into dir and returns the
// binary's path. Tests call it once and start brokers from the result.
func Build(t testing.TB, dir string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	bin := filepath.Join(dir, "ringbroker")
	// giouring links only with -checklinkname=0 (see the Makefile).
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags=-checklinkname=0", "-o", bin, "ringbroker/cmd/ringbroker")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build ringbroker into %s: %v\n%s", bin, err, out)
	}
	return bin
}

// Start runs the broker binary bin with the given I/O backend (auto, uring or
// netpoll) and extra key=value overrides, and waits until it answers Metadata.
func Start(t testing.TB, bin, ioBackend string, overrides ...string) *Broker {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	args := []string{
		"--io=" + ioBackend,
		"--override", "listeners=PLAINTEXT://" + addr,
		"--override", "log.dirs=" + filepath.Join(dir, "data"),
		"--override", "metrics.listen=",
	}
	for _, o := range overrides {
		args = append(args, "--override", o)
	}
	logPath := filepath.Join(dir, "broker.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("create broker log: %v", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s %s: %v", bin, strings.Join(args, " "), err)
	}
	b := &Broker{Addr: addr, PID: cmd.Process.Pid, t: t, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(b.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // in case a test left it paused
		_ = cmd.Process.Kill()                  // fails only when it already exited
		<-b.done
		if t.Failed() {
			t.Logf("ringbroker log %s (tail):\n%s", logPath, TailFile(logPath, logTail))
		}
	})
	start := time.Now()
	deadline := start.Add(readyTimeout)
	for {
		err := MetadataOK(addr)
		if err == nil {
			break
		}
		select {
		case <-b.done:
			t.Fatalf("ringbroker exited during start (%v):\n%s", cmd.ProcessState, TailFile(logPath, logTail))
		case <-time.After(pollEvery):
		}
		if time.Now().After(deadline) {
			t.Fatalf("ringbroker at %s not ready within %v: %v", addr, readyTimeout, err)
		}
	}
	t.Logf("ringbroker (io=%s, pid %d) ready at %s in %v", ioBackend, b.PID, addr, time.Since(start).Round(time.Millisecond))
	return b
}

// Pause stops the whole broker process (SIGSTOP) for d and resumes it: a
// real stall of every request in flight, as a long GC pause or a blocked
// disk would cause.
func (b *Broker) Pause(d time.Duration) {
	b.t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		b.t.Fatalf("SIGSTOP ringbroker pid %d: %v", b.PID, err)
	}
	<-time.After(d) // the stall itself, not a wait for a condition
	if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		b.t.Fatalf("SIGCONT ringbroker pid %d: %v", b.PID, err)
	}
}

// Stop sends SIGTERM and fails the test unless the broker exits 0 in time.
func (b *Broker) Stop() {
	b.t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.t.Fatalf("SIGTERM ringbroker pid %d: %v", b.PID, err)
	}
	select {
	case <-b.done:
	case <-time.After(stopTimeout):
		b.t.Fatalf("ringbroker pid %d did not exit within %v of SIGTERM", b.PID, stopTimeout)
	}
	if code := b.cmd.ProcessState.ExitCode(); code != 0 {
		b.t.Fatalf("ringbroker pid %d exited %d after SIGTERM; want 0\n%s", b.PID, code, TailFile(b.log, logTail))
	}
}

// MetadataOK asks addr for cluster metadata with a fresh client; nil means a broker answers
// with at least one broker listed.
func MetadataOK(addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return fmt.Errorf("new client for %s: %w", addr, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("metadata from %s: %w", addr, err)
	}
	if len(resp.Brokers) == 0 {
		return errors.New("metadata from " + addr + " lists no brokers")
	}
	return nil
}

// freeAddr returns a loopback host:port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}

// handedOut are the ports FreePort returned in this process. A port is free again once its
// probe closes, and the kernel may hand it to the next bind to port 0: two tests starting
// brokers at once (parallel subtests) got the same one and one broker failed to bind. Ports
// are shared by the whole process, so this record is too.
var handedOut sync.Map

// FreePort returns a loopback TCP port that was free a moment ago and that no earlier call in
// this process returned.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if _, taken := handedOut.LoadOrStore(port, true); !taken {
			return port
		}
	}
	t.Fatal("find a free port: 100 probes in a row gave ports already handed out")
	return 0
}

// TailFile returns the last n bytes of the file at path, or why it could not be read, for the
// logs a failed test prints.
func TailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(open %s: %v)", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(stat %s: %v)", path, err)
	}
	off := max(st.Size()-n, 0)
	buf, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return fmt.Sprintf("(read %s: %v)", path, err)
	}
	return string(buf)
}

// SegmentBytes sums the bytes of the record batches in the segment files (*.log) of a
// partition directory, 0 when it has none: the partition size Kafka's DescribeLogDirs reports,
// read from disk. It walks the batches' framing rather than taking the files' sizes, because
// ringbroker writes zeros ahead of a busy active segment's data (log.padBytes), as Kafka does
// with file.preallocate.
func SegmentBytes(t testing.TB, partitionDir string) int64 {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(partitionDir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range logs {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read segment %s: %v", f, err)
		}
		n += batchBytes(data)
	}
	return n
}

// batchBytes is how many bytes at the start of a segment file are whole record batches: each
// is its offset and length prefix (recordbatch.LogOverhead) plus the length.
func batchBytes(data []byte) int64 {
	var pos int64
	for pos+recordbatch.LogOverhead <= int64(len(data)) {
		length := int64(int32(binary.BigEndian.Uint32(data[pos+recordbatch.OffBatchLength:])))
		if length <= 0 || pos+recordbatch.LogOverhead+length > int64(len(data)) {
			break
		}
		pos += recordbatch.LogOverhead + length
	}
	return pos
}

// ConfigValue renders a config value as the testdata lists of Kafka's config keys write it:
// null for none, "" (two quotes) for the empty string, else the value.
func ConfigValue(v *string) string {
	switch {
	case v == nil:
		return "null"
	case *v == "":
		return `""`
	}
	return *v
}
