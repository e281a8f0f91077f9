package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/internal/brokertest"
	"ringbroker/internal/testutil"
)

const (
	// envBroker selects the broker under test: "ringbroker" (default) or "kafka".
	envBroker = "E2E_BROKER"
	// kafkaLibs is where `make deps` puts the Apache Kafka jars, relative to the repo root.
	kafkaLibs = ".cache/kafka/libs"

	// startTimeout bounds how long a broker may take to answer Metadata after start.
	startTimeout = 90 * time.Second
	// stopTimeout bounds how long a broker may take to exit after SIGTERM.
	stopTimeout = 60 * time.Second
	// kcatTimeout and javaTimeout bound one run of a client tool; a client that cannot
	// parse an answer often retries forever instead of failing.
	kcatTimeout = 90 * time.Second
	javaTimeout = 3 * time.Minute
	// logTailBytes is how much of a broker's log a failed test prints.
	logTailBytes = 24 << 10
)

// TestMain builds bin/ringbroker once before the tests when ringbroker is the target.
func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	flag.Parse()
	// Listing tests (as `make fuzz-short` does) starts no broker, so needs no binary.
	listing := flag.Lookup("test.list").Value.String() != ""
	if listing {
		return m.Run()
	}
	warmBroker := ""
	if brokerKind() == "ringbroker" {
		if err := buildRingbroker(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		warmBroker = ringbrokerBinary()
	}
	dir, err := os.MkdirTemp("", "ringbroker-e2e-java-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if suiteJava, err = prepareJava(dir, warmBroker); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// brokerKind is the target named by E2E_BROKER, "ringbroker" when unset.
func brokerKind() string {
	if k := os.Getenv(envBroker); k != "" {
		return k
	}
	return "ringbroker"
}

// repoRoot is the module root; go test runs each package in its own directory.
func repoRoot() string {
	abs, err := filepath.Abs("..")
	if err != nil {
		return ".."
	}
	return abs
}

func ringbrokerBinary() string { return filepath.Join(repoRoot(), "bin", "ringbroker") }

func buildRingbroker() error {
	cmd := exec.Command("go", "build", "-ldflags=-checklinkname=0", "-o", ringbrokerBinary(), "./cmd/ringbroker")
	cmd.Dir = repoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("build %s: %w\n%s", ringbrokerBinary(), err, out)
	}
	return nil
}

// target is one broker configuration a test runs against.
type target struct {
	name  string
	start func(t *testing.T, overrides ...string) *Broker
}

// targets lists the configurations E2E_BROKER selects.
func targets(t *testing.T) []target {
	t.Helper()
	switch k := brokerKind(); k {
	case "ringbroker":
		var ts []target
		for _, io := range []string{"uring", "netpoll"} {
			ts = append(ts, target{name: io, start: func(t *testing.T, overrides ...string) *Broker {
				t.Helper()
				return startRingbroker(t, io, overrides...)
			}})
		}
		return ts
	case "kafka":
		return []target{{name: "kafka", start: startKafka}}
	default:
		t.Fatalf("%s=%q: want ringbroker or kafka", envBroker, k)
		return nil
	}
}

// forEachTarget runs fn as a subtest per selected broker configuration.
func forEachTarget(t *testing.T, fn func(t *testing.T, tg target)) {
	t.Helper()
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) { fn(t, tg) })
	}
}

// forEachTargetParallel is forEachTarget with the targets run at the same time: for tests
// that spend their time waiting (a quota's rate measured over 20 s) rather than computing,
// so the backends do not take that time one after the other.
func forEachTargetParallel(t *testing.T, fn func(t *testing.T, tg target)) {
	t.Helper()
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			fn(t, tg)
		})
	}
}

// Broker is a broker process under test, ringbroker or Apache Kafka. It keeps its data
// directory and ports across Stop/Kill and Restart.
type Broker struct {
	t    testing.TB
	kind string // "ringbroker" or "kafka"
	addr string // host:port of the PLAINTEXT listener
	dir  string // temp dir with the log file and configs
	log  string // path of the combined stdout/stderr of every run
	argv []string
	// cleanExit reports whether an exit code after SIGTERM is a clean shutdown.
	cleanExit func(code int) bool

	mu   sync.Mutex
	proc *process // nil when not running
}

// process is one run of the broker binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited; state then holds its status
	err  error
}

