package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ack is one record a producer had acknowledged: where the broker said it is, and when.
type ack struct {
	producer  string
	seq       int64
	value     string
	partition int32
	offset    int64
	at        time.Time
}

// history is what the workload saw: acknowledgements, failed sends (indeterminate: the
// record may or may not be in the log), consumer observations and workload errors.
type history struct {
	mu        sync.Mutex
	acks      map[string][]ack // by topic
	failed    map[string]int   // indeterminate sends by topic
	streams   []*consumerStream
	problems  []string // workload failures: hung flushes, tool errors
	start     time.Time
	stop      time.Time // when the producers stopped sending
	sentByTop map[string]int
}

func newHistory() *history {
	return &history{acks: map[string][]ack{}, failed: map[string]int{}, sentByTop: map[string]int{}}
}

func (h *history) addAck(topic string, a ack) {
	h.mu.Lock()
	h.acks[topic] = append(h.acks[topic], a)
	h.mu.Unlock()
}

func (h *history) addFailed(topic string) {
	h.mu.Lock()
	h.failed[topic]++
	h.mu.Unlock()
}

func (h *history) addSent(topic string) {
	h.mu.Lock()
	h.sentByTop[topic]++
	h.mu.Unlock()
}

func (h *history) problem(format string, args ...any) {
	h.mu.Lock()
	h.problems = append(h.problems, fmt.Sprintf(format, args...))
	h.mu.Unlock()
}

// kgoProducer writes values "<id>-<seq>" to every partition of topic with one idempotent
// acks=all franz-go client: a sender per partition, each paced to rate/partitions records per
// second with at most window records in flight, so a partition that is down stalls only its
// own sender. The sequence is shared, so it rises along each partition. Once stop is closed
// it flushes and records what never got an answer.
func kgoProducer(h *history, nodes []*Broker, id, topic string, partitions int32, rate int, stop <-chan struct{}, logf func(string, ...any)) {
	cl, err := chaosClient(nodes,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordDeliveryTimeout(60*time.Second),
		kgo.ProduceRequestTimeout(10*time.Second),
	)
	if err != nil {
		h.problem("producer %s: %v", id, err)
		return
	}
	defer cl.Close()
	const window = 16
	var (
		seq    atomic.Int64
		errLog sync.Once
		wg     sync.WaitGroup
	)
	for p := range partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem := make(chan struct{}, window)
			tick := time.NewTicker(time.Second * time.Duration(partitions) / time.Duration(rate))
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				select {
				case sem <- struct{}{}:
				case <-stop:
					return
				}
				v := fmt.Sprintf("%s-%d", id, seq.Add(1)-1)
				h.addSent(topic)
				cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
					defer func() { <-sem }()
					if err != nil {
						h.addFailed(topic)
						errLog.Do(func() { logf("producer %s: first failed send %s: %v", id, v, err) })
						return
					}
					h.addAck(topic, ack{producer: id, seq: seqOf(v), value: v, partition: r.Partition, offset: r.Offset, at: time.Now()})
				})
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		h.problem("producer %s: flush after the workload: %v (records still unanswered)", id, err)
	}
}

// seqOf is the sequence number after the last '-' of a kgo producer's value.
func seqOf(v string) int64 {
	var seq int64
	fmt.Sscanf(v[strings.LastIndexByte(v, '-')+1:], "%d", &seq)
	return seq
}

// javaProducerCmd prepares Kafka's VerifiableProducer (idempotent, acks=-1) writing rate
// records per second to topic, and the file its stderr goes to.
func javaProducerCmd(t *testing.T, nodes []*Broker, topic string, rate int) (*exec.Cmd, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "producer.properties")
	writeFile(t, cfg, strings.Join([]string{
		"enable.idempotence=true",
		"acks=all",
		"retries=2147483647",
		"delivery.timeout.ms=60000",
		"request.timeout.ms=10000",
		"retry.backoff.ms=100",
		"retry.backoff.max.ms=1000",
		"metadata.max.age.ms=5000",
		"max.in.flight.requests.per.connection=5",
		"linger.ms=5",
		// Round robin, so every partition takes writes and its gaps measure unavailability.
		"partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
	}, "\n")+"\n")
	log4j := filepath.Join(dir, "log4j2.properties")
	writeFile(t, log4j, log4jConfig("warn", "SYSTEM_ERR"))
	var seeds []string
	for _, b := range nodes {
		seeds = append(seeds, b.Addr())
	}
	cmd := exec.Command("java", javaArgs(t, []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile=" + log4j}, "org.apache.kafka.tools.VerifiableProducer",
		"--topic", topic, "--bootstrap-server", strings.Join(seeds, ","), "--acks", "-1",
		"--throughput", fmt.Sprint(rate), "--producer.config", cfg)...)
	return cmd, filepath.Join(dir, "stderr.log")
}

