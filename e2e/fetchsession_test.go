package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

const (
	sessionPartitions = 1000
	// sessionFullBytes is the least a Fetch request of v12 or later naming every partition
	// takes, as every request would without sessions: 32 bytes a partition (partition, current
	// leader epoch, fetch offset, last fetched epoch, log start offset, max bytes). franz-go
	// may send its first Fetch before all its partitions are ready (in runs here it named
	// 690 to 1,000 of them), and adds the rest to the session later, so the test asks of the
	// largest request that opens or refreshes a session only half of that.
	sessionFullBytes = sessionPartitions * 32
	// sessionIdleRequests is how many idle Fetch requests the test looks at.
	sessionIdleRequests = 4
)

// fetchSizes records the size of every Fetch request a client writes (a kgo.HookBrokerWrite).
type fetchSizes struct {
	mu    sync.Mutex
	sizes []int
}

// OnBrokerWrite records the bytes of each Fetch request written.
func (f *fetchSizes) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, bytes int, _, _ time.Duration, err error) {
	if key != kmsg.Fetch.Int16() || err != nil {
		return
	}
	f.mu.Lock()
	f.sizes = append(f.sizes, bytes)
	f.mu.Unlock()
}

// since returns the sizes of the requests from the i-th on.
func (f *fetchSizes) since(i int) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.sizes[min(i, len(f.sizes)):]...)
}

func (f *fetchSizes) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sizes)
}

// TestFetchSessionThousandPartitions consumes a topic of 1,000 partitions with franz-go,
// which uses fetch sessions (KIP-227), and measures its Fetch requests: the session opens with
// a request naming most partitions, and once everything is consumed the idle ones are
// incremental, each at most 5 % of a request naming every partition (what every request would
// be without sessions). A broker restart in the middle of consumption ends the session: the
// client names the partitions again and goes on to read every record once, in order.
func TestFetchSessionThousandPartitions(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		const topic = "fetch-sessions"
		b := tg.start(t)
		b.CreateTopic(t, topic, sessionPartitions)
		producer := b.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		sizes := &fetchSizes{}
		assign := map[int32]kgo.Offset{}
		for p := range int32(sessionPartitions) {
			// An exact offset: the client needs no ListOffsets, so its first Fetch
			// names every partition at once.
			assign[p] = kgo.NewOffset().At(0)
		}
		consumer := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
			kgo.WithHooks(sizes), kgo.FetchMaxWait(200*time.Millisecond), kgo.FetchMaxBytes(64<<10),
			kgo.FetchMaxPartitionBytes(4<<10))
		seq := newSeqChecker(sessionPartitions)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		consume := func(n int, tolerateErrors bool) {
			t.Helper()
			for seq.got < n {
				fs := consumer.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of %d records: %v", seq.got, n, err)
				}
				fs.EachError(func(topic string, p int32, err error) {
					if !tolerateErrors {
						t.Fatalf("fetch %s/%d: %v", topic, p, err)
					}
					t.Logf("fetch %s/%d during the restart: %v", topic, p, err)
				})
				fs.EachRecord(func(r *kgo.Record) { seq.check(t, r) })
			}
		}

		// Three records a partition, consumed; then the client idles.
		const first = 3 * sessionPartitions
		produceSeqRange(t, producer, topic, sessionPartitions, 0, first)
		consume(first, false)
		all := sizes.since(0)
		if full := slices.Max(all); full*2 < sessionFullBytes {
			t.Fatalf("largest Fetch request %d bytes; want one naming most partitions, at least %d bytes (sizes so far %v)",
				full, sessionFullBytes/2, all)
		}
		mark := sizes.count()
		testutil.WaitFor(t, time.Minute, func() error {
			if n := sizes.count() - mark; n < sessionIdleRequests+2 {
				return fmt.Errorf("%d Fetch requests since everything was consumed; want %d", n, sessionIdleRequests+2)
			}
			return nil
		})
		// The first request or two after the last records name the partitions that moved.
		idle := sizes.since(mark + 2)
		for _, n := range idle {
			if n*20 > sessionFullBytes {
				t.Fatalf("idle Fetch requests of %v bytes; want each at most 5%% of a fetch naming every partition, %d bytes", idle, sessionFullBytes)
			}
		}
		t.Logf("first Fetch requests %v bytes, idle ones %v", all[:min(len(all), 4)], idle)

		// Twenty records a partition more, 4 KiB a partition and 64 KiB a response at most:
		// the broker restarts while the client is part way through them.
		const second = first + 20*sessionPartitions
		produceSeqRange(t, producer, topic, sessionPartitions, first, second)
		consume(first+(second-first)/4, false)
		mark = sizes.count()
		b.Stop()
		b.Restart()
		const third = second + sessionPartitions
		produceSeqRange(t, producer, topic, sessionPartitions, second, third)
		consume(third, true)
		after := sizes.since(mark)
		if slices.Max(after)*2 < sessionFullBytes {
			t.Fatalf("Fetch requests after the restart %v bytes; want one naming most partitions again, at least %d bytes", after, sessionFullBytes/2)
		}
		t.Logf("%d Fetch requests after the restart, the largest %d bytes", len(after), slices.Max(after))
		for p, o := range b.EndOffsets(t, topic) {
			if o != 24 {
				t.Fatalf("%s/%d: end offset %d; want 24", topic, p, o)
			}
		}
	})
}
