package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"
)

// ResultSchema is the version of the results JSON layout; ReadResult rejects others.
const ResultSchema = 1

// Result is the outcome of one run, written as JSON by `ringbench run --json`
// and read back by `ringbench compare`. Latencies are in milliseconds.
type Result struct {
	// Schema is ResultSchema.
	Schema int `json:"schema"`
	// Label names the system under test, e.g. "ringbroker" or "kafka-4.1".
	Label string `json:"label"`
	// Bootstrap is the address the run connected to.
	Bootstrap string `json:"bootstrap"`
	// Workload is the workload as run, after command-line overrides.
	Workload Workload `json:"workload"`
	// Start is when load began (warmup included).
	Start time.Time `json:"startTime"`
	// Warmup is how long load ran before measuring.
	Warmup Duration `json:"warmup"`
	// Duration is the measured period: records whose intended send time falls
	// in it are counted.
	Duration Duration `json:"measured"`
	// Publish is producer-side: intended send time to acknowledgement. In a transactional
	// workload it counts only committed records, to the end of their transaction's commit.
	Publish Stats `json:"publish"`
	// E2E is intended send time to consumption; nil when the workload has no consumers. In a
	// transactional workload consumers read committed, so it ends when a record became visible
	// after its commit.
	E2E *Stats `json:"e2e,omitempty"`
	// Transactions counts the transactions and times their commits; nil unless the workload
	// is transactional.
	Transactions *TxnStats `json:"transactions,omitempty"`
	// Probe times a request round trip taken beside the workload; nil when the run sent no
	// probes.
	Probe *ProbeStats `json:"probe,omitempty"`
	// RateSearch lists the targets of the search for the highest rate the consumers sustain;
	// nil unless the workload's producerRate is 0 and the run searched (RateController).
	RateSearch *RateSearch `json:"rateSearch,omitempty"`
	// Unsent counts records the schedule called for by the end of the measured
	// period that the producers never got to send: the system could not keep the rate.
	Unsent uint64 `json:"unsent"`
	// Broker holds resource figures of the broker process, when known.
	Broker *BrokerUsage `json:"broker,omitempty"`
	// Machine is how busy the machine and ringbench itself were over the measured period;
	// nil where /proc cannot be read.
	Machine *MachineUsage `json:"machine,omitempty"`
}

// MachineUsage is the CPU the whole machine and ringbench used over the measured period.
// ringbench shares the machine with the broker it measures, so a rate that stops rising with
// the machine's cores all busy is the machine's ceiling, clients included, not the broker's.
type MachineUsage struct {
	// Cores is the number of cores the machine has (what /proc/stat sums over).
	Cores int `json:"cores"`
	// BusyCores is the average number of cores busy with anything but idle and iowait:
	// processes, kernel threads and interrupt handling.
	BusyCores float64 `json:"busyCores"`
	// ClientCores is the average number of cores ringbench itself kept busy.
	ClientCores float64 `json:"clientCores"`
}

// RateSearch is how a run of producerRate 0 searched for the highest rate its consumers
// sustain.
type RateSearch struct {
	// Period is how often the target was set.
	Period Duration `json:"period"`
	// Steps are the periods from the consumers' first records on, warmup included.
	Steps []RateStep `json:"steps"`
}

// RateStep is one period of a rate search: what it saw and the target it led to.
type RateStep struct {
	// Published and Consumed are the records acknowledged and read in the period, per second.
	Published float64 `json:"published"`
	Consumed  float64 `json:"consumed"`
	// Backlog is how many acknowledged records were not yet read at the period's end.
	Backlog int64 `json:"backlog"`
	// Target is the total rate set for the next period, in records/s.
	Target float64 `json:"target"`
}

// Stats summarizes one side (publish or end-to-end) of a run.
type Stats struct {
	// Records counted in the measured period.
	Records uint64 `json:"records"`
	// Bytes of record values counted.
	Bytes uint64 `json:"bytes"`
	// Errors are failed produces (publish) or fetch errors and undecodable records (e2e).
	Errors uint64 `json:"errors"`
	// RecordsPerSec is Records over the measured duration.
	RecordsPerSec float64 `json:"recordsPerSec"`
	// MBPerSec is Bytes over the measured duration, in 10^6 bytes per second.
	MBPerSec float64 `json:"mbPerSec"`
	// Latency summarizes the latency histogram.
	Latency Latency `json:"latency"`
}

