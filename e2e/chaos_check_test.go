package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// finalLog is every partition of one topic read from the start to the high watermark once the
// faults are healed: offset to value, per partition, and where each value was found.
type finalLog struct {
	topic  string
	start  map[int32]int64
	end    map[int32]int64
	values map[int32]map[int64]string
	where  map[string][]location
}

type location struct {
	partition int32
	offset    int64
}

// readAll reads topic's partitions from their start offsets to their high watermarks with a
// fresh client.
func readAll(nodes []*Broker, topic string, partitions int32, timeout time.Duration) (*finalLog, error) {
	adm, err := chaosClient(nodes)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	fl := &finalLog{topic: topic, start: map[int32]int64{}, end: map[int32]int64{}, values: map[int32]map[int64]string{},
		where: map[string][]location{}}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	starts, err := kadm.NewClient(adm).ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	ends.Each(func(o kadm.ListedOffset) { fl.end[o.Partition] = o.Offset })
	starts.Each(func(o kadm.ListedOffset) { fl.start[o.Partition] = o.Offset })
	if len(fl.end) != int(partitions) {
		return nil, fmt.Errorf("%s: end offsets of %d partitions, want %d", topic, len(fl.end), partitions)
	}
	offs := map[int32]kgo.Offset{}
	remaining := 0
	for p := range partitions {
		fl.values[p] = map[int64]string{}
		offs[p] = kgo.NewOffset().AtStart()
		if fl.end[p] > fl.start[p] {
			remaining++
		}
	}
	cl, err := chaosClient(nodes, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	last := map[int32]int64{}
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read %s to its end: %d partitions not done after %v (ends %v, read to %v)", topic, remaining, timeout, fl.end, last)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= fl.end[r.Partition] {
				return
			}
			fl.values[r.Partition][r.Offset] = string(r.Value)
			fl.where[string(r.Value)] = append(fl.where[string(r.Value)], location{r.Partition, r.Offset})
			last[r.Partition] = r.Offset
			if r.Offset == fl.end[r.Partition]-1 {
				remaining--
			}
		})
	}
	return fl, nil
}

// verdict is what the checker found in one topic.
type verdict struct {
	topic       string
	acked       int
	failed      int // sends that failed: indeterminate
	sent        int
	records     int // records in the final log
	lost        int // acked values not in the final log
	misplaced   int // acked values in the log, but not at the acknowledged offset
	duplicated  int // values stored more than once
	reordered   int // a producer's records out of its send order within a partition
	holes       int // offsets missing below the high watermark
	lostReads   int // records a consumer saw that the final log does not hold at that offset
	backwards   int // consumer positions moving back without a reset
	dataLoss    int // consumer ErrDataLoss reports
	maxGap      map[int32]time.Duration
	examples    []string
	seenChecked int
}

func (v *verdict) fail(format string, args ...any) {
	if len(v.examples) < 20 {
		v.examples = append(v.examples, fmt.Sprintf(format, args...))
	}
}

func (v *verdict) bad() bool {
	return v.lost+v.misplaced+v.duplicated+v.reordered+v.holes+v.lostReads+v.backwards+v.dataLoss > 0
}

