package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options configure Run.
type Options struct {
	// Bootstrap lists seed brokers, host:port.
	Bootstrap []string
	// Workload is what to run; validated by Run.
	Workload Workload
	// Label names the system under test in the result.
	Label string
	// TopicPrefix starts the names of the topics the run creates; default "ringbench".
	TopicPrefix string
	// KeepTopics leaves the run's topics in place afterwards.
	KeepTopics bool
	// SetupTimeout bounds topic creation and leader election; default 30s.
	SetupTimeout time.Duration
	// DrainTimeout bounds how long after the measured period the run waits
	// for outstanding acknowledgements and for consumers to catch up; default 30s.
	DrainTimeout time.Duration
	// Progress receives progress lines; nil prints none.
	Progress io.Writer
	// Live rewrites a single progress line in place (for a terminal) instead
	// of printing one line per ProgressInterval.
	Live bool
	// ProgressInterval is the time between progress lines; default 1s.
	ProgressInterval time.Duration
	// BrokerPIDs are local broker processes (one, or a cluster's nodes on this
	// machine) whose CPU time and peak RSS over the measured period, summed
	// over them, go into the result.
	BrokerPIDs []int
	// ProbeInterval is how often the run times a request round trip of its own (Probe in the
	// result); 0 sends none.
	ProbeInterval time.Duration
	// Unthrottled makes a workload of producerRate 0 produce as fast as the clients can,
	// whether or not its consumers keep up, instead of searching for the highest rate they
	// sustain (RateController): the producers' ceiling.
	Unthrottled bool
	// Logger receives setup and teardown events; nil discards them.
	Logger *slog.Logger
}

// Run creates fresh topics, runs the workload's producers and consumers
// against the cluster at opts.Bootstrap through franz-go's kgo, and returns
// the measured result. Records whose intended send time falls in the warmup
// are not counted. The context cancels the run; a cancelled run returns an
// error and no result.
func Run(ctx context.Context, opts Options) (*Result, error) {
	r, err := newRunner(opts)
	if err != nil {
		return nil, err
	}
	return r.run(ctx)
}

// phase is what a run is doing, for progress lines.
type phase int32

const (
	phaseSetup phase = iota
	phaseWarmup
	phaseMeasure
	phaseDrain
)

// String names the phase in progress lines.
func (p phase) String() string {
	return [...]string{"setup", "warmup", "run", "drain"}[p]
}

// side holds the measurements of publish or of end-to-end latency.
type side struct {
	mu sync.Mutex
	// hist[0] is the warmup, hist[1] the measured period.
	hist [2]Histogram

	records atomic.Uint64 // all successes, any phase, for progress rates
	bytes   atomic.Uint64 // value bytes of the measured period
	errors  atomic.Uint64 // errors of the warmup and measured period
}

func (s *side) record(measured bool, d time.Duration, size int) {
	i := 0
	if measured {
		i = 1
		s.bytes.Add(uint64(size))
	}
	s.mu.Lock()
	s.hist[i].Record(d)
	s.mu.Unlock()
	s.records.Add(1)
}

// batch collects the latencies of one fetch so a consumer takes the lock
// once per poll rather than once per record.
type batch struct {
	lat   [2][]time.Duration
	bytes uint64
}

func (b *batch) add(measured bool, d time.Duration, size int) {
	i := 0
	if measured {
		i = 1
		b.bytes += uint64(size)
	}
	b.lat[i] = append(b.lat[i], d)
}

// recordBatch adds b to s and empties b for reuse.
func (s *side) recordBatch(b *batch) {
	n := len(b.lat[0]) + len(b.lat[1])
	if n == 0 {
		return
	}
	s.mu.Lock()
	for i := range b.lat {
		for _, d := range b.lat[i] {
			s.hist[i].Record(d)
		}
	}
	s.mu.Unlock()
	s.bytes.Add(b.bytes)
	s.records.Add(uint64(n))
	b.lat[0], b.lat[1], b.bytes = b.lat[0][:0], b.lat[1][:0], 0
}

