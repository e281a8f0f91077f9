package meta

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"ringbroker/raft"
)

// The controller listener carries three protocols: Raft's transport (connections that open
// with raft.Preamble), requests that a controller forwards to the active one (a commit, or a
// broker heartbeat; connections that open with forwardMagic), and Kafka's, from admin clients
// (see ServeClients). As a Kafka request size forwardMagic would be over 1.3 GB, far above any
// socket.request.max.bytes in use, so the three cannot be confused.
const (
	forwardMagic = "RBFW"
	// maxForwardBytes bounds one forwarded request or response.
	maxForwardBytes = 64 << 20
)

// forwardRequest is what a controller sends the active one.
type forwardRequest struct {
	// Kind is "commit" (Records, encoded), "heartbeat" (NodeID, Incarnation, and Addr from a
	// learner), "unreachable" (NodeID, Incarnation: a broker that refused a connection),
	// "join" (NodeID, Addr: add a learner), "api" (APIKey, Body: a request for
	// ControllerAPI), "read_index" (the commit index, for CatchUp) or "directory_id" (the
	// receiver's metadata directory id, for UpgradeKRaftVersion; any controller answers).
	Kind        string `json:"kind"`
	Records     []byte `json:"records,omitempty"`
	NodeID      int32  `json:"node_id,omitempty"`
	Incarnation UUID   `json:"incarnation,omitempty"`
	// Addr is a learner's listener address, where the leader sends it the log.
	Addr string `json:"addr,omitempty"`
	// DirectoryID is a joining node's metadata directory id (zero: not sent), and Broker
	// whether it is a broker-only node.
	DirectoryID UUID `json:"directory_id"`
	Broker      bool `json:"broker,omitempty"`
	// WantShutdown is a heartbeat's request for a controlled shutdown.
	WantShutdown bool `json:"want_shutdown,omitempty"`
	// APIKey and Body are an "api" request: a Kafka API request, encoded.
	APIKey int16  `json:"api_key,omitempty"`
	Body   []byte `json:"body,omitempty"`
}

// forwardResponse answers a forwardRequest: the entry's index, or why not.
type forwardResponse struct {
	Index     uint64 `json:"index,omitempty"`
	Err       string `json:"err,omitempty"`
	NotLeader bool   `json:"not_leader,omitempty"`
	Leader    uint64 `json:"leader,omitempty"`
	// LeaderAddr is the believed leader's controller listener, when known: a node joining a
	// dynamic quorum knows no address but its bootstrap servers'. A join's success names the
	// leader that accepted it in Leader and LeaderAddr, for the learner to answer it before
	// the log tells it where the voters are.
	LeaderAddr string `json:"leader_addr,omitempty"`
	// ShouldShutdown answers a heartbeat that asked for a controlled shutdown: the broker
	// leads nothing any more and may stop.
	ShouldShutdown bool `json:"should_shutdown,omitempty"`
	// Body answers an "api" request: the Kafka API response, encoded.
	Body []byte `json:"body,omitempty"`
	// DirectoryID answers a "directory_id" request: the answering controller's.
	DirectoryID UUID `json:"directory_id"`
}

// notLeaderAtError is a forward's not-leader answer that names where the leader listens.
type notLeaderAtError struct {
	raft.NotLeaderError
	addr string
}

// Unwrap lets errors.As find the raft.NotLeaderError.
func (e *notLeaderAtError) Unwrap() error { return &e.NotLeaderError }

// unreachableError says a forward did not reach the leader, so nothing was proposed.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }

func (e *unreachableError) Unwrap() error { return e.err }

// forward sends req to controller leader and returns its answer.
func (s *RaftStore) forward(leader int32, req forwardRequest, deadline time.Time) (forwardResponse, error) {
	addr := s.controllerAddr(leader)
	if addr == "" {
		return forwardResponse{}, &unreachableError{fmt.Errorf("leader %d is not a known voter", leader)}
	}
	return s.forwardTo(leader, addr, req, deadline)
}

