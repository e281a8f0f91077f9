package broker

import (
	"testing"
	"time"
)

func TestLeaderLease(t *testing.T) {
	b := &Broker{cfg: Config{BrokerSessionTimeout: time.Second}}
	t0 := time.Now()
	if b.leaseHeld(t0) {
		t.Fatal("lease held before any heartbeat")
	}
	b.renewLease(t0)
	if !b.leaseHeld(t0.Add(900 * time.Millisecond)) {
		t.Fatal("lease lost within the session timeout of the last heartbeat")
	}
	if b.leaseHeld(t0.Add(1100 * time.Millisecond)) {
		t.Fatal("lease held past the session timeout of the last heartbeat")
	}
	// A heartbeat answered late, sent before the latest acknowledged one, does not move the
	// lease back.
	b.renewLease(t0.Add(-time.Second))
	if !b.leaseHeld(t0.Add(900 * time.Millisecond)) {
		t.Fatal("an older heartbeat shortened the lease")
	}
}
