package raft

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	flagSeed  = flag.Int64("seed", -1, "TestSim: replay only this seed, printing its whole trace")
	flagSeeds = flag.Int("seeds", 0, "TestSim: number of seeds (default 5000, or $RAFT_SIM_SEEDS)")
)

// simSteps is the number of random events per seed before the liveness phase.
const simSteps = 2000

// TestSim drives 3- and 5-node clusters through random message loss, duplication,
// reordering, partitions, crashes that lose unsynced state, and restarts, checking the Raft
// safety properties after every event and liveness once the faults stop. A failing seed
// prints itself; `go test -run TestSim -seed=N -v` replays it exactly with its trace.
func TestSim(t *testing.T) {
	if *flagSeed >= 0 {
		s := newSim(uint64(*flagSeed))
		s.verbose = true
		err := s.run()
		for _, line := range s.trace {
			t.Log(line)
		}
		if err != nil {
			t.Fatalf("seed %d: %v", *flagSeed, err)
		}
		return
	}
	seeds := *flagSeeds
	if seeds == 0 {
		seeds = 5000
		if v := os.Getenv("RAFT_SIM_SEEDS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("RAFT_SIM_SEEDS=%q: %v", v, err)
			}
			seeds = n
		}
	}
	if testing.Short() {
		seeds = min(seeds, 200)
	}
	var stats simStats
	for seed := range uint64(seeds) {
		s := newSim(seed)
		if err := s.run(); err != nil {
			tail := s.trace[max(0, len(s.trace)-40):]
			t.Fatalf("seed %d: %v\nlast events:\n%s\nreplay: go test -ldflags=-checklinkname=0 ./raft -run 'TestSim$' -seed=%d -v",
				seed, err, strings.Join(tail, "\n"), seed)
		}
		stats.add(s)
	}
	t.Logf("%d seeds: %+v", seeds, stats)
	if stats.leaders == 0 || stats.commits == 0 || stats.snapshotsSent == 0 || stats.crashes == 0 {
		t.Fatalf("the simulation did not exercise the core: %+v", stats)
	}
}

type simStats struct {
	leaders, commits, snapshotsSent, crashes, tornWrites, transfers int
}

func (st *simStats) add(s *sim) {
	st.leaders += len(s.leaders)
	st.commits += len(s.committed)
	st.snapshotsSent += s.snapshotsSent
	st.crashes += s.crashes
	st.tornWrites += s.tornWrites
	st.transfers += s.transfers
}

// simNode is one node: its core (nil while crashed), what it made durable, and its state
// machine, a hash chain over the applied entries.
type simNode struct {
	id uint64
	r  *Raft
	// durable state: survives crashes.
	hs   HardState
	snap *Snapshot
	ents []Entry
	// volatile state machine.
	smIndex, smHash uint64
	// checker caches over the core's log.
	chainBase  uint64   // snapshot index the cache starts after
	chain      []uint64 // chain[i]: chain hash through entry chainBase+1+i
	chainEnts  []Entry
	checkedCmt uint64
	restarts   uint64
}

type commitRec struct {
	term, chain uint64
	minTerm     uint64 // lowest current term of a node observing this index as committed
}

type sim struct {
	seed    uint64
	rng     *rand.Rand
	nodes   []*simNode
	net     []Message
	cut     []bool // cut[a*n+b]: a cannot reach b
	voters  []uint64
	verbose bool
	trace   []string
	// fault rates in percent
	loss, dup int

	leaders    map[uint64]uint64    // term -> leader
	entryChain map[[2]uint64]uint64 // (index, term) -> chain hash through it
	committed  []commitRec          // committed[i-1] for index i
	maxByTerm  map[uint64]uint64    // minTerm -> highest committed index with it
	applied    []uint64             // applied[i-1]: chain after applying index i
	proposals  int

	snapshotsSent, crashes, tornWrites, transfers int
}

