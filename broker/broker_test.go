package broker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/ring"
)

// backends are the I/O backends every broker test runs on.
var backends = []string{"netpoll", "uring"}

// startBroker runs an in-process broker on a free loopback port with its data in a temp dir.
func startBroker(t *testing.T, io string, dir string, overrides ...string) *Broker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listeners = []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 0}}
	cfg.LogDirs = []string{dir}
	cfg.MetricsListen = ""
	cfg.IO = io
	cfg.Rings = 2
	for _, o := range overrides {
		if err := cfg.Override(o); err != nil {
			t.Fatal(err)
		}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := New(cfg, logger)
	if err != nil {
		t.Fatalf("new broker: %v", err)
	}
	if err := b.Start(); err != nil {
		b.Shutdown(context.Background())
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	return b
}

func newClient(t *testing.T, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.Addr().String()), kgo.RequestRetries(3)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func forBackends(t *testing.T, fn func(t *testing.T, io string)) {
	for _, io := range backends {
		t.Run(io, func(t *testing.T) { fn(t, io) })
	}
}

func TestProduceFetchRoundTrip(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		for _, sendfile := range []bool{false, true} {
			t.Run(fmt.Sprintf("io.fetch.sendfile=%v", sendfile), func(t *testing.T) {
				testProduceFetchRoundTrip(t, io, fmt.Sprintf("io.fetch.sendfile=%v", sendfile))
			})
		}
	})
}

