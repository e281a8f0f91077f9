package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/internal/testutil"
)

const (
	wcLines      = 30_000
	wcWordsLine  = 5
	wcVocabulary = 300
	wcPartitions = 3
	// wcChunk lines are produced every wcPace, so that input still arrives when the
	// application is killed: 30,000 lines take about 6 s.
	wcChunk = 500
	wcPace  = 100 * time.Millisecond
	// wcStart bounds the start of Kafka Streams up to RUNNING; wcDone the rest of the run.
	wcStart = 90 * time.Second
	wcDone  = 3 * time.Minute
)

// TestTxnStreamsWordCount runs Kafka Streams' word count (WordCountEos.java) with
// processing.guarantee=exactly_once_v2 and in-memory stores while its input is produced,
// kills it (SIGKILL) a third of the way through, with a transaction open that holds data,
// and starts it again. Read with
// read_committed, the counts of each word in the output must rise one commit at a time
// (no count from an aborted transaction, none counted twice) and end at the exact number
// of times the word was produced.
func TestTxnStreamsWordCount(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		began := time.Now()
		phase := func(what string) { t.Logf("%s at %v", what, time.Since(began).Round(time.Millisecond)) }
		b := tg.start(t, txnJavaOverrides()...)
		const input, output, appID = "wc-in", "wc-out", "wc-eos"
		b.CreateTopic(t, input, wcPartitions)
		b.CreateTopic(t, output, wcPartitions)
		lines, want := wordCountInput()
		stateDir := filepath.Join(t.TempDir(), "streams")

		start := func(n int) *javaApp {
			return startJavaApp(t, fmt.Sprintf("WordCountEos#%d", n), "WordCountEos", "384m", b.Addr(), appID, input, output, stateDir)
		}
		app := start(1)
		app.await(t, "STATE RUNNING", 1, wcStart)
		phase("streams running")

		fed := feedLines(t, b, input, lines)
		adm := b.Admin(t)
		testutil.WaitFor(t, wcDone, func() error {
			app.alive(t)
			n, err := committedSum(adm, appID, input)
			if err == nil && n < wcLines/3 {
				err = fmt.Errorf("%d of %d lines committed by %s", n, wcLines, appID)
			}
			return err
		})
		// Kill it with a transaction open that holds data: the stream thread stops for good
		// within a line, and the first word of the line reaches the repartition topic.
		app.send(t, "hold")
		app.await(t, "HOLDING", 1, wcStart)
		repartition := appID + "-word-counts-repartition"
		testutil.WaitFor(t, 30*time.Second, func() error {
			lso, hwm := stableAndEndAll(t, adm, repartition)
			for p := range hwm {
				if lso[p] < hwm[p] {
					return nil
				}
			}
			return fmt.Errorf("%s: no open transaction with data: last stable offsets %v, high watermarks %v", repartition, lso, hwm)
		})
		app.kill(t)
		phase("streams killed")
		app = start(2)
		app.await(t, "STATE RUNNING", 1, wcStart)
		phase("streams running again")
		if err := <-fed; err != nil {
			t.Fatalf("produce the input: %v", err)
		}
		phase("input produced")

		counts := newCountReader(t, b, output)
		testutil.WaitFor(t, wcDone, func() error {
			app.alive(t)
			return counts.poll(t, want)
		})
		app.stop(t, time.Minute)
		phase("counts exact; streams closed")

		writeSentinelRecords(t, b, output, wcPartitions)
		final := readUntilSentinels(t, b, output, wcPartitions, kgo.ReadCommitted())
		checkCountSeries(t, final, want)
		writeSentinelRecords(t, b, repartition, wcPartitions)
		committed := readUntilSentinels(t, b, repartition, wcPartitions, kgo.ReadCommitted())
		all := readUntilSentinels(t, b, repartition, wcPartitions, kgo.ReadUncommitted())
		t.Logf("%s: %d records read_committed, %d read_uncommitted", repartition, len(committed), len(all))
		if len(committed) != wcLines*wcWordsLine || len(all) <= len(committed) {
			t.Fatalf("%s: %d records read_committed, want one per word (%d); %d read_uncommitted, want more (the killed transaction's)",
				repartition, len(committed), wcLines*wcWordsLine, len(all))
		}
		phase("output checked")
	})
}