func newSim(seed uint64) *sim {
	n := 3
	if seed%2 == 1 {
		n = 5
	}
	s := &sim{
		seed:       seed,
		rng:        rand.New(rand.NewPCG(seed, 0x5eed)),
		cut:        make([]bool, n*n),
		leaders:    map[uint64]uint64{},
		entryChain: map[[2]uint64]uint64{},
		maxByTerm:  map[uint64]uint64{},
	}
	s.loss = s.rng.IntN(20)
	s.dup = s.rng.IntN(10)
	for i := range n {
		s.voters = append(s.voters, uint64(i+1))
	}
	boot := BootstrapState(s.voters, nil)
	for _, id := range s.voters {
		nd := &simNode{id: id, hs: boot.HardState, ents: slices.Clone(boot.Entries)}
		s.nodes = append(s.nodes, nd)
		if err := s.start(nd); err != nil {
			panic(err)
		}
	}
	return s
}

func (s *sim) logf(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf(format, args...))
	if !s.verbose && len(s.trace) > 200 {
		s.trace = append(s.trace[:0], s.trace[100:]...)
	}
}

func (s *sim) cfg(id uint64, restarts uint64) Config {
	return Config{ID: id, ElectionTick: 10, HeartbeatTick: 2, PreVote: s.seed%3 != 0, CheckQuorum: s.seed%4 != 0,
		MaxSizePerMsg: 64, MaxInflightMsgs: 4, Seed: s.seed*1000 + restarts}
}

// start builds a core from the durable state and the state machine from the snapshot.
func (s *sim) start(nd *simNode) error {
	r, err := NewRaft(s.cfg(nd.id, nd.restarts), State{HardState: nd.hs, Snapshot: nd.snap, Entries: slices.Clone(nd.ents)})
	if err != nil {
		return fmt.Errorf("restart node %d: %w", nd.id, err)
	}
	nd.r = r
	nd.smIndex, nd.smHash = 0, 0
	if !nd.snap.IsEmpty() {
		nd.smIndex, nd.smHash = nd.snap.Meta.Index, binary.BigEndian.Uint64(nd.snap.Data)
	}
	nd.chain, nd.chainEnts, nd.chainBase, nd.checkedCmt = nil, nil, 0, 0
	return nil
}

func chainHash(h uint64, e Entry) uint64 {
	const prime = 1099511628211
	mix := func(v uint64) {
		h ^= v
		h *= prime
	}
	mix(e.Index)
	mix(e.Term)
	mix(uint64(e.Type))
	for _, b := range e.Data {
		mix(uint64(b))
	}
	return h
}

func (s *sim) run() error {
	for step := 0; step < simSteps; step++ {
		touched, err := s.event()
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		if touched != nil {
			if err := s.check(touched); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
		}
	}
	return s.converge()
}

// event performs one random event and returns the node it changed, if any.
func (s *sim) event() (nd *simNode, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	nd = s.nodes[s.rng.IntN(len(s.nodes))]
	switch w := s.rng.IntN(100); {
	case w < 40:
		return s.deliverRandom()
	case w < 62:
		return nd, s.ready(nd, false)
	case w < 84:
		if nd.r != nil {
			nd.r.Tick()
			return nd, nil
		}
	case w < 90:
		if nd.r != nil {
			s.proposals++
			data := fmt.Appendf(nil, "p%d", s.proposals)
			err := nd.r.Step(Message{Type: MsgProp, Entries: []Entry{{Data: data}}})
			s.logf("propose %q at %d: %v", data, nd.id, err)
			return nd, nil
		}
	case w < 92:
		return nd, s.compact(nd)
	case w < 93:
		if len(s.net) > 0 {
			i := s.rng.IntN(len(s.net))
			s.logf("drop %s", s.net[i])
			s.net = slices.Delete(s.net, i, i+1)
		}
	case w < 95:
		if nd.r == nil {
			s.logf("restart %d", nd.id)
			nd.restarts++
			return nd, s.start(nd)
		}
		if s.rng.IntN(4) == 0 {
			s.crash(nd)
		}
	case w < 96:
		s.partition()
	case w < 98:
		s.logf("heal")
		clear(s.cut)
	default:
		if nd.r != nil && nd.r.state == StateLeader {
			to := s.voters[s.rng.IntN(len(s.voters))]
			s.transfers++
			s.logf("transfer leadership %d -> %d", nd.id, to)
			return nd, nd.r.Step(Message{Type: MsgTransferLeader, From: to})
		}
	}
	return nil, nil
}

