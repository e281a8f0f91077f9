package raft

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"ringbroker/internal/testutil"
)

var flagRewrite = flag.Bool("rewrite", false, "TestInteraction: rewrite testdata/*.txt with the actual output")

// TestInteraction runs the scenario scripts in testdata/*.txt. A script is a series of
// blocks separated by blank lines: a command line, a "----" line, then the expected output.
// Lines starting with # are comments. `go test -run TestInteraction -rewrite` regenerates the
// expected output, to be reviewed in the diff.
func TestInteraction(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario scripts in testdata: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScript(t, file) })
	}
}

func runScript(t *testing.T, file string) {
	env := &interEnv{nodes: map[uint64]*Raft{}, isolated: map[uint64]bool{}}
	testutil.RunScript(t, file, *flagRewrite, func(cmd string) []string {
		env.out.Reset()
		if err := env.exec(cmd); err != nil {
			fmt.Fprintf(&env.out, "error: %v\n", err)
		}
		if env.out.Len() == 0 {
			return []string{"ok"}
		}
		return strings.Split(strings.TrimSuffix(env.out.String(), "\n"), "\n")
	})
}

// interEnv is the cluster a script drives: cores, the messages in flight to each node, and
// which nodes are cut off.
type interEnv struct {
	nodes    map[uint64]*Raft
	inbox    []Message
	isolated map[uint64]bool
	out      strings.Builder
}