// javaProducer runs cmd (from javaProducerCmd) until stop is closed, then sends it SIGTERM;
// its shutdown hook closes the producer, which waits for every outstanding send. Each
// producer_send_success line is an ack.
func javaProducer(h *history, cmd *exec.Cmd, stderrPath, topic string, stop <-chan struct{}) {
	stderr, err := os.Create(stderrPath)
	if err != nil {
		h.problem("java producer: %v", err)
		return
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		h.problem("java producer: %v", err)
		return
	}
	if err := cmd.Start(); err != nil {
		h.problem("java producer: start: %v", err)
		return
	}
	exited := make(chan error, 1)
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var ev struct {
				Name      string `json:"name"`
				Value     string `json:"value"`
				Partition int32  `json:"partition"`
				Offset    int64  `json:"offset"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			switch ev.Name {
			case "producer_send_success":
				var seq int64
				fmt.Sscanf(ev.Value, "%d", &seq)
				h.addAck(topic, ack{producer: "java", seq: seq, value: ev.Value, partition: ev.Partition, offset: ev.Offset, at: time.Now()})
				h.addSent(topic)
			case "producer_send_error":
				h.addFailed(topic)
				h.addSent(topic)
			}
		}
	}()
	go func() {
		<-lines
		exited <- cmd.Wait()
	}()
	select {
	case err := <-exited:
		h.problem("java producer exited during the workload: %v\n%s", err, tail(readFileString(stderrPath), 4<<10))
		return
	case <-stop:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		h.problem("java producer did not close within 90s of SIGTERM (sends unanswered)\n%s", tail(readFileString(stderrPath), 4<<10))
	}
}

func readFileString(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// seen is one record a consumer polled.
type seen struct {
	topic     string
	partition int32
	offset    int64
	value     string
}

// consumerStream is what one concurrent consumer saw, in order, and where it reset itself.
type consumerStream struct {
	id   string
	mu   sync.Mutex
	recs []seen
	// resets counts, per topic/partition, the client's own re-seeks after it reported data
	// loss (ErrDataLoss): a position moving backwards right after one is its own doing.
	resets    map[string]int
	backwards []string // moves backwards with no reset before them
	dataLoss  []string // ErrDataLoss reports
	last      map[string]int64
}

// consume reads every partition of topics from the start with a franz-go client until stop
// is closed, recording each record and checking that positions only move forward.
func consume(h *history, nodes []*Broker, id string, topics map[string]int32, stop <-chan struct{}, logf func(string, ...any)) {
	cs := &consumerStream{id: id, resets: map[string]int{}, last: map[string]int64{}}
	h.mu.Lock()
	h.streams = append(h.streams, cs)
	h.mu.Unlock()
	parts := map[string]map[int32]kgo.Offset{}
	for tp, n := range topics {
		parts[tp] = map[int32]kgo.Offset{}
		for p := range n {
			parts[tp][p] = kgo.NewOffset().AtStart()
		}
	}
	cl, err := chaosClient(nodes, kgo.ConsumePartitions(parts), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		h.problem("consumer %s: %v", id, err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	pending := map[string]bool{} // a reset was reported and not yet followed by a record
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(tp string, p int32, err error) {
			var dl *kgo.ErrDataLoss
			if errors.As(err, &dl) {
				key := fmt.Sprintf("%s-%d", tp, p)
				msg := fmt.Sprintf("consumer %s: %s-%d data loss reported: consumed to %d (epoch %d), reset to %d (epoch %d)",
					id, tp, p, dl.ConsumedTo, dl.ConsumedToEpoch, dl.ResetTo, dl.ResetToEpoch)
				logf("%s", msg)
				cs.mu.Lock()
				cs.dataLoss = append(cs.dataLoss, msg)
				cs.resets[key]++
				pending[key] = true
				cs.mu.Unlock()
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			key := fmt.Sprintf("%s-%d", r.Topic, r.Partition)
			cs.mu.Lock()
			defer cs.mu.Unlock()
			if last, ok := cs.last[key]; ok && r.Offset <= last && !pending[key] {
				cs.backwards = append(cs.backwards, fmt.Sprintf("consumer %s: %s offset %d after %d with no reset", id, key, r.Offset, last))
			}
			delete(pending, key)
			cs.last[key] = r.Offset
			cs.recs = append(cs.recs, seen{topic: r.Topic, partition: r.Partition, offset: r.Offset, value: string(r.Value)})
		})
	}
}
