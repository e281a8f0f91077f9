// Package deploy holds no code, only the checks of the packaging beside it: the `make dist`
// tarball, the sample configurations, the systemd unit and user, and the container recipe.
package deploy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = ".."

// distVersion is the VERSION the tests build the tarball with.
const distVersion = "test"

var (
	distOnce sync.Once
	distDir  string // the unpacked tarball
	distTar  string // the tarball
	distErr  error
	scratch  string // removed by TestMain
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ringbroker-dist-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scratch = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// dist runs `make dist` once for the package's tests and returns the unpacked tarball's
// directory and the tarball.
func dist(t *testing.T) (dir, tarball string) {
	t.Helper()
	distOnce.Do(func() {
		out := filepath.Join(scratch, "dist")
		cmd := exec.Command("make", "-C", repoRoot, "dist", "VERSION="+distVersion, "DIST="+out)
		if b, err := cmd.CombinedOutput(); err != nil {
			distErr = fmt.Errorf("make dist: %v\n%s", err, b)
			return
		}
		distTar = filepath.Join(out, "ringbroker-"+distVersion+"-linux-"+runtime.GOARCH+".tar.gz")
		distDir = filepath.Join(scratch, "unpacked")
		distErr = untar(distTar, distDir)
	})
	if distErr != nil {
		t.Fatal(distErr)
	}
	return filepath.Join(distDir, "ringbroker-"+distVersion+"-linux-"+runtime.GOARCH), distTar
}

// untar unpacks a .tar.gz into dir, refusing entries that would land outside it.
func untar(tarball, dir string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", tarball, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", tarball, err)
		}
		path := filepath.Join(dir, h.Name)
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("%s: entry %q leaves the directory", tarball, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			err = writeFile(path, tr, h.FileInfo().Mode().Perm())
		default:
			err = fmt.Errorf("%s: entry %q of type %c", tarball, h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestDistTarball checks what `make dist` packs: the named tarball with exactly the expected
// files, owned by root, and a static binary built from cmd/ringbroker that runs and prints
// its usage.
func TestDistTarball(t *testing.T) {
	dir, tarball := dist(t)
	f, err := os.Open(tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	top := filepath.Base(dir) + "/"
	var files []string
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s is owned by %d:%d; want 0:0", h.Name, h.Uid, h.Gid)
		}
		if h.Typeflag == tar.TypeReg {
			files = append(files, strings.TrimPrefix(h.Name, top))
			if name := strings.TrimPrefix(h.Name, top); name == "bin/ringbroker" && h.Mode&0o111 != 0o111 {
				t.Errorf("bin/ringbroker has mode %o; want executable", h.Mode)
			}
		}
	}
	want := []string{"METRICS.md", "README.md", "bin/ringbroker", "config/server.properties", "grafana/ringbroker.json",
		"systemd/ringbroker.service", "systemd/ringbroker.sysusers"}
	for _, extra := range []string{"LICENSE", "LICENSE.md", "NOTICE"} {
		if _, err := os.Stat(filepath.Join(repoRoot, extra)); err == nil {
			want = append(want, extra)
		}
	}
	slices.Sort(files)
	slices.Sort(want)
	if !slices.Equal(files, want) {
		t.Errorf("tarball files %v; want %v", files, want)
	}

	bin := filepath.Join(dir, "bin", "ringbroker")
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("bin/ringbroker is dynamically linked; want a static binary")
		}
	}
	ef.Close()
	info, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, info)
	}
	// -ldflags is not recorded with -trimpath; without -checklinkname=0 the link would fail.
	for _, want := range []string{"path\tringbroker/cmd/ringbroker", "-trimpath=true", "CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH} {
		if !strings.Contains(string(info), want) {
			t.Errorf("go version -m bin/ringbroker lacks %q:\n%s", want, info)
		}
	}
	usage, _ := exec.Command(bin, "--help").CombinedOutput()
	for _, flag := range []string{"-config", "-override", "-io"} {
		if !strings.Contains(string(usage), flag) {
			t.Errorf("bin/ringbroker --help does not describe %s:\n%s", flag, usage)
		}
	}
}