func (s *sim) crash(nd *simNode) {
	s.crashes++
	torn := 0
	if nd.r.HasReady() && s.rng.IntN(2) == 0 {
		// Die in the middle of writing the next Ready: a prefix of its entries reached the
		// disk, its hard state did not, and nothing was sent or applied.
		rd := nd.r.Ready()
		if len(rd.Entries) > 0 && rd.Snapshot == nil {
			torn = s.rng.IntN(len(rd.Entries) + 1)
			nd.persistEntries(rd.Entries[:torn])
			s.tornWrites++
		}
	}
	s.logf("crash %d (torn entries persisted: %d)", nd.id, torn)
	nd.r = nil
}

func (s *sim) partition() {
	clear(s.cut)
	n := len(s.nodes)
	side := make([]bool, n)
	for i := range side {
		side[i] = s.rng.IntN(2) == 0
	}
	for a := range n {
		for b := range n {
			s.cut[a*n+b] = side[a] != side[b]
		}
	}
	s.logf("partition %v", side)
}

func (s *sim) deliverRandom() (*simNode, error) {
	if len(s.net) == 0 {
		return nil, nil
	}
	i := s.rng.IntN(len(s.net))
	m := s.net[i]
	if s.rng.IntN(100) >= s.dup {
		s.net = slices.Delete(s.net, i, i+1)
	}
	return s.deliver(m)
}

func (s *sim) deliver(m Message) (*simNode, error) {
	nd := s.nodes[m.To-1]
	if nd.r == nil || s.cut[int(m.From-1)*len(s.nodes)+int(m.To-1)] {
		return nil, nil
	}
	if s.verbose {
		s.logf("deliver %s", m)
	}
	if err := nd.r.Step(m); err != nil && !errors.Is(err, ErrProposalDropped) {
		return nd, fmt.Errorf("step %s: %w", m, err)
	}
	return nd, nil
}

func (nd *simNode) persistEntries(ents []Entry) {
	if len(ents) == 0 {
		return
	}
	first := ents[0].Index
	base := uint64(0)
	if nd.snap != nil {
		base = nd.snap.Meta.Index
	}
	if first <= base {
		panic(fmt.Sprintf("node %d persists entry %d at or below its snapshot %d", nd.id, first, base))
	}
	keep := min(uint64(len(nd.ents)), first-base-1)
	nd.ents = append(slices.Clone(nd.ents[:keep]), ents...)
}

// ready handles a Ready in the documented order: persist, send, apply.
func (s *sim) ready(nd *simNode, reliable bool) error {
	if nd.r == nil || !nd.r.HasReady() {
		return nil
	}
	rd := nd.r.Ready()
	if rd.Snapshot != nil {
		nd.snap = rd.Snapshot
		nd.ents = nil
	}
	nd.persistEntries(rd.Entries)
	if rd.HardState != nil {
		nd.hs = *rd.HardState
	}
	for _, m := range rd.Messages {
		if m.Type == MsgSnap {
			s.snapshotsSent++
		}
		if !reliable && s.rng.IntN(100) < s.loss {
			continue
		}
		if s.verbose {
			s.logf("send %s", m)
		}
		s.net = append(s.net, m)
	}
	if len(s.net) > 400 {
		s.net = s.net[len(s.net)-400:]
	}
	if rd.Snapshot != nil {
		nd.smIndex, nd.smHash = rd.Snapshot.Meta.Index, binary.BigEndian.Uint64(rd.Snapshot.Data)
	}
	for _, e := range rd.CommittedEntries {
		if e.Index != nd.smIndex+1 {
			return fmt.Errorf("node %d applies entry %d after %d", nd.id, e.Index, nd.smIndex)
		}
		nd.smIndex, nd.smHash = e.Index, chainHash(nd.smHash, e)
		if e.Index <= uint64(len(s.applied)) {
			if s.applied[e.Index-1] != nd.smHash {
				return fmt.Errorf("state machine safety: node %d applied %s giving chain %x; another node's chain at %d is %x", nd.id, e, nd.smHash, e.Index, s.applied[e.Index-1])
			}
		} else if e.Index == uint64(len(s.applied))+1 {
			s.applied = append(s.applied, nd.smHash)
		}
	}
	return nil
}

