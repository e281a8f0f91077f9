package meta

import "testing"

// TestUnregisterBrokerKeepsEpochsRising: an UnregisterBroker record removes the broker, which
// registers again (with the same incarnation) at a higher epoch than before; unregistering a
// broker that is not registered is refused, as is its fencing.
func TestUnregisterBrokerKeepsEpochsRising(t *testing.T) {
	reg := Record{Type: TypeBroker, NodeID: 2, Host: "h", Port: 1, Incarnation: UUID{7}}
	im, err := EmptyImage("cid").Apply(0, []Record{reg, {Type: TypeBroker, NodeID: 2, Host: "h", Port: 1, Incarnation: UUID{8}}})
	if err != nil {
		t.Fatal(err)
	}
	before := im.Brokers[2].Epoch
	gone, err := im.Apply(1, []Record{{Type: TypeUnregisterBroker, NodeID: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := gone.Brokers[2]; ok {
		t.Fatal("broker 2 still registered after UnregisterBroker")
	}
	if _, ok := im.Brokers[2]; !ok {
		t.Fatal("Apply modified the earlier image")
	}
	for _, r := range []Record{{Type: TypeUnregisterBroker, NodeID: 2}, {Type: TypeFence, NodeID: 2, Fenced: true}} {
		if _, err := gone.Apply(2, []Record{r}); err == nil {
			t.Fatalf("%s of an unregistered broker applied", r.Type)
		}
	}
	back, err := gone.Apply(2, []Record{reg})
	if err != nil {
		t.Fatal(err)
	}
	if e := back.Brokers[2].Epoch; e <= before {
		t.Fatalf("broker 2 registered again at epoch %d; want above its %d before", e, before)
	}
}
