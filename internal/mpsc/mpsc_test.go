package mpsc

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

func push[T any](q *Queue[T], v T) { q.Push(&Node[T]{Value: v}) }

func TestPopOrder(t *testing.T) {
	q := New[int]()
	if n := q.Pop(); n != nil {
		t.Fatalf("Pop on empty queue = %d; want nil", n.Value)
	}
	for round := range 3 {
		for i := range round + 1 {
			push(q, i)
		}
		for i := range round + 1 {
			n := q.Pop()
			if n == nil || n.Value != i {
				t.Fatalf("round %d: Pop = %v; want %d", round, n, i)
			}
		}
		if n := q.Pop(); n != nil {
			t.Fatalf("round %d: Pop after draining = %d", round, n.Value)
		}
	}
}

// TestNodeReuse checks that a popped node may be pushed again.
func TestNodeReuse(t *testing.T) {
	q := New[int]()
	n := &Node[int]{Value: 1}
	for i := range 5 {
		n.Value = i
		q.Push(n)
		got := q.Pop()
		if got != n || got.Value != i {
			t.Fatalf("iteration %d: Pop = %v; want the pushed node", i, got)
		}
	}
}

// TestConcurrentProducers checks that every pushed element arrives exactly
// once and that each producer's elements arrive in the order it pushed them.
func TestConcurrentProducers(t *testing.T) {
	const producers, perProducer = 8, 20000
	type item struct{ producer, seq int }
	q := New[item]()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perProducer {
				push(q, item{p, i})
			}
		}()
	}
	next := make([]int, producers)
	deadline := time.Now().Add(30 * time.Second)
	for got := 0; got < producers*perProducer; {
		n := q.Pop()
		if n == nil {
			if time.Now().After(deadline) {
				t.Fatalf("received %d of %d elements before the deadline", got, producers*perProducer)
			}
			q.Wait(nil)
			continue
		}
		it := n.Value
		if it.seq != next[it.producer] {
			t.Fatalf("producer %d: got seq %d, want %d", it.producer, it.seq, next[it.producer])
		}
		next[it.producer]++
		got++
	}
	wg.Wait()
	if n := q.Pop(); n != nil {
		t.Fatalf("extra element %v after all were received", n.Value)
	}
}

// TestWaitWakes checks that a consumer parked in Wait is woken by a push from
// another goroutine and that Wait honours done.
func TestWaitWakes(t *testing.T) {
	q := New[int]()
	got := make(chan int)
	go func() {
		for {
			if n := q.Pop(); n != nil {
				got <- n.Value
				if n.Value < 0 {
					return
				}
				continue
			}
			q.Wait(nil)
		}
	}()
	for i := range 1000 {
		push(q, i)
		select {
		case v := <-got:
			if v != i {
				t.Fatalf("got %d, want %d", v, i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("consumer not woken for element %d", i)
		}
	}
	push(q, -1)
	<-got

	done := make(chan struct{})
	close(done)
	if New[int]().Wait(done) {
		t.Fatal("Wait on an empty queue with closed done reported true")
	}
	q2 := New[int]()
	push(q2, 1)
	if !q2.Wait(done) {
		t.Fatal("Wait on a non-empty queue reported false")
	}
}

// TestLend checks that a lender and the consumer never act at once (owned is
// touched by both without a lock, so -race sees any overlap), that Lend
// succeeds only while the consumer waits with nothing queued, and that no push
// is lost or left without a wake-up however pushes and lends interleave.
func TestLend(t *testing.T) {
	const goroutines, rounds = 4, 20000
	q := New[int]()
	owned := 0
	consumed := make(chan int)
	go func() {
		for {
			if n := q.Pop(); n != nil {
				if n.Value < 0 {
					consumed <- owned
					return
				}
				owned++
				continue
			}
			q.Wait(nil)
		}
	}()
	var lends [goroutines]int
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				if i%2 == 0 {
					push(q, i)
				} else if q.Lend() {
					owned++
					lends[g]++
					q.Return()
				}
				if i%16 == 0 {
					time.Sleep(time.Microsecond)
				}
			}
		}()
	}
	wg.Wait()
	push(q, -1)
	var got int
	select {
	case got = <-consumed:
	case <-time.After(30 * time.Second):
		t.Fatal("the consumer did not reach the last push: a wake-up was lost")
	}
	total := goroutines * rounds / 2
	for _, n := range lends {
		total += n
	}
	if total == goroutines*rounds/2 {
		t.Fatal("no Lend succeeded: the test did not exercise lending")
	}
	if got != total {
		t.Fatalf("owned counted %d; want %d pushes and lends", got, total)
	}
	if q2 := New[int](); q2.Lend() {
		t.Fatal("Lend succeeded on a queue whose consumer is not waiting")
	}
}

// TestLendWhileWaitEnds checks that a consumer whose Wait ends by done while
// its place is lent returns only after Return, and that a lend with something
// queued fails and leaves the consumer to be woken by that push.
func TestLendWhileWaitEnds(t *testing.T) {
	q := New[int]()
	done := make(chan struct{})
	waited := make(chan bool)
	go func() { waited <- q.Wait(done) }()
	for !q.Lend() {
		runtime.Gosched()
	}
	close(done)
	select {
	case <-waited:
		t.Fatal("Wait returned while its place was lent")
	case <-time.After(50 * time.Millisecond):
	}
	q.Return()
	if ok := <-waited; ok {
		t.Fatal("Wait ended by done reported true")
	}

	q = New[int]()
	go func() { waited <- q.Wait(nil) }()
	for q.parked.Load() != blocked {
		runtime.Gosched()
	}
	q.link(&Node[int]{Value: 1}) // a push between its link and its look for a wake-up
	if q.Lend() {
		t.Fatal("Lend succeeded with an element queued")
	}
	q.wakeConsumer()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("a failed Lend did not wake the consumer for the queued element")
	}
}
