package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The suite starts a few hundred JVMs (Kafka's CLI tools, its Java clients, the programs of
// e2e/testdata), and most of each one's life is start-up: loading, parsing and verifying the
// same few thousand classes of the Kafka jars, and for a program run from source, compiling
// it. TestMain does both once: it compiles e2e/testdata's programs into one directory and
// records which classes the Kafka tools load into a class-data-sharing archive (JDK CDS), which
// every JVM of the suite then maps instead of loading those classes again. That halves a
// tool's start (about 0.95 to 0.45 s for kafka-configs here); what each JVM does is unchanged.

// javaSetup is what TestMain prepared for the suite's JVMs.
type javaSetup struct {
	// classes is the directory of e2e/testdata's compiled programs; "" before TestMain.
	classes string
	// archive is the class-data-sharing archive of the Kafka tools' classes, "" when none
	// was made (the JVMs then load every class themselves).
	archive string
}

// suiteJava is set once by TestMain, before any test runs, and only read afterwards.
var suiteJava javaSetup

// javaArgs are the arguments of a JVM with jvmFlags running mainClass (an Apache Kafka class
// or a program of e2e/testdata, by class name) with args: the suite's classpath, and its
// class-data archive when one was made.
func javaArgs(t testing.TB, jvmFlags []string, mainClass string, args ...string) []string {
	t.Helper()
	argv := append([]string(nil), jvmFlags...)
	if suiteJava.archive != "" {
		argv = append(argv, "-XX:SharedArchiveFile="+suiteJava.archive)
	}
	cp := kafkaClasspath(t)
	if suiteJava.classes != "" {
		cp += string(os.PathListSeparator) + suiteJava.classes
	}
	argv = append(argv, "-cp", cp, mainClass)
	return append(argv, args...)
}

// javaLibs is the Apache Kafka classpath (libs/*), or an error when `make deps` has not
// fetched the jars.
func javaLibs() (string, error) {
	dir := filepath.Join(repoRoot(), kafkaLibs)
	jars, err := filepath.Glob(filepath.Join(dir, "kafka_2.13-*.jar"))
	if err != nil || len(jars) == 0 {
		return "", fmt.Errorf("no Apache Kafka jars in %s (run `make deps`)", dir)
	}
	return filepath.Join(dir, "*"), nil
}

// prepareJava compiles e2e/testdata's programs into dir and, when warmBroker is not empty
// (a ringbroker binary), makes the class-data archive from the classes Kafka's tools load
// against a broker run from it. Without the Kafka jars it prepares nothing, and the tests
// that need them say so. A failed compile is an error; a failed archive only costs speed,
// so it is reported on stderr and the suite runs without one.
func prepareJava(dir, warmBroker string) (javaSetup, error) {
	libs, err := javaLibs()
	if err != nil {
		return javaSetup{}, nil
	}
	setup := javaSetup{classes: filepath.Join(dir, "classes")}
	compiled := make(chan error, 1)
	go func() { compiled <- compileTestPrograms(libs, setup.classes) }()
	if warmBroker != "" {
		archive := filepath.Join(dir, "kafka-tools.jsa")
		start := time.Now()
		if err := makeClassArchive(libs, dir, warmBroker, archive); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: no class-data archive, JVMs start without one: %v\n", err)
		} else {
			setup.archive = archive
			fmt.Fprintf(os.Stderr, "e2e: class-data archive of the Kafka tools made in %v\n", time.Since(start).Round(time.Millisecond))
		}
	}
	if err := <-compiled; err != nil {
		return javaSetup{}, err
	}
	return setup, nil
}

