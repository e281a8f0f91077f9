package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"ringbroker/broker/meta"
	"ringbroker/coord"
	"ringbroker/coord/txn"
	"ringbroker/internal/mempool"
	rlog "ringbroker/log"
	"ringbroker/ring"
	"ringbroker/wire"
)

// Broker is one ringbroker node: on a single node both broker and controller.
type Broker struct {
	cfg    Config
	logger *slog.Logger
	// meta is the metadata log: this node's voter (or, broker-only, learner) of the quorum,
	// which on a single node is this node alone.
	meta *meta.RaftStore
	apis *apiTable
	// listeners is the security of each listener by name; interBroker names the one other
	// brokers reach this node on.
	listeners   map[string]*listenerSec
	interBroker string
	// peers opens the connections to other brokers, secured as interBroker is (peerdial.go);
	// nil (plaintext) on a node that has none to connect to.
	peers *peerDialer
	// authz checks requests against the ACLs; nil without authorizer.class.name.
	authz *authzCache
	// clientQuotas are the client quotas and connection limits.
	clientQuotas *clientQuotas
	// logLevels is the process's log level, which broker-logger configs change.
	logLevels logLevels
	// telemetry is the client metrics (KIP-714) clients push (telemetry.go).
	telemetry *telemetry

	// controllerMu serialises controller decisions (validate, then commit) so two CreateTopics
	// cannot both pass validation for the same name.
	controllerMu sync.Mutex
	// autoCreates are the topics Metadata requests asked to create, created in the
	// background (autocreate.go).
	autoCreates autoCreator

	// dyn is the configuration in force with the dynamic broker configs (live, dynconf.go);
	// dynMu serialises its rebuilds.
	dyn   atomic.Pointer[dynamicConfig]
	dynMu sync.Mutex
	// quotas are the replication throttles (quota.go).
	quotas replicationQuotas

	// parts is the current partition table, replaced whole when the image changes.
	parts   atomic.Pointer[partitionTable]
	partsMu sync.Mutex // serialises syncPartitions
	// fetchers copy the partitions this broker follows from their leaders.
	fetchers *fetcherSet

	producerIDs producerIDAllocator
	codecs      *wire.Codecs
	// cleaner compacts the logs of topics whose cleanup.policy includes compact.
	cleaner *rlog.Cleaner
	// writeback keeps each log's page cache to log.cache.window.bytes; nil when that is 0.
	writeback *rlog.Writeback

	// groups is the consumer-group coordinator; groupsLoaded says which __consumer_offsets
	// partitions it has been given to load, with the leader epoch they were loaded under.
	groups       *coord.GroupCoordinator
	groupsLoadMu sync.Mutex
	groupsLoaded map[int32]int32
	// txns is the transaction coordinator; txnsLoaded says which __transaction_state partitions
	// it was given and under which leader epoch (guarded by txnsLoadMu). markerSender carries its
	// markers to other brokers, verifySender Produce's verifications to other coordinators.
	txns         *txn.Coordinator
	txnsLoadMu   sync.Mutex
	txnsLoaded   map[int32]int32
	markerSender peerSender
	verifySender peerSender

	servers []*ring.Server
	// controllerClients serves the Kafka clients of the controller listener; nil on a node
	// without one (controllerlistener.go).
	controllerClients *ring.Adopted
	// fetchAttempts recycles fetch attempts (*fetchAttempt) with their lists and response
	// writer, so a long-poll fetch of many partitions allocates nothing per attempt once warm.
	fetchAttempts sync.Pool
	// reqPool is the request memory pool (queued.max.request.bytes): every request frame is
	// received into a buffer from it and returns there once answered.
	reqPool *mempool.Pool
	// reqCtxs and sendBatches recycle what each request and each write of responses needs.
	reqCtxs     reqCtxPool
	sendBatches sendBatchPool
	// handlers run the requests (num.io.threads); purgatory holds the ones that wait.
	handlers  *handlerPool
	purgatory *purgatory
	// fetchSessions are the incremental fetch sessions (KIP-227) of every connection.
	fetchSessions *fetchSessionCache
	pprofSrv      *http.Server
	metrics       *brokerMetrics
	metricsSrv    *http.Server
	metricsLn     net.Listener

	// dirs are the log dirs (log.dirs) in config order; the first holds the metadata log.
	dirs []*logDir
	// preferredDirs are where AlterReplicaLogDirs asked partitions not held yet to be created;
	// movesMu serialises the starts and cancellations of AlterReplicaLogDirs moves.
	preferredDirs preferredDirs
	movesMu       sync.Mutex
	// replicaDirs records the dir of every replica here, in the first dir (replicadirs.go);
	// dirReports signals the loop that reports replicas in offline dirs (dirfailover.go).
	replicaDirs *replicaDirs
	dirReports  chan struct{}
	// parkedMoves are the partition directory names whose move copy was left at start because
	// their log may be in an offline dir (finishMoves); set once in New.
	parkedMoves map[string]bool

	// The signal of a new image, this process's registration id, and whether a heartbeat is
	// in flight (controller.go).
	imageChanged chan struct{}
	incarnation  meta.UUID
	heartbeating atomic.Bool
	// shuttingDown is set once Shutdown asks the controller for a controlled shutdown, so that
	// every later heartbeat keeps asking.
	shuttingDown atomic.Bool
	// ready is set once this broker registered with a metadata image caught up to its
	// registration: before, its image may be one from before a restart, naming it leader of
	// partitions others lead now, so client connections are closed, as Kafka does not open its
	// listeners to clients before the broker caught up.
	ready atomic.Bool
	// leaseStart is when the last heartbeat (or the registration) that the active controller
	// acknowledged was sent, in Unix nanoseconds (see leaseHeld).
	leaseStart atomic.Int64
	// reporting marks the brokers whose refused connections are being reported to the active
	// controller (guarded by reportMu).
	reportMu  sync.Mutex
	reporting map[int32]bool

	// dirRemover removes deleted partitions' directories in the background (logdelete.go).
	dirRemover *dirRemover

	closing atomic.Bool
	stop    chan struct{}
	bg      sync.WaitGroup
}

