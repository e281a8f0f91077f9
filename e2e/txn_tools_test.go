package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringbroker/internal/testutil"
)

const (
	// txnOpenTimeout bounds TxnProducer's start up to an open transaction. A broker
	// without transactions fails the tests here.
	txnOpenTimeout = 90 * time.Second
	// txnShortTimeout is the transaction.timeout.ms of the transaction the coordinator
	// has to abort, and txnAbortSlack how much later than that the abort may come.
	txnShortTimeout = 5 * time.Second
	txnAbortSlack   = 15 * time.Second
)

// TestTxnTools drives transactions of Apache Kafka's Java producer (TxnProducer.java)
// that do not end by themselves: kafka-transactions.sh (TransactionsCommand) lists,
// describes and aborts a hung one; a second producer with the same transactional.id
// fences the first; and the coordinator aborts one at its transaction.timeout.ms.
func TestTxnTools(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t, txnJavaOverrides()...)
		t.Run("TransactionsCommand", func(t *testing.T) { testTransactionsCommand(t, b) })
		t.Run("Fencing", func(t *testing.T) { testTxnFencing(t, b) })
		t.Run("Timeout", func(t *testing.T) { testTxnTimeout(t, b) })
	})
}

// startHungTxn runs TxnProducer.java's hang: a transaction of count records on partition
// 0 of topic, left open, with the given transaction timeout.
func startHungTxn(t *testing.T, b *Broker, txnID, topic string, count int, timeout time.Duration) *javaApp {
	t.Helper()
	app := startJavaApp(t, "TxnProducer hang "+txnID, "TxnProducer", "192m",
		"hang", b.Addr(), txnID, topic, strconv.Itoa(count), strconv.FormatInt(timeout.Milliseconds(), 10))
	app.await(t, "OPEN", 1, txnOpenTimeout)
	return app
}

