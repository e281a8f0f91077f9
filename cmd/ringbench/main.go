// Command ringbench is the load generator of ringbroker: it runs
// OpenMessaging-style workloads against any Kafka-compatible cluster through
// franz-go, so ringbroker and Apache Kafka are measured the same way, and
// compares the results.
//
//	ringbench run --bootstrap 127.0.0.1:9092 --workload bench/workloads/1kb-fixed-rate-16p.yaml \
//	    [--label L] [--duration D] [--warmup D] [--rate R] [--json out.json] [--broker-pid PID]
//	ringbench compare A.json B.json [C.json...] [--out dir/]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ringbroker/bench"
)

const usage = `usage:
  ringbench run --bootstrap HOST:PORT --workload FILE [flags]
  ringbench compare A.json B.json [C.json...] [--out DIR]

Run "ringbench run -h" or "ringbench compare -h" for flags.
`

// loadGenGCPercent is the GC target of ringbench when GOGC is not set: the load generator
// shares the machine with the broker it measures, and at the default of 100 its collector
// costs more CPU than its heap (a few hundred MiB) is worth.
const loadGenGCPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(loadGenGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, isTerminal(os.Stdout))
	stop()
	os.Exit(code)
}

// run executes one ringbench command and returns the process exit code:
// 0 on success, 1 when the command failed, 2 on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = runCmd(ctx, args[1:], stdout, stderr, tty)
	case "compare":
		err = compareCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "ringbench: unknown command %q\n%s", args[0], usage)
		return 2
	}
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "ringbench %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "ringbench %s: %v\n", args[0], err)
		return 1
	}
}

// usageError marks a bad command line, as opposed to a failed run.
type usageError struct{ error }

// parseInterleaved parses flags that may come before, between or after
// positional arguments ("compare a.json b.json --out dir") and returns the
// positionals in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		bootstrap    = fs.String("bootstrap", "127.0.0.1:9092", "comma-separated seed brokers, host:port")
		workloadPath = fs.String("workload", "", "workload file (YAML or JSON), e.g. bench/workloads/1kb-fixed-rate-16p.yaml")
		label        = fs.String("label", "", "name of the system under test in results (default: the bootstrap address)")
		duration     = fs.Duration("duration", 0, "override the workload's testDuration")
		warmup       = fs.Duration("warmup", -1, "override the workload's warmupDuration")
		rate         = fs.Float64("rate", -1, "override the workload's producerRate in records/s (0 = the highest rate the consumers sustain, searched as the run goes)")
		unthrottled  = fs.Bool("unthrottled", false, "with producerRate 0, produce as fast as the clients can whether or not the consumers keep up (the producers' ceiling)")
		jsonOut      = fs.String("json", "", "write the result as JSON to this file")
		brokerPIDs   = fs.String("broker-pid", "", "comma-separated pids of local broker processes (a cluster's nodes) to sample for CPU and peak RSS, summed")
		prefix       = fs.String("topic-prefix", "ringbench", "prefix of the topics the run creates")
		keep         = fs.Bool("keep-topics", false, "do not delete the run's topics afterwards")
		interval     = fs.Duration("progress-interval", 0, "time between progress lines (default 1s on a terminal, 5s otherwise)")
		drain        = fs.Duration("drain-timeout", 30*time.Second, "how long to wait for acks and consumers after the measured period")
		quiet        = fs.Bool("quiet", false, "print no progress and no setup logs")
		probe        = fs.Duration("probe-interval", 5*time.Millisecond, "how often to time the round trip of a Metadata request for no topics beside the workload, the floor under every latency (0 = no probe)")
		cpuProfile   = fs.String("cpuprofile", "", "write a CPU profile of ringbench itself (the clients' cost on a shared machine) to this file")
	)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", pos)}
	}
	if *workloadPath == "" {
		return usageError{errors.New("--workload is required")}
	}
	w, err := bench.LoadWorkload(*workloadPath)
	if err != nil {
		return err
	}
	if *duration > 0 {
		w.TestDuration = bench.Duration(*duration)
	}
	if *warmup >= 0 {
		w.WarmupDuration = bench.Duration(*warmup)
	}
	if *rate >= 0 {
		w.ProducerRate = *rate
	}
	if err := w.Validate(); err != nil {
		return usageError{err}
	}
	if *label == "" {
		*label = *bootstrap
	}
	var pids []int
	for _, f := range strings.Split(*brokerPIDs, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			return usageError{fmt.Errorf("--broker-pid %q: want comma-separated process ids", *brokerPIDs)}
		}
		pids = append(pids, pid)
	}
	opts := bench.Options{
		Bootstrap:        strings.Split(*bootstrap, ","),
		Workload:         w,
		Label:            *label,
		TopicPrefix:      *prefix,
		KeepTopics:       *keep,
		DrainTimeout:     *drain,
		Progress:         stdout,
		Live:             tty,
		ProgressInterval: *interval,
		BrokerPIDs:       pids,
		ProbeInterval:    *probe,
		Unthrottled:      *unthrottled,
		Logger:           slog.New(slog.NewTextHandler(stderr, nil)),
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = 5 * time.Second
		if tty {
			opts.ProgressInterval = time.Second
		}
	}
	if *quiet {
		opts.Progress, opts.Logger = nil, nil
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	res, err := bench.Run(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	if err := bench.WriteReport(stdout, res); err != nil {
		return err
	}
	if *jsonOut != "" {
		if err := res.WriteJSON(*jsonOut); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", *jsonOut)
	}
	return nil
}

func compareCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory for index.html (table and chart), latency.svg and compare.txt")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if len(pos) < 2 {
		return usageError{fmt.Errorf("need at least two result files, got %d", len(pos))}
	}
	var runs []*bench.Result
	for _, p := range pos {
		r, err := bench.ReadResult(p)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	if err := bench.Compare(stdout, runs, *out); err != nil {
		return err
	}
	if *out != "" {
		fmt.Fprintf(stdout, "\nwrote %s/index.html, latency.svg, compare.txt\n", strings.TrimRight(*out, "/"))
	}
	return nil
}

// isTerminal reports whether f is a terminal, to choose a live progress line.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// startCPUProfile profiles this process into path until the returned stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
