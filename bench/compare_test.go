package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/compare from synthetic runs")

// syntheticResult builds a deterministic result whose latencies are
// lognormal around medianMs with a heavier tail, for the compare fixtures.
func syntheticResult(label string, seed uint64, medianMs float64, withE2E, withBroker bool) *Result {
	w := DefaultWorkload()
	w.Name = "1kb-fixed-rate-16p"
	w.PartitionsPerTopic = 16
	w.ProducerRate = 10000
	w.ConsumerPerSubscription = 1
	rng := rand.New(rand.NewPCG(seed, 7))
	hist := func(scale float64) *Histogram {
		var h Histogram
		for range 600_000 {
			v := medianMs * scale * math.Exp(0.5*rng.NormFloat64())
			if rng.IntN(2000) == 0 {
				v *= 8 * (1 + rng.Float64())
			}
			h.Record(time.Duration(v * 1e6))
		}
		return &h
	}
	d := time.Minute
	r := &Result{
		Schema:    ResultSchema,
		Label:     label,
		Bootstrap: "127.0.0.1:9092",
		Workload:  w,
		Start:     time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC),
		Warmup:    Duration(10 * time.Second),
		Duration:  Duration(d),
		Publish:   NewStats(hist(1), 600_000*1024, 0, d),
	}
	if withE2E {
		s := NewStats(hist(1.6), 600_000*1024, 0, d)
		r.E2E = &s
	}
	if withBroker {
		rss := uint64(medianMs * 300 * (1 << 20))
		anon := rss * 2 / 3
		cpu := medianMs * 20
		pct := 100 * cpu / d.Seconds()
		r.Broker = &BrokerUsage{PID: 4242, PeakRSSBytes: &rss, PeakAnonRSSBytes: &anon, CPUSeconds: &cpu, CPUPercent: &pct}
	}
	return r
}

func readFixtures(t *testing.T, names ...string) []*Result {
	t.Helper()
	var runs []*Result
	for _, n := range names {
		r, err := ReadResult(filepath.Join("testdata", "compare", n+".json"))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	return runs
}

func TestCompareGolden(t *testing.T) {
	dir := filepath.Join("testdata", "compare")
	if *update {
		fixtures := map[string]*Result{
			"kafka":      syntheticResult("kafka-4.1", 1, 2.5, true, true),
			"ringbroker": syntheticResult("ringbroker", 2, 0.9, true, true),
			"noe2e":      syntheticResult("ringbroker-netpoll", 3, 1.2, false, false),
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, r := range fixtures {
			if err := r.WriteJSON(filepath.Join(dir, name+".json")); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		golden string
		runs   []string
	}{
		{"two.txt", []string{"kafka", "ringbroker"}},
		{"three.txt", []string{"kafka", "ringbroker", "noe2e"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var out bytes.Buffer
			if err := WriteComparison(&out, readFixtures(t, tt.runs...)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, tt.golden)
			if *update {
				if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != string(want) {
				t.Fatalf("comparison differs from %s (run with -update to accept):\n--- got\n%s--- want\n%s", path, out.String(), want)
			}
		})
	}
}

// checkXML decodes doc fully and counts elements by name.
func checkXML(t *testing.T, doc string, strict bool) map[string]int {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(doc))
	dec.Strict = strict
	if !strict {
		dec.AutoClose = xml.HTMLAutoClose
		dec.Entity = xml.HTMLEntity
	}
	counts := map[string]int{}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return counts
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			counts[se.Name.Local]++
		}
	}
}

func TestCompareWritesChartAndPage(t *testing.T) {
	runs := readFixtures(t, "kafka", "ringbroker", "noe2e")
	out := t.TempDir()
	var text bytes.Buffer
	if err := Compare(&text, runs, out); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(out, "latency.svg"))
	if err != nil {
		t.Fatal(err)
	}
	counts := checkXML(t, string(svg), true)
	// Publish panel: three curves; e2e panel: two (noe2e has none).
	if counts["polyline"] != 5 || counts["circle"] != 5 {
		t.Fatalf("svg has %d curves and %d max dots, want 5 and 5", counts["polyline"], counts["circle"])
	}
	page, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	pc := checkXML(t, string(page), false)
	if pc["svg"] != 1 || pc["table"] != 1 || pc["tr"] < 20 {
		t.Fatalf("page has %d svg, %d table, %d rows", pc["svg"], pc["table"], pc["tr"])
	}
	txt, err := os.ReadFile(filepath.Join(out, "compare.txt"))
	if err != nil || string(txt) != text.String() {
		t.Fatalf("compare.txt differs from the printed comparison (err %v)", err)
	}
}

func TestCompareErrors(t *testing.T) {
	runs := readFixtures(t, "kafka")
	if err := WriteComparison(io.Discard, runs); err == nil {
		t.Fatal("comparison of one run succeeded")
	}
	if err := WriteComparisonHTML(io.Discard, runs); err == nil {
		t.Fatal("page of one run succeeded")
	}
}

func TestDecodeResultRejects(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "compare", "kafka.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, from, to, wantErr string
	}{
		{"schema", `"schema": 1`, `"schema": 2`, "schema=2"},
		{"unknown field", `"schema": 1`, `"schema": 1, "extra": true`, "unknown field"},
		{"duration", `"measured": "1m0s"`, `"measured": "0s"`, "measured=0s"},
		{"curve order", `"p": 10,`, `"p": 0,`, "not above"},
		{"curve range", `"p": 10,`, `"p": 101,`, "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := strings.Replace(string(good), tt.from, tt.to, 1)
			if bad == string(good) {
				t.Fatalf("fixture lacks %q", tt.from)
			}
			if _, err := DecodeResult([]byte(bad)); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("DecodeResult = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRunNames(t *testing.T) {
	got := runNames([]*Result{{Label: "a"}, {Label: ""}, {Label: "a"}})
	want := []string{"a #1", "run 2", "a #3"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("runNames = %q, want %q", got, want)
	}
}

func FuzzDecodeResult(f *testing.F) {
	// Small seeds: the fuzzer minimizes every new input, which is slow for
	// the multi-kilobyte fixtures.
	f.Add([]byte(`{"schema":1,"label":"a","measured":"1m0s","warmup":"10s","unsent":3,` +
		`"publish":{"records":10,"bytes":100,"recordsPerSec":0.2,"mbPerSec":0.001,"latency":{"p50Ms":1.5,"maxMs":9,` +
		`"curve":[{"p":0,"ms":0.5},{"p":50,"ms":1.5},{"p":99,"ms":4},{"p":100,"ms":9}]}},` +
		`"e2e":{"records":10,"latency":{"curve":[{"p":90,"ms":2},{"p":100,"ms":1e6}]}},` +
		`"broker":{"pid":7,"peakRssBytes":1048576,"cpuPercent":55.5}}`))
	f.Add([]byte(`{"schema":1,"measured":"1s","publish":{"latency":{"curve":[{"p":50,"ms":-1}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeResult(data)
		if err != nil {
			return
		}
		// Anything that decodes must compare and chart without failing.
		if err := WriteComparison(io.Discard, []*Result{r, r}); err != nil {
			t.Fatal(err)
		}
		checkXML(t, ChartSVG([]*Result{r}), true)
	})
}
