package e2e

// TestChaos is a Jepsen-style test of replicated partitions (issue 11): three nodes, each
// broker and controller, each in its own network namespace; a nemesis that kills, pauses and
// cuts off one node at a time (the leader or a follower of a partition, or the active
// controller); idempotent acks=all producers (franz-go and Kafka's VerifiableProducer) and
// franz-go consumers running throughout; then, with everything healed and every ISR full, a
// checker that reads the whole log and fails on any acknowledged record lost, duplicated,
// reordered or moved, and on any record a consumer saw that is not in the log any more.
//
// CHAOS_FAULTS sets the number of faults (default 20, the short run `go test ./e2e/` does;
// `make chaos` runs 200), CHAOS_SEED repeats a run's choices, CHAOS_NET=proxy forces the
// loopback-proxy network instead of namespaces, CHAOS_KEEP_LOGS=1 keeps the nodes' logs of a
// run that passed.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"ringbroker/internal/testutil"
)

const (
	chaosNodes     = 3
	chaosRF        = 3
	chaosMinISR    = 2
	chaosKgoTopic  = "chaos-kgo"
	chaosJavaTopic = "chaos-java"
	chaosKgoParts  = 4
	chaosJavaParts = 3
	// chaosProducers franz-go producers write chaosRate records per second each; the Java
	// producer writes chaosRate*2.
	chaosProducers = 3
	chaosRate      = 50
	chaosConsumers = 2
	// healedTimeout bounds the wait after the last fault for every ISR to be full.
	healedTimeout = 90 * time.Second
)

func TestChaos(t *testing.T) {
	faults := 20
	if s := os.Getenv("CHAOS_FAULTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_FAULTS=%q: want a positive count", s)
		}
		faults = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: want an unsigned integer", s)
		}
		seed = n
	}
	t.Logf("chaos seed %d (CHAOS_SEED=%d repeats the nemesis's choices), %d faults", seed, seed, faults)
	began := time.Now()

	cn := newChaosNet(t, chaosNodes)
	t.Logf("chaos network: %s", cn.Mode())
	nodes := startChaosCluster(t, cn, chaosNodes)
	diagDir := filepath.Join(os.TempDir(), fmt.Sprintf("ringbroker-chaos-%d", seed))
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("CHAOS_KEEP_LOGS") != "" {
			keepLogs(t, nodes, diagDir)
		}
	})
	topics := map[string]int32{chaosKgoTopic: chaosKgoParts, chaosJavaTopic: chaosJavaParts}
	names := []string{chaosKgoTopic, chaosJavaTopic}
	adm := nodes[0].Admin(t)
	for _, tp := range names {
		minISR := strconv.Itoa(chaosMinISR)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := adm.CreateTopic(ctx, topics[tp], chaosRF, map[string]*string{"min.insync.replicas": &minISR}, tp)
		cancel()
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s (RF %d, min.insync.replicas %d): %v", tp, chaosRF, chaosMinISR, err)
		}
	}
	testutil.WaitFor(t, clusterTimeout, func() error { return fullISR(nodes[0], names, chaosRF) })

	h := newHistory()
	// The workload stops before the nodes do, also when the test stops early, so nothing
	// of it runs or logs after the test.
	stopProduce, stopConsume := make(chan struct{}), make(chan struct{})
	var produceOnce, consumeOnce sync.Once
	var producers, consumers sync.WaitGroup
	endProduce := func() { produceOnce.Do(func() { close(stopProduce) }); producers.Wait() }
	endConsume := func() { consumeOnce.Do(func() { close(stopConsume) }); consumers.Wait() }
	t.Cleanup(func() { endProduce(); endConsume() })
	javaCmd, javaStderr := javaProducerCmd(t, nodes, chaosJavaTopic, 2*chaosRate)
	h.start = time.Now()
	for i := range chaosProducers {
		producers.Go(func() {
			kgoProducer(h, nodes, fmt.Sprintf("k%d", i+1), chaosKgoTopic, chaosKgoParts, chaosRate, stopProduce, t.Logf)
		})
	}
	producers.Go(func() { javaProducer(h, javaCmd, javaStderr, chaosJavaTopic, stopProduce) })
	for i := range chaosConsumers {
		consumers.Go(func() { consume(h, nodes, fmt.Sprintf("c%d", i+1), topics, stopConsume, t.Logf) })
	}
	// A quiet start: every producer has acks before the first fault.
	testutil.WaitFor(t, 2*time.Minute, func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.acks[chaosKgoTopic]) < chaosProducers*10 || len(h.acks[chaosJavaTopic]) < 10 {
			return fmt.Errorf("producers not yet going: %d and %d acks (java problems %v)",
				len(h.acks[chaosKgoTopic]), len(h.acks[chaosJavaTopic]), h.problems)
		}
		return nil
	})

	nm := &nemesis{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), nodes: nodes, net: cn,
		topics: names, rf: chaosRF, diagDir: diagDir}
	faultsBegan := time.Now()
	nm.run(faults)
	t.Logf("%d faults in %v; healed, waiting for every ISR to be full", faults, time.Since(faultsBegan).Round(time.Second))

	// Healed: producers go on a little, so the partitions are seen taking writes again.
	testutil.WaitFor(t, healedTimeout, func() error {
		for _, b := range nodes {
			if err := fullISR(b, names, chaosRF); err != nil {
				return fmt.Errorf("node %s: %w", b.Addr(), err)
			}
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	h.mu.Lock()
	h.stop = time.Now()
	h.mu.Unlock()
	endProduce()
	// The consumers read on until they have caught up with the last acks, bounded.
	caughtUp := func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		want := len(h.acks[chaosKgoTopic]) + len(h.acks[chaosJavaTopic])
		for _, cs := range h.streams {
			cs.mu.Lock()
			n := len(cs.recs)
			cs.mu.Unlock()
			if n < want {
				return fmt.Errorf("consumer %s has read %d records, %d acked", cs.id, n, want)
			}
		}
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for caughtUp() != nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if err := caughtUp(); err != nil {
		t.Logf("consumers stopped before catching up: %v", err)
	}
	endConsume()

	var vs []*verdict
	for _, tp := range names {
		fl, err := readAll(nodes, tp, topics[tp], 2*time.Minute)
		if err != nil {
			t.Fatalf("final read: %v", err)
		}
		vs = append(vs, check(h, fl, topics[tp]))
	}
	t.Log(figures(seed, cn.Mode(), time.Since(began), nm, vs))
	for _, p := range h.problems {
		t.Errorf("workload: %s", p)
	}
	for _, v := range vs {
		if v.acked == 0 {
			t.Errorf("%s: no record was acknowledged", v.topic)
		}
		if v.bad() {
			t.Errorf("%s: lost %d, misplaced %d, duplicated %d, reordered %d, holes %d, lost reads %d, backwards %d, data loss %d; first findings:\n  %s",
				v.topic, v.lost, v.misplaced, v.duplicated, v.reordered, v.holes, v.lostReads, v.backwards, v.dataLoss,
				strings.Join(v.examples, "\n  "))
		}
	}
	if t.Failed() {
		t.Logf("repeat with CHAOS_SEED=%d CHAOS_FAULTS=%d", seed, faults)
	}
}