func testTransactionsCommand(t *testing.T, b *Broker) {
	const topic, txnID, records = "txn-tool", "tool-txn", 3
	b.CreateTopic(t, topic, 1)
	hung := startHungTxn(t, b, txnID, topic, records, 2*time.Minute)
	tp := topic + "-0"

	list := txnTool(t, b, []string{"TransactionalId", "Coordinator", "ProducerId", "TransactionState"}, "list")
	row := findRow(t, list, "TransactionalId", txnID)
	if row["TransactionState"] != "Ongoing" {
		t.Fatalf("list: %s is %s; want Ongoing", txnID, row["TransactionState"])
	}
	pid := row["ProducerId"]

	desc := txnTool(t, b, []string{"CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
		"TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"},
		"describe", "--transactional-id", txnID)
	row = findRow(t, desc, "TransactionalId", txnID)
	if row["TransactionState"] != "Ongoing" || row["ProducerId"] != pid || row["TopicPartitions"] != tp || row["TransactionTimeoutMs"] != "120000" {
		t.Fatalf("describe: %v; want Ongoing, producer %s, partitions %s, timeout 120000", row, pid, tp)
	}

	producersHeader := []string{"ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp", "CurrentTransactionStartOffset"}
	row = findRow(t, txnTool(t, b, producersHeader, "describe-producers", "--topic", topic, "--partition", "0"), "ProducerId", pid)
	if row["CurrentTransactionStartOffset"] != "0" || row["LastSequence"] != strconv.Itoa(records-1) {
		t.Fatalf("describe-producers: %v; want the transaction open at offset 0, last sequence %d", row, records-1)
	}

	// The open transaction is no hanging one: its coordinator knows the partition. A
	// broker that misreports the producer's transactional id or partitions makes it one.
	hanging := txnTool(t, b, []string{"Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
		"StartOffset", "LastTimestamp", "Duration(min)"},
		"find-hanging", "--broker-id", strconv.Itoa(int(nodeID(t, b))), "--max-transaction-timeout", "0")
	if len(hanging) != 0 {
		t.Fatalf("find-hanging: %v; want none", hanging)
	}

	adm := b.Admin(t)
	produceAfter(t, b, topic, "after")
	if lso, hwm := stableAndEnd(t, adm, topic); lso != 0 || hwm != records+1 {
		t.Fatalf("before abort: last stable offset %d, high watermark %d; want 0 and %d", lso, hwm, records+1)
	}
	txnTool(t, b, nil, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
	testutil.WaitFor(t, 30*time.Second, func() error {
		if lso, hwm := stableAndEnd(t, adm, topic); lso != hwm || hwm != records+2 {
			return fmt.Errorf("after abort: last stable offset %d, high watermark %d; want both %d", lso, hwm, records+2)
		}
		return nil
	})
	row = findRow(t, txnTool(t, b, producersHeader, "describe-producers", "--topic", topic, "--partition", "0"), "ProducerId", pid)
	if row["CurrentTransactionStartOffset"] != "None" {
		t.Fatalf("describe-producers after abort: %v; want no open transaction", row)
	}

	writeSentinelRecords(t, b, topic, 1)
	checkValues(t, "read_committed", readUntilSentinels(t, b, topic, 1, kgo.ReadCommitted()), "after")
	checkValues(t, "read_uncommitted", readUntilSentinels(t, b, topic, 1, kgo.ReadUncommitted()),
		"tool-txn-0", "tool-txn-1", "tool-txn-2", "after")
	hung.kill(t)
}

func testTxnFencing(t *testing.T, b *Broker) {
	const topic, txnID = "txn-fence", "fence-txn"
	b.CreateTopic(t, topic, 1)
	app := startJavaApp(t, "TxnProducer fence", "TxnProducer", "192m", "fence", b.Addr(), txnID, topic)
	app.await(t, "SECOND COMMITTED", 1, txnOpenTimeout)
	app.stop(t, 30*time.Second)

	fenced := false
	steps := app.linesWith("STEP ")
	for _, want := range []string{"first-send", "first-commit", "first-abort", "first-begin", "first-send-again"} {
		i := slices.IndexFunc(steps, func(s string) bool { return strings.HasPrefix(s, "STEP "+want+" ") })
		if i < 0 {
			t.Fatalf("no outcome of %s among %q", want, steps)
		}
		if !strings.HasPrefix(steps[i], "STEP "+want+" ERR ") {
			t.Fatalf("the fenced producer's %s succeeded: %q", want, steps)
		}
		fenced = fenced || strings.Contains(steps[i], "ProducerFencedException")
	}
	if !fenced {
		t.Fatalf("no ProducerFencedException among the fenced producer's errors: %q", steps)
	}
	t.Logf("fenced producer: %q", steps)

	writeSentinelRecords(t, b, topic, 1)
	checkValues(t, "read_committed", readUntilSentinels(t, b, topic, 1, kgo.ReadCommitted()), "second-a", "second-b")
	checkValues(t, "read_uncommitted", readUntilSentinels(t, b, topic, 1, kgo.ReadUncommitted()), "first-a", "second-a", "second-b")
}

func testTxnTimeout(t *testing.T, b *Broker) {
	const topic, txnID, records = "txn-timeout", "timeout-txn", 5
	b.CreateTopic(t, topic, 1)
	hung := startHungTxn(t, b, txnID, topic, records, txnShortTimeout)
	opened := time.Now()
	adm := b.Admin(t)

	// Until its timeout, the transaction holds back the last stable offset.
	alwaysFor(t, txnShortTimeout-time.Second, func() error {
		if lso, hwm := stableAndEnd(t, adm, topic); lso != 0 || hwm != records {
			return fmt.Errorf("%v after the transaction opened: last stable offset %d, high watermark %d; want 0 and %d",
				time.Since(opened).Round(time.Millisecond), lso, hwm, records)
		}
		return nil
	})
	testutil.WaitFor(t, txnAbortSlack, func() error {
		if lso, hwm := stableAndEnd(t, adm, topic); lso != hwm || hwm != records+1 {
			return fmt.Errorf("last stable offset %d, high watermark %d; want both %d (the abort marker written)", lso, hwm, records+1)
		}
		return nil
	})
	t.Logf("coordinator aborted the transaction %v after it opened", time.Since(opened).Round(time.Millisecond))

	hung.send(t, "commit")
	hung.await(t, "STEP commit", 1, time.Minute)
	commit := hung.linesWith("STEP commit")[0]
	// Kafka 4.1 (transaction version 2) takes the commit for a retry after the epoch bump of
	// its abort and answers INVALID_TXN_STATE.
	if !strings.HasPrefix(commit, "STEP commit ERR InvalidTxnStateException") {
		t.Fatalf("commit after the timeout: %q; want InvalidTxnStateException", commit)
	}
	t.Logf("commit after the timeout: %q", commit)

	writeSentinelRecords(t, b, topic, 1)
	checkValues(t, "read_committed", readUntilSentinels(t, b, topic, 1, kgo.ReadCommitted()))
	var hungValues []string
	for i := range records {
		hungValues = append(hungValues, fmt.Sprintf("%s-%d", txnID, i))
	}
	checkValues(t, "read_uncommitted", readUntilSentinels(t, b, topic, 1, kgo.ReadUncommitted()), hungValues...)
	hung.kill(t)
}

// txnTool runs kafka-transactions.sh (TransactionsCommand) with args and parses the table
// it prints; with header nil it must print nothing.
func txnTool(t *testing.T, b *Broker, header []string, args ...string) []map[string]string {
	t.Helper()
	res := runJava(t, "org.apache.kafka.tools.TransactionsCommand", append([]string{"--bootstrap-server", b.Addr()}, args...)...)
	out := strings.TrimRight(res.stdout, "\n")
	if header == nil {
		if out != "" {
			t.Fatalf("kafka-transactions %s printed %q; want nothing", args[0], out)
		}
		return nil
	}
	lines := strings.Split(out, "\n")
	if got := strings.Fields(lines[0]); !slices.Equal(got, header) {
		t.Fatalf("kafka-transactions %s: header %q; want %q; output:\n%s", args[0], got, header, res.stdout)
	}
	var rows []map[string]string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != len(header) {
			t.Fatalf("kafka-transactions %s: row %q has %d columns; want %d", args[0], l, len(f), len(header))
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = f[i]
		}
		rows = append(rows, row)
	}
	return rows
}