func (s *sim) compact(nd *simNode) error {
	if nd.r == nil || nd.smIndex < nd.r.log.snapIndex+4 {
		return nil
	}
	data := binary.BigEndian.AppendUint64(nil, nd.smHash)
	snap, err := nd.r.Compact(nd.smIndex, data)
	if err != nil {
		return fmt.Errorf("compact node %d at %d: %w", nd.id, nd.smIndex, err)
	}
	s.logf("compact %d at %d", nd.id, nd.smIndex)
	// Storage: save the snapshot, then drop the entries it covers.
	base := uint64(0)
	if nd.snap != nil {
		base = nd.snap.Meta.Index
	}
	drop := min(uint64(len(nd.ents)), snap.Meta.Index-base)
	nd.snap = snap
	nd.ents = slices.Clone(nd.ents[drop:])
	return nil
}

// check verifies the safety properties after an event that changed nd.
func (s *sim) check(nd *simNode) error {
	r := nd.r
	if r == nil {
		return nil
	}
	if r.state == StateLeader {
		if l, ok := s.leaders[r.term]; ok && l != nd.id {
			return fmt.Errorf("election safety: nodes %d and %d both lead term %d", l, nd.id, r.term)
		}
		s.leaders[r.term] = nd.id
	}
	// Log matching: every (index, term) names one log prefix, whichever node holds it.
	if nd.chainBase != r.log.snapIndex || nd.chain == nil && len(r.log.entries) > 0 {
		nd.chainBase, nd.chain, nd.chainEnts = r.log.snapIndex, nil, nil
		if r.log.snapIndex > 0 {
			h := binary.BigEndian.Uint64(r.snapshot.Data)
			if err := s.recordChain(nd, r.log.snapIndex, r.log.snapTerm, h); err != nil {
				return err
			}
		}
	}
	keep := 0
	for keep < len(nd.chainEnts) && keep < len(r.log.entries) && sameEntry(nd.chainEnts[keep], r.log.entries[keep]) {
		keep++
	}
	nd.chain, nd.chainEnts = nd.chain[:keep], nd.chainEnts[:keep]
	for i := keep; i < len(r.log.entries); i++ {
		e := r.log.entries[i]
		h := nd.chainAt(e.Index - 1)
		h = chainHash(h, e)
		nd.chain = append(nd.chain, h)
		nd.chainEnts = append(nd.chainEnts, e)
		if err := s.recordChain(nd, e.Index, e.Term, h); err != nil {
			return err
		}
	}
	// Committed entries never change: whoever commits index i commits the same prefix.
	if nd.checkedCmt < r.log.snapIndex {
		nd.checkedCmt = r.log.snapIndex - 1
	}
	for i := nd.checkedCmt + 1; i <= r.committed; i++ {
		t, _ := r.log.term(i)
		h := nd.chainAt(i)
		switch {
		case i <= uint64(len(s.committed)):
			c := &s.committed[i-1]
			if c.term != t || c.chain != h {
				return fmt.Errorf("committed entry changed: node %d commits %d/%d (chain %x); committed before as %d/%d (chain %x)", nd.id, t, i, h, c.term, i, c.chain)
			}
			if r.term < c.minTerm {
				c.minTerm = r.term
				s.maxByTerm[r.term] = max(s.maxByTerm[r.term], i)
			}
		case i == uint64(len(s.committed))+1:
			s.committed = append(s.committed, commitRec{term: t, chain: h, minTerm: r.term})
			s.maxByTerm[r.term] = max(s.maxByTerm[r.term], i)
		}
	}
	nd.checkedCmt = max(nd.checkedCmt, r.committed)
	// Leader completeness: a leader of term T holds every entry committed in a term below T.
	if r.state == StateLeader {
		var need uint64
		for term, idx := range s.maxByTerm {
			if term < r.term {
				need = max(need, idx)
			}
		}
		if need > r.log.snapIndex {
			c := s.committed[need-1]
			if need > r.log.lastIndex() || nd.chainAt(need) != c.chain {
				return fmt.Errorf("leader completeness: leader %d of term %d lacks committed entry %d/%d (last index %d)", nd.id, r.term, c.term, need, r.log.lastIndex())
			}
		}
	}
	return nil
}