// TxnStats summarizes the transactions of a transactional run.
type TxnStats struct {
	// Committed counts the transactions committed whose first record's intended send time
	// falls in the measured period.
	Committed uint64 `json:"committed"`
	// Aborted counts the transactions of the warmup and measured period that failed (a record
	// not acknowledged, or the commit refused) and were aborted; their records count as
	// publish errors.
	Aborted uint64 `json:"aborted"`
	// CommitsPerSec is Committed over the measured duration.
	CommitsPerSec float64 `json:"commitsPerSec"`
	// Commit is the latency of committing: the EndTransaction round trip, which starts once
	// every record of the transaction is acknowledged.
	Commit Latency `json:"commitLatency"`
}

// ProbeStats summarizes the probe of a run: a Metadata request for no topics, sent by a client
// of its own at a fixed interval through the measured period. It costs a broker next to nothing
// to answer, so its round trip is the floor under every request's latency in that run: what
// the machine (the client's and the broker's scheduling on shared cores, loopback) adds to any
// request under the workload's load. A commit or produce latency close to it has little left
// that a broker could take off.
type ProbeStats struct {
	// Interval is the time between probe sends.
	Interval Duration `json:"interval"`
	// Requests counts the probes answered whose send fell in the measured period.
	Requests uint64 `json:"requests"`
	// Errors counts probes that failed.
	Errors uint64 `json:"errors"`
	// Latency summarizes the round trips.
	Latency Latency `json:"latency"`
}

// NewTxnStats builds TxnStats from the commit latency histogram over a measured duration.
func NewTxnStats(commits *Histogram, aborted uint64, d time.Duration) TxnStats {
	s := TxnStats{Committed: commits.Count(), Aborted: aborted, Commit: Summarize(commits)}
	if secs := d.Seconds(); secs > 0 {
		s.CommitsPerSec = math.Round(float64(s.Committed)/secs*10) / 10
	}
	return s
}

// Latency holds percentiles of a latency histogram in milliseconds, plus a
// percentile curve for plotting.
type Latency struct {
	// MinMs, MeanMs and MaxMs are exact; the percentiles are within 1 %.
	MinMs   float64 `json:"minMs"`
	MeanMs  float64 `json:"meanMs"`
	P50Ms   float64 `json:"p50Ms"`
	P90Ms   float64 `json:"p90Ms"`
	P99Ms   float64 `json:"p99Ms"`
	P999Ms  float64 `json:"p99.9Ms"`
	P9999Ms float64 `json:"p99.99Ms"`
	MaxMs   float64 `json:"maxMs"`
	// Curve samples the histogram at CurvePercentiles, for charts.
	Curve []Point `json:"curve"`
	// Overflow counts values above HistogramMax, recorded as HistogramMax.
	Overflow uint64 `json:"overflow,omitempty"`
}

// Point is one point of a percentile curve: the latency at a percentile.
type Point struct {
	// Percentile is 0..100.
	Percentile float64 `json:"p"`
	// Ms is the latency at Percentile in milliseconds.
	Ms float64 `json:"ms"`
}

// BrokerUsage is the broker's resource use during the measured period. Every
// field is optional: ringbench fills them with --broker-pid, or a caller that
// knows them (a script, a container runtime) may.
type BrokerUsage struct {
	// PID of the sampled process, the first one when there are several.
	PID int `json:"pid,omitempty"`
	// PIDs are the sampled processes when there are several (a cluster's
	// nodes); the other fields are sums over them.
	PIDs []int `json:"pids,omitempty"`
	// PeakRSSBytes is the highest resident set size seen. It counts mapped
	// file pages, so a broker that serves reads from mmap'd segments shows
	// page cache here that a broker reading with read(2) does not.
	PeakRSSBytes *uint64 `json:"peakRssBytes,omitempty"`
	// PeakAnonRSSBytes is the highest anonymous RSS seen (heap, stacks,
	// buffers: RssAnon), comparable across brokers that read files differently.
	PeakAnonRSSBytes *uint64 `json:"peakAnonRssBytes,omitempty"`
	// CPUSeconds is user plus system CPU time used.
	CPUSeconds *float64 `json:"cpuSeconds,omitempty"`
	// CPUPercent is CPUSeconds over the measured duration, in percent of one core.
	CPUPercent *float64 `json:"cpuPercent,omitempty"`
}

// curveDecades is how many nines the percentile curve reaches (99.9999 %).
const curveDecades = 6

