package broker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
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
	var voters []string
	var ctrl []int
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ctrl = append(ctrl, ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrl[i]))
	}
	cid := meta.NewUUID().String()
	bs := make([]*Broker, n)
	for i := range n {
		cfg := base(filepath.Join(tb.TempDir(), "data"))
		cfg.NodeID = int32(i + 1)
		cfg.ClusterID = cid
		cfg.QuorumVoters = strings.Join(voters, ",")
		cfg.ControllerListenerNames = []string{"CONTROLLER"}
		cfg.Listeners = append(cfg.Listeners, Listener{Name: "CONTROLLER", Host: "127.0.0.1", Port: ctrl[i]})
		b, err := New(cfg, logger)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { b.Shutdown(context.Background()) })
		bs[i] = b
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
			tb.Fatalf("start node %d: %v", i+1, err)
		}
	}
	return bs
}
