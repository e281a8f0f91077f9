package broker

// Produce (key 0), versions 3-13, advertised from 0.
//
// Versions 0-2 are advertised, as Apache Kafka 4.x does (KAFKA-18659: older librdkafka turns
// compression off unless the broker lists Produce v0), but a v0-2 request closes the
// connection. Each partition's records must be exactly one valid record batch of magic 2
// (length, CRC32C, counts; wire.ValidateProduce); the batch is appended as received after its
// baseOffset and partitionLeaderEpoch are written in place, so nothing is re-encoded. Idempotent
// producers are checked per producer id, epoch and sequence by the log (duplicates are answered
// with their original offsets). Transactional batches are accepted and tracked by the log (the
// first begins the producer's transaction; a non-transactional batch during one is
// INVALID_TXN_STATE); WriteTxnMarkers ends them. A request with transactional batches but no
// transactional id, or one the principal may not WRITE, fails every partition with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka's; a topic the principal may not WRITE fails
// its partitions with TOPIC_AUTHORIZATION_FAILED (after UNKNOWN_TOPIC_ID for an unknown id,
// before every other check, as KafkaApis authorizes before it asks the replica manager).
// A transactional batch that would begin its producer's transaction here is first verified with
// the transaction coordinator (KIP-890, txnverify.go). acks=0 gets no response, and the connection is closed when any
// partition failed, as Kafka does; acks=1 answers after the append, acks=-1 once the high watermark
// passes the batch (at once when the leader is the only in-sync replica; NOT_ENOUGH_REPLICAS
// below min.insync.replicas). In group-commit mode (topic config flush.group.commit)
// acks=1 and acks=-1 answer only once a shared fsync covers the appended batches; the handler
// returns at once and the flusher goroutine sends the response (KAFKA_STORAGE_ERROR for a
// partition whose fsync failed); acks=0 starts the fsync without waiting. A partition whose log
// dir is offline is KAFKA_STORAGE_ERROR, and an append that fails in the file system takes its
// dir offline (logdirs.go). v13 names topics by id. Runs on a handler worker, or on the
// io_uring thread that read it (io.inline.requests) as long as each append is only a write to
// the page cache (log.TryAppend), handing the rest to a worker from the first that is not
// (produceRun). The record bytes are the request frame itself, stamped in place and written
// from there, unless the topic's compression.type asks for another codec than the batch's:
// then the batch is rewritten in that codec first (recompress.go).

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
	"ringbroker/internal/recordbatch"
	"ringbroker/internal/timingwheel"
	rlog "ringbroker/log"
	"ringbroker/wire"
)

var produceAPI = &api{key: kmsg.Produce, minVersion: 3, advertiseFromZero: true, maxVersion: 13,
	decode: decodeProduce, handle: handleProduce, inline: true}

// decodeProduce decodes into the request rc keeps, reusing its slices.
func decodeProduce(rc *reqCtx, body []byte) (kmsg.Request, error) {
	if err := wire.DecodeProduce(&rc.produce, body, rc.hdr.APIVersion); err != nil {
		return nil, err
	}
	return &rc.produce, nil
}

func handleProduce(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.ProduceRequest)
	if rc.onLoop && req.TransactionID != nil {
		// Verifying a transaction's partitions waits for its coordinator.
		rc.handOff(func() { handleProduce(b, rc, req) })
		return
	}
	pr := &rc.produceRun
	*pr = produceRun{b: b, rc: rc, req: req, resp: &rc.produceResp, waits: pr.waits[:0]}
	// The response is built in the one rc keeps, over the slices of its last use.
	topics := pr.resp.Topics[:0]
	*pr.resp = kmsg.NewProduceResponse()
	pr.resp.Topics = topics
	pr.tbl = b.parts.Load()
	pr.im = b.meta.Image()
	pr.validAcks = req.Acks == 0 || req.Acks == 1 || req.Acks == -1
	z := rc.authorizer()
	// As Kafka's KafkaApis: transactional records need a transactional id the principal may
	// WRITE, else every partition fails; each topic needs WRITE.
	pr.txnRefused = (req.TransactionID == nil || z.on()) && hasTransactionalRecords(req) &&
		(req.TransactionID == nil || !z.may(acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID))
	pr.writable = z.topicChecks(acl.OpWrite)
	if !pr.txnRefused {
		pr.unverified = b.verifyTxnPartitions(req, pr.im, pr.tbl, &pr.writable)
	}
	pr.now = time.Now()
	pr.leased = b.leaseHeld(pr.now)
	if pr.appendAll() {
		pr.finish()
	}
}

