package mempool

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestClassOf(t *testing.T) {
	for _, tc := range []struct{ n, wClass int }{
		{1, 0}, {4096, 0}, {4097, 1}, {8192, 1}, {65536, 4}, {65537, 5}, {100 << 20, 15}, {MaxBuffer, numClasses - 1},
	} {
		if got := classOf(tc.n); got != tc.wClass {
			t.Errorf("classOf(%d) = %d, want %d", tc.n, got, tc.wClass)
		}
	}
}

func TestGetExactLenAndReuse(t *testing.T) {
	p := New(0, -1)
	defer p.Close()
	for _, n := range []int{1, 100, 4096, 5000, 70_000, 1 << 20} {
		b := p.Get(n)
		if len(b) != n || cap(b) < n || cap(b)&(cap(b)-1) != 0 {
			t.Fatalf("Get(%d): len %d cap %d; want len %d and a power-of-two cap", n, len(b), cap(b), n)
		}
		for i := range b {
			b[i] = byte(i)
		}
		p.Put(b)
		again := p.Get(n)
		if &again[0] != &b[0] {
			t.Errorf("Get(%d) after Put did not reuse the returned buffer", n)
		}
		p.Put(again)
	}
	st := p.Stats()
	if st.InUse != 0 || st.Gets != 12 || st.Allocs != 4 {
		t.Errorf("stats %+v; want InUse 0, Gets 12, Allocs 4 (1, 100 and 4096 share a class)", st)
	}
}

func TestLimitIsSoftAndWakes(t *testing.T) {
	p := New(1<<20, -1)
	defer p.Close()
	// One frame above the whole limit still fits an idle pool.
	big := p.Get(3 << 20)
	if big == nil {
		t.Fatal("a frame larger than the limit was refused by an idle pool")
	}
	var woken atomic.Int32
	if b := p.GetOrWait(100, func() { woken.Add(1) }); b != nil {
		t.Fatal("Get granted while in use is above the limit")
	}
	if b := p.GetOrWait(100, func() { woken.Add(1) }); b != nil {
		t.Fatal("Get granted while in use is above the limit")
	}
	if st := p.Stats(); st.Waiting != 2 || st.Refused != 2 {
		t.Fatalf("stats %+v; want 2 waiting, 2 refused", st)
	}
	p.Put(big)
	if woken.Load() != 2 {
		t.Fatalf("%d wake-ups after Put, want 2", woken.Load())
	}
	if b := p.Get(100); b == nil {
		t.Fatal("Get refused after memory came back")
	} else {
		p.Put(b)
	}
	if st := p.Stats(); st.Waiting != 0 || st.InUse != 0 {
		t.Fatalf("stats %+v; want nothing waiting or in use", st)
	}
}

func TestRetainBound(t *testing.T) {
	p := New(0, 1<<20)
	defer p.Close()
	var bufs [][]byte
	for range 8 {
		bufs = append(bufs, p.Get(512<<10))
	}
	for _, b := range bufs {
		p.Put(b)
	}
	if st := p.Stats(); st.Free > 1<<20 {
		t.Fatalf("free lists keep %d bytes, retain bound is %d", st.Free, 1<<20)
	}
}

// TestConcurrentBound hammers the pool from many goroutines and checks that in-use memory never
// passes the limit by more than one buffer, and that every waiter eventually gets memory.
func TestConcurrentBound(t *testing.T) {
	const limit = 4 << 20
	const size = 256 << 10
	p := New(limit, -1)
	defer p.Close()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				var b []byte
				for b == nil {
					ch := make(chan struct{}, 1)
					b = p.GetOrWait(size, func() { ch <- struct{}{} })
					if b == nil {
						<-ch
					}
				}
				b[0], b[len(b)-1] = byte(g), byte(i)
				if st := p.Stats(); st.InUse > limit+size {
					t.Errorf("in use %d, limit %d + one buffer %d", st.InUse, limit, size)
				}
				p.Put(b)
			}
		}()
	}
	wg.Wait()
	if st := p.Stats(); st.InUse != 0 || st.PeakInUse > limit+size {
		t.Fatalf("stats %+v", st)
	}
}