// CurvePercentiles returns the percentiles sampled into Latency.Curve: 0 and
// 10..90 %, then ten points per decade of 1/(1-p) up to 99.9999 %, then 100.
// They are evenly spaced on the x axis of an HdrHistogram-style plot.
func CurvePercentiles() []float64 {
	ps := []float64{0}
	for i := 1; i < 10; i++ {
		ps = append(ps, float64(i)*10)
	}
	for k := 11; k <= curveDecades*10; k++ {
		p := 100 * (1 - math.Pow(10, -float64(k)/10))
		ps = append(ps, math.Round(p*1e6)/1e6)
	}
	return append(ps, 100)
}

func ms(d time.Duration) float64 {
	return math.Round(float64(d)/1e3) / 1e3 // microsecond resolution, in ms
}

// Summarize turns a histogram into a Latency. The curve stops at the first
// percentile whose rank needs more samples than were taken, ending at the max.
func Summarize(h *Histogram) Latency {
	l := Latency{
		MinMs:    ms(h.Min()),
		MeanMs:   ms(h.Mean()),
		P50Ms:    ms(h.Percentile(50)),
		P90Ms:    ms(h.Percentile(90)),
		P99Ms:    ms(h.Percentile(99)),
		P999Ms:   ms(h.Percentile(99.9)),
		P9999Ms:  ms(h.Percentile(99.99)),
		MaxMs:    ms(h.Max()),
		Overflow: h.Saturated(),
	}
	if h.Count() == 0 {
		return l
	}
	n := float64(h.Count())
	for _, p := range CurvePercentiles() {
		if p < 100 && (1-p/100)*n < 1 {
			break
		}
		l.Curve = append(l.Curve, Point{Percentile: p, Ms: ms(h.Percentile(p))})
	}
	if last := l.Curve[len(l.Curve)-1]; last.Percentile != 100 {
		l.Curve = append(l.Curve, Point{Percentile: 100, Ms: l.MaxMs})
	}
	return l
}

// NewStats builds Stats from counts and a latency histogram over a measured duration.
func NewStats(h *Histogram, bytes, errors uint64, d time.Duration) Stats {
	s := Stats{Records: h.Count(), Bytes: bytes, Errors: errors, Latency: Summarize(h)}
	if secs := d.Seconds(); secs > 0 {
		s.RecordsPerSec = math.Round(float64(s.Records)/secs*10) / 10
		s.MBPerSec = math.Round(float64(bytes)/secs/1e6*1000) / 1000
	}
	return s
}

// WriteJSON writes r, indented, to path.
func (r *Result) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result %s: %w", r.Label, err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

// ReadResult reads a results file written by WriteJSON.
func ReadResult(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	r, err := DecodeResult(data)
	if err != nil {
		return nil, fmt.Errorf("result %s: %w", path, err)
	}
	return r, nil
}

// DecodeResult parses results JSON, rejecting unknown fields, other schema
// versions and values no run could produce.
func DecodeResult(data []byte) (*Result, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Result
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("decode result: %w", err)
	}
	if r.Schema != ResultSchema {
		return nil, fmt.Errorf("decode result: schema=%d; want %d", r.Schema, ResultSchema)
	}
	if r.Duration <= 0 {
		return nil, fmt.Errorf("decode result: measured=%v; want > 0", time.Duration(r.Duration))
	}
	curves := [][]Point{r.Publish.Latency.Curve}
	if r.E2E != nil {
		curves = append(curves, r.E2E.Latency.Curve)
	}
	if r.Transactions != nil {
		curves = append(curves, r.Transactions.Commit.Curve)
	}
	for _, curve := range curves {
		if err := checkCurve(curve); err != nil {
			return nil, fmt.Errorf("decode result: %w", err)
		}
	}
	return &r, nil
}

// checkCurve refuses a percentile curve no histogram could give.
func checkCurve(curve []Point) error {
	for i, p := range curve {
		if math.IsNaN(p.Percentile) || p.Percentile < 0 || p.Percentile > 100 || math.IsNaN(p.Ms) || p.Ms < 0 {
			return fmt.Errorf("curve point %d = (p=%v, ms=%v) out of range", i, p.Percentile, p.Ms)
		}
		if i > 0 && p.Percentile <= curve[i-1].Percentile {
			return fmt.Errorf("curve point %d percentile %v not above %v", i, p.Percentile, curve[i-1].Percentile)
		}
	}
	return nil
}