// produceRun is one Produce request under way: what is worked out once per request, and the
// topic and partition it has got to, so that a request begun on the event loop can go on
// from the partition whose append would block there, on a handler worker. A reqCtx keeps
// one, with the memory of its last use.
type produceRun struct {
	b    *Broker
	rc   *reqCtx
	req  *kmsg.ProduceRequest
	resp *kmsg.ProduceResponse

	tbl                                   *partitionTable
	im                                    *meta.Image
	validAcks, txnRefused, leased, anyErr bool
	writable                              topicNames
	unverified                            map[*kmsg.ProduceRequestTopicPartition]*kerr.Error
	now                                   time.Time
	waits                                 []produceWait

	// ti and pi index the topic and partition to append next; topic, denied and limits are
	// the topic's, set when its first partition is reached.
	ti, pi int
	topic  *meta.Topic
	denied bool
	limits produceLimits
}

// appendAll appends (or fails) the partitions from the current one on, filling in their
// response. It reports false when it handed the rest of the request to a worker: on the event
// loop, where an append would block.
func (pr *produceRun) appendAll() bool {
	req, resp := pr.req, pr.resp
	for ; pr.ti < len(req.Topics); pr.ti, pr.pi = pr.ti+1, 0 {
		rt := &req.Topics[pr.ti]
		if pr.pi == 0 {
			pr.beginTopic(rt)
		}
		st := &resp.Topics[pr.ti]
		for ; pr.pi < len(rt.Partitions); pr.pi++ {
			rp := &rt.Partitions[pr.pi]
			st.Partitions = slices.Grow(st.Partitions, 1)[:pr.pi+1]
			sp := &st.Partitions[pr.pi]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			code, msg, blocked := pr.appendPartition(rp, sp)
			if blocked {
				pr.rc.handOff(pr.resume)
				return false
			}
			if code != nil {
				pr.anyErr = true
				sp.ErrorCode = code.Code
				if msg != "" && req.Version >= 8 {
					sp.ErrorMessage = kmsg.StringPtr(msg)
				}
			}
		}
	}
	return true
}

// resume goes on with the request on a handler worker.
func (pr *produceRun) resume() {
	if pr.appendAll() {
		pr.finish()
	}
}

// beginTopic starts the response of topic rt and looks up what its partitions share.
func (pr *produceRun) beginTopic(rt *kmsg.ProduceRequestTopic) {
	resp := pr.resp
	// Within capacity the grown element keeps the memory of its last use: its partitions.
	resp.Topics = slices.Grow(resp.Topics, 1)[:pr.ti+1]
	st := &resp.Topics[pr.ti]
	parts := st.Partitions[:0]
	*st = kmsg.NewProduceResponseTopic()
	st.Topic = rt.Topic
	st.TopicID = rt.TopicID
	st.Partitions = parts
	if pr.req.Version >= 13 {
		pr.topic = pr.im.TopicsByID[meta.UUID(rt.TopicID)]
	} else {
		pr.topic = pr.im.Topics[rt.Topic]
	}
	name := rt.Topic
	if pr.topic != nil {
		name = pr.topic.Name
	}
	pr.denied = (pr.topic != nil || pr.req.Version < 13) && !pr.writable.may(name)
	pr.limits = produceLimits{}
	if pr.topic != nil && !pr.denied {
		pr.limits = pr.b.produceLimitsOf(pr.topic)
	}
}