// requestPoolRetain is how much returned request memory the pool keeps for reuse: up to
// 64 MiB, less under a smaller queued.max.request.bytes.
func requestPoolRetain(limit int64) int64 {
	const most = 64 << 20
	if limit > 0 {
		return min(limit, most)
	}
	return most
}

// startupState is what the previous run left in a log dir.
type startupState struct {
	clean          bool
	recoveryPoints map[rlog.TopicPartition]int64
	logStarts      map[rlog.TopicPartition]int64 // log-start-offset-checkpoint
	highWatermarks map[rlog.TopicPartition]int64 // replication-offset-checkpoint
}

// highWatermarkFile is Kafka's checkpoint of every partition's high watermark in the log dir.
const highWatermarkFile = "replication-offset-checkpoint"

// Background intervals, as Kafka's log.flush.offset.checkpoint.interval.ms and a flush scheduler
// tick fine enough for small flush.ms settings.
const (
	checkpointInterval = 60 * time.Second
	flushTickInterval  = 100 * time.Millisecond
)

// New opens the metadata log and every partition's log in cfg.LogDirs, recovering what an
// unclean shutdown left, but does not listen yet.
func New(cfg Config, logger *slog.Logger) (*Broker, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if len(cfg.LogDirs) == 0 || len(cfg.Listeners) == 0 {
		return nil, errors.New("config needs log.dirs and listeners")
	}
	if len(cfg.AdvertisedListeners) == 0 {
		cfg.AdvertisedListeners = cfg.Listeners
	}
	if err := cfg.checkAdvertised(); err != nil {
		return nil, err
	}
	for _, key := range cfg.NotActedOn() {
		logger.Warn("config sets a Kafka key ringbroker does not act on; it is kept for DescribeConfigs only", "key", key)
	}
	if err := cfg.checkControllerListenerProtocol(); err != nil {
		return nil, err
	}
	scram := newScramFromImage(&cfg)
	listeners, err := cfg.listenerSecurity(scram)
	if err != nil {
		return nil, err
	}
	interBroker, err := cfg.interBrokerListener()
	if err != nil {
		return nil, err
	}
	var peers *peerDialer
	if cfg.inCluster() && cfg.hasRole("broker") {
		// Only a broker of a cluster connects to other brokers, on their inter-broker listener.
		if peers, err = newPeerDialer(&cfg, interBroker, logger); err != nil {
			return nil, err
		}
	}
	authz, err := newAuthzCache(cfg.Security)
	if err != nil {
		return nil, err
	}
	quotas, err := newClientQuotas(cfg, interBroker)
	if err != nil {
		return nil, err
	}
	b := &Broker{listeners: listeners, interBroker: interBroker, authz: authz, clientQuotas: quotas, cfg: cfg, logger: logger, metrics: newBrokerMetrics(), apis: newAPITable(cfg.MetricsListen != ""),
		codecs: wire.NewCodecs(), groupsLoaded: map[int32]int32{}, txnsLoaded: map[int32]int32{}, reporting: map[int32]bool{},
		cleaner:      rlog.NewCleaner(rlog.CleanerConfig{Logger: logger}),
		reqPool:      mempool.New(max(cfg.QueuedMaxRequestBytes, 0), requestPoolRetain(cfg.QueuedMaxRequestBytes)),
		purgatory:    newPurgatory(),
		dirRemover:   newDirRemover(logger),
		imageChanged: make(chan struct{}, 1), dirReports: make(chan struct{}, 1), incarnation: meta.NewUUID(), quotas: newReplicationQuotas(), telemetry: newTelemetry(cfg.TelemetryMaxBytes, logger)}
	b.metrics.countInline(b.apis)
	imageOf := func() *meta.Image {
		if b.meta == nil {
			return nil
		}
		return b.meta.Image()
	}
	b.peers = peers
	scram.image.Store(&imageOf)
	b.fetchers = newFetcherSet(b)
	b.fetchSessions = newFetchSessionCache(int(cfg.FetchSessionSlots), cfg.FetchSessionEvictionMin)
	b.metrics.watchFetchSessions(b.fetchSessions)
	if cfg.LogCacheWindowBytes > 0 {
		b.writeback = rlog.NewWriteback(cfg.LogCacheWindowBytes, logger)
	}
	if _, err := raiseNoFileLimit(logger); err != nil {
		logger.Warn("open-file limit unchanged", "err", err)
	}
	voters, err := b.setupQuorum()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.LogDirs[0], 0o755); err != nil {
		return nil, fmt.Errorf("create log dir %s: %w", cfg.LogDirs[0], err)
	}
	clusterID, err := ensureMetaProperties(cfg.LogDirs[0], cfg.NodeID, cfg.ClusterID)
	if err != nil {
		return nil, fmt.Errorf("the first log dir holds the metadata log: %w", err)
	}
	var futures []futureLog
	if b.dirs, futures, b.parkedMoves, err = openLogDirs(&cfg, clusterID, logger, b.dirRemover.add); err != nil {
		return nil, err
	}
	if b.replicaDirs, err = loadReplicaDirs(b.dirs[0].path); err != nil {
		return nil, fmt.Errorf("the first log dir holds the metadata log: %w", err)
	}
	ml, err := b.openMetadata(clusterID, voters)
	if err != nil {
		return nil, err
	}
	b.meta = ml
	b.installControllerAPIs()
	b.producerIDs.b = b
	b.markerSender = peerSender{b: b, purpose: "txn-markers"}
	b.verifySender = peerSender{b: b, purpose: "txn-verify"}
	b.stop = make(chan struct{})
	for _, d := range b.dirs {
		if !d.offline() && !d.startup.clean && len(ml.Image().Topics) > 0 {
			logger.Info("no clean-shutdown marker: recovering logs from their recovery points", "dir", d.path)
		}
	}
	b.parts.Store(&partitionTable{byName: map[string][]*partition{}, byID: map[meta.UUID][]*partition{}})
	if err := b.syncPartitions(); err != nil {
		ml.Close()
		return nil, err
	}
	// From here on a crash must be recovered.
	for _, d := range b.dirs {
		d.startup = startupState{}
	}
	b.resumeMoves(futures)
	if b.groups, err = b.newGroupCoordinator(); err != nil {
		b.closeLogs()
		ml.Close()
		return nil, err
	}
	if err := b.loadOffsetsPartitions(); err != nil {
		b.groups.Close()
		b.closeLogs()
		ml.Close()
		return nil, err
	}
	if b.txns, err = b.newTxnCoordinator(); err != nil {
		b.groups.Close()
		b.closeLogs()
		ml.Close()
		return nil, err
	}
	if err := b.loadTxnPartitions(); err != nil {
		b.txns.Close()
		b.groups.Close()
		b.closeLogs()
		ml.Close()
		return nil, err
	}
	for _, d := range b.dirs {
		if d.offline() {
			continue
		}
		if err := rlog.RemoveCleanShutdownMarker(d.path); err != nil {
			b.closeLogs()
			ml.Close()
			return nil, err
		}
	}
	if b.writeback != nil {
		b.writeback.Start()
	}
	b.bg.Add(2)
	go b.backgroundLoop()
	go func() {
		defer b.bg.Done()
		b.dirRemover.run(b.stop)
	}()
	return b, nil
}

