// Command ringbroker runs a Kafka-wire-compatible broker. With no arguments it is a single node
// with data in ./data, clients on 127.0.0.1:9092 and metrics on 127.0.0.1:9644.
//
//	ringbroker [--config server.properties] [--override key=value ...] [--io auto|uring|netpoll]
//	ringbroker format --cluster-id ID --config server.properties [--override key=value ...]
//	    [--standalone | --no-initial-controllers | --initial-controllers id@host:port:dirid,...]
//	ringbroker random-uuid
//
// format is the storage format step of a cluster node, as kafka-storage format: it writes
// meta.properties with the cluster id into the first log dir. A single node formats itself. A
// controller of a dynamic quorum (controller.quorum.bootstrap.servers without
// controller.quorum.voters) takes one of the three quorum options, as in Kafka: --standalone
// makes it the quorum's only voter, --initial-controllers founds the quorum with the listed
// voters, and --no-initial-controllers makes it an observer until kafka-metadata-quorum
// add-controller adds it.
// random-uuid prints a new cluster id, as kafka-storage random-uuid does.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"ringbroker/broker"
	"ringbroker/broker/meta"
)

// overrides collects repeated --override flags.
type overrides []string

func (o *overrides) String() string     { return strings.Join(*o, ",") }
func (o *overrides) Set(s string) error { *o = append(*o, s); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ringbroker:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "format" {
		return format(args[1:])
	}
	if len(args) == 1 && args[0] == "random-uuid" {
		fmt.Println(meta.NewUUID())
		return nil
	}
	fs := flag.NewFlagSet("ringbroker", flag.ContinueOnError)
	configPath := fs.String("config", "", "server.properties file (Kafka key names)")
	io := fs.String("io", "", "I/O backend: auto, uring or netpoll (overrides io.backend)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	shutdownTimeout := fs.Duration("shutdown-timeout", 30*time.Second, "how long a clean shutdown may take")
	var ovs overrides
	fs.Var(&ovs, "override", "key=value config override (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 1 && *configPath == "" {
		// Kafka's scripts take the properties file as the sole argument.
		*configPath = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	// A LevelVar, so that kafka-configs --entity-type broker-loggers can change it live.
	var level slog.LevelVar
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: &level}))

	cfg, err := loadConfig(*configPath, ovs)
	if err != nil {
		return err
	}
	if *io != "" {
		if err := cfg.Set("io.backend", *io); err != nil {
			return fmt.Errorf("--io: %w", err)
		}
	}

	// Signals are caught from here on, so a SIGTERM during start still shuts down cleanly.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	b, err := broker.New(cfg, logger)
	if err != nil {
		return err
	}
	b.SetLogLevel(&level)
	if err := b.Start(); err != nil {
		b.Shutdown(context.Background())
		return err
	}
	sizeScheduler(b, logger)
	logger.Info("ringbroker started", "addr", b.Addr().String(), "io", b.Backend(), "gomaxprocs", runtime.GOMAXPROCS(0),
		"io_uring_wait_held", b.HoldWaits())

	s := <-sig
	logger.Info("shutting down", "signal", s.String())
	ctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("clean shutdown complete")
	return nil
}

// sizeScheduler gives the Go scheduler one P per core plus one per io_uring event loop, unless
// the GOMAXPROCS environment variable sets it. A loop that holds its P through its wait
// (io.uring.wait=hold, Broker.HoldWaits) needs that P for itself; one that hands its P back
// needs one again for every batch of completions, and with a P of its own it does not wait
// behind the handler workers, which keep the cores busy. Measured on 2 cores with 2 rings
// handing off (ringbench max-throughput, 3 interleaved rounds below load 1): 1.07x the
// records/s of GOMAXPROCS=2, the same latency at a fixed rate.
func sizeScheduler(b *broker.Broker, logger *slog.Logger) {
	loops := b.EventLoopThreads()
	if loops == 0 || os.Getenv("GOMAXPROCS") != "" {
		return
	}
	runtime.GOMAXPROCS(runtime.NumCPU() + loops)
	logger.Debug("scheduler sized for the event loops", "cores", runtime.NumCPU(), "loops", loops)
}

// format runs the storage format step.
func format(args []string) error {
	fs := flag.NewFlagSet("ringbroker format", flag.ContinueOnError)
	configPath := fs.String("config", "", "server.properties file (Kafka key names)")
	clusterID := fs.String("cluster-id", "", "cluster id (22 characters of base64, as kafka-storage random-uuid prints)")
	var qf broker.QuorumFormat
	fs.BoolVar(&qf.Standalone, "standalone", false, "dynamic quorum: make this controller its only voter")
	fs.BoolVar(&qf.NoInitialControllers, "no-initial-controllers", false, "dynamic quorum: this controller joins as an observer, to be added with add-controller")
	fs.StringVar(&qf.InitialControllers, "initial-controllers", "", "dynamic quorum: the founding voters, id@host:port:directoryid,...")
	var ovs overrides
	fs.Var(&ovs, "override", "key=value config override (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clusterID == "" {
		return fmt.Errorf("format: --cluster-id is required")
	}
	cfg, err := loadConfig(*configPath, ovs)
	if err != nil {
		return err
	}
	if err := broker.Format(cfg, *clusterID, qf); err != nil {
		return fmt.Errorf("format: %w", err)
	}
	fmt.Printf("Formatted %s with cluster.id %s and node.id %d\n", strings.Join(cfg.LogDirs, ", "), *clusterID, cfg.NodeID)
	return nil
}

// loadConfig is the defaults, then the properties file when given, then the overrides in order.
func loadConfig(path string, ovs overrides) (broker.Config, error) {
	cfg := broker.DefaultConfig()
	if path != "" {
		if err := cfg.LoadProperties(path); err != nil {
			return cfg, err
		}
	}
	for _, kv := range ovs {
		if err := cfg.Override(kv); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}
