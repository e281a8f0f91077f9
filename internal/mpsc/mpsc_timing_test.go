package mpsc

import (
	"fmt"
	"sync"
	"testing"
)

// benchProducers is the number of producer goroutines in the benchmarks.
var benchProducers = []int{1, 4, 16}

// message stands in for a coordinator request: each is freshly allocated by
// its producer, for the queue and the channel alike.
type message struct {
	seq     int
	payload [4]uint64
}

// BenchmarkQueue measures b.N messages moved from P producers to one consumer
// that parks in Wait when idle, like a coordinator shard.
func BenchmarkQueue(b *testing.B) {
	for _, p := range benchProducers {
		b.Run(fmt.Sprintf("producers=%d", p), func(b *testing.B) {
			q := New[message]()
			done := make(chan struct{})
			go func() {
				for n := 0; n < b.N; {
					if q.Pop() != nil {
						n++
						continue
					}
					q.Wait(nil)
				}
				close(done)
			}()
			b.ReportAllocs()
			b.ResetTimer()
			runProducers(b.N, p, func(i int) { q.Push(&Node[message]{Value: message{seq: i}}) })
			<-done
		})
	}
}

// BenchmarkChannel is BenchmarkQueue with a buffered Go channel of message
// pointers in place of the queue.
func BenchmarkChannel(b *testing.B) {
	for _, p := range benchProducers {
		b.Run(fmt.Sprintf("producers=%d", p), func(b *testing.B) {
			ch := make(chan *message, 1024)
			done := make(chan struct{})
			go func() {
				for range b.N {
					<-ch
				}
				close(done)
			}()
			b.ReportAllocs()
			b.ResetTimer()
			runProducers(b.N, p, func(i int) { ch <- &message{seq: i} })
			<-done
		})
	}
}

func runProducers(n, p int, push func(int)) {
	var wg sync.WaitGroup
	for w := range p {
		count := n / p
		if w < n%p {
			count++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range count {
				push(i)
			}
		}()
	}
	wg.Wait()
}