// Start opens the listeners and the metrics endpoint, and registers this broker in the metadata
// log with its advertised address.
func (b *Broker) Start() error {
	loops := b.cfg.Rings
	if loops <= 0 {
		loops = runtime.NumCPU()
	}
	b.handlers = newHandlerPool(b.cfg.NumIOThreads, loops, b.cfg.PinCPUs)
	for i, l := range b.cfg.Listeners {
		backend, err := ring.ParseBackend(b.cfg.IO)
		if err != nil {
			return err
		}
		srv, err := ring.Listen(ring.Config{
			Addr:            l.Addr(),
			Backend:         backend,
			Rings:           b.cfg.Rings,
			PinCPUs:         b.cfg.PinCPUs,
			SendZCThreshold: b.cfg.SendZCThreshold,
			Wait:            b.initialWait(),
			TLS:             b.listeners[l.Name].tls,
			Logger:          b.logger,
			SocketBuffers:   b.cfg.socketBuffers(),
		}, &connHandler{b: b, listener: b.listeners[l.Name], apis: b.apis})
		if err != nil {
			b.stopServers(context.Background())
			return fmt.Errorf("listen %s: %w", l, err)
		}
		b.servers = append(b.servers, srv)
		if srv.Backend() == ring.Netpoll {
			// One event loop: its connections' requests may run on any worker.
			b.handlers.flatten()
		}
		if l.Port == 0 {
			// Port 0 picked a port; advertise the one actually bound.
			_, p, _ := net.SplitHostPort(srv.Addr().String())
			port, _ := strconv.Atoi(p)
			b.cfg.Listeners[i].Port = port
			if i < len(b.cfg.AdvertisedListeners) && b.cfg.AdvertisedListeners[i].Port == 0 {
				b.cfg.AdvertisedListeners[i].Port = port
			}
		}
		b.metrics.setBackend(string(srv.Backend()))
		b.logger.Info("listening", "listener", b.cfg.Listeners[i].String(), "io", srv.Backend())
	}
	if err := b.serveControllerClients(); err != nil {
		b.stopServers(context.Background())
		return err
	}
	if b.cfg.hasRole("broker") {
		if err := b.registerSelf(); err != nil {
			b.stopServers(context.Background())
			return err
		}
		// The registration is in the local image, so the image holds everything committed
		// before it: partition state from the caught-up image, then serve clients.
		if err := b.syncPartitions(); err != nil {
			b.stopServers(context.Background())
			return fmt.Errorf("open partitions for the caught-up metadata image: %w", err)
		}
		b.settleDirReport()
	}
	b.startJWKSFetchers()
	b.ready.Store(true)
	b.bg.Add(2)
	go b.controllerLoop()
	go b.dirReportLoop()
	if b.cfg.MetricsListen != "" {
		ln, err := net.Listen("tcp", b.cfg.MetricsListen)
		if err != nil {
			b.stopServers(context.Background())
			return fmt.Errorf("metrics listen %s: %w", b.cfg.MetricsListen, err)
		}
		b.metricsLn = ln
		b.metricsSrv = &http.Server{Handler: b.metrics.handler(b), ReadHeaderTimeout: 5 * time.Second}
		go b.metricsSrv.Serve(ln)
		b.logger.Info("metrics", "addr", ln.Addr().String())
	}
	if b.cfg.PprofListen != "" {
		srv, addr, err := servePprof(b.cfg.PprofListen)
		if err != nil {
			b.stopServers(context.Background())
			return err
		}
		b.pprofSrv = srv
		b.logger.Info("pprof", "addr", addr)
	}
	b.cleaner.Start()
	return nil
}