// startRingbroker runs bin/ringbroker with the given I/O backend (auto, uring, netpoll)
// on free loopback ports and a temp data dir, plus extra key=value overrides, and waits
// until it answers Metadata.
func startRingbroker(t *testing.T, io string, overrides ...string) *Broker {
	t.Helper()
	return startRingbrokerOn(t, io, brokertest.FreePort(t), overrides...)
}

// startRingbrokerOn is startRingbroker with its PLAINTEXT listener on port, for tests whose
// overrides name the listeners themselves.
func startRingbrokerOn(t *testing.T, io string, port int, overrides ...string) *Broker {
	t.Helper()
	dir := t.TempDir()
	b := newRingbroker(t, dir, port, ringbrokerArgv(t, dir, io, port, overrides...))
	b.launch()
	return b
}

// ringbrokerArgv is the command line of bin/ringbroker with the given I/O backend, its
// PLAINTEXT listener on port, its data in dir/data, metrics on a free port and key=value
// overrides.
func ringbrokerArgv(t *testing.T, dir, io string, port int, overrides ...string) []string {
	t.Helper()
	argv := []string{
		ringbrokerBinary(),
		"--io=" + io,
		"--override", fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", port),
		"--override", "log.dirs=" + filepath.Join(dir, "data"),
		"--override", fmt.Sprintf("metrics.listen=127.0.0.1:%d", brokertest.FreePort(t)),
	}
	for _, o := range overrides {
		argv = append(argv, "--override", o)
	}
	return argv
}

// newRingbroker is a ringbroker, not started yet, run by argv in dir and serving clients on
// port.
func newRingbroker(t *testing.T, dir string, port int, argv []string) *Broker {
	return &Broker{
		t:         t,
		kind:      "ringbroker",
		addr:      fmt.Sprintf("127.0.0.1:%d", port),
		dir:       dir,
		log:       filepath.Join(dir, "broker.log"),
		argv:      argv,
		cleanExit: func(code int) bool { return code == 0 },
	}
}

// startKafka runs an Apache Kafka 4.1.1 single-node KRaft broker (broker and controller
// in one process) from .cache/kafka/libs, with key=value overrides appended to its
// server.properties, and waits until it answers Metadata.
func startKafka(t *testing.T, overrides ...string) *Broker {
	t.Helper()
	return startKafkaOn(t, brokertest.FreePort(t), brokertest.FreePort(t), overrides...)
}

// startKafkaOn is startKafka with its PLAINTEXT and CONTROLLER listeners on port and
// controllerPort, for tests whose overrides name the listeners themselves.
func startKafkaOn(t *testing.T, port, controllerPort int, overrides ...string) *Broker {
	t.Helper()
	dir := t.TempDir()
	props, log4j := writeKafkaConfig(t, dir, port, controllerPort, overrides...)
	runJava(t, "kafka.tools.StorageTool", "format", "-t", newClusterID(t), "-c", props)
	b := newKafkaBroker(t, dir, port, kafkaArgv(t, props, log4j))
	b.launch()
	return b
}

// writeKafkaConfig writes the server.properties of a single-node KRaft Apache Kafka with its data
// in dir/data, plus key=value overrides, and its log4j2 configuration, and returns their paths.
func writeKafkaConfig(t *testing.T, dir string, port, controllerPort int, overrides ...string) (props, log4j string) {
	t.Helper()
	props = filepath.Join(dir, "server.properties")
	lines := []string{
		"process.roles=broker,controller",
		"node.id=1",
		fmt.Sprintf("controller.quorum.voters=1@127.0.0.1:%d", controllerPort),
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", port, controllerPort),
		fmt.Sprintf("advertised.listeners=PLAINTEXT://127.0.0.1:%d", port),
		"controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"log.dirs=" + filepath.Join(dir, "data"),
		"num.partitions=1",
		"offsets.topic.replication.factor=1",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"share.coordinator.state.topic.replication.factor=1",
		"share.coordinator.state.topic.min.isr=1",
		"group.initial.rebalance.delay.ms=0",
	}
	lines = append(lines, overrides...)
	writeFile(t, props, strings.Join(lines, "\n")+"\n")
	log4j = filepath.Join(dir, "log4j2.properties")
	writeFile(t, log4j, log4jConfig("info", "SYSTEM_OUT"))
	return props, log4j
}

// kafkaArgv is the command line of an Apache Kafka broker with the given configuration.
func kafkaArgv(t *testing.T, props, log4j string) []string {
	t.Helper()
	return append([]string{"java"}, javaArgs(t, []string{"-Xms256m", "-Xmx1g", "-XX:+UseG1GC",
		"-Dlog4j2.configurationFile=" + log4j}, "kafka.Kafka", props)...)
}