// snapshot copies one phase's histogram.
func (s *side) snapshot(measured bool) Histogram {
	i := 0
	if measured {
		i = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hist[i]
}

type runner struct {
	opts   Options
	w      Workload
	log    *slog.Logger
	topics []string

	payload []byte
	// start, measureStart and end bound the schedule: warmup is
	// [start, measureStart), the measured period [measureStart, end).
	start, measureStart, end time.Time

	phase    atomic.Int32
	pub, e2e side
	// txn holds the commit latencies of a transactional workload; its errors count the
	// aborted transactions.
	txn side
	// probe holds the round trips of the probe requests (probe.go); its errors count the
	// failed ones.
	probe side
	// search, when the run looks for the highest rate its consumers sustain, sets target (the
	// float64 bits of the total rate in records/s) once a period; a producer re-paces when it
	// sees a target other than the one it paces to. searched lists the periods.
	search   *RateController
	target   atomic.Uint64
	searched []RateStep

	foreign  atomic.Uint64 // consumed records without a plausible stamp
	unsent   atomic.Uint64
	firstErr atomic.Pointer[string]
	// sends recycles pendingRecords, so the steady state of a run allocates no record and
	// no value per send (keys, where the workload has them, are still allocated).
	sends sync.Pool
}

// pendingRecord is one record between Produce and its promise. It is the record's Context
// (wrapping the run's abort context, which fails the record when the drain time is up), so
// the promise finds the intended send time in memory it touches anyway rather than by
// reading the stamp back from a value buffer that went cold while the record was queued.
// The context is set once, when the pendingRecord is new, and never cleared: kgo may still
// ask a record's context for Done after its promise ran (the goroutine that waits for a new
// topic's partitions holds the first record's), so it must not change under kgo.
type pendingRecord struct {
	context.Context
	rec      kgo.Record
	value    []byte
	intended time.Time
}

func newRunner(opts Options) (*runner, error) {
	if len(opts.Bootstrap) == 0 {
		return nil, errors.New("run: no bootstrap brokers")
	}
	if err := opts.Workload.Validate(); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if opts.TopicPrefix == "" {
		opts.TopicPrefix = "ringbench"
	}
	if opts.SetupTimeout <= 0 {
		opts.SetupTimeout = 30 * time.Second
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 30 * time.Second
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := opts.Workload
	payload, err := w.Payload(mrand.Uint64())
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	var id [3]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("run: topic id: %w", err)
	}
	r := &runner{opts: opts, w: w, log: log, payload: payload}
	if w.ProducerRate == 0 && w.ConsumerPerSubscription > 0 && w.TransactionSize == 0 && !opts.Unthrottled {
		r.search = NewRateController()
		r.target.Store(math.Float64bits(r.search.Rate()))
	}
	for i := range w.Topics {
		r.topics = append(r.topics, fmt.Sprintf("%s-%s-%s-%d", opts.TopicPrefix, w.Name, hex.EncodeToString(id[:]), i))
	}
	r.sends.New = func() any {
		pr := &pendingRecord{value: make([]byte, len(payload))}
		copy(pr.value, payload)
		return pr
	}
	return r, nil
}

func (r *runner) noteErr(what string, err error) {
	s := fmt.Sprintf("%s: %v", what, err)
	r.firstErr.CompareAndSwap(nil, &s)
}

func (r *runner) run(ctx context.Context) (res *Result, err error) {
	w := r.w
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(r.opts.Bootstrap...))
	if err != nil {
		return nil, fmt.Errorf("run: admin client for %v: %w", r.opts.Bootstrap, err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)

	if err := createTopics(ctx, adm, r.topics, w.PartitionsPerTopic, w.ReplicationFactor, r.opts.SetupTimeout); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	r.log.Info("topics ready", "topics", r.topics, "partitions", w.PartitionsPerTopic)
	if !r.opts.KeepTopics {
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.SetupTimeout)
			defer cancel()
			if derr := deleteTopics(dctx, adm, r.topics); derr != nil {
				r.log.Warn("delete topics", "err", derr)
			}
		}()
	}
	offs, err := endOffsets(ctx, adm, r.topics, r.opts.SetupTimeout)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}

	consumers, err := r.newConsumers(offs)
	defer func() {
		for _, c := range consumers {
			c.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	producers, err := r.newProducers(ctx)
	defer func() {
		for _, p := range producers {
			p.cl.Close()
		}
	}()
	if err != nil {
		return nil, err
	}

	r.start = time.Now()
	r.measureStart = r.start.Add(time.Duration(w.WarmupDuration))
	r.end = r.measureStart.Add(time.Duration(w.TestDuration))
	r.phase.Store(int32(phaseWarmup))
	if w.WarmupDuration == 0 {
		r.phase.Store(int32(phaseMeasure))
	}

	// abort ends everything still outstanding DrainTimeout after the measured period.
	abortCtx, abort := context.WithDeadline(ctx, r.end.Add(r.opts.DrainTimeout))
	defer abort()

	monDone := make(chan struct{})
	monResult := make(chan monitored, 1)
	go func() { monResult <- r.monitor(abortCtx, monDone) }()

	consCtx, stopConsumers := context.WithCancel(abortCtx)
	defer stopConsumers()
	var consWG sync.WaitGroup
	for _, c := range consumers {
		consWG.Go(func() { r.consume(consCtx, c) })
	}
	probeCtx, stopProbe := context.WithDeadline(abortCtx, r.end)
	defer stopProbe()
	var probeWG sync.WaitGroup
	if r.opts.ProbeInterval > 0 {
		probeWG.Go(func() { r.runProbe(probeCtx, r.opts.ProbeInterval) })
	}
	if r.search != nil {
		// Stopped with the probe, when the producers are done.
		probeWG.Go(func() { r.searchRate(probeCtx) })
	}

	// Producers stop at the first intended time past the end; sendGrace only
	// stops those still behind schedule, and lets a late timer wake-up finish.
	sendCtx, stopSending := context.WithDeadline(abortCtx, r.end.Add(sendGrace))
	defer stopSending()
	var prodWG sync.WaitGroup
	for _, p := range producers {
		if w.TransactionSize > 0 {
			prodWG.Go(func() { r.produceTxns(sendCtx, abortCtx, p) })
		} else {
			prodWG.Go(func() { r.produce(sendCtx, abortCtx, p) })
		}
	}
	prodWG.Wait()
	stopProbe()
	probeWG.Wait()
	r.phase.Store(int32(phaseDrain))

	for _, p := range producers {
		if err := p.cl.Flush(abortCtx); err != nil {
			r.noteErr("flush", err)
		}
	}
	if len(consumers) > 0 {
		_ = waitFor(abortCtx, r.opts.DrainTimeout, "consumers to catch up", func(context.Context) (bool, error) {
			return r.e2e.snapshotCount() >= r.pub.snapshotCount(), nil
		})
	}
	stopConsumers()
	consWG.Wait()
	close(monDone)
	mon := <-monResult

	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("run %s: %w", w.Name, err)
	}
	return r.result(mon), nil
}

