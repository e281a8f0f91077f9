package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// TestUnregisterRunningBroker: a running broker that UnregisterBroker removes registers again
// at its next heartbeat, as Kafka's does, and its partition gets its leader back; an id that
// was never registered is BROKER_ID_NOT_REGISTERED.
func TestUnregisterRunningBroker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := startBroker(t, "netpoll", t.TempDir(), "broker.heartbeat.interval.ms=100")
	cl := newClient(t, b, kgo.DefaultProduceTopic("u"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	unregister := func(id int32) *kmsg.UnregisterBrokerResponse {
		t.Helper()
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = id
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := unregister(7); resp.ErrorCode != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("UnregisterBroker of node 7: error %d; want BROKER_ID_NOT_REGISTERED", resp.ErrorCode)
	}
	epoch := b.meta.Image().Brokers[b.cfg.NodeID].Epoch
	if resp := unregister(b.cfg.NodeID); resp.ErrorCode != 0 {
		t.Fatalf("UnregisterBroker of the running node: error %d %q", resp.ErrorCode, deref(resp.ErrorMessage))
	}
	testutil.WaitFor(t, 10*time.Second, func() error {
		br, ok := b.meta.Image().Brokers[b.cfg.NodeID]
		if !ok || br.Epoch <= epoch {
			return errors.New("the unregistered running broker has not registered again")
		}
		return nil
	})
	testutil.WaitFor(t, 10*time.Second, func() error {
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr()
	})
}