// newKafkaBroker is an Apache Kafka broker, not started yet, run by argv in dir and serving
// clients on port.
func newKafkaBroker(t *testing.T, dir string, port int, argv []string) *Broker {
	return &Broker{
		t:    t,
		kind: "kafka",
		addr: fmt.Sprintf("127.0.0.1:%d", port),
		dir:  dir,
		log:  filepath.Join(dir, "broker.log"),
		argv: argv,
		// The JVM exits 143 (128+SIGTERM) after its shutdown hooks ran a clean shutdown.
		cleanExit: func(code int) bool { return code == 0 || code == 143 },
	}
}

// launch starts the first run and registers the cleanup that kills the process and,
// for a failed test, prints the broker's log.
func (b *Broker) launch() {
	b.t.Helper()
	b.t.Cleanup(func() {
		b.Kill()
		if b.t.Failed() {
			b.t.Logf("%s log %s (tail):\n%s", b.kind, b.log, brokertest.TailFile(b.log, logTailBytes))
		}
	})
	start := time.Now()
	b.startProcess()
	b.waitReady()
	b.t.Logf("%s ready at %s in %v", b.kind, b.addr, time.Since(start).Round(time.Millisecond))
}

func (b *Broker) startProcess() {
	b.t.Helper()
	logf, err := os.OpenFile(b.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.t.Fatalf("open broker log %s: %v", b.log, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== e2e: start %s\n", strings.Join(b.argv, " "))
	cmd := exec.Command(b.argv[0], b.argv[1:]...)
	cmd.Dir = b.dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("start %s: %v", b.argv[0], err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	b.mu.Lock()
	b.proc = p
	b.mu.Unlock()
}

// waitReady polls Metadata until the broker answers with itself in the broker list,
// failing at once if the process exits.
func (b *Broker) waitReady() {
	b.t.Helper()
	p := b.current()
	testutil.WaitFor(b.t, startTimeout, func() error {
		select {
		case <-p.done:
			b.t.Fatalf("%s exited during start: %v\n%s", b.kind, p.err, brokertest.TailFile(b.log, logTailBytes))
		default:
		}
		return brokertest.MetadataOK(b.addr)
	})
}

func (b *Broker) current() *process {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.proc
}

// Addr is the host:port clients bootstrap from.
func (b *Broker) Addr() string { return b.addr }

// Kind is "ringbroker" or "kafka".
func (b *Broker) Kind() string { return b.kind }

// Alive reports whether the broker process is running.
func (b *Broker) Alive() bool {
	p := b.current()
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM and fails the test unless the process exits cleanly in time.
func (b *Broker) Stop() {
	b.t.Helper()
	p := b.current()
	if p == nil {
		b.t.Fatalf("stop %s: not running", b.kind)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.t.Fatalf("SIGTERM %s pid %d: %v", b.kind, p.cmd.Process.Pid, err)
	}
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		b.t.Fatalf("%s pid %d did not exit within %v of SIGTERM", b.kind, p.cmd.Process.Pid, stopTimeout)
	}
	b.mu.Lock()
	b.proc = nil
	b.mu.Unlock()
	if code := p.cmd.ProcessState.ExitCode(); !b.cleanExit(code) {
		b.t.Fatalf("%s pid %d exited with %v after SIGTERM; want a clean exit", b.kind, p.cmd.Process.Pid, p.err)
	}
}

// Kill sends SIGKILL and waits for the process to be gone; it does nothing when the
// broker is not running.
func (b *Broker) Kill() {
	p := b.current()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill() // fails only when the process already exited
	<-p.done
	b.mu.Lock()
	b.proc = nil
	b.mu.Unlock()
}

// Restart starts the broker again on the same data directory and ports; the previous
// run must have been stopped or killed.
func (b *Broker) Restart() {
	b.t.Helper()
	if b.current() != nil {
		b.t.Fatalf("restart %s: still running", b.kind)
	}
	start := time.Now()
	b.startProcess()
	b.waitReady()
	b.t.Logf("%s restarted in %v", b.kind, time.Since(start).Round(time.Millisecond))
}

// Client returns a franz-go client bootstrapped at the broker, closed when the test ends.
func (b *Broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.addr)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("new client for %s: %v", b.addr, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client for the broker, closed when the test ends.
func (b *Broker) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(b.Client(t))
}

// CreateTopic creates a topic with replication factor 1 and waits until every
// partition has a leader.
func (b *Broker) CreateTopic(t testing.TB, topic string, partitions int32, configs ...string) {
	t.Helper()
	adm := b.Admin(t)
	cfg := map[string]*string{}
	for _, kv := range configs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("topic config %q: want key=value", kv)
		}
		cfg[k] = &v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %q with %d partitions: %v", topic, partitions, err)
	}
	b.WaitTopic(t, topic, partitions)
}

// WaitTopic waits until metadata shows topic with the given number of partitions, each
// with a leader.
func (b *Broker) WaitTopic(t testing.TB, topic string, partitions int32) {
	t.Helper()
	adm := b.Admin(t)
	testutil.WaitFor(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil {
			return fmt.Errorf("topic %q not in metadata: %v", topic, td.Err)
		}
		if len(td.Partitions) != int(partitions) {
			return fmt.Errorf("topic %q has %d partitions in metadata, want %d", topic, len(td.Partitions), partitions)
		}
		for _, p := range td.Partitions {
			if p.Leader < 0 || p.Err != nil {
				return fmt.Errorf("topic %q partition %d: leader %d, err %v", topic, p.Partition, p.Leader, p.Err)
			}
		}
		return nil
	})
}

