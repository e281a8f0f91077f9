package bench

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// txnResult is syntheticResult's result made transactional: 6000 commits over its minute,
// their latencies spread evenly from commitMs to twice that, and two aborted.
func txnResult(label string, seed uint64, medianMs, commitMs float64) *Result {
	r := syntheticResult(label, seed, medianMs, true, true)
	r.Workload.Name = "transactions"
	r.Workload.TransactionSize = 100
	var h Histogram
	for i := range 6000 {
		h.Record(time.Duration(commitMs * (1 + float64(i%100)/100) * 1e6))
	}
	s := NewTxnStats(&h, 2, time.Duration(r.Duration))
	r.Transactions = &s
	return r
}

// TestTransactionalResult writes and reads back a transactional result, then checks that its
// report, its comparison with another and their chart show the transactions and commits.
func TestTransactionalResult(t *testing.T) {
	kafka, ring := txnResult("kafka-4.1", 1, 5, 4), txnResult("ringbroker", 2, 2, 1)
	if tx := kafka.Transactions; tx.Committed != 6000 || tx.Aborted != 2 || tx.CommitsPerSec != 100 ||
		tx.Commit.MinMs != 4 || tx.Commit.P50Ms < 5.9 || tx.Commit.P50Ms > 6.1 || tx.Commit.P99Ms < 7.85 || tx.Commit.P99Ms > 7.95 {
		t.Fatalf("transaction stats %+v; want 6000 committed at 100/s, 2 aborted, commits from 4 ms, p50 about 6 and p99 about 7.9", tx)
	}

	path := filepath.Join(t.TempDir(), "txn.json")
	if err := kafka.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadResult(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Transactions, kafka.Transactions) || back.Workload.TransactionSize != 100 {
		t.Fatalf("read back transactions %+v, size %d; want %+v, 100", back.Transactions, back.Workload.TransactionSize, kafka.Transactions)
	}

	broken := *kafka
	commits := *kafka.Transactions
	commits.Commit.Curve = slices.Clone(commits.Commit.Curve)
	commits.Commit.Curve[1].Percentile = 101
	broken.Transactions = &commits
	data, err := json.Marshal(&broken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeResult(data); err == nil || !strings.Contains(err.Error(), "curve point 1 = (p=101") {
		t.Fatalf("DecodeResult of a commit curve at p=101 = %v; want it refused", err)
	}

	var report bytes.Buffer
	if err := WriteReport(&report, ring); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"transactions of 100 records", "\ncommitted "} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, report.String())
		}
	}
	_, commitRow, _ := strings.Cut(report.String(), "\ncommit (txns) ")
	if f := strings.Fields(commitRow); len(f) < 4 || !reflect.DeepEqual(f[:4], []string{"6000", "100.0", "-", "2"}) {
		t.Errorf("report's commit row starts %q; want 6000 commits, 100.0/s, no MB/s, 2 aborted:\n%s", f, report.String())
	}

	var cmp bytes.Buffer
	if err := WriteComparison(&cmp, []*Result{kafka, ring}); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for line := range strings.Lines(cmp.String()) {
		if name, rest, ok := strings.Cut(line, "  "); ok {
			rows[strings.TrimSpace(name)] = strings.Fields(rest)
		}
	}
	for name, want := range map[string][]string{
		"commits/s":            {"100.0", "100.0", "1.00x"},
		"aborted transactions": {"2", "2"},
		"commit p99 ms":        {FormatMs(kafka.Transactions.Commit.P99Ms), FormatMs(ring.Transactions.Commit.P99Ms), "0.25x"},
	} {
		if !reflect.DeepEqual(rows[name], want) {
			t.Errorf("comparison row %q = %q; want %q\n%s", name, rows[name], want, cmp.String())
		}
	}

	svg := ChartSVG([]*Result{kafka, ring})
	checkXML(t, svg, true)
	if n := strings.Count(svg, "Commit latency (EndTransaction round trip)"); n != 1 {
		t.Errorf("chart has %d commit latency panels; want 1", n)
	}
	if plain := ChartSVG(readFixtures(t, "kafka", "ringbroker")); strings.Contains(plain, "Commit latency") {
		t.Error("chart of runs without transactions has a commit latency panel")
	}
}