// appendPartition appends rp's records, or says why not; blocked reports that, on the event
// loop, the append would block and nothing was done.
func (pr *produceRun) appendPartition(rp *kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition) (code *kerr.Error, msg string, blocked bool) {
	b, req, topic := pr.b, pr.req, pr.topic
	switch {
	case pr.txnRefused:
		return kerr.TransactionalIDAuthorizationFailed, "", false
	case topic == nil && req.Version >= 13:
		return kerr.UnknownTopicID, "", false
	case pr.denied:
		return kerr.TopicAuthorizationFailed, "", false
	case !pr.validAcks:
		return kerr.InvalidRequiredAcks, "", false
	case topic == nil:
		return kerr.UnknownTopicOrPartition, "", false
	}
	p := pr.tbl.leaderID(topic.ID, rp.Partition)
	if p == nil {
		switch {
		case pr.tbl.offlineAt(topic.ID, rp.Partition):
			return kerr.KafkaStorageError, "the log dir of this partition is offline", false
		case rp.Partition >= 0 && int(rp.Partition) < len(topic.Partitions):
			return kerr.NotLeaderForPartition, "", false
		}
		return kerr.UnknownTopicOrPartition, "", false
	}
	if !pr.leased {
		return kerr.NotLeaderForPartition, "This broker has not reached the controller for broker.session.timeout.ms and may have been fenced", false
	}
	if st := p.state(); req.Acks == -1 && len(st.isr) < st.minISR {
		return kerr.NotEnoughReplicas, "The size of the current ISR " + strconv.Itoa(len(st.isr)) + " is insufficient to satisfy the min.isr requirement of " + strconv.Itoa(st.minISR), false
	}
	if code := pr.unverified[rp]; code != nil {
		return code, "the transaction coordinator did not verify this partition in the producer's transaction", false
	}
	if p.offline() {
		return kerr.KafkaStorageError, "the log dir of this partition is offline", false
	}
	code, msg, upto, blocked := b.appendToPartition(p, &pr.limits, rp.Records, req.Version, pr.now, sp, pr.rc.onLoop, &pr.rc.cs.woken)
	if code != nil || blocked {
		return code, msg, blocked
	}
	if p.log().GroupCommit() {
		pr.waits = append(pr.waits, produceWait{topic: pr.ti, partition: pr.pi, p: p, upto: upto, fsync: true})
	}
	if req.Acks == -1 && p.highWatermark() < upto {
		pr.waits = append(pr.waits, produceWait{topic: pr.ti, partition: pr.pi, p: p, upto: upto})
	}
	return nil, "", false
}

// finish answers the request once every partition is appended or failed: at once, after the
// waits (acks=all, group commit), or not at all (acks=0).
func (pr *produceRun) finish() {
	b, rc, req, resp, waits := pr.b, pr.rc, pr.req, pr.resp, pr.waits
	if req.Acks == 0 {
		for _, w := range waits {
			if w.fsync {
				w.p.log().SyncAsync(w.upto, b.afterSync(w.p))
			}
		}
		if pr.anyErr {
			rc.closeConn()
			return
		}
		rc.noResponse()
		return
	}
	if len(waits) > 0 {
		// The waits outlive the run, which rc reuses for its next request.
		waits = slices.Clone(waits)
		// The topic names alias the request frame, which lives until the response is encoded.
		fail := func(i int, code *kerr.Error, msg string) {
			sp := &resp.Topics[waits[i].topic].Partitions[waits[i].partition]
			sp.ErrorCode = code.Code
			sp.BaseOffset = -1
			if msg != "" && rc.hdr.APIVersion >= 8 {
				sp.ErrorMessage = kmsg.StringPtr(msg)
			}
		}
		b.respondWhenDone(waits, time.Duration(req.TimeoutMillis)*time.Millisecond, fail, func() { rc.respond(resp) })
		return
	}
	rc.respond(resp)
}

// produceWait is a partition of a Produce (or WriteTxnMarkers) response that waits: for a group
// fsync (fsync), or for the high watermark to pass its batch (acks=all with followers).
type produceWait struct {
	topic, partition int // indexes into a Produce response
	p                *partition
	upto             int64 // the log end offset after the append
	fsync            bool
}

// afterSync is the completion of a group fsync of p: the high watermark may move over the
// fsynced records, and fetches waiting on it look again.
func (b *Broker) afterSync(p *partition) func(error) {
	return func(err error) {
		if err == nil {
			p.afterLeaderAppend(b.cfg.NodeID)
			p.wakeWaiters()
			return
		}
		b.noteStorageError(p.dir.Load(), err)
	}
}

// produceOutcome collects the waits of one response; the last one settled sends it.
type produceOutcome struct {
	waits   []produceWait
	settled []atomic.Bool
	left    atomic.Int32
	mu      sync.Mutex // guards the response's partitions while waits settle concurrently
	timer   atomic.Pointer[timingwheel.Timer]
	b       *Broker
	// fail records the error of waits[i] in the response (under mu); send sends the response.
	fail func(i int, code *kerr.Error, msg string)
	send func()
}

// settle records the outcome of wait i, once: nil, or the error its partition answers.
func (o *produceOutcome) settle(i int, code *kerr.Error, msg string) {
	if o.settled[i].Swap(true) {
		return
	}
	if code != nil {
		o.mu.Lock()
		o.fail(i, code, msg)
		o.mu.Unlock()
	}
	if o.left.Add(-1) == 0 {
		if t := o.timer.Load(); t != nil {
			o.b.purgatory.cancel(t)
		}
		o.send()
	}
}

