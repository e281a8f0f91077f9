package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/internal/testutil"
)

// Transactions through Apache Kafka's Java clients: an exactly-once consume-transform-
// produce application under broker and application crashes (this file), Kafka Streams'
// exactly-once word count (txn_streams_test.go), and kafka-transactions.sh with fencing and
// transaction timeouts (txn_tools_test.go).

const (
	javaETLRecords    = 100_000
	javaETLKeys       = 1000
	javaETLPartitions = 4
	// javaETLFirstCommit bounds the application's start: JVM, group join, initTransactions
	// and the first transaction. A broker without transactions fails the test here.
	javaETLFirstCommit = 90 * time.Second
	// javaETLStepTimeout bounds each stretch of progress between two faults, a broker
	// restart included.
	javaETLStepTimeout = 2 * time.Minute
	// javaSentinelKey marks the record writeSentinelRecords puts at the end of each partition.
	javaSentinelKey = "e2e-sentinel"
)

// javaETLFault is one fault of TestTxnJavaETL: kill "broker" or "app"; when held, at a
// moment the application has a transaction open with its records written (TxnEtl.java's
// hold), else wherever the application is.
type javaETLFault struct {
	kill string
	held bool
}

// txnJavaOverrides are the broker settings of the Java transaction tests; Apache Kafka
// takes the same keys. Small internal topics make the first FindCoordinator quick, and the
// coordinator looks for timed-out transactions every second rather than every 10.
func txnJavaOverrides() []string {
	return []string{
		"group.initial.rebalance.delay.ms=0",
		"offsets.topic.num.partitions=4",
		"transaction.state.log.num.partitions=4",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
	}
}

// TestTxnJavaETL runs TxnEtl.java, an exactly-once consume-transform-produce application,
// over 100,000 keyed records while the broker is killed (SIGKILL) three times and the
// application twice, each restarted; three of the kills come while the application holds a
// transaction open with its records written, two wherever it is. The output, read with read_committed, must hold each
// input record transformed exactly once, in input order per key.
func TestTxnJavaETL(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		began := time.Now()
		phase := func(what string) { t.Logf("%s at %v", what, time.Since(began).Round(time.Millisecond)) }
		b := tg.start(t, txnJavaOverrides()...)
		const input, output, group, txnID = "etl-in", "etl-out", "etl-group", "etl-txn"
		b.CreateTopic(t, input, javaETLPartitions)
		b.CreateTopic(t, output, javaETLPartitions)
		want := produceJavaETLInput(t, b, input)
		phase("input produced")

		start := func(n int) *javaApp {
			return startJavaApp(t, fmt.Sprintf("TxnEtl#%d", n), "TxnEtl", "256m", b.Addr(), group, txnID, input, output)
		}
		apps := []*javaApp{start(1)}
		apps[0].await(t, "COMMITTED", 1, javaETLFirstCommit)
		phase("first transaction committed")

		adm := b.Admin(t)
		faults := []javaETLFault{{"broker", true}, {"app", true}, {"broker", false}, {"app", false}, {"broker", true}}
		for i, f := range faults {
			app := apps[len(apps)-1]
			waitJavaETLProgress(t, adm, app, group, input, javaETLRecords*(i+1)/(len(faults)+1))
			if f.held {
				n := app.count("HOLDING") + 1
				app.send(t, "hold")
				app.await(t, "HOLDING", n, javaETLStepTimeout)
			}
			switch f.kill {
			case "broker":
				b.Kill()
				b.Restart()
				if f.held {
					app.send(t, "release")
				}
			case "app":
				app.kill(t)
				apps = append(apps, start(len(apps)+1))
			}
			phase(fmt.Sprintf("fault %d (%+v) done", i+1, f))
		}
		waitJavaETLProgress(t, adm, apps[len(apps)-1], group, input, javaETLRecords)
		apps[len(apps)-1].stop(t, time.Minute)
		phase("all input committed")
		var committed, aborted int
		for _, a := range apps {
			committed += a.count("COMMITTED")
			aborted += a.count("ABORTED")
		}
		t.Logf("%d transactions committed, %d aborted by the application", committed, aborted)

		writeSentinelRecords(t, b, output, javaETLPartitions)
		got := readUntilSentinels(t, b, output, javaETLPartitions, kgo.ReadCommitted())
		checkJavaETLOutput(t, got, want)
		all := readUntilSentinels(t, b, output, javaETLPartitions, kgo.ReadUncommitted())
		t.Logf("output: %d records read_committed, %d read_uncommitted (the rest from aborted transactions)", len(got), len(all))
		if len(all) <= len(got) {
			t.Fatalf("no aborted records in the output, though an application was killed with a transaction holding data")
		}
		phase("output checked")
	})
}

