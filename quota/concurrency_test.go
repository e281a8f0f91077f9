package quota

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
)

// TestConcurrentUse drives both managers from several goroutines while quotas change, for the
// race detector; every connection acquired is released, so the counts must end at zero.
func TestConcurrentUse(t *testing.T) {
	s := NewStore()
	clock := newFakeClock()
	q, err := NewClientQuotas(s, DefaultConfig(), clock.now)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := NewConnectionQuotas(DefaultConnectionConfig(), s, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(g)})
			for i := range 500 {
				client := fmt.Sprint("c", i%7)
				q.Record(Produce, "u", client, 100)
				q.RecordRequestTime("u", client, 1000)
				_ = q.NewMutationQuota("u", client, i%2 == 0).Record(1)
				if a := cq.Acquire("CLIENT", ip); a.Verdict == Accept {
					if err := cq.Release("CLIENT", ip); err != nil {
						t.Error(err)
					}
				}
				clock.advance(1)
			}
		})
	}
	wg.Go(func() {
		for i := range 500 {
			e := Entity{ClientID: DefaultName()}
			s.Set(e, KeyProducerByteRate, float64(1000+i))
			s.Set(e, KeyRequestPercentage, 50)
			s.Set(e, KeyControllerMutationRate, 10)
			s.Set(Entity{IP: DefaultName()}, KeyConnectionCreationRate, 100)
			if i%3 == 0 {
				s.Remove(e, KeyProducerByteRate)
			}
		}
	})
	wg.Wait()
	for g := range 4 {
		if n := cq.Count(netip.AddrFrom4([4]byte{10, 0, 0, byte(g)})); n != 0 {
			t.Errorf("10.0.0.%d: %d connections left", g, n)
		}
	}
}
