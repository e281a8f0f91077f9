package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// FormatMs formats a latency in milliseconds with three significant digits
// or to the microsecond, whichever is coarser, so columns stay readable.
func FormatMs(ms float64) string {
	switch {
	case math.IsNaN(ms):
		return "-"
	case ms < 10:
		return fmt.Sprintf("%.3f", ms)
	case ms < 100:
		return fmt.Sprintf("%.2f", ms)
	case ms < 1000:
		return fmt.Sprintf("%.1f", ms)
	default:
		return fmt.Sprintf("%.0f", ms)
	}
}

// histMs formats percentile p of h in milliseconds, or "-" while h is empty.
func histMs(h *Histogram, p float64) string {
	if h.Count() == 0 {
		return "-"
	}
	return FormatMs(float64(h.Percentile(p)) / 1e6)
}

// progress keeps what is needed to print rates over the last interval.
type progress struct {
	r       *runner
	lastAt  time.Time
	lastPub uint64
	lastE2E uint64
	printed bool
}

// print writes one progress line: phase, elapsed, publish rate over the last
// interval, latency percentiles of the current phase so far, errors, time left.
func (p *progress) print(out io.Writer, live bool, now time.Time, ph phase) {
	r := p.r
	pubN, e2eN := r.pub.records.Load(), r.e2e.records.Load()
	secs := now.Sub(p.lastAt).Seconds()
	pubRate := float64(pubN-p.lastPub) / secs
	e2eRate := float64(e2eN-p.lastE2E) / secs
	p.lastAt, p.lastPub, p.lastE2E = now, pubN, e2eN

	measured := ph != phaseWarmup
	pubH, e2eH := r.pub.snapshot(measured), r.e2e.snapshot(measured)

	var b strings.Builder
	switch ph {
	case phaseWarmup:
		fmt.Fprintf(&b, "warmup %4.0fs/%.0fs", now.Sub(r.start).Seconds(), r.measureStart.Sub(r.start).Seconds())
	case phaseMeasure:
		fmt.Fprintf(&b, "run    %4.0fs/%.0fs", now.Sub(r.measureStart).Seconds(), r.end.Sub(r.measureStart).Seconds())
	default:
		fmt.Fprintf(&b, "%-6s", ph)
	}
	fmt.Fprintf(&b, "  pub %8.0f rec/s %7.2f MB/s  p50 %s p99 %s ms",
		pubRate, pubRate*float64(len(r.payload))/1e6, histMs(&pubH, 50), histMs(&pubH, 99))
	if r.w.ConsumerPerSubscription > 0 {
		fmt.Fprintf(&b, "  e2e %8.0f rec/s  p50 %s p99 %s ms", e2eRate, histMs(&e2eH, 50), histMs(&e2eH, 99))
	}
	if r.w.TransactionSize > 0 {
		commits := r.txn.snapshot(measured)
		fmt.Fprintf(&b, "  commit p50 %s p99 %s ms", histMs(&commits, 50), histMs(&commits, 99))
	}
	fmt.Fprintf(&b, "  err %d", r.pub.errors.Load()+r.e2e.errors.Load()+r.txn.errors.Load())
	if left := r.end.Sub(now); left > 0 {
		fmt.Fprintf(&b, "  left %s", left.Round(time.Second))
	}
	if live {
		fmt.Fprintf(out, "\r\x1b[2K%s", b.String())
	} else {
		fmt.Fprintln(out, b.String())
	}
	p.printed = true
}

// finish ends a live progress line so the report starts on a fresh line.
func (p *progress) finish(out io.Writer, live bool) {
	if out != nil && live && p.printed {
		fmt.Fprintln(out)
	}
}

// WriteReport prints a run's result as a table: throughput, errors and
// latency percentiles for publish and end-to-end, then broker usage.
func WriteReport(out io.Writer, r *Result) error {
	w := r.Workload
	rate := "max"
	switch {
	case w.ProducerRate > 0:
		rate = fmt.Sprintf("%g rec/s", w.ProducerRate)
	case r.RateSearch != nil && len(r.RateSearch.Steps) > 0:
		steps := r.RateSearch.Steps
		rate = fmt.Sprintf("the highest rate the consumers sustain (searched every %v, last target %.0f rec/s)",
			time.Duration(r.RateSearch.Period), steps[len(steps)-1].Target)
	case r.RateSearch != nil:
		rate = "the highest rate the consumers sustain (the search never started: nothing consumed)"
	}
	fmt.Fprintf(out, "%s on %s (%s), started %s\n", w.Name, r.Label, r.Bootstrap, r.Start.Format(time.RFC3339))
	txns := ""
	if w.TransactionSize > 0 {
		txns = fmt.Sprintf("; transactions of %d records", w.TransactionSize)
	}
	fmt.Fprintf(out, "measured %v after %v warmup; target %s; %d B records; acks=%s compression=%s%s\n\n",
		time.Duration(r.Duration), time.Duration(r.Warmup), rate, w.MessageSize, w.Acks, w.Compression, txns)
	rows := [][]string{{"", "records", "rec/s", "MB/s", "errors", "p50", "p90", "p99", "p99.9", "p99.99", "max (ms)"}}
	row := func(name string, count uint64, rate, mb string, errors uint64, l Latency) {
		rows = append(rows, []string{name, strconv.FormatUint(count, 10), rate, mb, strconv.FormatUint(errors, 10),
			FormatMs(l.P50Ms), FormatMs(l.P90Ms), FormatMs(l.P99Ms), FormatMs(l.P999Ms), FormatMs(l.P9999Ms), FormatMs(l.MaxMs)})
	}
	publish := "publish"
	if r.Transactions != nil {
		publish = "committed"
	}
	row(publish, r.Publish.Records, fmtRate(r.Publish.RecordsPerSec), fmtMB(r.Publish.MBPerSec), r.Publish.Errors, r.Publish.Latency)
	if r.E2E != nil {
		row("end-to-end", r.E2E.Records, fmtRate(r.E2E.RecordsPerSec), fmtMB(r.E2E.MBPerSec), r.E2E.Errors, r.E2E.Latency)
	}
	if t := r.Transactions; t != nil {
		// Counted in transactions, not records: errors are the aborted ones.
		row("commit (txns)", t.Committed, fmtRate(t.CommitsPerSec), "-", t.Aborted, t.Commit)
	}
	if p := r.Probe; p != nil {
		// The round trip of a request that costs the broker next to nothing: the floor.
		row("probe (rtt)", p.Requests, fmtRate(float64(p.Requests)/time.Duration(r.Duration).Seconds()), "-", p.Errors, p.Latency)
	}
	if err := writeColumns(out, rows); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if r.Unsent > 0 {
		fmt.Fprintf(out, "\nunsent: %d records due by the end were never sent: the rate was not sustained\n", r.Unsent)
	}
	if b := r.Broker; b != nil {
		fmt.Fprintf(out, "\nbroker pid %d:", b.PID)
		if b.PeakRSSBytes != nil {
			fmt.Fprintf(out, " peak RSS %.1f MiB", float64(*b.PeakRSSBytes)/(1<<20))
		}
		if b.PeakAnonRSSBytes != nil {
			fmt.Fprintf(out, " (anonymous %.1f MiB)", float64(*b.PeakAnonRSSBytes)/(1<<20))
		}
		if b.CPUSeconds != nil && b.CPUPercent != nil {
			fmt.Fprintf(out, ", CPU %.1f s (%.0f %% of a core)", *b.CPUSeconds, *b.CPUPercent)
		}
		fmt.Fprintln(out)
	}
	return nil
}