// produceJavaETLInput produces the input of TestTxnJavaETL: record i has key "key-<i mod
// javaETLKeys>" and value "v<i>". It returns the output expected per key, in order.
func produceJavaETLInput(t *testing.T, b *Broker, topic string) map[string][]string {
	t.Helper()
	cl := b.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := map[string][]string{}
	recs := make([]*kgo.Record, 0, javaETLRecords)
	for i := range javaETLRecords {
		k, v := fmt.Sprintf("key-%03d", i%javaETLKeys), fmt.Sprintf("v%06d", i)
		want[k] = append(want[k], "etl:"+v)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce the ETL input: %v", err)
	}
	cl.Close()
	return want
}

// waitJavaETLProgress waits until the group's committed offsets on topic add up to at least n,
// failing the test if the application exits meanwhile.
func waitJavaETLProgress(t *testing.T, adm *kadm.Client, app *javaApp, group, topic string, n int) {
	t.Helper()
	testutil.WaitFor(t, javaETLStepTimeout, func() error {
		app.alive(t)
		sum, err := committedSum(adm, group, topic)
		if err != nil {
			return err
		}
		if sum < int64(n) {
			return fmt.Errorf("group %s committed %d records of %s; waiting for %d (%d transactions committed)", group, sum, topic, n, app.count("COMMITTED"))
		}
		return nil
	})
}

// committedSum adds up group's committed offsets on topic.
func committedSum(adm *kadm.Client, group, topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("fetch offsets of %s: %w", group, err)
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			sum += o.At
		}
	})
	return sum, nil
}

// checkJavaETLOutput fails the test unless got holds, for each key, exactly the expected
// values in order, and each key in one partition.
func checkJavaETLOutput(t *testing.T, got []*kgo.Record, want map[string][]string) {
	t.Helper()
	byKey := map[string][]string{}
	partOf := map[string]int32{}
	for _, r := range got {
		k := string(r.Key)
		if p, ok := partOf[k]; ok && p != r.Partition {
			t.Fatalf("key %q in partitions %d and %d", k, p, r.Partition)
		}
		partOf[k] = r.Partition
		byKey[k] = append(byKey[k], string(r.Value))
	}
	if len(got) != javaETLRecords {
		t.Errorf("output holds %d records read_committed; want %d", len(got), javaETLRecords)
	}
	bad := 0
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g := byKey[k]; !slices.Equal(g, want[k]) {
			if bad++; bad <= 3 {
				t.Errorf("key %s: %d values, first differing at %d: %s; want %d values", k, len(g), firstDiff(g, want[k]), describeAt(g, firstDiff(g, want[k])), len(want[k]))
			}
		}
	}
	for k := range byKey {
		if _, ok := want[k]; !ok {
			t.Errorf("output holds key %q, which is not in the input", k)
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d keys differ from the transformed input", bad, len(want))
	}
}

// firstDiff is the first index at which a and b differ (the shorter length when one is a
// prefix of the other).
func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// describeAt shows the values of s around index i.
func describeAt(s []string, i int) string {
	return fmt.Sprintf("%q", s[max(0, i-2):min(len(s), i+3)])
}

// writeSentinelRecords appends a record with key javaSentinelKey to every partition of topic, with
// a plain producer.
func writeSentinelRecords(t *testing.T, b *Broker, topic string, partitions int32) {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for p := range partitions {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Key: []byte(javaSentinelKey), Value: []byte("end")}).FirstErr(); err != nil {
			t.Fatalf("write the sentinel of %s/%d: %v", topic, p, err)
		}
	}
	cl.Close()
}

// readUntilSentinels reads every partition of topic from the start at the given isolation
// level until its sentinel (writeSentinelRecords) arrives, and returns the records before the
// sentinels in partition order. Read committed, the sentinels arrive only once every
// transaction before them has ended.
func readUntilSentinels(t *testing.T, b *Broker, topic string, partitions int32, level kgo.IsolationLevel) []*kgo.Record {
	t.Helper()
	assign := map[int32]kgo.Offset{}
	for p := range partitions {
		assign[p] = kgo.NewOffset().AtStart()
	}
	cl := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}), kgo.FetchIsolationLevel(level))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	byPart := make([][]*kgo.Record, partitions)
	ended := map[int32]bool{}
	for len(ended) < int(partitions) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: sentinels of %d of %d partitions seen within a minute", topic, len(ended), partitions)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case ended[r.Partition]:
				t.Fatalf("%s/%d@%d: a record after the sentinel", topic, r.Partition, r.Offset)
			case string(r.Key) == javaSentinelKey:
				ended[r.Partition] = true
			default:
				byPart[r.Partition] = append(byPart[r.Partition], r)
			}
		})
	}
	return slices.Concat(byPart...)
}