// forwardTo sends req to the controller listening at addr (node leader, or -1 when unknown).
func (s *RaftStore) forwardTo(leader int32, addr string, req forwardRequest, deadline time.Time) (forwardResponse, error) {
	var resp forwardResponse
	body, err := json.Marshal(req)
	if err != nil {
		return resp, fmt.Errorf("encode forwarded %s: %w", req.Kind, err)
	}
	c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
	if err != nil {
		return resp, &unreachableError{fmt.Errorf("forward %s to controller %d at %s: %w", req.Kind, leader, addr, err)}
	}
	defer c.Close()
	c.SetDeadline(deadline)
	msg := make([]byte, 0, 8+len(body))
	msg = append(msg, forwardMagic...)
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(body)))
	msg = append(msg, body...)
	if _, err := c.Write(msg); err != nil {
		return resp, &unreachableError{fmt.Errorf("forward %s to controller %d at %s: %w", req.Kind, leader, addr, err)}
	}
	out, err := readForwardFrame(bufio.NewReader(c))
	if err != nil {
		return resp, fmt.Errorf("forward %s to controller %d at %s: no answer: %w", req.Kind, leader, addr, err)
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return resp, fmt.Errorf("forward %s to controller %d: bad answer: %w", req.Kind, leader, err)
	}
	switch {
	case resp.NotLeader && resp.LeaderAddr != "":
		return resp, &notLeaderAtError{NotLeaderError: raft.NotLeaderError{Leader: resp.Leader}, addr: resp.LeaderAddr}
	case resp.NotLeader:
		return resp, &raft.NotLeaderError{Leader: resp.Leader}
	case resp.Err != "":
		return resp, remoteError(resp.Err)
	}
	return resp, nil
}

// remoteError rebuilds an error the active controller answered with, wrapping the sentinel it
// ends in, so that callers can tell a refused record (errors.Is) wherever it was checked.
func remoteError(msg string) error {
	for _, sentinel := range []error{ErrStalePartitionEpoch, ErrIneligibleReplica, ErrProducerIDsBehind} {
		if strings.HasSuffix(msg, ": "+sentinel.Error()) {
			return fmt.Errorf("%s: %w", strings.TrimSuffix(msg, ": "+sentinel.Error()), sentinel)
		}
	}
	return errors.New(msg)
}

func readForwardFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxForwardBytes {
		return nil, fmt.Errorf("forwarded frame of %d bytes exceeds %d", n, maxForwardBytes)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

func (s *RaftStore) serveForward(body []byte) forwardResponse {
	var req forwardRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return forwardResponse{Err: fmt.Sprintf("decode forwarded request (%d bytes): %v", len(body), err)}
	}
	var idx uint64
	var err error
	var shouldShutdown bool
	var out []byte
	switch req.Kind {
	case "commit":
		var recs []Record
		if recs, err = DecodeRecords(req.Records); err == nil {
			base := s.Image()
			var next *Image
			if next, err = base.Apply(base.Offset, recs); err == nil {
				idx, err = s.proposeLocal(req.Records, base, next, time.Now().Add(s.cfg.CommitTimeout))
			}
		}
	case "heartbeat":
		if shouldShutdown, err = s.recordHeartbeat(req.NodeID, req.Incarnation, req.WantShutdown); err == nil && req.Addr != "" {
			// A learner's address is known from its join entry, which a snapshot may have
			// compacted away; its heartbeats keep this leader's address book current.
			if _, voter := s.cfg.Voters[req.NodeID]; !voter {
				s.node.AddPeer(raftID(req.NodeID), req.Addr)
			}
		}
	case "unreachable":
		err = s.recordSuspect(req.NodeID, req.Incarnation)
	case "join":
		err = s.addLearner(req.NodeID, QuorumMember{Addr: req.Addr, DirectoryID: req.DirectoryID, Broker: req.Broker})
	case "api":
		out, err = s.serveControllerAPI(req.APIKey, req.Body)
	case "read_index":
		idx, err = s.readIndex(time.Now().Add(s.cfg.CommitTimeout))
	case "directory_id":
		return forwardResponse{DirectoryID: s.cfg.DirectoryID}
	default:
		err = fmt.Errorf("unknown forwarded request kind %q", req.Kind)
	}
	var nl *raft.NotLeaderError
	switch {
	case errors.As(err, &nl):
		resp := forwardResponse{NotLeader: true, Leader: nl.Leader}
		if nl.Leader != raft.None {
			resp.LeaderAddr = s.controllerAddr(int32(nl.Leader - 1))
		}
		return resp
	case err != nil:
		return forwardResponse{Err: err.Error()}
	}
	resp := forwardResponse{Index: idx, ShouldShutdown: shouldShutdown, Body: out}
	if req.Kind == "join" {
		resp.Leader, resp.LeaderAddr = raftID(s.cfg.NodeID), s.Addr()
	}
	return resp
}
