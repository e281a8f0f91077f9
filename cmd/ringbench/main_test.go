package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"ringbroker/bench"
	"ringbroker/internal/brokertest"
)

func TestParseInterleaved(t *testing.T) {
	tests := []struct {
		args    []string
		wantPos string
		wantOut string
	}{
		{[]string{"a", "b", "--out", "d"}, "a,b", "d"},
		{[]string{"--out=d", "a", "b"}, "a,b", "d"},
		{[]string{"a", "-out", "d", "b"}, "a,b", "d"},
		{[]string{"a", "b"}, "a,b", ""},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		out := fs.String("out", "", "")
		pos, err := parseInterleaved(fs, tt.args)
		if err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if strings.Join(pos, ",") != tt.wantPos || *out != tt.wantOut {
			t.Errorf("%q: positionals %q, out %q; want %q, %q", tt.args, pos, *out, tt.wantPos, tt.wantOut)
		}
	}
}

func TestCompareCommand(t *testing.T) {
	fixtures := filepath.Join("..", "..", "bench", "testdata", "compare")
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"compare", filepath.Join(fixtures, "kafka.json"), filepath.Join(fixtures, "ringbroker.json"), "--out", dir}, &stdout, &stderr, false)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	golden, err := os.ReadFile(filepath.Join(fixtures, "two.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), string(golden)) {
		t.Fatalf("compare output differs from %s:\n%s", "two.txt", stdout.String())
	}
	for _, f := range []string{"index.html", "latency.svg", "compare.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("compare did not write %s: %v", f, err)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{nil, 2, "usage"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"compare", "one.json"}, 2, "at least two"},
		{[]string{"compare", "no.json", "such.json"}, 1, "no such file"},
		{[]string{"run"}, 2, "--workload is required"},
		{[]string{"run", "--workload", "x.yaml", "extra"}, 2, "unexpected arguments"},
		{[]string{"run", "--nope"}, 2, "flag provided but not defined"},
		{[]string{"run", "--workload", "../../bench/workloads/max-throughput.yaml", "--rate", "1e12"}, 2, "producerRate"},
		{[]string{"help"}, 0, ""},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tt.args, &stdout, &stderr, false)
		if code != tt.wantCode || !strings.Contains(stderr.String()+stdout.String(), tt.wantErr) {
			t.Errorf("%q: exit %d, output %q; want exit %d and %q", tt.args, code, stderr.String(), tt.wantCode, tt.wantErr)
		}
	}
}

// TestRunCommand drives a short run through the CLI against a real
// ringbroker process and checks the report and the JSON it writes.
func TestRunCommand(t *testing.T) {
	b := brokertest.Start(t, brokertest.Build(t, t.TempDir()), "auto")
	out := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run",
		"--bootstrap", b.Addr, "--broker-pid", strconv.Itoa(b.PID),
		"--workload", "../../bench/workloads/1kb-fixed-rate-16p.yaml",
		"--duration", "1s", "--warmup", "200ms", "--rate", "400",
		"--label", "ringbroker", "--json", out, "--progress-interval", "500ms",
	}, &stdout, &stderr, false)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"1kb-fixed-rate-16p on ringbroker", "publish", "end-to-end", "broker pid " + strconv.Itoa(b.PID), "wrote " + out} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	t.Log(stdout.String())
	res, err := bench.ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Label != "ringbroker" || res.Publish.Records != 400 || res.E2E == nil || res.E2E.Records != 400 {
		t.Fatalf("result label %q, publish %d, e2e %+v; want ringbroker, 400, 400", res.Label, res.Publish.Records, res.E2E)
	}
	if res.Broker == nil || res.Broker.PID != b.PID || res.Broker.PeakRSSBytes == nil || *res.Broker.PeakRSSBytes == 0 {
		t.Fatalf("result broker usage %+v; want pid %d with a peak RSS", res.Broker, b.PID)
	}
	b.Stop()
}
