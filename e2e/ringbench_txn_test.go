package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"ringbroker/bench"
)

// ringbenchTxnDuration is the measured period of TestRingbenchTransactions, without warmup.
const ringbenchTxnDuration = 5 * time.Second

// TestRingbenchTransactions runs the transactions workload (transactional producers, commits,
// a read_committed consumer) for a few seconds with bin/ringbench, then checks the result: every
// transaction committed, every committed record consumed, the commit latencies in order, and
// the topic holding the committed records and one marker per transaction and partition.
func TestRingbenchTransactions(t *testing.T) {
	bin := buildRingbench(t)
	workload := filepath.Join(repoRoot(), "bench", "workloads", "transactions.yaml")

	forEachTarget(t, func(t *testing.T, tg target) {
		b := tg.start(t)
		out := filepath.Join(t.TempDir(), "result.json")
		label := "e2e-txn-" + tg.name
		res := runCmd(t, ringbenchTimeout, nil, bin, "run",
			"--bootstrap", b.Addr(), "--workload", workload, "--label", label,
			"--duration", ringbenchTxnDuration.String(), "--warmup", "0s",
			"--broker-pid", strconv.Itoa(b.current().cmd.Process.Pid), "--json", out,
			"--topic-prefix", "e2e-txnbench", "--keep-topics", "--progress-interval", "1s")
		t.Logf("ringbench output:\n%s", res.stdout)
		if !strings.Contains(res.stdout, "commit p50 ") || !strings.Contains(res.stdout, "\ncommit (txns) ") {
			t.Errorf("output has no commit latency in the progress lines or no commit row in the report")
		}

		r, err := bench.ReadResult(out)
		if err != nil {
			t.Fatal(err)
		}
		w, tx := r.Workload, r.Transactions
		switch {
		case w.Name != "transactions" || w.TransactionSize != 100 || w.PartitionsPerTopic != 16:
			t.Fatalf("workload %+v; want transactions of 100 records over 16 partitions", w)
		case tx == nil || tx.Committed == 0 || tx.Aborted != 0:
			t.Fatalf("transactions %+v; want some committed and none aborted", tx)
		case r.Publish.Errors != 0 || r.E2E == nil || r.E2E.Errors != 0:
			t.Fatalf("publish errors %d, e2e %+v; want no errors and a consumer", r.Publish.Errors, r.E2E)
		}
		producers := uint64(w.ProducersPerTopic)
		// Every transaction holds 100 records but for each producer's last, cut short by the end.
		if n := r.Publish.Records; n > 100*tx.Committed || n <= 100*(tx.Committed-producers) {
			t.Errorf("%d committed records in %d transactions; want 100 a transaction but for %d last ones", n, tx.Committed, producers)
		}
		if r.E2E.Records != r.Publish.Records {
			t.Errorf("the read_committed consumer saw %d records; %d were committed", r.E2E.Records, r.Publish.Records)
		}
		if want := float64(tx.Committed) / ringbenchTxnDuration.Seconds(); tx.CommitsPerSec < want-0.1 || tx.CommitsPerSec > want+0.1 {
			t.Errorf("%v commits/s; want %d over %v", tx.CommitsPerSec, tx.Committed, ringbenchTxnDuration)
		}
		c := tx.Commit
		if c.MinMs <= 0 || c.MinMs > c.P50Ms || c.P50Ms > c.P99Ms || c.P99Ms > c.P999Ms || c.P999Ms > c.MaxMs || len(c.Curve) == 0 {
			t.Errorf("commit latency %+v; want positive and ordered, with a curve", c)
		}
		// A record is committed once every record of its transaction is acknowledged and the
		// commit is answered: never sooner than the commit itself.
		if r.Publish.Latency.MinMs < c.MinMs {
			t.Errorf("committed record latency min %v ms below the commit min %v ms", r.Publish.Latency.MinMs, c.MinMs)
		}

		// The topic holds the committed records and the markers: one per partition a transaction
		// wrote, 16 for a whole transaction.
		name, _, held := runTopicOffsets(t, b, "e2e-txnbench-")
		markers := uint64(held) - r.Publish.Records
		if markers > 16*tx.Committed || markers < 16*(tx.Committed-producers) {
			t.Errorf("%s holds %d offsets: %d records and %d others; want 16 markers for each of the %d transactions but the %d last",
				name, held, r.Publish.Records, markers, tx.Committed, producers)
		}
		t.Logf("%s: %d transactions (%v/s), commit p50/p99/p99.9 %v/%v/%v ms; committed %v rec/s, e2e p50/p99 %v/%v ms",
			label, tx.Committed, tx.CommitsPerSec, c.P50Ms, c.P99Ms, c.P999Ms, r.Publish.RecordsPerSec, r.E2E.Latency.P50Ms, r.E2E.Latency.P99Ms)
	})
}