// Addr is the bound address of the first listener; on a controller-only node, which serves
// no clients, the controller listener's.
func (b *Broker) Addr() net.Addr {
	if len(b.servers) == 0 {
		return b.meta.ListenAddr()
	}
	return b.servers[0].Addr()
}

// ListenerAddr is the address the listener of that name is bound to; nil when there is none.
func (b *Broker) ListenerAddr(name string) net.Addr {
	for i, l := range b.cfg.Listeners {
		if l.Name == name && i < len(b.servers) {
			return b.servers[i].Addr()
		}
	}
	return nil
}

// Backend is the I/O backend the first listener runs on; empty on a controller-only node,
// whose controller listener is plain Go networking.
func (b *Broker) Backend() ring.Backend {
	if len(b.servers) == 0 {
		return ""
	}
	return b.servers[0].Backend()
}

// EventLoopThreads is the number of io_uring event loops over all listeners: each runs on an
// OS thread of its own, which a process sizing its Go scheduler (GOMAXPROCS) counts.
func (b *Broker) EventLoopThreads() int {
	n := 0
	for _, s := range b.servers {
		if s.Backend() == ring.Uring {
			n += len(s.RingStats())
		}
	}
	return n
}

// initialWait is how the io_uring loops block from the start: io.uring.wait, but handoff in
// place of hold until HoldWaits finds the Ps for it.
func (b *Broker) initialWait() ring.WaitMode {
	m, _ := ring.ParseWaitMode(b.cfg.UringWait) // checked when the config was set
	if m == ring.WaitHold {
		return ring.WaitHandoff
	}
	return m
}