// EndOffsets returns the high watermark of each partition of topic.
func (b *Broker) EndOffsets(t testing.TB, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := b.Admin(t).ListEndOffsets(ctx, topic)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		t.Fatalf("list end offsets of %q: %v", topic, err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// newClusterID makes a KRaft cluster id: 16 random bytes, URL-safe base64 without padding.
func newClusterID(t testing.TB) string {
	t.Helper()
	for {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			t.Fatalf("random cluster id: %v", err)
		}
		// Like Kafka's Uuid.randomUuid: an id starting with '-' reads as an option to
		// kafka-storage format.
		if s := base64.RawURLEncoding.EncodeToString(id[:]); s[0] != '-' {
			return s
		}
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// log4jConfig is a log4j2 configuration logging at level to the given console target.
func log4jConfig(level, target string) string {
	return strings.Join([]string{
		"status = warn",
		"appender.console.type = Console",
		"appender.console.name = CONSOLE",
		"appender.console.target = " + target,
		"appender.console.layout.type = PatternLayout",
		"appender.console.layout.pattern = [%d] %p %m (%c)%n",
		"rootLogger.level = " + level,
		"rootLogger.appenderRef.console.ref = CONSOLE",
	}, "\n") + "\n"
}

func kafkaClasspath(t testing.TB) string {
	t.Helper()
	cp, err := javaLibs()
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// cmdResult is what a finished client command printed.
type cmdResult struct {
	stdout, stderr string
}

// runCmd runs a client command with stdin, failing the test (with its output) unless it
// exits 0 within timeout.
func runCmd(t testing.TB, timeout time.Duration, stdin []byte, name string, args ...string) cmdResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	start := time.Now()
	err := cmd.Run()
	res := cmdResult{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (timed out after %v)", err, timeout)
		}
		t.Fatalf("%s %s: %v after %v\nstdout: %d bytes, ending %q\nstderr (tail):\n%s", name, strings.Join(args, " "), err,
			time.Since(start).Round(time.Millisecond), len(res.stdout), tail(res.stdout, 1<<10), tail(res.stderr, 8<<10))
	}
	return res
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// runJava runs an Apache Kafka main class from .cache/kafka/libs with no input.
func runJava(t testing.TB, mainClass string, args ...string) cmdResult {
	t.Helper()
	return runJavaStdin(t, nil, mainClass, args...)
}

// runJavaStdin runs an Apache Kafka main class with stdin; its log goes to stderr at
// WARN so stdout holds only what the tool prints.
func runJavaStdin(t testing.TB, stdin []byte, mainClass string, args ...string) cmdResult {
	t.Helper()
	log4j := filepath.Join(t.TempDir(), "log4j2-tools.properties")
	writeFile(t, log4j, log4jConfig("warn", "SYSTEM_ERR"))
	argv := javaArgs(t, []string{"-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile=" + log4j}, mainClass, args...)
	return runCmd(t, javaTimeout, stdin, "java", argv...)
}

// runKcat runs kcat with no input.
func runKcat(t testing.TB, args ...string) cmdResult {
	t.Helper()
	return runCmd(t, kcatTimeout, nil, "kcat", args...)
}

// runKcatStdin runs kcat with stdin, as kcat -P reads its records there.
func runKcatStdin(t testing.TB, stdin []byte, args ...string) cmdResult {
	t.Helper()
	return runCmd(t, kcatTimeout, stdin, "kcat", args...)
}