// compileTestPrograms compiles e2e/testdata/*.java against the Kafka jars into out.
func compileTestPrograms(libs, out string) error {
	srcs, err := filepath.Glob(filepath.Join(repoRoot(), "e2e", "testdata", "*.java"))
	if err != nil || len(srcs) == 0 {
		return fmt.Errorf("no Java programs in e2e/testdata: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), javaTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "javac", append([]string{"-d", out, "-cp", libs, "-nowarn"}, srcs...)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("javac e2e/testdata: %w\n%s", err, msg)
	}
	return nil
}

// warmRun is one tool run whose loaded classes go into the archive.
type warmRun struct {
	mainClass string
	args      []string
	stdin     string
}

// makeClassArchive runs Kafka's common tools against a ringbroker started from bin in
// dir/warm, each listing the classes it loaded, and dumps their union into archive.
func makeClassArchive(libs, dir, bin, archive string) error {
	warm := filepath.Join(dir, "warm")
	log4j := filepath.Join(warm, "log4j2-tools.properties")
	if err := os.MkdirAll(warm, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(log4j, []byte(log4jConfig("warn", "SYSTEM_ERR")), 0o644); err != nil {
		return err
	}
	addr, stop, err := startWarmBroker(bin, warm)
	if err != nil {
		return err
	}
	defer stop()
	const topic = "class-archive"
	run := func(i int, r warmRun) error {
		list := filepath.Join(warm, fmt.Sprintf("%d.classlist", i))
		argv := append([]string{"-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-XX:DumpLoadedClassList=" + list, "-Dlog4j2.configurationFile=" + log4j,
			"-cp", libs, r.mainClass, "--bootstrap-server", addr}, r.args...)
		return runWarm(strings.NewReader(r.stdin), "java", argv...)
	}
	// The topic first, then the rest two at a time (the machine has two cores).
	first := warmRun{mainClass: "org.apache.kafka.tools.TopicCommand",
		args: []string{"--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1"}}
	rest := []warmRun{
		{mainClass: "org.apache.kafka.tools.ConsoleProducer", args: []string{"--topic", topic}, stdin: "warm\n"},
		{mainClass: "kafka.admin.ConfigCommand", args: []string{"--describe", "--entity-type", "brokers", "--entity-name", "1"}},
		{mainClass: "org.apache.kafka.tools.consumer.ConsoleConsumer",
			args: []string{"--topic", topic, "--from-beginning", "--max-messages", "1", "--group", "class-archive", "--timeout-ms", "60000"}},
		{mainClass: "org.apache.kafka.tools.AclCommand", args: []string{"--list"}},
		{mainClass: "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", args: []string{"--describe", "--all-groups"}},
	}
	if err := run(0, first); err != nil {
		return err
	}
	errs := make([]error, len(rest))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i, r := range rest {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = run(i+1, r)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	lists, err := filepath.Glob(filepath.Join(warm, "*.classlist"))
	if err != nil {
		return err
	}
	union := map[string]bool{}
	var all bytes.Buffer
	for _, l := range lists {
		b, err := os.ReadFile(l)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line != "" && !union[line] {
				union[line] = true
				all.WriteString(line + "\n")
			}
		}
	}
	classList := filepath.Join(warm, "all.classlist")
	if err := os.WriteFile(classList, all.Bytes(), 0o644); err != nil {
		return err
	}
	return runWarm(nil, "java", "-Xshare:dump", "-XX:SharedClassListFile="+classList,
		"-XX:SharedArchiveFile="+archive, "-cp", libs)
}

// runWarm runs one command of the archive's making, with its output in the error if it fails.
func runWarm(stdin *strings.Reader, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), javaTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(string(out), 4<<10))
	}
	return nil
}

// startWarmBroker runs bin (netpoll, data in dir) until stop is called and returns its
// address once it accepts connections.
func startWarmBroker(bin, dir string) (addr string, stop func(), err error) {
	ports := make([]int, 2)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, fmt.Errorf("find a free port: %w", err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	addr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	cmd := exec.Command(bin, "--io=netpoll",
		"--override", "listeners=PLAINTEXT://"+addr,
		"--override", "log.dirs="+filepath.Join(dir, "data"),
		"--override", fmt.Sprintf("metrics.listen=127.0.0.1:%d", ports[1]),
		"--override", "group.initial.rebalance.delay.ms=0",
		// An authorizer, so that kafka-acls has ACLs to list; every client here is ANONYMOUS.
		"--override", "authorizer.class.name="+standardAuthorizer,
		"--override", "super.users=User:ANONYMOUS")
	logf, err := os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		return "", nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return "", nil, fmt.Errorf("start %s: %w", bin, err)
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	}
	for deadline := time.Now().Add(startTimeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, stop, nil
		}
	}
	stop()
	return "", nil, fmt.Errorf("ringbroker at %s did not accept connections within %v", addr, startTimeout)
}