// machineWindow holds the machine's and ringbench's CPU time at the start and the end of the
// measured period.
type machineWindow struct {
	n       int
	at      [2]time.Time
	machine [2]MachineSample
	client  [2]float64
}

// sample takes the next reading from /proc; a failed one is noted and leaves the window
// without usage.
func (m *machineWindow) sample(r *runner, now time.Time) {
	machine, err := ReadMachine()
	var self ProcSample
	if err == nil {
		self, err = ReadProc(os.Getpid())
	}
	if err != nil {
		r.noteErr("machine sample", err)
	}
	m.add(now, machine, self.CPUSeconds, err)
}

// add records a reading taken at now, or the error that took its place. Readings past the
// second, or after a failed one, are ignored.
func (m *machineWindow) add(now time.Time, machine MachineSample, clientSeconds float64, err error) {
	if m.n >= len(m.at) {
		return
	}
	if err != nil {
		m.n = len(m.at) + 1
		return
	}
	m.at[m.n], m.machine[m.n], m.client[m.n] = now, machine, clientSeconds
	m.n++
}

// usage is the window's averages, nil unless both ends were read.
func (m *machineWindow) usage() *MachineUsage {
	if m.n != len(m.at) {
		return nil
	}
	secs := m.at[1].Sub(m.at[0]).Seconds()
	total := m.machine[1].TotalSeconds - m.machine[0].TotalSeconds
	if secs <= 0 || total <= 0 {
		return nil
	}
	// /proc/stat's ticks and the wall clock differ slightly; the machine's own total over the
	// window is what its cores could have been busy for.
	cores := m.machine[1].Cores
	return &MachineUsage{Cores: cores,
		BusyCores:   float64(cores) * (m.machine[1].BusySeconds - m.machine[0].BusySeconds) / total,
		ClientCores: (m.client[1] - m.client[0]) / secs}
}