func sameEntry(a, b Entry) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type && string(a.Data) == string(b.Data)
}

// chainAt returns the chain hash through index i of the node's log (i at or above the
// snapshot index, at most the last index).
func (nd *simNode) chainAt(i uint64) uint64 {
	if i == nd.chainBase {
		if i == 0 {
			return 0
		}
		return binary.BigEndian.Uint64(nd.r.snapshot.Data)
	}
	return nd.chain[i-nd.chainBase-1]
}

func (s *sim) recordChain(nd *simNode, index, term, h uint64) error {
	k := [2]uint64{index, term}
	if prev, ok := s.entryChain[k]; ok && prev != h {
		return fmt.Errorf("log matching: node %d holds entry %d/%d after a different prefix (chain %x, seen %x)", nd.id, term, index, h, prev)
	}
	s.entryChain[k] = h
	return nil
}

// converge stops all faults, restarts every node and requires the cluster to elect a leader,
// commit a new entry and apply the same log everywhere.
func (s *sim) converge() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while converging: %v", p)
		}
	}()
	s.logf("converge")
	clear(s.cut)
	for _, nd := range s.nodes {
		if nd.r == nil {
			nd.restarts++
			if err := s.start(nd); err != nil {
				return err
			}
		}
	}
	const final = "final"
	proposed := false
	for round := range 400 {
		for _, nd := range s.nodes {
			nd.r.Tick()
			if err := s.check(nd); err != nil {
				return fmt.Errorf("converge round %d: %w", round, err)
			}
		}
		for quiet := false; !quiet; {
			quiet = true
			for _, nd := range s.nodes {
				if nd.r.HasReady() {
					quiet = false
					if err := s.ready(nd, true); err != nil {
						return err
					}
					if err := s.check(nd); err != nil {
						return fmt.Errorf("converge round %d: %w", round, err)
					}
				}
			}
			for len(s.net) > 0 {
				quiet = false
				m := s.net[0]
				s.net = s.net[1:]
				nd, err := s.deliver(m)
				if err != nil {
					return err
				}
				if nd != nil {
					if err := s.check(nd); err != nil {
						return fmt.Errorf("converge round %d: %w", round, err)
					}
				}
			}
		}
		var leader *simNode
		for _, nd := range s.nodes {
			if nd.r.state == StateLeader {
				leader = nd
			}
		}
		if leader == nil {
			continue
		}
		if !proposed {
			if leader.r.Step(Message{Type: MsgProp, Entries: []Entry{{Data: []byte(final)}}}) == nil {
				proposed = true
			}
			continue
		}
		last := leader.r.log.lastIndex()
		done := leader.r.committed == last
		for _, nd := range s.nodes {
			done = done && nd.smIndex == last && nd.smHash == leader.smHash
		}
		if done {
			return nil
		}
	}
	var st []string
	for _, nd := range s.nodes {
		st = append(st, fmt.Sprintf("%d:%s term=%d commit=%d applied=%d last=%d", nd.id, nd.r.state, nd.r.term, nd.r.committed, nd.smIndex, nd.r.log.lastIndex()))
	}
	return fmt.Errorf("no convergence after faults stopped (proposed final entry: %v): %s", proposed, strings.Join(st, "; "))
}