// respondWhenDone calls send once every wait is settled, fail first for each that failed:
// group fsyncs by their flusher goroutines, high-watermark waits by the fetches that move it,
// by a change of leadership (NOT_LEADER_OR_FOLLOWER) or, after timeout, by the purgatory
// (REQUEST_TIMED_OUT), as Kafka's DelayedProduce.
func (b *Broker) respondWhenDone(waits []produceWait, timeout time.Duration, fail func(int, *kerr.Error, string), send func()) {
	o := &produceOutcome{waits: waits, settled: make([]atomic.Bool, len(waits)), b: b, fail: fail, send: send}
	o.left.Store(int32(len(waits)))
	hwWaits := false
	for _, w := range waits {
		hwWaits = hwWaits || !w.fsync
	}
	if hwWaits {
		o.timer.Store(b.purgatory.after(time.Now().Add(timeout), func() {
			for i, w := range waits {
				if !w.fsync {
					o.settle(i, kerr.RequestTimedOut, "")
				}
			}
		}))
	}
	for i, w := range waits {
		if w.fsync {
			after := b.afterSync(w.p)
			w.p.log().SyncAsync(w.upto, func(err error) {
				after(err)
				switch {
				case errors.Is(err, rlog.ErrTruncated):
					// Leadership moved and the new leader's log replaced these offsets: the
					// client retries at the new leader.
					o.settle(i, kerr.NotLeaderForPartition, "")
					return
				case err != nil:
					o.settle(i, kerr.KafkaStorageError, err.Error())
					return
				}
				o.settle(i, nil, "")
			})
			continue
		}
		if !w.p.waitHW(w.upto, func(code *kerr.Error) { o.settle(i, code, "") }) {
			o.settle(i, nil, "")
		}
	}
}

// produceLimits are the topic configs that Produce checks, parsed once per topic and request
// rather than once per partition.
type produceLimits struct {
	maxBytes      int  // max.message.bytes
	logAppendTime bool // message.timestamp.type=LogAppendTime
	compacted     bool // cleanup.policy includes compact: every record needs a key
	// codec is the codec batches are stored in when recompress is set (compression.type
	// other than producer; recompress.go).
	codec      wire.Codec
	level      int // compression.<codec>.level, or wire.DefaultLevel
	recompress bool
	// beforeMs and afterMs are message.timestamp.before.max.ms and after.max.ms.
	beforeMs, afterMs int64
}

// produceLimitsOf reads topic's Produce limits from its overrides and the broker defaults.
func (b *Broker) produceLimitsOf(topic *meta.Topic) produceLimits {
	l := produceLimits{maxBytes: int(b.live().MessageMaxBytes)}
	if v, ok := topic.Configs["max.message.bytes"]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			l.maxBytes = n
		}
	}
	l.logAppendTime = topic.Configs["message.timestamp.type"] == "LogAppendTime"
	limit := func(name string) int64 {
		v, _ := b.live().effectiveTopicConfig(topic.Configs, name)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 1<<63 - 1
		}
		return n
	}
	l.beforeMs, l.afterMs = limit("message.timestamp.before.max.ms"), limit("message.timestamp.after.max.ms")
	policy, _ := b.live().effectiveTopicConfig(topic.Configs, "cleanup.policy")
	l.compacted = hasListItem(policy, "compact")
	compression, _ := b.live().effectiveTopicConfig(topic.Configs, "compression.type")
	l.codec, l.recompress = storedCodec(compression)
	l.level = wire.DefaultLevel
	if l.recompress && l.codec != wire.CodecNone && l.codec != wire.CodecSnappy {
		v, _ := b.live().effectiveTopicConfig(topic.Configs, "compression."+l.codec.String()+".level")
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			l.level = n
		}
	}
	return l
}