// snapshotCount is the number of measured records so far.
func (s *side) snapshotCount() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hist[1].Count()
}

func (r *runner) result(mon monitored) *Result {
	d := time.Duration(r.w.TestDuration)
	pubHist := r.pub.snapshot(true)
	res := &Result{
		Schema:    ResultSchema,
		Label:     r.opts.Label,
		Bootstrap: strings.Join(r.opts.Bootstrap, ","),
		Workload:  r.w,
		Start:     r.start.UTC().Truncate(time.Millisecond),
		Warmup:    r.w.WarmupDuration,
		Duration:  r.w.TestDuration,
		Publish:   NewStats(&pubHist, r.pub.bytes.Load(), r.pub.errors.Load(), d),
		Unsent:    r.unsent.Load(),
		Broker:    mon.broker,
		Machine:   mon.machine,
	}
	if r.w.ConsumerPerSubscription > 0 {
		e2eHist := r.e2e.snapshot(true)
		s := NewStats(&e2eHist, r.e2e.bytes.Load(), r.e2e.errors.Load()+r.foreign.Load(), d)
		res.E2E = &s
	}
	if r.w.TransactionSize > 0 {
		commits := r.txn.snapshot(true)
		s := NewTxnStats(&commits, r.txn.errors.Load(), d)
		res.Transactions = &s
	}
	if r.search != nil {
		res.RateSearch = &RateSearch{Period: Duration(ratePeriod), Steps: r.searched}
	}
	if r.opts.ProbeInterval > 0 {
		probes := r.probe.snapshot(true)
		res.Probe = &ProbeStats{Interval: Duration(r.opts.ProbeInterval), Requests: probes.Count(),
			Errors: r.probe.errors.Load(), Latency: Summarize(&probes)}
	}
	if e := r.firstErr.Load(); e != nil {
		r.log.Warn("errors during run", "first", *e, "publishErrors", res.Publish.Errors)
	}
	return res
}

// producer is one producer client and the topic it writes.
type producer struct {
	cl    *kgo.Client
	topic string
	// index among all producers staggers start times across the schedule.
	index int
}

func (r *runner) producerOpts() []kgo.Opt {
	w := r.w
	opts := []kgo.Opt{
		kgo.SeedBrokers(r.opts.Bootstrap...),
		kgo.ProducerLinger(time.Duration(w.LingerMs) * time.Millisecond),
	}
	switch w.Acks {
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5))
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	codec := map[string]kgo.CompressionCodec{
		"none":   kgo.NoCompression(),
		"gzip":   kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(),
		"lz4":    kgo.Lz4Compression(),
		"zstd":   kgo.ZstdCompression(),
	}[w.Compression]
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	if w.BatchSize > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(w.BatchSize)))
	}
	return opts
}

