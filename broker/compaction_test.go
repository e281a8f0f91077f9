package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/internal/testutil"
)

// TestCompactedTopic produces overwritten keys and a tombstone with zstd to a compacted topic,
// lets the broker's cleaner compact the sealed segments and reads the partition back with
// franz-go: one record per key (the latest, at its original offset), the tombstone kept
// within delete.retention.ms, and keyless records refused with INVALID_RECORD.
func TestCompactedTopic(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		b := startBroker(t, io, t.TempDir())
		cl := newClient(t, b, kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerLinger(0))
		adm := kadm.NewClient(cl)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		const topic = "compacted"
		if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
			"cleanup.policy": kmsg.StringPtr("compact"), "segment.bytes": kmsg.StringPtr("2048"),
		}, topic); err != nil {
			t.Fatal(err)
		}
		produce := func(key string, value []byte) int64 {
			t.Helper()
			r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: value}).First()
			if err != nil {
				t.Fatalf("produce %s: %v", key, err)
			}
			return r.Offset
		}
		latest := map[string]int64{}
		for round := range 20 {
			for k := range 10 {
				key := fmt.Sprintf("k%d", k)
				latest[key] = produce(key, fmt.Appendf(nil, "%s-%d-%080d", key, round, round))
			}
		}
		latest["k0"] = produce("k0", nil) // tombstone
		for i := range 40 {               // incompressible, so the keys above leave the active segment
			key := fmt.Sprintf("filler-%02d", i)
			v := make([]byte, 200)
			for j := range v {
				v[j] = byte(rand.Uint32())
			}
			latest[key] = produce(key, v)
		}
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("no key")}).FirstErr()
		if !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("keyless record on a compacted topic: err = %v; want INVALID_RECORD", err)
		}

		p := b.parts.Load().lookup(topic, 0)
		sizeBefore := p.log().Size()
		b.cleaner.Wake()
		testutil.WaitFor(t, 20*time.Second, func() error {
			if size := p.log().Size(); size > sizeBefore/2 {
				return fmt.Errorf("log holds %d bytes, %d before cleaning", size, sizeBefore)
			}
			return nil
		})
		// The background cleaning swaps one segment group at a time; a synchronous cleaning
		// waits for it to finish.
		if _, err := b.cleaner.Clean(p.log()); err != nil {
			t.Fatal(err)
		}

		consumer := newClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		got := map[string]int64{}
		var n int
		for n < len(latest) {
			fs := consumer.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("fetch after cleaning (%d records read): %v", n, err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				n++
				key := string(r.Key)
				if _, dup := got[key]; dup {
					t.Errorf("key %s read twice after cleaning (offsets %d and %d)", key, got[key], r.Offset)
				}
				got[key] = r.Offset
				if key == "k0" && r.Value != nil {
					t.Errorf("k0 has value %q; want the tombstone", r.Value)
				}
			})
		}
		for key, off := range latest {
			if got[key] != off {
				t.Errorf("key %s at offset %d; want %d", key, got[key], off)
			}
		}
	})
}