// HoldWaits switches the io_uring loops to io.uring.wait=hold (the default) once GOMAXPROCS
// has a P for every loop beside one per core, and reports whether it did. A held wait keeps
// its loop's P, sparing the runtime a hand-over and a wake-up of its monitor thread per wait;
// with fewer Ps the loops would take the ones the handler workers need, so they keep handing
// theirs off.
func (b *Broker) HoldWaits() bool {
	m, _ := ring.ParseWaitMode(b.cfg.UringWait)
	loops := b.EventLoopThreads()
	if m != ring.WaitHold || loops == 0 || runtime.GOMAXPROCS(0) < runtime.NumCPU()+loops {
		return false
	}
	for _, s := range b.servers {
		s.SetWait(ring.WaitHold)
	}
	return true
}

// advertised is the advertised endpoint of the inter-broker listener: the one other brokers
// and the metadata quorum reach this node on.
func (b *Broker) advertised() Listener {
	l := b.cfg.AdvertisedListeners[0]
	for _, a := range b.cfg.AdvertisedListeners {
		if a.Name == b.interBroker {
			l = a
		}
	}
	return resolveAdvertisedHost(l)
}

// resolveAdvertisedHost replaces a wildcard or empty host with this machine's host name.
func resolveAdvertisedHost(l Listener) Listener {
	if l.Host == "" || l.Host == "0.0.0.0" || l.Host == "::" {
		if h, err := os.Hostname(); err == nil {
			l.Host = h
		}
	}
	return l
}

// registerSelf records this broker's advertised endpoint and incarnation in the metadata log.
func (b *Broker) registerSelf() error {
	adv := b.advertised()
	rec := meta.Record{Type: meta.TypeBroker, NodeID: b.cfg.NodeID, Host: adv.Host, Port: int32(adv.Port), Incarnation: b.incarnation}
	for _, l := range b.endpoints() {
		rec.Endpoints = append(rec.Endpoints, meta.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port)})
	}
	sent := time.Now()
	_, err := b.meta.Commit([]meta.Record{rec})
	if err != nil {
		return fmt.Errorf("register broker %d: %w", b.cfg.NodeID, err)
	}
	b.renewLease(sent)
	return nil
}