// wordCountInput makes the input lines, each wcWordsLine words of wcVocabulary, and the
// count of each word.
func wordCountInput() ([]string, map[string]int64) {
	rng := rand.New(rand.NewPCG(12, 34))
	lines := make([]string, wcLines)
	want := map[string]int64{}
	for i := range lines {
		words := make([]string, wcWordsLine)
		for j := range words {
			words[j] = fmt.Sprintf("w%03d", rng.IntN(wcVocabulary))
			want[words[j]]++
		}
		lines[i] = strings.Join(words, " ")
	}
	return lines, want
}

// feedLines produces lines to topic in chunks of wcChunk every wcPace, in the background,
// and reports the outcome on the channel it returns.
func feedLines(t *testing.T, b *Broker, topic string, lines []string) <-chan error {
	t.Helper()
	cl := b.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()))
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wcDone)
		defer cancel()
		pace := time.NewTicker(wcPace)
		defer pace.Stop()
		for i := 0; i < len(lines); i += wcChunk {
			<-pace.C
			var recs []*kgo.Record
			for _, l := range lines[i:min(i+wcChunk, len(lines))] {
				recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(l)})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				done <- fmt.Errorf("lines %d..: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	return done
}

// countReader follows the word count output with read_committed and keeps the latest
// count of each word.
type countReader struct {
	cl     *kgo.Client
	latest map[string]int64
}

func newCountReader(t *testing.T, b *Broker, topic string) *countReader {
	t.Helper()
	return &countReader{
		cl: b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted())),
		latest: map[string]int64{},
	}
}

// poll reads what arrived and returns nil once the latest counts are want.
func (c *countReader) poll(t *testing.T, want map[string]int64) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fs := c.cl.PollFetches(ctx)
	fs.EachError(func(topic string, p int32, err error) {
		if ctx.Err() == nil {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		}
	})
	fs.EachRecord(func(r *kgo.Record) { c.latest[string(r.Key)] = countValue(t, r) })
	if maps.Equal(c.latest, want) {
		return nil
	}
	var sum, wantSum int64
	for _, n := range c.latest {
		sum += n
	}
	for _, n := range want {
		wantSum += n
	}
	return fmt.Errorf("latest counts of %d words add up to %d; want %d words adding up to %d", len(c.latest), sum, len(want), wantSum)
}

// countValue decodes a count: an 8-byte big-endian long.
func countValue(t *testing.T, r *kgo.Record) int64 {
	t.Helper()
	if len(r.Value) != 8 {
		t.Fatalf("%s/%d@%d: count of %d bytes %q; want 8", r.Topic, r.Partition, r.Offset, len(r.Value), r.Value)
	}
	return int64(binary.BigEndian.Uint64(r.Value))
}

// checkCountSeries fails the test unless, for each word, the counts in recs rise strictly
// and the last is the word's count in want, and every word of want is there.
func checkCountSeries(t *testing.T, recs []*kgo.Record, want map[string]int64) {
	t.Helper()
	last := map[string]int64{}
	for _, r := range recs {
		w, n := string(r.Key), countValue(t, r)
		if prev, ok := last[w]; ok && n <= prev {
			t.Fatalf("%s/%d@%d: count of %q falls or repeats: %d after %d", r.Topic, r.Partition, r.Offset, w, n, prev)
		}
		last[w] = n
	}
	for _, w := range slices.Sorted(maps.Keys(want)) {
		if last[w] != want[w] {
			t.Errorf("word %q: final count %d; want %d", w, last[w], want[w])
		}
	}
	if len(last) != len(want) {
		t.Errorf("output counts %d words; want %d", len(last), len(want))
	}
}
