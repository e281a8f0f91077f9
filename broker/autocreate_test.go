package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// autoCreateMetadata asks for topics' metadata allowing auto-creation.
func autoCreateMetadata(t *testing.T, ctx context.Context, b *Broker, topics ...string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, newClient(t, b))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != len(topics) {
		t.Fatalf("Metadata of %d topics answered %d", len(topics), len(resp.Topics))
	}
	return resp
}

// TestMetadataAutoCreate: a Metadata request naming an unknown topic starts its creation and is
// answered UNKNOWN_TOPIC_OR_PARTITION without partitions, as Kafka's under KRaft, also right
// after the topic was deleted (kafka-go's TestConn/test_delete_topics); asked again, the topic
// is there.
func TestMetadataAutoCreate(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b := startBroker(t, io, t.TempDir())
		adm := kadm.NewClient(newClient(t, b))

		waitCreated := func(name string) {
			t.Helper()
			for {
				mt := autoCreateMetadata(t, ctx, b, name).Topics[0]
				if mt.ErrorCode == 0 && len(mt.Partitions) == 1 {
					return
				}
				if ctx.Err() != nil {
					t.Fatalf("%s not auto-created: %+v", name, mt)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		first := autoCreateMetadata(t, ctx, b, "auto").Topics[0]
		if first.ErrorCode != kerr.UnknownTopicOrPartition.Code || len(first.Partitions) != 0 {
			t.Fatalf("first Metadata of auto: %+v; want UNKNOWN_TOPIC_OR_PARTITION without partitions", first)
		}
		waitCreated("auto")

		if _, err := adm.CreateTopic(ctx, 1, 1, nil, "deleted"); err != nil {
			t.Fatal(err)
		}
		resp, err := adm.DeleteTopics(ctx, "deleted")
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		if mt := autoCreateMetadata(t, ctx, b, "deleted").Topics[0]; mt.ErrorCode != kerr.UnknownTopicOrPartition.Code || len(mt.Partitions) != 0 {
			t.Fatalf("Metadata right after deleting: %+v; want UNKNOWN_TOPIC_OR_PARTITION without partitions", mt)
		}
		waitCreated("deleted")
	})
}

// TestMetadataAutoCreateBound: a request naming more unknown topics than may wait queues only
// maxAutoCreatePending of them; the rest are created when asked for again. The queue is the
// same on both backends, so one runs.
func TestMetadataAutoCreateBound(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := startBroker(t, "netpoll", t.TempDir())
	// waitIdle waits for the creating goroutine to finish, checking the bound meanwhile.
	waitIdle := func() {
		t.Helper()
		for {
			b.autoCreates.mu.Lock()
			pending, running := len(b.autoCreates.pending), b.autoCreates.running
			b.autoCreates.mu.Unlock()
			if pending > maxAutoCreatePending {
				t.Fatalf("%d names pending; want at most %d", pending, maxAutoCreatePending)
			}
			if !running {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("auto-creation still running: %d pending", pending)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	names := make([]string, maxAutoCreatePending+50)
	for i := range names {
		names[i] = fmt.Sprintf("many-%04d", i)
	}
	for _, mt := range autoCreateMetadata(t, ctx, b, names...).Topics {
		if mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("%s: %s; want UNKNOWN_TOPIC_OR_PARTITION", *mt.Topic, kerr.ErrorForCode(mt.ErrorCode))
		}
	}
	waitIdle()
	created := 0
	for _, name := range names {
		if _, ok := b.meta.Image().Topics[name]; ok {
			created++
		}
	}
	if created != maxAutoCreatePending {
		t.Fatalf("%d of %d topics auto-created; want %d", created, len(names), maxAutoCreatePending)
	}
}
