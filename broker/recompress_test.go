package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/wire"
)

// TestRecompression: a topic's compression.type decides the codec its batches are stored in,
// as Kafka's: a batch in another codec is rewritten with the same records, headers, timestamps
// and producer fields, one already in it is kept, and compression.type=producer keeps what the
// producer sent. The broker's compression.type is the default of topics without their own.
func TestRecompression(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := startBroker(t, "netpoll", t.TempDir(), "compression.type=lz4")
	adm := kadm.NewClient(newClient(t, b))
	topics := map[string]wire.Codec{"zstd": wire.CodecZstd, "uncompressed": wire.CodecNone, "producer": wire.CodecGzip, "": wire.CodecLZ4}
	ids := map[string][16]byte{}
	for ct := range topics {
		var cfg map[string]*string
		if ct != "" {
			cfg = map[string]*string{"compression.type": kmsg.StringPtr(ct)}
		}
		created, err := adm.CreateTopic(ctx, 1, 1, cfg, "rc-"+ct)
		if err != nil {
			t.Fatalf("create the topic with compression.type=%q: %v", ct, err)
		}
		ids["rc-"+ct] = created.ID
	}
	for ct, want := range topics {
		topic := "rc-" + ct
		pr := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.GzipCompression()))
		var recs []*kgo.Record
		for i := range 20 {
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("value ", i)),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}}, Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))})
		}
		if err := pr.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", topic, err)
		}

		stored := wire.Batch(fetchStored(ctx, t, b, topic, ids[topic]))
		if got := stored.Codec(); got != want {
			t.Fatalf("%s: stored in codec %v; want %v", topic, got, want)
		}
		if stored.ProducerID() < 0 || stored.BaseSequence() != 0 || stored.NumRecords() != 20 || stored.FirstTimestamp() != 1_700_000_000_000 {
			t.Fatalf("%s: stored batch producer id %d, sequence %d, %d records from %d; want the idempotent producer's 20 records",
				topic, stored.ProducerID(), stored.BaseSequence(), stored.NumRecords(), stored.FirstTimestamp())
		}

		cons := newClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		var got []*kgo.Record
		for len(got) < 20 {
			fs := cons.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("%s: consume: %v", topic, err)
			}
			got = append(got, fs.Records()...)
		}
		for i, r := range got {
			if string(r.Key) != fmt.Sprint("k", i) || string(r.Value) != fmt.Sprint("value ", i) || len(r.Headers) != 1 ||
				string(r.Headers[0].Value) != fmt.Sprint(i) || r.Timestamp.UnixMilli() != 1_700_000_000_000+int64(i) || r.Offset != int64(i) {
				t.Fatalf("%s: record %d read back as %q=%q %v at %v offset %d", topic, i, r.Key, r.Value, r.Headers, r.Timestamp, r.Offset)
			}
		}
	}
}

// TestRecompressionLevel: compression.gzip.level applies to what the broker recompresses: the
// same records stored at level 1 take more bytes than at level 9.
func TestRecompressionLevel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := startBroker(t, "netpoll", t.TempDir())
	adm := kadm.NewClient(newClient(t, b))
	sizes := map[string]int{}
	for _, level := range []string{"1", "9"} {
		topic := "gzip-" + level
		created, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"compression.type": kmsg.StringPtr("gzip"), "compression.gzip.level": kmsg.StringPtr(level)}, topic)
		if err != nil {
			t.Fatal(err)
		}
		pr := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(time.Second))
		var recs []*kgo.Record
		for i := range 200 {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("record %d of a log that compresses %d times over, more at higher levels", i, i%7))})
		}
		if err := pr.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		sizes[level] = len(fetchStored(ctx, t, b, topic, created.ID))
	}
	if sizes["1"] <= sizes["9"] {
		t.Fatalf("gzip level 1 stored %d bytes, level 9 %d; want level 1 larger", sizes["1"], sizes["9"])
	}
}

// fetchStored reads what partition 0 of a topic stores from its start, up to 1 MiB, with a
// raw Fetch: its batches as the log holds them.
func fetchStored(ctx context.Context, t *testing.T, b *Broker, topic string, id [16]byte) []byte {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, newClient(t, b))
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("%s: fetch: %v %+v", topic, err, resp)
	}
	return resp.Topics[0].Partitions[0].RecordBatches
}

// TestRecompressLyingCount: a compressed batch whose header claims two billion records is
// refused by the recompression of a zstd topic without allocating for them, and the broker
// goes on serving.
func TestRecompressLyingCount(t *testing.T) {
	b := startBroker(t, "netpoll", t.TempDir())
	batch, err := b.codecs.AppendBatch(nil, wire.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		wire.CodecGzip, []wire.Record{{Value: []byte("one")}})
	if err != nil {
		t.Fatal(err)
	}
	lying := wire.Batch(batch)
	binary.BigEndian.PutUint32(lying[57:], 2_000_000_000) // the record count
	if _, code, msg := b.recompress(lying, wire.CodecZstd, wire.DefaultLevel, 1<<20); code == nil {
		t.Fatalf("a batch claiming 2e9 records was recompressed")
	} else {
		t.Logf("refused: %v %s", code, msg)
	}
}
