package bench

import (
	"errors"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// compareRow is one line of a comparison: a name and how to read its value
// from a result. ratio says whether a ratio to the first run is meaningful.
type compareRow struct {
	name  string
	value func(r *Result) (float64, bool)
	fmt   func(float64) string
	ratio bool
}

func fmtRate(v float64) string  { return strconv.FormatFloat(v, 'f', 1, 64) }
func fmtMB(v float64) string    { return strconv.FormatFloat(v, 'f', 2, 64) }
func fmtCount(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

// fmtCores formats an average number of busy cores.
func fmtCores(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func statsRows(name string, get func(r *Result) *Stats) []compareRow {
	val := func(f func(s *Stats) float64) func(r *Result) (float64, bool) {
		return func(r *Result) (float64, bool) {
			s := get(r)
			if s == nil {
				return 0, false
			}
			return f(s), true
		}
	}
	return []compareRow{
		{name + " rec/s", val(func(s *Stats) float64 { return s.RecordsPerSec }), fmtRate, true},
		{name + " MB/s", val(func(s *Stats) float64 { return s.MBPerSec }), fmtMB, true},
		{name + " errors", val(func(s *Stats) float64 { return float64(s.Errors) }), fmtCount, false},
		{name + " p50 ms", val(func(s *Stats) float64 { return s.Latency.P50Ms }), FormatMs, true},
		{name + " p90 ms", val(func(s *Stats) float64 { return s.Latency.P90Ms }), FormatMs, true},
		{name + " p99 ms", val(func(s *Stats) float64 { return s.Latency.P99Ms }), FormatMs, true},
		{name + " p99.9 ms", val(func(s *Stats) float64 { return s.Latency.P999Ms }), FormatMs, true},
		{name + " p99.99 ms", val(func(s *Stats) float64 { return s.Latency.P9999Ms }), FormatMs, true},
		{name + " max ms", val(func(s *Stats) float64 { return s.Latency.MaxMs }), FormatMs, true},
	}
}

// txnRows are the rows of transactional runs: commits per second, aborted transactions and
// the commit latency; they are left out when no run has transactions.
func txnRows() []compareRow {
	val := func(f func(t *TxnStats) float64) func(r *Result) (float64, bool) {
		return func(r *Result) (float64, bool) {
			if r.Transactions == nil {
				return 0, false
			}
			return f(r.Transactions), true
		}
	}
	return []compareRow{
		{"commits/s", val(func(t *TxnStats) float64 { return t.CommitsPerSec }), fmtRate, true},
		{"aborted transactions", val(func(t *TxnStats) float64 { return float64(t.Aborted) }), fmtCount, false},
		{"commit p50 ms", val(func(t *TxnStats) float64 { return t.Commit.P50Ms }), FormatMs, true},
		{"commit p90 ms", val(func(t *TxnStats) float64 { return t.Commit.P90Ms }), FormatMs, true},
		{"commit p99 ms", val(func(t *TxnStats) float64 { return t.Commit.P99Ms }), FormatMs, true},
		{"commit p99.9 ms", val(func(t *TxnStats) float64 { return t.Commit.P999Ms }), FormatMs, true},
		{"commit max ms", val(func(t *TxnStats) float64 { return t.Commit.MaxMs }), FormatMs, true},
	}
}

// probeRows are the round trips of the runs' probes (ProbeStats), left out when no run has one.
func probeRows() []compareRow {
	val := func(f func(l *Latency) float64) func(r *Result) (float64, bool) {
		return func(r *Result) (float64, bool) {
			if r.Probe == nil {
				return 0, false
			}
			return f(&r.Probe.Latency), true
		}
	}
	return []compareRow{
		{"probe p50 ms", val(func(l *Latency) float64 { return l.P50Ms }), FormatMs, true},
		{"probe p99 ms", val(func(l *Latency) float64 { return l.P99Ms }), FormatMs, true},
		{"probe p99.9 ms", val(func(l *Latency) float64 { return l.P999Ms }), FormatMs, true},
	}
}

func compareRows() []compareRow {
	rows := statsRows("publish", func(r *Result) *Stats { return &r.Publish })
	rows = append(rows, statsRows("e2e", func(r *Result) *Stats { return r.E2E })...)
	rows = append(rows, txnRows()...)
	rows = append(rows, probeRows()...)
	return append(rows,
		compareRow{"unsent", func(r *Result) (float64, bool) { return float64(r.Unsent), true }, fmtCount, false},
		compareRow{"broker peak RSS MiB", func(r *Result) (float64, bool) {
			if r.Broker == nil || r.Broker.PeakRSSBytes == nil {
				return 0, false
			}
			return float64(*r.Broker.PeakRSSBytes) / (1 << 20), true
		}, fmtRate, true},
		compareRow{"broker peak anon RSS MiB", func(r *Result) (float64, bool) {
			if r.Broker == nil || r.Broker.PeakAnonRSSBytes == nil {
				return 0, false
			}
			return float64(*r.Broker.PeakAnonRSSBytes) / (1 << 20), true
		}, fmtRate, true},
		compareRow{"broker CPU %", func(r *Result) (float64, bool) {
			if r.Broker == nil || r.Broker.CPUPercent == nil {
				return 0, false
			}
			return *r.Broker.CPUPercent, true
		}, fmtRate, true},
		compareRow{"machine cores busy", func(r *Result) (float64, bool) {
			if r.Machine == nil {
				return 0, false
			}
			return r.Machine.BusyCores, true
		}, fmtCores, true},
		compareRow{"ringbench cores", func(r *Result) (float64, bool) {
			if r.Machine == nil {
				return 0, false
			}
			return r.Machine.ClientCores, true
		}, fmtCores, true},
	)
}

// runNames returns a column name per run: its label, made unique with "#n"
// when labels repeat, or "run n" when empty.
func runNames(runs []*Result) []string {
	names := make([]string, len(runs))
	seen := map[string]int{}
	for i, r := range runs {
		n := r.Label
		if n == "" {
			n = fmt.Sprintf("run %d", i+1)
		}
		seen[n]++
		names[i] = n
	}
	for i, n := range names {
		if seen[n] > 1 {
			names[i] = fmt.Sprintf("%s #%d", n, i+1)
		}
	}
	return names
}

// comparisonTable returns the header and cells of a comparison of runs; the
// first run is the baseline of the ratio columns.
func comparisonTable(runs []*Result) (header []string, cells [][]string) {
	names := runNames(runs)
	header = append([]string{""}, names...)
	for _, n := range names[1:] {
		header = append(header, n+"/"+names[0])
	}
	text := func(name string, f func(r *Result) string) {
		row := []string{name}
		for _, r := range runs {
			row = append(row, f(r))
		}
		for range runs[1:] {
			row = append(row, "")
		}
		cells = append(cells, row)
	}
	text("workload", func(r *Result) string { return r.Workload.Name })
	text("start", func(r *Result) string { return r.Start.UTC().Format(time.RFC3339) })
	text("measured", func(r *Result) string { return time.Duration(r.Duration).String() })
	for _, cr := range compareRows() {
		row := []string{cr.name}
		vals := make([]float64, len(runs))
		oks := make([]bool, len(runs))
		present := false
		for i, r := range runs {
			vals[i], oks[i] = cr.value(r)
			present = present || oks[i]
			if oks[i] {
				row = append(row, cr.fmt(vals[i]))
			} else {
				row = append(row, "-")
			}
		}
		if !present {
			continue
		}
		for i := 1; i < len(runs); i++ {
			if cr.ratio && oks[0] && oks[i] && vals[0] > 0 {
				row = append(row, strconv.FormatFloat(vals[i]/vals[0], 'f', 2, 64)+"x")
			} else {
				row = append(row, "")
			}
		}
		cells = append(cells, row)
	}
	return header, cells
}

// WriteComparison prints runs side by side, with each later run's ratio to
// the first. For latency a ratio below 1 is better; for throughput, above 1.
func WriteComparison(out io.Writer, runs []*Result) error {
	if len(runs) < 2 {
		return fmt.Errorf("compare: %d runs; want at least 2", len(runs))
	}
	header, cells := comparisonTable(runs)
	if err := writeColumns(out, append([][]string{header}, cells...)); err != nil {
		return fmt.Errorf("write comparison: %w", err)
	}
	_, err := fmt.Fprintf(out, "\nratios are to %s: below 1.00x is lower latency, above 1.00x is higher throughput\n", runNames(runs)[0])
	return err
}

// WriteComparisonHTML writes a standalone page with the comparison table and
// the latency chart.
func WriteComparisonHTML(out io.Writer, runs []*Result) error {
	if len(runs) < 2 {
		return fmt.Errorf("compare: %d runs; want at least 2", len(runs))
	}
	header, cells := comparisonTable(runs)
	names := runNames(runs)
	var b strings.Builder
	b.WriteString(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>ringbench: ` + html.EscapeString(strings.Join(names, " vs ")) + `</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.5em}
div.t{overflow-x:auto}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:1em 0;font-size:.92em}
th,td{padding:.25em .8em;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}
thead th{border-bottom:2px solid #888}
p.note{color:#555;font-size:.9em}
</style></head><body>
<h1>ringbench: ` + html.EscapeString(strings.Join(names, " vs ")) + `</h1>
`)
	b.WriteString(ChartSVG(runs))
	b.WriteString("\n<div class=\"t\"><table>\n<thead><tr>")
	for _, h := range header {
		b.WriteString("<th>" + html.EscapeString(h) + "</th>")
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, row := range cells {
		b.WriteString("<tr>")
		for _, c := range row {
			b.WriteString("<td>" + html.EscapeString(c) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody></table></div>\n<p class=\"note\">Ratios are to " + html.EscapeString(names[0]) +
		": below 1.00x is lower latency, above 1.00x is higher throughput. Latency is measured from each record's" +
		" intended send time (open loop), so stalls are not hidden.</p>\n</body></html>\n")
	_, err := io.WriteString(out, b.String())
	return err
}

// Compare prints the comparison of runs to out and, when outDir is not
// empty, writes outDir/index.html (table and chart), outDir/latency.svg and
// outDir/compare.txt.
func Compare(out io.Writer, runs []*Result, outDir string) error {
	if err := WriteComparison(out, runs); err != nil {
		return err
	}
	if outDir == "" {
		return nil
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	var txt, page strings.Builder
	errs := []error{WriteComparison(&txt, runs), WriteComparisonHTML(&page, runs)}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	files := map[string]string{
		"compare.txt": txt.String(),
		"index.html":  page.String(),
		"latency.svg": `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + ChartSVG(runs),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(outDir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
	}
	return nil
}

// writeColumns prints rows as aligned columns: the first left-aligned, the
// others right-aligned, two spaces apart, with no trailing blanks.
func writeColumns(out io.Writer, rows [][]string) error {
	var widths []int
	for _, row := range rows {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		var line strings.Builder
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				line.WriteString(c + pad)
			} else {
				line.WriteString("  " + pad + c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	_, err := io.WriteString(out, b.String())
	return err
}