func (e *interEnv) ids() []uint64 {
	var ids []uint64
	for id := range e.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func parseIDs(s string) ([]uint64, error) {
	var ids []uint64
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("node id %q: %w", f, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func (e *interEnv) node(arg string) (*Raft, error) {
	id, err := strconv.ParseUint(arg, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("node id %q: %w", arg, err)
	}
	r := e.nodes[id]
	if r == nil {
		return nil, fmt.Errorf("no node %d", id)
	}
	return r, nil
}

func (e *interEnv) exec(line string) error {
	f := strings.Fields(line)
	args := map[string]string{}
	for _, a := range f[1:] {
		k, v, _ := strings.Cut(a, "=")
		args[k] = v
	}
	need := func(i int) (string, error) {
		if len(f) <= i {
			return "", fmt.Errorf("%s: missing argument %d", f[0], i)
		}
		return f[i], nil
	}
	switch f[0] {
	case "add-nodes", "add-joiner":
		return e.addNodes(f[0], args)
	case "campaign", "tick", "propose", "propose-conf-change", "transfer-leader", "compact", "status", "log":
		a, err := need(1)
		if err != nil {
			return err
		}
		r, err := e.node(a)
		if err != nil {
			return err
		}
		return e.nodeCmd(f[0], r, f[2:])
	case "isolate":
		a, err := need(1)
		if err != nil {
			return err
		}
		r, err := e.node(a)
		if err != nil {
			return err
		}
		e.isolated[r.id] = true
	case "heal":
		clear(e.isolated)
	case "stabilize":
		e.stabilize()
	default:
		return fmt.Errorf("unknown command %q", f[0])
	}
	return nil
}

func (e *interEnv) addNodes(cmd string, args map[string]string) error {
	var voters, learners []uint64
	var err error
	if v := args["voters"]; v != "" {
		if voters, err = parseIDs(v); err != nil {
			return err
		}
	}
	if v := args["learners"]; v != "" {
		if learners, err = parseIDs(v); err != nil {
			return err
		}
	}
	_, prevote := args["prevote"]
	_, checkquorum := args["checkquorum"]
	mk := func(id uint64, st State) error {
		r, err := NewRaft(Config{ID: id, ElectionTick: 10, HeartbeatTick: 1, PreVote: prevote, CheckQuorum: checkquorum, Seed: 1}, st)
		if err != nil {
			return err
		}
		e.nodes[id] = r
		r.Ready() // the bootstrap state is already durable
		return nil
	}
	if cmd == "add-joiner" {
		ids, err := parseIDs(args["id"])
		if err != nil {
			return err
		}
		return mk(ids[0], State{})
	}
	for _, id := range slices.Concat(voters, learners) {
		if err := mk(id, BootstrapState(voters, learners)); err != nil {
			return err
		}
	}
	return nil
}

func (e *interEnv) nodeCmd(cmd string, r *Raft, rest []string) error {
	switch cmd {
	case "campaign":
		return r.Step(Message{Type: MsgHup})
	case "tick":
		n := 1
		if len(rest) > 0 {
			var err error
			if n, err = strconv.Atoi(rest[0]); err != nil {
				return fmt.Errorf("tick count %q: %w", rest[0], err)
			}
		}
		for range n {
			r.Tick()
		}
	case "propose":
		if len(rest) != 1 {
			return fmt.Errorf("propose: want one data argument")
		}
		return r.Step(Message{Type: MsgProp, Entries: []Entry{{Data: []byte(rest[0])}}})
	case "propose-conf-change":
		if len(rest) != 2 {
			return fmt.Errorf("propose-conf-change: want add-voter|add-learner|remove and a node id")
		}
		types := map[string]ConfChangeType{"add-voter": AddVoter, "add-learner": AddLearner, "remove": RemoveNode}
		typ, ok := types[rest[0]]
		if !ok {
			return fmt.Errorf("conf change type %q unknown", rest[0])
		}
		id, err := strconv.ParseUint(rest[1], 10, 64)
		if err != nil {
			return err
		}
		return r.Step(Message{Type: MsgProp, Entries: []Entry{{Type: EntryConfChange, Data: ConfChange{Type: typ, NodeID: id}.Encode()}}})
	case "transfer-leader":
		if len(rest) != 1 {
			return fmt.Errorf("transfer-leader: want the transferee")
		}
		id, err := strconv.ParseUint(rest[0], 10, 64)
		if err != nil {
			return err
		}
		return r.Step(Message{Type: MsgTransferLeader, From: id})
	case "compact":
		_, err := r.Compact(r.applied, fmt.Appendf(nil, "state@%d", r.applied))
		return err
	case "status":
		e.status(r)
	case "log":
		fmt.Fprintf(&e.out, "snapshot %d/%d\n", r.log.snapTerm, r.log.snapIndex)
		for _, ent := range r.log.entries {
			fmt.Fprintf(&e.out, "%s\n", ent)
		}
	}
	return nil
}

func (e *interEnv) status(r *Raft) {
	st := r.Status()
	fmt.Fprintf(&e.out, "%d: %s lead=%d term=%d vote=%d commit=%d applied=%d log=(%d, %d] voters=%v learners=%v\n",
		r.id, st.SoftState.State, st.SoftState.Lead, st.HardState.Term, st.HardState.Vote, st.HardState.Commit,
		st.Applied, st.FirstIdx-1, st.LastIndex, st.Conf.Voters, st.Conf.Learners)
	var ids []uint64
	for id := range st.Progress {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := st.Progress[id]
		fmt.Fprintf(&e.out, "  %d: %s match=%d next=%d paused=%v\n", id, p.State, p.Match, p.Next, p.Paused)
	}
}

// stabilize handles Readies and delivers messages, in node order, until nothing is left.
func (e *interEnv) stabilize() {
	for {
		progress := false
		for _, id := range e.ids() {
			r := e.nodes[id]
			if r.HasReady() {
				progress = true
				e.printReady(id, r.Ready())
			}
		}
		for _, id := range e.ids() {
			var msgs, rest []Message
			for _, m := range e.inbox {
				if m.To == id {
					msgs = append(msgs, m)
				} else {
					rest = append(rest, m)
				}
			}
			if len(msgs) == 0 {
				continue
			}
			progress = true
			e.inbox = rest
			fmt.Fprintf(&e.out, "> %d receiving messages\n", id)
			for _, m := range msgs {
				if e.isolated[m.From] || e.isolated[m.To] {
					fmt.Fprintf(&e.out, "  %s DROPPED\n", m)
					continue
				}
				fmt.Fprintf(&e.out, "  %s\n", m)
				if err := e.nodes[id].Step(m); err != nil {
					fmt.Fprintf(&e.out, "  error: %v\n", err)
				}
			}
		}
		if !progress {
			return
		}
	}
}

func (e *interEnv) printReady(id uint64, rd Ready) {
	fmt.Fprintf(&e.out, "> %d handling Ready\n", id)
	if ss := rd.SoftState; ss != nil {
		fmt.Fprintf(&e.out, "  %s lead=%d\n", ss.State, ss.Lead)
	}
	if hs := rd.HardState; hs != nil {
		fmt.Fprintf(&e.out, "  HardState term=%d vote=%d commit=%d\n", hs.Term, hs.Vote, hs.Commit)
	}
	if s := rd.Snapshot; s != nil {
		fmt.Fprintf(&e.out, "  Snapshot %d/%d voters=%v learners=%v data=%q\n", s.Meta.Term, s.Meta.Index, s.Meta.Conf.Voters, s.Meta.Conf.Learners, s.Data)
	}
	for _, ent := range rd.Entries {
		fmt.Fprintf(&e.out, "  Persist %s\n", ent)
	}
	for _, ent := range rd.CommittedEntries {
		fmt.Fprintf(&e.out, "  Apply %s\n", ent)
	}
	for _, m := range rd.Messages {
		fmt.Fprintf(&e.out, "  Send %s\n", m)
		e.inbox = append(e.inbox, m)
	}
}
