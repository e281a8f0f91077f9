package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestRaftStoreControllerAPIReachesTheActiveController sends request bodies from every node of
// a quorum and checks that the active controller's handler, and only it, answers them: from
// itself directly, from the others over the forwarding connection.
func TestRaftStoreControllerAPIReachesTheActiveController(t *testing.T) {
	q := newQuorum(t, 3, 0)
	leader := q.leader()
	for id, s := range q.stores {
		s.HandleControllerAPI(56, func(body []byte) ([]byte, error) {
			if id != leader {
				return nil, fmt.Errorf("node %d, not the leader %d, answered", id, leader)
			}
			return append([]byte(fmt.Sprintf("node %d: ", id)), body...), nil
		})
	}
	for id, s := range q.stores {
		out, err := s.ControllerAPI(context.Background(), 56, []byte("request"))
		if want := fmt.Sprintf("node %d: request", leader); err != nil || !bytes.Equal(out, []byte(want)) {
			t.Fatalf("ControllerAPI from node %d = %q, %v; want %q", id, out, err, want)
		}
	}
}

// TestRaftStoreControllerAPIWithoutHandler checks that a controller without a handler for an
// API refuses rather than answering nothing.
func TestRaftStoreControllerAPIWithoutHandler(t *testing.T) {
	q := newQuorum(t, 1, 0)
	q.leader()
	if _, err := q.stores[1].ControllerAPI(context.Background(), 56, []byte("x")); !errors.Is(err, errControllerAPINotServed) {
		t.Fatalf("ControllerAPI without a handler: %v; want %v", err, errControllerAPINotServed)
	}
}

// TestBrokerEpochs checks that a broker's epoch grows with each new incarnation and stays with a
// registration repeated by the same one, and that a partition record adding an ISR member at
// another epoch than its registration's is refused (KIP-903).
func TestBrokerEpochs(t *testing.T) {
	tid, inc1, inc2 := NewUUID(), NewUUID(), NewUUID()
	im, err := EmptyImage("cid").Apply(0, []Record{
		{Type: TypeTopic, TopicName: "t", TopicID: tid},
		{Type: TypeBroker, NodeID: 1, Incarnation: NewUUID()},
		{Type: TypeBroker, NodeID: 2, Incarnation: inc1},
		{Type: TypeBroker, NodeID: 2, Incarnation: inc1},
		{Type: TypePartition, TopicID: tid, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e := im.Brokers[2].Epoch; e != 1 {
		t.Fatalf("broker 2 registered twice by one incarnation: epoch %d, want 1", e)
	}
	im, err = im.Apply(0, []Record{{Type: TypeBroker, NodeID: 2, Incarnation: inc2}})
	if err != nil {
		t.Fatal(err)
	}
	if e := im.Brokers[2].Epoch; e != 2 {
		t.Fatalf("broker 2's second incarnation: epoch %d, want 2", e)
	}
	join := func(epoch int64) error {
		_, err := im.Apply(0, []Record{{Type: TypePartition, TopicID: tid, Replicas: []int32{1, 2}, ISR: []int32{1, 2},
			ISREpochs: []int64{-1, epoch}, Leader: 1, PartitionEpoch: 1}})
		return err
	}
	if err := join(1); !errors.Is(err, ErrIneligibleReplica) {
		t.Fatalf("broker 2 joining the ISR at its old epoch: %v; want %v", err, ErrIneligibleReplica)
	}
	for _, e := range []int64{2, -1} {
		if err := join(e); err != nil {
			t.Fatalf("broker 2 joining the ISR at epoch %d: %v", e, err)
		}
	}
}
