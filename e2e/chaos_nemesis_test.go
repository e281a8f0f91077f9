package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"ringbroker/internal/brokertest"
	"ringbroker/internal/testutil"
)

// Process fault kinds; the network ones are the chaosNet's CutKinds.
const (
	faultKill       = "kill"        // SIGKILL, then a restart after a pause
	faultPauseShort = "pause-short" // SIGSTOP for less than the session timeout, then SIGCONT
	faultPauseLong  = "pause-long"  // SIGSTOP for longer than the session timeout: the node is fenced
)

// Nemesis timing.
const (
	// healTimeout bounds how long a healed node may take to answer Metadata again.
	healTimeout = 90 * time.Second
	// settleTimeout bounds the wait, between faults, for every ISR to be full again; a
	// cluster that does not get there in time takes the next fault anyway.
	settleTimeout = 15 * time.Second
)

// fault is one injected fault, for the log and the figures.
type fault struct {
	n      int
	kind   string
	role   string // leader, follower, controller
	node   int    // index into nodes
	detail string // which partition the role was picked from
	pause  time.Duration
	at     time.Time
}

// nemesis injects faults one at a time: it picks a role (the leader or a follower of a random
// partition, or the active controller), the node holding it, and a fault kind; it holds the
// fault for a random pause, heals it, waits until the node answers again and (bounded) until
// every ISR is full, then waits a little before the next.
type nemesis struct {
	t      *testing.T
	rng    *rand.Rand
	nodes  []*Broker
	net    chaosNet
	topics []string
	rf     int
	log    []fault
	// diagDir receives goroutine dumps of the nodes when the ISR does not fill after a heal.
	diagDir string
}

func (nm *nemesis) kinds() []string {
	return append([]string{faultKill, faultPauseShort, faultPauseLong}, nm.net.CutKinds()...)
}

// between returns a random duration in [lo, hi).
func (nm *nemesis) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(nm.rng.Int64N(int64(hi-lo)))
}

// pick chooses the victim of fault n.
func (nm *nemesis) pick(n int) fault {
	f := fault{n: n, kind: nm.kinds()[nm.rng.IntN(len(nm.kinds()))]}
	roles := []string{"leader", "follower", "controller"}
	f.role = roles[nm.rng.IntN(len(roles))]
	f.node = nm.rng.IntN(len(nm.nodes))
	if f.role == "controller" {
		if c, err := activeControllerOf(nm.nodes); err == nil {
			f.node = c
		} else {
			f.role, f.detail = "any", "no active controller known: "+err.Error()
		}
		return f
	}
	var ps []partitionState
	for _, b := range nm.nodes {
		var err error
		if ps, err = clusterState(b, nm.topics); err == nil && len(ps) > 0 {
			break
		}
	}
	if len(ps) == 0 {
		f.role, f.detail = "any", "no metadata"
		return f
	}
	p := ps[nm.rng.IntN(len(ps))]
	f.detail = fmt.Sprintf("%s-%d leader %d replicas %v isr %v", p.topic, p.partition, p.leader, p.replicas, p.isr)
	switch {
	case f.role == "leader" && p.leader >= 1:
		f.node = int(p.leader) - 1
	case f.role == "follower":
		var fs []int32
		for _, r := range p.replicas {
			if r != p.leader {
				fs = append(fs, r)
			}
		}
		if len(fs) > 0 {
			f.node = int(fs[nm.rng.IntN(len(fs))]) - 1
		} else {
			f.role = "any"
		}
	default:
		f.role = "any"
	}
	return f
}

// run injects count faults.
func (nm *nemesis) run(count int) {
	t := nm.t
	for n := 1; n <= count; n++ {
		f := nm.pick(n)
		switch f.kind {
		case faultKill:
			f.pause = nm.between(500*time.Millisecond, 4*time.Second)
		case faultPauseShort:
			f.pause = nm.between(chaosSessionTimeout/5, chaosSessionTimeout*3/5)
		case faultPauseLong:
			f.pause = nm.between(chaosSessionTimeout*3/2, chaosSessionTimeout*3)
		default:
			f.pause = nm.between(time.Second, 7*time.Second)
		}
		f.at = time.Now()
		b := nm.nodes[f.node]
		t.Logf("%s fault %d/%d: %s node %d (%s; %s) for %v", f.at.UTC().Format("15:04:05.000"), n, count, f.kind, f.node+1, f.role,
			f.detail, f.pause.Round(time.Millisecond))
		nm.log = append(nm.log, f)
		switch f.kind {
		case faultKill:
			b.Kill()
			time.Sleep(f.pause)
			b.Restart()
		case faultPauseShort, faultPauseLong:
			if err := b.signal(syscall.SIGSTOP); err != nil {
				t.Fatalf("fault %d: SIGSTOP node %d: %v", n, f.node+1, err)
			}
			time.Sleep(f.pause)
			if err := b.signal(syscall.SIGCONT); err != nil {
				t.Fatalf("fault %d: SIGCONT node %d: %v", n, f.node+1, err)
			}
		default:
			if err := nm.net.Cut(f.node, f.kind); err != nil {
				t.Fatalf("fault %d: %s node %d: %v", n, f.kind, f.node+1, err)
			}
			time.Sleep(f.pause)
			if err := nm.net.Heal(); err != nil {
				t.Fatalf("fault %d: heal %s of node %d: %v", n, f.kind, f.node+1, err)
			}
		}
		// The healed node must answer again; one that does not is hung.
		testutil.WaitFor(t, healTimeout, func() error {
			if !b.Alive() {
				t.Fatalf("fault %d: node %d exited after the heal:\n%s", n, f.node+1, brokertest.TailFile(b.log, logTailBytes))
			}
			return brokertest.MetadataOK(b.Addr())
		})
		settled := time.Now()
		deadline := settled.Add(settleTimeout)
		var err error
		for {
			if err = fullISR(b, nm.topics, nm.rf); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Logf("%s fault %d: ISR not full %v after the heal, going on: %v\n%s  goroutines: %s", time.Now().UTC().Format("15:04:05.000"), n,
				settleTimeout, err, nm.views(), dumpGoroutines(nm.net, nm.nodes, nm.diagDir, fmt.Sprintf("fault%03d", n)))
		}
		time.Sleep(nm.between(200*time.Millisecond, time.Second))
	}
}

// views is how each node sees the partitions, for a log line when they do not agree.
func (nm *nemesis) views() string {
	var b strings.Builder
	for i, node := range nm.nodes {
		ps, err := clusterState(node, nm.topics)
		fmt.Fprintf(&b, "  node %d sees:", i+1)
		if err != nil {
			fmt.Fprintf(&b, " %v\n", err)
			continue
		}
		for _, p := range ps {
			fmt.Fprintf(&b, " %s-%d leader %d isr %v;", p.topic, p.partition, p.leader, p.isr)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// byKind counts the faults of each kind and of each role.
func (nm *nemesis) byKind() (kinds, roles map[string]int) {
	kinds, roles = map[string]int{}, map[string]int{}
	for _, f := range nm.log {
		kinds[f.kind]++
		roles[f.role]++
	}
	return kinds, roles
}