// newProducers builds ProducersPerTopic clients per topic; in a transactional workload each
// has its transactional.id initialized before the run starts.
func (r *runner) newProducers(ctx context.Context) ([]producer, error) {
	var ps []producer
	for _, t := range r.topics {
		for range r.w.ProducersPerTopic {
			opts := append(r.producerOpts(), kgo.DefaultProduceTopic(t))
			if r.w.TransactionSize > 0 {
				opts = append(opts, transactionalOpts(t, len(ps))...)
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				return ps, fmt.Errorf("run: producer client for topic %s: %w", t, err)
			}
			ps = append(ps, producer{cl: cl, topic: t, index: len(ps)})
			if r.w.TransactionSize == 0 {
				continue
			}
			if err := initTransactional(ctx, cl, r.opts.SetupTimeout); err != nil {
				return ps, fmt.Errorf("run: producer %d for topic %s: %w", len(ps)-1, t, err)
			}
		}
	}
	return ps, nil
}

// newConsumers builds ConsumerPerSubscription clients per topic, splitting
// the topic's partitions round-robin among them, each reading from offs.
func (r *runner) newConsumers(offs kadm.ListedOffsets) ([]*kgo.Client, error) {
	var cs []*kgo.Client
	n := r.w.ConsumerPerSubscription
	for _, t := range r.topics {
		for c := range min(n, r.w.PartitionsPerTopic) {
			assign := map[int32]kgo.Offset{}
			for p := c; p < r.w.PartitionsPerTopic; p += n {
				o, ok := offs.Lookup(t, int32(p))
				if !ok {
					return cs, fmt.Errorf("run: no end offset for %s[%d]", t, p)
				}
				assign[int32(p)] = kgo.NewOffset().At(o.Offset)
			}
			opts := []kgo.Opt{
				kgo.SeedBrokers(r.opts.Bootstrap...),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t: assign}),
				kgo.FetchMaxWait(500 * time.Millisecond),
			}
			if r.w.TransactionSize > 0 {
				opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				return cs, fmt.Errorf("run: consumer client for topic %s: %w", t, err)
			}
			cs = append(cs, cl)
		}
	}
	return cs, nil
}

// inWindow reports whether an intended send time is in the measured period.
func (r *runner) inWindow(t time.Time) bool {
	return !t.Before(r.measureStart) && t.Before(r.end)
}

// sendGrace is how long past the measured period a producer that is behind
// schedule may keep sending overdue records before they count as unsent.
const sendGrace = 250 * time.Millisecond

// produce sends on p's schedule until its next intended time is past the
// measured period or sendCtx ends. Records carry abortCtx, which fails whatever is still
// buffered when the drain time is up.
func (r *runner) produce(sendCtx, abortCtx context.Context, p producer) {
	w := r.w
	// Read before the pacer is made from it, so a target set in between is not missed.
	paced := r.target.Load()
	pacer, clock, err := r.pacerFor(p)
	if err != nil {
		r.noteErr("pacer", err)
		return
	}
	defer clock.Close()
	rng := mrand.New(mrand.NewPCG(mrand.Uint64(), uint64(p.index)))
	keyIdx := rng.IntN(RoundRobinKeys)
	promise := func(rec *kgo.Record, err error) { r.onAck(rec, err) }
	var sent uint64
	for {
		if r.search != nil {
			if t := r.target.Load(); t != paced {
				paced = t
				if err := pacer.SetRate(r.producerRate()); err != nil {
					r.noteErr("pacer", err)
					return
				}
			}
		}
		intended, err := pacer.Next(sendCtx)
		if err != nil || !intended.Before(r.end) {
			break
		}
		pr := r.sends.Get().(*pendingRecord)
		if pr.Context == nil {
			pr.Context = abortCtx
		}
		pr.intended = intended
		PutStamp(pr.value, intended)
		// The intended time is the record's creation time too, which spares kgo a clock read.
		pr.rec = kgo.Record{Topic: p.topic, Value: pr.value, Timestamp: intended, Context: pr}
		rec := &pr.rec
		switch w.KeyDistribution {
		case KeyRandomNano:
			rec.Key = strconv.AppendUint(nil, rng.Uint64(), 36)
		case KeyRoundRobin:
			rec.Key = strconv.AppendInt(nil, int64(keyIdx), 10)
			keyIdx = (keyIdx + 1) % RoundRobinKeys
		}
		p.cl.Produce(abortCtx, rec, promise)
		sent++
	}
	if w.ProducerRate > 0 || r.search != nil {
		if due := pacer.Due(r.end); due > sent {
			r.unsent.Add(due - sent)
		}
	}
}

