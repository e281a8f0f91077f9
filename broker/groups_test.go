package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupConsumeCommitRestart runs a franz-go consumer group of two members against a real
// broker, commits, restarts the broker, and checks a new member resumes from the commits.
func TestGroupConsumeCommitRestart(t *testing.T) {
	dir := t.TempDir()
	overrides := []string{"group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=4"}
	b := startBroker(t, "netpoll", dir, overrides...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "g"); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, b, kgo.DefaultProduceTopic("g"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	const n = 600
	for i := 0; i < n; i++ {
		prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	seen := map[string]int{}
	members := make([]*kgo.Client, 2)
	for i := range members {
		members[i] = newClient(t, b, kgo.ConsumerGroup("grp"), kgo.ConsumeTopics("g"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	}
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Add(1)
		go func(m *kgo.Client) {
			defer wg.Done()
			for {
				mu.Lock()
				done := len(seen) >= n
				mu.Unlock()
				if done || ctx.Err() != nil {
					return
				}
				pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
				fs := m.PollFetches(pctx)
				pcancel()
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)]++
					mu.Unlock()
				})
				if err := m.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("commit: %v", err)
				}
			}
		}(m)
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("group consumed %d distinct records, want %d", len(seen), n)
	}
	for _, m := range members {
		m.Close()
	}
	offs, err := adm.FetchOffsets(ctx, "grp")
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != n {
		t.Fatalf("committed offsets sum %d, want %d", committed, n)
	}

	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, "netpoll", dir, overrides...)
	prod2 := newClient(t, b2, kgo.DefaultProduceTopic("g"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err := prod2.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m := newClient(t, b2, kgo.ConsumerGroup("grp"), kgo.ConsumeTopics("g"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for {
		fs := m.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll after restart: %v", err)
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if string(recs[0].Value) != "after" || len(recs) != 1 {
			t.Fatalf("after restart the group re-read %d records starting %q; want only the new one", len(recs), recs[0].Value)
		}
		return
	}
}
