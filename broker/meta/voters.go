package meta

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"ringbroker/raft"
)

// ParseVoters parses controller.quorum.voters: "id@host:port,..." into node id -> address.
func ParseVoters(val string) (map[int32]string, error) {
	out := map[int32]string{}
	for _, part := range strings.Split(val, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("voter %q: want id@host:port", part)
		}
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("voter %q: bad node id %q", part, id)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("voter %q: %w", part, err)
		}
		if _, dup := out[int32(n)]; dup {
			return nil, fmt.Errorf("voter %q: node id %d listed twice", part, n)
		}
		out[int32(n)] = addr
	}
	if len(out) == 0 {
		return nil, errors.New("no voters")
	}
	return out, nil
}

// BootstrapVoter is a founding voter of a dynamic quorum (kafka-storage format --standalone
// or --initial-controllers): its node id, controller listener and directory id.
type BootstrapVoter struct {
	NodeID int32
	QuorumMember
}

// ParseInitialControllers parses --initial-controllers: "id@host:port:directoryid,...", as
// kafka-storage format takes it.
func ParseInitialControllers(val string) ([]BootstrapVoter, error) {
	var out []BootstrapVoter
	seen := map[int32]bool{}
	for _, part := range strings.Split(val, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		id, rest, ok := strings.Cut(part, "@")
		i := strings.LastIndexByte(rest, ':')
		if !ok || i < 0 {
			return nil, fmt.Errorf("controller %q: want id@host:port:directoryid", part)
		}
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("controller %q: bad node id %q", part, id)
		}
		addr := rest[:i]
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("controller %q: %w", part, err)
		}
		dir, err := ParseUUID(rest[i+1:])
		if err != nil {
			return nil, fmt.Errorf("controller %q: directory id: %w", part, err)
		}
		if seen[int32(n)] {
			return nil, fmt.Errorf("controller %q: node id %d listed twice", part, n)
		}
		seen[int32(n)] = true
		out = append(out, BootstrapVoter{NodeID: int32(n), QuorumMember: QuorumMember{Addr: addr, DirectoryID: dir}})
	}
	if len(out) == 0 {
		return nil, errors.New("no controllers")
	}
	return out, nil
}

// FormatDynamic writes the start of a dynamic quorum's metadata log into dir, which must hold
// none yet: one committed membership change per founding voter, with its address and directory
// id (Kafka's bootstrap checkpoint with its VotersRecord). The voters elect a leader among
// themselves at start; other controllers join as learners until AddVoter promotes them.
func FormatDynamic(dir string, voters []BootstrapVoter) error {
	storage, st, err := raft.OpenDiskStorage(dir, raft.DiskOptions{})
	if err != nil {
		return fmt.Errorf("format metadata log %s: %w", dir, err)
	}
	if !st.HardState.IsEmpty() || !st.Snapshot.IsEmpty() || len(st.Entries) > 0 {
		storage.Close()
		return fmt.Errorf("format metadata log %s: it holds a log already", dir)
	}
	var changes []raft.ConfChange
	for _, v := range voters {
		changes = append(changes, raft.ConfChange{Type: raft.AddVoter, NodeID: raftID(v.NodeID), Context: encodeMemberContext(v.QuorumMember)})
	}
	boot := raft.BootstrapConf(changes)
	err = storage.Append(&boot.HardState, boot.Entries)
	if cerr := storage.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("format metadata log %s: %w", dir, err)
	}
	return nil
}
