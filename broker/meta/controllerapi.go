package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"ringbroker/raft"
)

// ControllerAPIHandler answers a Kafka API request that only the active controller can
// answer (AlterPartition, DescribeQuorum): body is the request's encoding, the result the
// response's, both at the versions the broker layer uses. The broker installs one per API,
// since deciding needs the state it keeps; the request then travels as Kafka's encoding from
// any node to the active controller, over the controller listener.
type ControllerAPIHandler func(body []byte) ([]byte, error)

// errControllerAPINotServed says no handler is installed for an API.
var errControllerAPINotServed = errors.New("the controller does not serve this API yet")

// controllerAPIs holds the installed ControllerAPIHandlers by API key.
type controllerAPIs struct {
	mu       sync.RWMutex
	handlers map[int16]ControllerAPIHandler
}

// HandleControllerAPI installs h for the API key; until then requests for it fail.
func (s *RaftStore) HandleControllerAPI(key int16, h ControllerAPIHandler) {
	s.apis.mu.Lock()
	defer s.apis.mu.Unlock()
	if s.apis.handlers == nil {
		s.apis.handlers = map[int16]ControllerAPIHandler{}
	}
	s.apis.handlers[key] = h
}

// ControllerAPI sends an encoded request of API key to the active controller (this node's
// handler if it is that controller) and returns the encoded response. It gives up when ctx
// ends or after the commit timeout.
func (s *RaftStore) ControllerAPI(ctx context.Context, key int16, body []byte) ([]byte, error) {
	deadline := time.Now().Add(s.cfg.CommitTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var out []byte
	_, err := s.toLeader(deadline, func(leader int32) (uint64, error) {
		if leader == s.cfg.NodeID {
			var err error
			out, err = s.serveControllerAPI(key, body)
			return 0, err
		}
		resp, err := s.forward(leader, forwardRequest{Kind: "api", APIKey: key, Body: body}, deadline)
		out = resp.Body
		return 0, err
	})
	return out, err
}

// serveControllerAPI runs the handler of API key if this node is the active controller.
func (s *RaftStore) serveControllerAPI(key int16, body []byte) ([]byte, error) {
	if l := s.node.Leader(); l != raftID(s.cfg.NodeID) {
		return nil, &raft.NotLeaderError{Leader: l}
	}
	s.apis.mu.RLock()
	h := s.apis.handlers[key]
	s.apis.mu.RUnlock()
	if h == nil {
		return nil, fmt.Errorf("API key %d: %w", key, errControllerAPINotServed)
	}
	return h(body)
}
