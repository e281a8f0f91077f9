package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ringbroker/internal/testutil"
)

// javaApp is one run of a Java program from e2e/testdata, compiled by TestMain, on the
// Apache Kafka classpath. It keeps the lines the program prints on stdout
// for the test to wait on, and its stderr for failures.
type javaApp struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed once the process exited and its stdout was read

	mu     sync.Mutex
	lines  []string
	stderr bytes.Buffer
}

// lockedWriter appends to the app's stderr buffer under its lock, so that a failing test
// can print it while the process still runs.
type lockedWriter struct{ a *javaApp }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.a.mu.Lock()
	defer w.a.mu.Unlock()
	return w.a.stderr.Write(p)
}

// startJavaApp runs program (the class of e2e/testdata/<program>.java) with args; heap is
// its -Xmx. The process is killed when the test ends, and its stderr printed if the test failed.
func startJavaApp(t *testing.T, name, program, heap string, args ...string) *javaApp {
	t.Helper()
	log4j := filepath.Join(t.TempDir(), "log4j2-app.properties")
	writeFile(t, log4j, log4jConfig("warn", "SYSTEM_ERR"))
	argv := javaArgs(t, []string{"-Xmx" + heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile=" + log4j}, program, args...)
	a := &javaApp{name: name, cmd: exec.Command("java", argv...), done: make(chan struct{})}
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("%s: stdout pipe: %v", name, err)
	}
	a.cmd.Stderr = lockedWriter{a}
	if a.stdin, err = a.cmd.StdinPipe(); err != nil {
		t.Fatalf("%s: stdin pipe: %v", name, err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start %s (%s): %v", name, program, err)
	}
	go func() {
		defer close(a.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			a.mu.Lock()
			a.lines = append(a.lines, sc.Text())
			a.mu.Unlock()
		}
		_ = a.cmd.Wait() // the exit status is checked by stop; a killed app fails here
	}()
	t.Cleanup(func() {
		_ = a.cmd.Process.Kill() // already gone unless the test failed midway
		<-a.done
		if t.Failed() {
			t.Logf("%s stderr (tail):\n%s", name, a.stderrTail())
		}
	})
	return a
}

func (a *javaApp) stderrTail() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return tail(a.stderr.String(), 6<<10)
}

// count returns how many lines the app printed that start with prefix.
func (a *javaApp) count(prefix string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, l := range a.lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// linesWith returns the lines the app printed that start with prefix.
func (a *javaApp) linesWith(prefix string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, l := range a.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// exited reports whether the process has ended.
func (a *javaApp) exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// alive fails the test at once when the app has exited: a condition waiting on its work
// calls it so that a crashed app ends the wait at once instead of at a timeout.
func (a *javaApp) alive(t *testing.T) {
	t.Helper()
	if a.exited() {
		t.Fatalf("%s exited (%v); stdout ends %q (its stderr follows)", a.name, a.cmd.ProcessState, a.lastLines(5))
	}
}

func (a *javaApp) lastLines(n int) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.lines[max(0, len(a.lines)-n):]...)
}

// await waits until the app has printed n lines starting with prefix, failing the test if
// it exits first or timeout passes.
func (a *javaApp) await(t *testing.T, prefix string, n int, timeout time.Duration) {
	t.Helper()
	testutil.WaitFor(t, timeout, func() error {
		if a.count(prefix) >= n {
			return nil
		}
		a.alive(t)
		return fmt.Errorf("%s: %d lines %q of %d; last lines %q", a.name, a.count(prefix), prefix, n, a.lastLines(3))
	})
}

// send writes one line to the app's stdin.
func (a *javaApp) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(a.stdin, line+"\n"); err != nil {
		t.Fatalf("%s: write %q to stdin: %v", a.name, line, err)
	}
}

// kill ends the app with SIGKILL, as a crash, and waits until it is gone.
func (a *javaApp) kill(t *testing.T) {
	t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", a.name, err)
	}
	<-a.done
}

// stop closes the app's stdin, which asks it to finish, and fails the test unless it
// exits 0 within timeout.
func (a *javaApp) stop(t *testing.T, timeout time.Duration) {
	t.Helper()
	_ = a.stdin.Close() // end of file on stdin is the stop request
	select {
	case <-a.done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v of stop", a.name, timeout)
	}
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("%s exited with %d (its stderr follows)", a.name, code)
	}
}