// TestSampleConfigsServe starts the tarball's binary with each shipped server.properties (the
// bare-metal one and the container's), only the addresses and the log dir overridden to fit a
// test: it must take every key, serve Kafka's metrics and stop cleanly on SIGTERM.
func TestSampleConfigsServe(t *testing.T) {
	dir, _ := dist(t)
	for _, config := range []string{filepath.Join(dir, "config", "server.properties"), filepath.Join(repoRoot, "deploy", "container", "server.properties")} {
		t.Run(filepath.Base(filepath.Dir(config)), func(t *testing.T) {
			serveAndStop(t, filepath.Join(dir, "bin", "ringbroker"), config)
		})
	}
}

// metricsAddr matches the broker's log line naming its metrics address.
var metricsAddr = regexp.MustCompile(`msg=metrics addr=(\S+)`)

func serveAndStop(t *testing.T, bin, config string) {
	cmd := exec.Command(bin, "--config", config, "--override", "log.dirs="+t.TempDir(),
		"--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "advertised.listeners=PLAINTEXT://127.0.0.1:0",
		"--override", "metrics.listen=127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	started := make(chan string, 1)
	var metrics string
	var log bytes.Buffer
	var logMu sync.Mutex
	go func() {
		var addr string
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if m := metricsAddr.FindStringSubmatch(sc.Text()); m != nil {
				addr = m[1]
			}
			// main takes SIGTERM as a clean shutdown from just after this line on.
			if strings.Contains(sc.Text(), `msg="ringbroker started"`) {
				started <- addr
			}
		}
		done <- cmd.Wait()
	}()
	logged := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return log.String()
	}
	select {
	case metrics = <-started:
	case err := <-done:
		t.Fatalf("ringbroker exited before serving: %v\n%s", err, logged())
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("ringbroker did not serve metrics within 60s\n%s", logged())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var body []byte
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metrics+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && bytes.Contains(body, []byte("kafka_controller_kafkacontroller_activecontrollercount 1")) {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ctx.Err() != nil {
		cmd.Process.Kill()
		t.Fatalf("no active controller on /metrics within 30s:\n%s\n%s", body, logged())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ringbroker after SIGTERM: %v\n%s", err, logged())
		}
	case <-time.After(45 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("ringbroker did not stop within 45s of SIGTERM\n%s", logged())
	}
	if !strings.Contains(logged(), "clean shutdown complete") {
		t.Errorf("no clean shutdown in the log:\n%s", logged())
	}
}

// unitSettings reads the [Service] section of a systemd unit: each key's values in order.
func unitSettings(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: line %q is not key=value", path, line)
			}
			out[k] = append(out[k], v)
		}
	}
	return out
}

// TestSystemdUnitSettings pins what the unit must say for ringbroker: how it starts, its
// limits, its user, and no setting that would take io_uring or /proc/sys away.
func TestSystemdUnitSettings(t *testing.T) {
	s := unitSettings(t, filepath.Join(repoRoot, "deploy", "systemd", "ringbroker.service"))
	for key, want := range map[string]string{
		"ExecStart":    "/usr/local/bin/ringbroker --config /etc/ringbroker/server.properties",
		"LimitNOFILE":  "1048576",
		"LimitMEMLOCK": "infinity",
		"Restart":      "on-failure",
		"User":         "ringbroker",
		"Group":        "ringbroker",
	} {
		if got := s[key]; len(got) != 1 || got[0] != want {
			t.Errorf("%s=%v; want %s", key, got, want)
		}
	}
	if typ := s["Type"]; len(typ) != 1 || (typ[0] != "simple" && typ[0] != "exec") {
		t.Errorf("Type=%v; want simple or exec (ringbroker does not notify systemd)", typ)
	}
	// A syscall filter would have to allow io_uring_setup, io_uring_enter and
	// io_uring_register, and systemd's groups do not list them everywhere; ProcSubset=pid
	// hides /proc/sys/kernel/io_uring_disabled, which the broker reads to explain a fallback.
	for _, key := range []string{"SystemCallFilter", "ProcSubset", "DynamicUser"} {
		if v, ok := s[key]; ok {
			t.Errorf("%s=%v is set; want it absent", key, v)
		}
	}
}

