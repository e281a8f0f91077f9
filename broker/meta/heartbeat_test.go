package meta

import (
	"context"
	"testing"
)

func TestRaftStoreHeartbeatsReachTheLeader(t *testing.T) {
	q := newQuorum(t, 3, 0)
	l := q.leader()
	inc := NewUUID()
	for id, s := range q.stores {
		if _, err := s.Heartbeat(context.Background(), id, inc, false); err != nil {
			t.Fatalf("heartbeat from node %d: %v", id, err)
		}
	}
	hb := q.stores[l].Heartbeats()
	if len(hb) != 3 || hb[1].Incarnation != inc {
		t.Fatalf("leader %d holds heartbeats %v, want one from each of 3 nodes", l, hb)
	}
}