// findRow returns the row whose column col is val, failing the test when there is none.
func findRow(t *testing.T, rows []map[string]string, col, val string) map[string]string {
	t.Helper()
	for _, r := range rows {
		if r[col] == val {
			return r
		}
	}
	t.Fatalf("no row with %s %s among %v", col, val, rows)
	return nil
}

// nodeID is the id of the broker, from metadata.
func nodeID(t *testing.T, b *Broker) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := b.Admin(t).BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) != 1 {
		t.Fatalf("broker metadata: %v, brokers %v", err, md.Brokers)
	}
	return md.Brokers[0].NodeID
}

// produceAfter writes one plain record with value v to partition 0 of topic.
func produceAfter(t *testing.T, b *Broker, topic, v string) {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
		t.Fatalf("produce %q to %s: %v", v, topic, err)
	}
	cl.Close()
}

// stableAndEnd returns the last stable offset and the high watermark of partition 0 of topic.
func stableAndEnd(t *testing.T, adm *kadm.Client, topic string) (lso, hwm int64) {
	t.Helper()
	lsos, hwms := stableAndEndAll(t, adm, topic)
	return lsos[0], hwms[0]
}

// stableAndEndAll returns the last stable offset and the high watermark of each partition
// of topic.
func stableAndEndAll(t *testing.T, adm *kadm.Client, topic string) (lso, hwm map[int32]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	get := func(what string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) map[int32]int64 {
		offs, err := list(ctx, topic)
		if err == nil {
			err = offs.Error()
		}
		if err != nil {
			t.Fatalf("list %s offsets of %s: %v", what, topic, err)
		}
		out := map[int32]int64{}
		offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return out
	}
	return get("last stable", adm.ListCommittedOffsets), get("end", adm.ListEndOffsets)
}

// checkValues fails the test unless recs hold exactly want, in order.
func checkValues(t *testing.T, what string, recs []*kgo.Record, want ...string) {
	t.Helper()
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: values %q; want %q", what, got, want)
	}
}