// TestSystemdUnitVerifies runs systemd-analyze verify on the unit installed as the unit's
// comment says, in a root of its own: the tarball's binary, config and unit, and the system's
// units. It must pass without a word; a unit with a bad key in the same root must not.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (make deps installs it)")
	}
	dir, _ := dist(t)
	systemUnits := "/usr/lib/systemd/system"
	if _, err := os.Stat(systemUnits); err != nil {
		systemUnits = "/lib/systemd/system"
	}
	root := t.TempDir()
	install := func(from, to string, mode os.FileMode) {
		t.Helper()
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeFile(filepath.Join(root, to), bytes.NewReader(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	install(filepath.Join(dir, "bin", "ringbroker"), "usr/local/bin/ringbroker", 0o755)
	install(filepath.Join(dir, "config", "server.properties"), "etc/ringbroker/server.properties", 0o640)
	install(filepath.Join(dir, "systemd", "ringbroker.service"), "etc/systemd/system/ringbroker.service", 0o644)
	if err := os.MkdirAll(filepath.Join(root, "usr", "lib", "systemd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", systemUnits, filepath.Join(root, "usr", "lib", "systemd", "system")).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v\n%s", systemUnits, err, out)
	}
	if err := os.Symlink("usr/lib", filepath.Join(root, "lib")); err != nil {
		t.Fatal(err)
	}
	verify := func(unit string) (string, error) {
		out, err := exec.Command(analyze, "verify", "--root="+root, unit).CombinedOutput()
		return string(out), err
	}
	if out, err := verify("ringbroker.service"); err != nil || out != "" {
		t.Fatalf("systemd-analyze verify ringbroker.service: %v\n%s", err, out)
	}

	unit, err := os.ReadFile(filepath.Join(dir, "systemd", "ringbroker.service"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(unit), "[Service]\n", "[Service]\nLimitNOFILE=lots\n", 1)
	if err := writeFile(filepath.Join(root, "etc", "systemd", "system", "broken.service"), strings.NewReader(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := verify("broken.service"); !strings.Contains(out, "lots") {
		t.Fatalf("systemd-analyze verify passed a unit with LimitNOFILE=lots: %q", out)
	}
}

// TestSysusers creates the unit's user with systemd-sysusers in a root of its own.
func TestSysusers(t *testing.T) {
	sysusers, err := exec.LookPath("systemd-sysusers")
	if err != nil {
		t.Skip("systemd-sysusers is not installed (make deps installs it)")
	}
	dir, _ := dist(t)
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf, err := filepath.Abs(filepath.Join(dir, "systemd", "ringbroker.sysusers"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sysusers, "--root="+root, conf).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^ringbroker:x:\d+:\d+:[^:]*:/var/lib/ringbroker:/usr/sbin/nologin$`)
	if !re.Match(passwd) {
		t.Fatalf("no ringbroker system user in /etc/passwd:\n%s", passwd)
	}
}

// TestContainerfile checks the container recipe statically (building it needs a container
// engine): a build stage and a runtime stage, the build flags giouring needs, a non-root user,
// the ports, files it copies that exist, and the note on io_uring under seccomp.
func TestContainerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "container", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var from, copies []string
	var user, expose string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "FROM":
			from = append(from, line)
		case "COPY":
			// Sources from the build context, not from another stage.
			args := slices.DeleteFunc(f[1:], func(a string) bool { return strings.HasPrefix(a, "--chown=") })
			if len(args) > 1 && !strings.HasPrefix(args[0], "--from=") {
				copies = append(copies, args[:len(args)-1]...)
			}
		case "USER":
			user = f[1]
		case "EXPOSE":
			expose = strings.Join(f[1:], " ")
		}
	}
	if len(from) < 2 || !strings.Contains(from[0], " AS build") {
		t.Errorf("FROM lines %q; want a build stage and a runtime stage", from)
	}
	if !strings.Contains(string(data), "-ldflags=-checklinkname=0") || !strings.Contains(string(data), "CGO_ENABLED=0") {
		t.Errorf("the build does not pass -ldflags=-checklinkname=0 with CGO_ENABLED=0")
	}
	if user == "" || user == "root" || user == "0" || strings.HasPrefix(user, "0:") {
		t.Errorf("USER %q; want a non-root user", user)
	}
	if expose != "9092 9644" {
		t.Errorf("EXPOSE %q; want 9092 9644", expose)
	}
	for _, src := range copies {
		if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
			t.Errorf("COPY %s: %v", src, err)
		}
	}
	for _, note := range []string{"seccomp", "io_uring_setup", "netpoll"} {
		if !strings.Contains(string(data), note) {
			t.Errorf("the Containerfile says nothing of %s", note)
		}
	}
}