func (b *Broker) stopServers(ctx context.Context) {
	for _, s := range b.servers {
		if err := s.Shutdown(ctx); err != nil {
			b.logger.Warn("listener shutdown", "err", err)
		}
	}
	if b.controllerClients != nil {
		if err := b.controllerClients.Shutdown(ctx); err != nil {
			b.logger.Warn("controller listener clients shutdown", "err", err)
		}
	}
}

// Shutdown is a clean stop: move leadership away (controlled shutdown), stop accepting, finish
// in-flight requests, flush and close every log (writing the clean-shutdown markers), close
// the metadata log.
func (b *Broker) Shutdown(ctx context.Context) error {
	if !b.closing.CompareAndSwap(false, true) {
		return nil
	}
	b.controlledShutdown(ctx)
	b.stopServers(ctx)
	if b.metricsSrv != nil {
		b.metricsSrv.Shutdown(ctx)
	}
	if b.pprofSrv != nil {
		b.pprofSrv.Shutdown(ctx)
	}
	if b.handlers != nil {
		b.handlers.close()
	}
	b.purgatory.close()
	close(b.stop)
	b.bg.Wait()
	b.groups.Close()
	b.markerSender.close()
	b.verifySender.close()
	b.txns.Close()
	b.cleaner.Stop()
	if b.writeback != nil {
		b.writeback.Stop()
	}
	failed := b.closeLogs()
	errs := []error{b.writeCheckpoints()}
	for _, d := range b.dirs {
		// A dir is clean when every log in it closed and its checkpoints are written. A dir
		// offline since the start holds no open log; the error that took a dir offline was
		// reported when it did, and the shutdown of the other dirs is as clean as Kafka's.
		if d.offline() {
			b.logger.Warn("log dir offline at shutdown; it gets no clean-shutdown marker", "dir", d.path, "err", d.err())
			continue
		}
		if err := failed[d]; err != nil {
			errs = append(errs, err)
			continue
		}
		if err := rlog.WriteCleanShutdownMarker(d.path); err != nil {
			errs = append(errs, fmt.Errorf("log dir %s: %w", d.path, err))
		}
	}
	if err := b.meta.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// closeLogs stops the follower fetchers and closes every partition's
// log, which flushes it. It returns the close errors by dir.
func (b *Broker) closeLogs() map[*logDir]error {
	b.fetchers.close()
	errs := map[*logDir]error{}
	for _, ps := range b.parts.Load().byName {
		for _, p := range ps {
			if p == nil {
				continue
			}
			p.wakeWaiters()
			if err := p.log().Close(); err != nil {
				d := p.dir.Load()
				errs[d] = errors.Join(errs[d], fmt.Errorf("close %s-%d: %w", p.topic, p.index, err))
			}
		}
	}
	return errs
}

// backgroundLoop runs the flush scheduler (flush.ms), the recovery-point and high-watermark
// checkpoints, retention and the ISR lag check (every half replica.lag.time.max.ms).
func (b *Broker) backgroundLoop() {
	defer b.bg.Done()
	flush := time.NewTicker(flushTickInterval)
	defer flush.Stop()
	checkpoint := time.NewTicker(checkpointInterval)
	defer checkpoint.Stop()
	retention := time.NewTicker(b.retentionCheckInterval())
	defer retention.Stop()
	isr := time.NewTicker(max(b.cfg.ReplicaLagTimeMax/2, time.Millisecond))
	defer isr.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-isr.C:
			b.shrinkISRs(now)
		case <-flush.C:
			for _, ps := range b.parts.Load().byName {
				for _, p := range ps {
					if p == nil || p.offline() {
						continue
					}
					if err := p.log().FlushIfDue(); err != nil && !errors.Is(err, rlog.ErrClosed) {
						b.logger.Error("scheduled flush", "topic", p.topic, "partition", p.index, "err", err)
						b.noteStorageError(p.dir.Load(), err)
					}
				}
			}
		case <-retention.C:
			b.applyRetention()
		case <-checkpoint.C:
			if err := b.writeCheckpoints(); err != nil {
				b.logger.Error("write recovery-point checkpoint", "err", err)
			}
		}
	}
}