// appendToPartition validates and appends one partition's records and fills sp. upto is the
// offset after the batch: what the high watermark must reach for acks=all.
//
// onLoop (the event loop, where nothing may block) appends only what is a write to the page
// cache: it reports blocked, having changed nothing, where the partition is busy with another
// append, the append would roll, flush or allocate (log.TryAppend), or the batch needs
// recompressing; the fetches its append wakes go to woken, for the loop to run once the
// request is answered (connState.runWoken), instead of to handler workers.
func (b *Broker) appendToPartition(p *partition, limits *produceLimits, records []byte, version int16, now time.Time, sp *kmsg.ProduceResponseTopicPartition, onLoop bool, woken *[]*fetchOp) (code *kerr.Error, msg string, upto int64, blocked bool) {
	_, err := wire.ValidateProduce(records, version, limits.maxBytes)
	if err != nil {
		var be *wire.BatchError
		if errors.As(err, &be) {
			return be.Code, err.Error(), 0, false
		}
		return kerr.CorruptMessage, err.Error(), 0, false
	}
	if limits.compacted {
		if code, msg := b.checkCompactedKeys(p.topic, p.index, records); code != nil {
			return code, msg, 0, false
		}
	}
	batch := wire.Batch(records)
	if limits.recompress && batch.Codec() != limits.codec {
		if onLoop {
			return nil, "", 0, true
		}
		if batch, code, msg = b.recompress(batch, limits.codec, limits.level, limits.maxBytes); code != nil {
			return code, msg, 0, false
		}
		records = batch
	}
	logAppendTime := limits.logAppendTime
	if logAppendTime {
		batch.SetLogAppendTime(now.UnixMilli())
	} else if code, msg := checkTimestamps(limits, batch, now); code != nil {
		return code, msg, 0, false
	}
	var res rlog.AppendResult
	if onLoop {
		if !p.appendMu.TryLock() {
			return nil, "", 0, true
		}
		res, err = p.log().TryAppend(records)
		p.appendMu.Unlock()
		if errors.Is(err, rlog.ErrWouldBlock) {
			return nil, "", 0, true
		}
	} else {
		p.appendMu.Lock()
		res, err = p.log().Append(records)
		p.appendMu.Unlock()
	}
	if err != nil {
		b.noteStorageError(p.dir.Load(), err)
		return appendErrorCode(err), err.Error(), 0, false
	}
	sp.BaseOffset = res.BaseOffset
	sp.LogStartOffset = res.LogStartOffset
	sp.LogAppendTime = -1
	if logAppendTime {
		sp.LogAppendTime = now.UnixMilli()
	}
	if !res.Duplicate {
		p.countIn(len(records), res.LastOffset-res.BaseOffset+1)
		p.afterLeaderAppend(b.cfg.NodeID)
		if onLoop {
			p.wakeWaitersInto(woken)
		} else {
			p.wakeWaiters()
		}
	}
	return nil, "", res.LastOffset + 1, false
}

// hasTransactionalRecords reports whether a partition of req starts with a transactional
// batch (Kafka's ProduceRequest.hasTransactionalRecords looks at the first batch too).
func hasTransactionalRecords(req *kmsg.ProduceRequest) bool {
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			if b := wire.Batch(req.Topics[i].Partitions[j].Records); len(b) >= recordbatch.HeaderSize && b.IsTransactional() {
				return true
			}
		}
	}
	return false
}

// checkTimestamps applies message.timestamp.before.max.ms and after.max.ms to CreateTime
// batches, as Kafka's LogValidator does.
func checkTimestamps(limits *produceLimits, batch wire.Batch, now time.Time) (*kerr.Error, string) {
	nowMs := now.UnixMilli()
	before, after := limits.beforeMs, limits.afterMs
	first, last := batch.FirstTimestamp(), batch.MaxTimestamp()
	if first >= 0 && nowMs-first > before {
		return kerr.InvalidTimestamp, "timestamp " + strconv.FormatInt(first, 10) + " is older than message.timestamp.before.max.ms allows"
	}
	if last-nowMs > after {
		return kerr.InvalidTimestamp, "timestamp " + strconv.FormatInt(last, 10) + " is further in the future than message.timestamp.after.max.ms allows"
	}
	return nil, ""
}

// appendErrorCode maps a log append error to Kafka's code.
func appendErrorCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, rlog.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber
	case errors.Is(err, rlog.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch
	case errors.Is(err, rlog.ErrInvalidTxnState):
		return kerr.InvalidTxnState
	case errors.Is(err, rlog.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced
	case errors.Is(err, rlog.ErrRecordTooLarge):
		return kerr.MessageTooLarge
	case errors.Is(err, rlog.ErrRecordListTooLarge):
		return kerr.RecordListTooLarge
	case errors.Is(err, rlog.ErrCorruptBatch):
		return kerr.CorruptMessage
	default:
		return kerr.KafkaStorageError
	}
}

// hasListItem reports whether the comma-separated list holds item, as contains(splitList(list),
// item) does, without allocating: Produce asks it for every topic of every request.
func hasListItem(list, item string) bool {
	for list != "" {
		var s string
		s, list, _ = strings.Cut(list, ",")
		if strings.TrimSpace(s) == item {
			return true
		}
	}
	return false
}