// pacerWake is the least time between a producer's wake-ups: a record is sent at most this
// late after its intended time (which its latency counts from) for an idle producer, and a
// producer at 50,000 records a second wakes 4,000 times a second, not once a record.
const pacerWake = 250 * time.Microsecond

// pacerClock is a Clock holding something to release, as a timerfd.
type pacerClock interface {
	Clock
	io.Closer
}

// pacerFor returns p's share of the workload's schedule, staggered by its index so that the
// producers' records interleave, on a clock of its own that the caller closes.
func (r *runner) pacerFor(p producer) (*Pacer, io.Closer, error) {
	offset := time.Duration(0)
	if total := r.totalRate(); total > 0 {
		offset = time.Duration(float64(p.index) / total * 1e9)
	}
	clock, err := newPacerClock()
	if err != nil {
		return nil, nil, err
	}
	pacer, err := NewPacer(clock, r.start.Add(offset), r.producerRate(), pacerWake)
	if err != nil {
		clock.Close()
		return nil, nil, err
	}
	return pacer, clock, nil
}

// totalRate is the rate over all producers: the workload's, or the search's current target.
func (r *runner) totalRate() float64 {
	if r.search != nil {
		return math.Float64frombits(r.target.Load())
	}
	return r.w.ProducerRate
}

// producerRate is one producer's share of totalRate.
func (r *runner) producerRate() float64 {
	return r.totalRate() / float64(r.w.Topics*r.w.ProducersPerTopic)
}

// ratePeriod is how often the search for the sustainable rate sets a new target.
const ratePeriod = time.Second

// searchRate feeds the rate search once a period until ctx ends. It starts once the
// consumers have read their first records, so their start-up does not count as lag.
func (r *runner) searchRate(ctx context.Context) {
	tick := time.NewTicker(ratePeriod)
	defer tick.Stop()
	var lastAt time.Time
	var lastPub, lastE2E uint64
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			pub, e2e := r.pub.records.Load(), r.e2e.records.Load()
			if e2e == 0 {
				continue
			}
			if !lastAt.IsZero() {
				p := RatePeriod{Length: now.Sub(lastAt), Published: pub - lastPub, Consumed: e2e - lastE2E,
					Backlog: int64(pub) - int64(e2e)}
				next := r.search.Next(p)
				r.target.Store(math.Float64bits(next))
				secs := p.Length.Seconds()
				r.searched = append(r.searched, RateStep{Published: math.Round(float64(p.Published) / secs),
					Consumed: math.Round(float64(p.Consumed) / secs), Backlog: p.Backlog, Target: math.Round(next)})
			}
			lastAt, lastPub, lastE2E = now, pub, e2e
		}
	}
}

// onAck records a produce outcome and recycles the record.
func (r *runner) onAck(rec *kgo.Record, err error) {
	pr := rec.Context.(*pendingRecord)
	// The pacer's times carry the monotonic clock, so Since reads only that.
	latency := time.Since(pr.intended)
	if intended := pr.intended; !intended.Before(r.start) && intended.Before(r.end) {
		if err != nil {
			r.pub.errors.Add(1)
			r.noteErr("produce", err)
		} else {
			r.pub.record(r.inWindow(intended), latency, len(rec.Value))
		}
	}
	pr.rec = kgo.Record{}
	r.sends.Put(pr)
}