// testProduceFetchRoundTrip produces 2000 records with keys, values and headers over 4
// partitions and consumes them back, each once and in offset order.
func testProduceFetchRoundTrip(t *testing.T, io string, overrides ...string) {
	b := startBroker(t, io, t.TempDir(), overrides...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "rt"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, b, kgo.DefaultProduceTopic("rt"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	const n = 2000
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("value-%d", i)),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	consumer := newClient(t, b, kgo.ConsumeTopics("rt"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	lastOffset := map[int32]int64{}
	for len(seen) < n {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			if seen[k] {
				t.Errorf("duplicate key %s", k)
			}
			seen[k] = true
			if string(r.Value) != "value-"+k || len(r.Headers) != 1 {
				t.Errorf("record %s: value %q headers %v", k, r.Value, r.Headers)
			}
			if last, ok := lastOffset[r.Partition]; ok && r.Offset != last+1 {
				t.Errorf("partition %d: offset %d after %d", r.Partition, r.Offset, last)
			}
			lastOffset[r.Partition] = r.Offset
		})
	}
	offs, err := adm.ListEndOffsets(ctx, "rt")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	offs.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != n {
		t.Fatalf("end offsets sum %d, want %d", total, n)
	}
}

func TestCreateTopicErrors(t *testing.T) {
	b := startBroker(t, "netpoll", t.TempDir())
	ctx := context.Background()
	cl := newClient(t, b)
	req := kmsg.NewPtrCreateTopicsRequest()
	for _, tc := range []struct {
		name       string
		partitions int32
		rf         int16
		configs    map[string]string
		want       *kerr.Error
	}{
		{"ok", 3, 1, nil, nil},
		{"bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"zero", 0, 1, nil, kerr.InvalidPartitions},
		{"rf3", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"badcfg", 1, 1, map[string]string{"retention.ms": "abc"}, kerr.InvalidConfig},
		{"unknowncfg", 1, 1, map[string]string{"no.such": "1"}, kerr.InvalidConfig},
	} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tc.name, tc.partitions, tc.rf
		for k, v := range tc.configs {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, kmsg.StringPtr(v)
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := kerr.ErrorForCode(resp.Topics[0].ErrorCode); got != errOrNil(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	// Creating it again is TOPIC_ALREADY_EXISTS.
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "ok", 1, 1
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topics[0].ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("recreate: code %d", resp.Topics[0].ErrorCode)
	}
}

func errOrNil(e *kerr.Error) error {
	if e == nil {
		return nil
	}
	return e
}

func TestTopicsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, "netpoll", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kmsg.StringPtr("123456")}, "keep"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, b, kgo.DefaultProduceTopic("keep"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, "netpoll", dir)
	adm2 := kadm.NewClient(newClient(t, b2))
	if cfgs := topicConfigs(t, adm2, "keep"); cfgs["retention.ms"] != "123456" {
		t.Fatalf("retention.ms override lost: %v", cfgs)
	}
	if parts, total := endOffsets(t, adm2, "keep"); parts != 2 || total != 2 {
		t.Fatalf("after restart %d partitions with end offsets summing to %d, want 2 and 2", parts, total)
	}
}

// topicConfigs returns the configs DescribeConfigs shows for topic, by name.
func topicConfigs(t *testing.T, adm *kadm.Client, topic string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range rc.Configs {
		out[c.Key] = c.MaybeValue()
	}
	return out
}

// endOffsets returns the number of partitions of topic and the sum of their end offsets.
func endOffsets(t *testing.T, adm *kadm.Client, topic string) (int, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	offs.Each(func(o kadm.ListedOffset) { total += o.Offset })
	return len(offs[topic]), total
}

// TestOpenOneFileLogDataDir starts a single node on a copy of the data dir that ringbroker left
// before a single node became a one-voter quorum (testdata/v0-single-node, written at commit
// 5156026 with the one-file metadata log): its topics, configs and records are all there, it
// takes new writes, and it starts again on the upgraded dir.
func TestOpenOneFileLogDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "v0-single-node"))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for start := range 2 {
		b := startBroker(t, "netpoll", dir)
		if got := b.meta.Image().ClusterID; got != "RfmwV6U2f9uKpvXJEm7POQ" {
			t.Fatalf("start %d: cluster id %s, want the one in meta.properties", start, got)
		}
		adm := kadm.NewClient(newClient(t, b))
		if parts, total := endOffsets(t, adm, "orders"); parts != 4 || total != int64(10+start) {
			t.Fatalf("start %d: orders has %d partitions holding %d records, want 4 holding %d", start, parts, total, 10+start)
		}
		if cfgs := topicConfigs(t, adm, "orders"); cfgs["cleanup.policy"] != "compact" || cfgs["retention.ms"] != "3600000" {
			t.Fatalf("start %d: orders has configs %v", start, cfgs)
		}
		if start == 0 {
			cl := newClient(t, b, kgo.DefaultProduceTopic("orders"))
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("new"), Value: []byte("v1")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEventLoopThreads counts the io_uring event loops a process sizes its scheduler by: the
// rings of every listener under io_uring, none under netpoll.
func TestEventLoopThreads(t *testing.T) {
	forBackends(t, func(t *testing.T, io string) {
		b := startBroker(t, io, t.TempDir())
		want := 0
		if b.Backend() == ring.Uring {
			want = 2 // startBroker's io.rings
		}
		if got := b.EventLoopThreads(); got != want {
			t.Fatalf("%s: %d event loop threads, want %d", b.Backend(), got, want)
		}
	})
}

// TestHoldWaits: the io_uring loops switch to held waits only under io.uring.wait=hold (the
// default) and only once GOMAXPROCS has a P per loop beside one per core; a broker so switched
// serves produce and fetch, and netpoll has no loops to switch.
func TestHoldWaits(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(runtime.NumCPU()))
	if np := startBroker(t, "netpoll", t.TempDir()); np.HoldWaits() {
		t.Fatal("netpoll: HoldWaits = true, want false: no event loops")
	}
	b := startBroker(t, "uring", t.TempDir())
	if b.HoldWaits() {
		t.Fatal("GOMAXPROCS = cores: HoldWaits = true, want false: the loops would take the workers' Ps")
	}
	runtime.GOMAXPROCS(runtime.NumCPU() + b.EventLoopThreads())
	if h := startBroker(t, "uring", t.TempDir(), "io.uring.wait=handoff"); h.HoldWaits() {
		t.Fatal("io.uring.wait=handoff: HoldWaits = true, want false")
	}
	if !b.HoldWaits() {
		t.Fatalf("GOMAXPROCS = %d for %d loops: HoldWaits = false, want true", runtime.GOMAXPROCS(0), b.EventLoopThreads())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(newClient(t, b)).CreateTopic(ctx, 2, 1, nil, "held"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, b, kgo.DefaultProduceTopic("held"))
	const n = 500
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	consumer := newClient(t, b, kgo.ConsumeTopics("held"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < n {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll after %d of %d records: %v", len(seen), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}
