package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"ringbroker/broker/meta"
)

// startInProcessCluster starts n brokers in this process forming one quorum; n == 0 starts a
// single node with no config, the sole voter of its quorum without a controller listener.
// mods change every node's config before it starts.
func startInProcessCluster(tb testing.TB, n int, mods ...func(*Config)) []*Broker {
	tb.Helper()
	base := func(dir string) Config {
		cfg := DefaultConfig()
		cfg.Listeners = []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 0}}
		cfg.LogDirs = []string{dir}
		cfg.MetricsListen = ""
		cfg.IO = "netpoll"
		cfg.Rings = 1
		for _, m := range mods {
			m(&cfg)
		}
		return cfg
	}
	logger := slog.New(slog.NewTextHandler(&strings.Builder{}, nil))
	if n == 0 {
		b, err := New(base(tb.TempDir()), logger)
		if err != nil {
			tb.Fatal(err)
		}
		if err := b.Start(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { b.Shutdown(context.Background()) })
		return []*Broker{b}
	}
	// The controller ports are picked by listening and closing, so another process may take
	// one before its node binds it: start again on new ports then.
	for attempt := 1; ; attempt++ {
		bs, err := startQuorum(tb, n, base, logger)
		if err == nil {
			return bs
		}
		if attempt == 3 || !errors.Is(err, syscall.EADDRINUSE) && !strings.Contains(err.Error(), "address already in use") {
			tb.Fatal(err)
		}
		tb.Logf("start the cluster again on other ports: %v", err)
	}
}

// startQuorum starts n nodes of one quorum on controller ports it picks; on an error every
// node it made is shut down.
func startQuorum(tb testing.TB, n int, base func(dir string) Config, logger *slog.Logger) ([]*Broker, error) {
	var voters []string
	var ctrl []int
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ctrl = append(ctrl, ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrl[i]))
	}
	cid := meta.NewUUID().String()
	var bs []*Broker
	shutdown := func() {
		for _, b := range bs {
			b.Shutdown(context.Background())
		}
	}
	for i := range n {
		cfg := base(filepath.Join(tb.TempDir(), "data"))
		cfg.NodeID = int32(i + 1)
		cfg.ClusterID = cid
		cfg.QuorumVoters = strings.Join(voters, ",")
		cfg.ControllerListenerNames = []string{"CONTROLLER"}
		cfg.Listeners = append(cfg.Listeners, Listener{Name: "CONTROLLER", Host: "127.0.0.1", Port: ctrl[i]})
		b, err := New(cfg, logger)
		if err != nil {
			shutdown()
			return nil, fmt.Errorf("new node %d: %w", i+1, err)
		}
		tb.Cleanup(func() { b.Shutdown(context.Background()) })
		bs = append(bs, b)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, b := range bs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = b.Start() }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			shutdown()
			return nil, fmt.Errorf("start node %d: %w", i+1, err)
		}
	}
	return bs, nil
}

// TestProducerIDBlocksRace reserves producer-id blocks from all three nodes of a cluster at
// once: the reservations that race from the same image retry, and every block is distinct.
func TestProducerIDBlocksRace(t *testing.T) {
	t.Parallel()
	bs := startInProcessCluster(t, 3)
	const each = 5
	starts := make(chan int64, len(bs)*each)
	errs := make(chan error, len(bs)*each)
	var wg sync.WaitGroup
	for _, b := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				b.producerIDs.mu.Lock()
				start, err := b.producerIDs.reserveBlock()
				b.producerIDs.mu.Unlock()
				if err != nil {
					errs <- err
					continue
				}
				starts <- start
			}
		}()
	}
	wg.Wait()
	close(starts)
	close(errs)
	for err := range errs {
		t.Errorf("reserve a block: %v", err)
	}
	seen := map[int64]bool{}
	for s := range starts {
		if seen[s] {
			t.Fatalf("block at %d reserved twice", s)
		}
		seen[s] = true
	}
	if len(seen) != len(bs)*each {
		t.Fatalf("%d distinct blocks; want %d", len(seen), len(bs)*each)
	}
}