// check compares the final log of a topic with the history.
func check(h *history, fl *finalLog, partitions int32) *verdict {
	v := &verdict{topic: fl.topic, maxGap: map[int32]time.Duration{}}
	h.mu.Lock()
	acks := slices.Clone(h.acks[fl.topic])
	v.failed, v.sent = h.failed[fl.topic], h.sentByTop[fl.topic]
	streams := slices.Clone(h.streams)
	start, stop := h.start, h.stop
	h.mu.Unlock()
	v.acked = len(acks)

	// The log: contiguous offsets, each value once.
	for p := range partitions {
		for o := fl.start[p]; o < fl.end[p]; o++ {
			if _, ok := fl.values[p][o]; !ok {
				v.holes++
				v.fail("%s-%d: offset %d missing below the high watermark %d", fl.topic, p, o, fl.end[p])
			}
		}
		v.records += len(fl.values[p])
	}
	for val, locs := range fl.where {
		if len(locs) > 1 {
			v.duplicated += len(locs) - 1
			v.fail("%s: value %q stored %d times at %v", fl.topic, val, len(locs), locs)
		}
	}

	// Every ack: its value at its offset.
	for _, a := range acks {
		got, ok := fl.values[a.partition][a.offset]
		switch {
		case ok && got == a.value:
		case len(fl.where[a.value]) == 0:
			v.lost++
			v.fail("%s-%d: acked %q at offset %d (acked %s) is lost; offset %d holds %q", fl.topic, a.partition, a.value, a.offset,
				a.at.Format("15:04:05.000"), a.offset, got)
		default:
			v.misplaced++
			v.fail("%s-%d: acked %q at offset %d (acked %s) is at %v instead; offset %d holds %q", fl.topic, a.partition, a.value, a.offset,
				a.at.Format("15:04:05.000"), fl.where[a.value], a.offset, got)
		}
	}

	// Order: per producer and partition, acked offsets rise with the sequence, and in the
	// log every record of a producer (acked or not) follows its predecessors.
	type pp struct {
		producer  string
		partition int32
	}
	byPP := map[pp][]ack{}
	for _, a := range acks {
		byPP[pp{a.producer, a.partition}] = append(byPP[pp{a.producer, a.partition}], a)
	}
	for k, as := range byPP {
		sort.Slice(as, func(i, j int) bool { return as[i].seq < as[j].seq })
		for i := 1; i < len(as); i++ {
			if as[i].offset <= as[i-1].offset {
				v.reordered++
				v.fail("%s-%d: producer %s acked seq %d at offset %d but the earlier seq %d at %d", fl.topic, k.partition, k.producer,
					as[i].seq, as[i].offset, as[i-1].seq, as[i-1].offset)
			}
		}
	}
	for p := range partitions {
		lastSeq := map[string]int64{}
		for o := fl.start[p]; o < fl.end[p]; o++ {
			val, ok := fl.values[p][o]
			if !ok {
				continue
			}
			prod := "java"
			if i := strings.LastIndexByte(val, '-'); i >= 0 {
				prod = val[:i]
			}
			seq := seqOf(val)
			if last, ok := lastSeq[prod]; ok && seq <= last {
				v.reordered++
				v.fail("%s-%d: offset %d holds %q after the same producer's seq %d", fl.topic, p, o, val, last)
			}
			lastSeq[prod] = seq
		}
	}

	// Reads: what a consumer saw is in the final log at the offset it saw it.
	for _, cs := range streams {
		cs.mu.Lock()
		for _, s := range cs.recs {
			if s.topic != fl.topic {
				continue
			}
			v.seenChecked++
			if got, ok := fl.values[s.partition][s.offset]; !ok || got != s.value {
				v.lostReads++
				v.fail("%s-%d: consumer %s read %q at offset %d; the final log holds %q there (present %v)", fl.topic, s.partition, cs.id,
					s.value, s.offset, got, ok)
			}
		}
		for _, b := range cs.backwards {
			if strings.Contains(b, " "+fl.topic+"-") {
				v.backwards++
				v.fail("%s", b)
			}
		}
		for _, d := range cs.dataLoss {
			if strings.Contains(d, " "+fl.topic+"-") {
				v.dataLoss++
				v.fail("%s", d)
			}
		}
		cs.mu.Unlock()
	}

	// Availability: the longest stretch with no ack per partition while producers ran.
	times := map[int32][]time.Time{}
	for _, a := range acks {
		times[a.partition] = append(times[a.partition], a.at)
	}
	for p := range partitions {
		ts := times[p]
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		prev := start
		for _, at := range append(ts, stop) {
			if at.After(stop) {
				at = stop
			}
			if g := at.Sub(prev); g > v.maxGap[p] {
				v.maxGap[p] = g
			}
			if at.After(prev) {
				prev = at
			}
		}
	}
	return v
}

// figures is the report of a run: faults by kind and role, then one row per topic.
func figures(seed uint64, mode string, elapsed time.Duration, nm *nemesis, vs []*verdict) string {
	var b strings.Builder
	kinds, roles := nm.byKind()
	fmt.Fprintf(&b, "chaos figures: seed %d, broker %s, network %s, %d faults in %v\n", seed, brokerKind(), mode, len(nm.log),
		elapsed.Round(time.Second))
	fmt.Fprintf(&b, "  faults by kind: %s\n", countList(kinds))
	fmt.Fprintf(&b, "  faults by role: %s\n", countList(roles))
	fmt.Fprintf(&b, "  %-12s %8s %8s %8s %8s %5s %9s %5s %9s %5s %9s %9s %9s %8s\n", "topic", "sent", "acked", "failed", "records",
		"lost", "misplaced", "dup", "reordered", "holes", "lostreads", "backwards", "dataloss", "reads")
	for _, v := range vs {
		fmt.Fprintf(&b, "  %-12s %8d %8d %8d %8d %5d %9d %5d %9d %5d %9d %9d %9d %8d\n", v.topic, v.sent, v.acked, v.failed, v.records,
			v.lost, v.misplaced, v.duplicated, v.reordered, v.holes, v.lostReads, v.backwards, v.dataLoss, v.seenChecked)
	}
	for _, v := range vs {
		var ps []string
		for p := range int32(len(v.maxGap)) {
			ps = append(ps, fmt.Sprintf("%d:%.1fs", p, v.maxGap[p].Seconds()))
		}
		fmt.Fprintf(&b, "  max unavailability %s (partition:longest gap without an ack): %s\n", v.topic, strings.Join(ps, " "))
	}
	return b.String()
}

func countList(m map[string]int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var out []string
	for _, k := range ks {
		out = append(out, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(out, " ")
}