// consume polls one consumer client until ctx ends, recording end-to-end
// latency for records whose stamp is in the run's schedule.
func (r *runner) consume(ctx context.Context, cl *kgo.Client) {
	var b batch
	for {
		fetches := cl.PollFetches(ctx)
		now := time.Now()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			r.e2e.errors.Add(1)
			r.noteErr(fmt.Sprintf("fetch %s[%d]", t, p), err)
		})
		fetches.EachRecord(func(rec *kgo.Record) {
			intended, err := ReadStamp(rec.Value)
			if err != nil || intended.Before(r.start) || !intended.Before(r.end) || intended.After(now) {
				r.foreign.Add(1)
				return
			}
			b.add(r.inWindow(intended), now.Sub(intended), len(rec.Value))
		})
		r.e2e.recordBatch(&b)
	}
}

// monitored is what monitor measured: the broker's usage (nil without BrokerPIDs) and the
// machine's (nil if /proc could not be read).
type monitored struct {
	broker  *BrokerUsage
	machine *MachineUsage
}

// monitor advances the phase, prints progress and samples the broker and the machine until
// done is closed, then returns what it measured. CPU is the difference of samples taken when
// the measured period starts and when it ends; the broker's RSS is sampled then and at every
// tick in between.
func (r *runner) monitor(ctx context.Context, done <-chan struct{}) monitored {
	tick := time.NewTicker(min(r.opts.ProgressInterval, time.Second))
	defer tick.Stop()
	startTimer := time.NewTimer(time.Until(r.measureStart))
	defer startTimer.Stop()
	endTimer := time.NewTimer(time.Until(r.end))
	defer endTimer.Stop()
	pr := &progress{r: r, lastAt: r.start}
	var machine machineWindow
	var (
		usage    *BrokerUsage
		first    ProcSample
		firstAt  time.Time
		peakRSS  uint64
		peakAnon uint64
		sampling bool
	)
	sample := func(now time.Time) {
		if len(r.opts.BrokerPIDs) == 0 {
			return
		}
		var s ProcSample
		for _, pid := range r.opts.BrokerPIDs {
			one, err := ReadProc(pid)
			if err != nil {
				r.noteErr("broker sample", err)
				return
			}
			s.CPUSeconds += one.CPUSeconds
			s.RSSBytes += one.RSSBytes
			s.AnonRSSBytes += one.AnonRSSBytes
		}
		if firstAt.IsZero() {
			first, firstAt = s, now
		}
		peakRSS = max(peakRSS, s.RSSBytes)
		peakAnon = max(peakAnon, s.AnonRSSBytes)
		u := BrokerUsage{PID: r.opts.BrokerPIDs[0], PeakRSSBytes: new(peakRSS)}
		if len(r.opts.BrokerPIDs) > 1 {
			u.PIDs = r.opts.BrokerPIDs
		}
		if peakAnon > 0 {
			u.PeakAnonRSSBytes = new(peakAnon)
		}
		if secs := now.Sub(firstAt).Seconds(); secs > 0 {
			u.CPUSeconds = new(s.CPUSeconds - first.CPUSeconds)
			u.CPUPercent = new(100 * *u.CPUSeconds / secs)
		}
		usage = &u
	}
	nextPrint := r.start.Add(r.opts.ProgressInterval)
	for {
		select {
		case <-done:
			pr.finish(r.opts.Progress, r.opts.Live)
			return monitored{broker: usage, machine: machine.usage()}
		case <-ctx.Done():
			pr.finish(r.opts.Progress, r.opts.Live)
			return monitored{broker: usage, machine: machine.usage()}
		case now := <-startTimer.C:
			r.phase.CompareAndSwap(int32(phaseWarmup), int32(phaseMeasure))
			sampling = true
			sample(now)
			machine.sample(r, now)
		case now := <-endTimer.C:
			sample(now)
			machine.sample(r, now)
			sampling = false
		case now := <-tick.C:
			if sampling {
				sample(now)
			}
			if r.opts.Progress != nil && !now.Before(nextPrint) {
				pr.print(r.opts.Progress, r.opts.Live, now, phase(r.phase.Load()))
				nextPrint = now.Add(r.opts.ProgressInterval - r.opts.ProgressInterval/4)
			}
		}
	}
}
