package broker

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"ringbroker/broker/meta"
)

// sortedBrokers returns the registered brokers by node id.
func sortedBrokers(im *meta.Image) []meta.Broker {
	out := make([]meta.Broker, 0, len(im.Brokers))
	for _, br := range im.Brokers {
		out = append(out, br)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

// A cluster (KRaft's model): every node named in controller.quorum.voters runs a Raft voter of
// the metadata log on its CONTROLLER listener (broker/meta.RaftStore). Each broker registers
// with a new incarnation id at start and heartbeats to the active controller, which fences
// brokers that stay silent for broker.session.timeout.ms (their partitions go offline with
// RF=1, leader -1) and unfences them when they heartbeat again. A controller-only node
// (process.roles=controller) is a voter with no client listener that neither registers nor
// heartbeats; a broker-only node (process.roles=broker) is not a voter and follows the log as
// a Raft learner (a KRaft observer), forwarding its commits and heartbeats to the active
// controller. Without controller.quorum.voters a node is the sole voter of its own quorum, on
// the same path: it needs no controller listener, as it has nobody to talk to, and formats its
// log dir by itself.

// checkProcessRoles validates process.roles: broker, controller, or both (as Kafka).
func checkProcessRoles(roles []string) error {
	if len(roles) == 0 {
		return fmt.Errorf("process.roles is empty: want broker and/or controller")
	}
	for _, r := range roles {
		if r != "broker" && r != "controller" {
			return fmt.Errorf("unknown role %q: want broker and/or controller", r)
		}
	}
	return nil
}

// hasRole reports whether process.roles includes role; no process.roles means both.
func (c *Config) hasRole(role string) bool {
	return len(c.ProcessRoles) == 0 || slices.Contains(c.ProcessRoles, role)
}

// setupQuorum validates the cluster keys and splits the controller listener off the client
// listeners. It returns the quorum's voters with their controller listener addresses; without
// controller.quorum.voters, this node alone with no address (no controller listener).
func (b *Broker) setupQuorum() (map[int32]string, error) {
	c := &b.cfg
	if c.QuorumVoters == "" && len(c.QuorumBootstrapServers) == 0 {
		if !c.hasRole("broker") || !c.hasRole("controller") {
			return nil, fmt.Errorf("process.roles=%s needs controller.quorum.voters: only a combined node runs alone", strings.Join(c.ProcessRoles, ","))
		}
		if len(c.ControllerListenerNames) > 0 {
			return nil, fmt.Errorf("controller.listener.names is set but controller.quorum.voters is not")
		}
		return map[int32]string{c.NodeID: ""}, nil
	}
	if c.QuorumVoters == "" {
		return nil, fmt.Errorf("controller.quorum.bootstrap.servers without controller.quorum.voters: dynamic quorums (KIP-853) are not supported yet; list the voters in controller.quorum.voters")
	}
	voters, err := meta.ParseVoters(c.QuorumVoters)
	if err != nil {
		return nil, fmt.Errorf("controller.quorum.voters=%q: %w", c.QuorumVoters, err)
	}
	controller := c.hasRole("controller")
	if _, ok := voters[c.NodeID]; ok != controller {
		if controller {
			return nil, fmt.Errorf("node.id %d is not in controller.quorum.voters=%q but process.roles includes controller", c.NodeID, c.QuorumVoters)
		}
		return nil, fmt.Errorf("node.id %d is in controller.quorum.voters=%q but process.roles=broker", c.NodeID, c.QuorumVoters)
	}
	if len(c.ControllerListenerNames) == 0 {
		return nil, fmt.Errorf("controller.listener.names is required with controller.quorum.voters")
	}
	name := c.ControllerListenerNames[0]
	if !controller {
		return voters, c.checkBrokerOnlyListeners(name)
	}
	var ctrl *Listener
	var clients []Listener
	for _, l := range c.Listeners {
		if l.Name == name {
			ctrl = &l
			continue
		}
		clients = append(clients, l)
	}
	if ctrl == nil {
		return nil, fmt.Errorf("controller listener %s (controller.listener.names) is not in listeners", name)
	}
	if !c.hasRole("broker") {
		if len(clients) > 0 {
			return nil, fmt.Errorf("process.roles=controller: listeners has %s besides the controller listener %s; a controller serves no clients", clients[0], name)
		}
		c.Listeners, c.AdvertisedListeners = nil, nil
		voters[c.NodeID] = ctrl.Addr()
		return voters, nil
	}
	if len(clients) == 0 {
		return nil, fmt.Errorf("listeners has no client listener besides the controller listener %s", name)
	}
	c.Listeners = clients
	var adv []Listener
	for _, l := range c.AdvertisedListeners {
		if l.Name != name {
			adv = append(adv, l)
		}
	}
	if len(adv) == 0 {
		adv = clients
	}
	c.AdvertisedListeners = adv
	if c.ClusterID == "" {
		if _, err := os.Stat(filepath.Join(c.LogDirs[0], "meta.properties")); err != nil {
			return nil, fmt.Errorf("log dir %s is not formatted: run `ringbroker format --cluster-id ID --config FILE` (as kafka-storage format) or start with --override cluster.id=ID", c.LogDirs[0])
		}
	}
	voters[c.NodeID] = ctrl.Addr()
	return voters, nil
}

// checkBrokerOnlyListeners checks a broker-only node's listeners: the controller listener
// belongs to the controllers (Kafka refuses it in a broker's listeners too), and formatting is
// required as on every cluster node.
func (c *Config) checkBrokerOnlyListeners(ctrlName string) error {
	for _, l := range c.Listeners {
		if l.Name == ctrlName {
			return fmt.Errorf("process.roles=broker: listeners must not contain the controller listener %s (controller.listener.names)", ctrlName)
		}
	}
	if c.ClusterID == "" {
		if _, err := os.Stat(filepath.Join(c.LogDirs[0], "meta.properties")); err != nil {
			return fmt.Errorf("log dir %s is not formatted: run `ringbroker format --cluster-id ID --config FILE` (as kafka-storage format) or start with --override cluster.id=ID", c.LogDirs[0])
		}
	}
	return nil
}

// learnerListen is where a broker-only node receives the metadata log as a Raft learner: a
// port picked on its first listener's host, announced with its advertised host when it joins.
func (c *Config) learnerListen() string {
	return net.JoinHostPort(c.Listeners[0].Host, "0")
}

// openMetadata opens the metadata log: this node's voter (or, broker-only, learner) of the
// controller quorum, listening on its controller listener (none when it is the sole voter
// without one).
func (b *Broker) openMetadata(clusterID string, voters map[int32]string) (*meta.RaftStore, error) {
	dir := filepath.Join(b.cfg.LogDirs[0], metadataDirName)
	learner := !b.cfg.hasRole("controller")
	listen, advHost := voters[b.cfg.NodeID], ""
	if learner {
		listen, advHost = b.cfg.learnerListen(), b.advertised().Host
	}
	s, err := meta.OpenRaft(meta.RaftConfig{NodeID: b.cfg.NodeID, Dir: dir, ClusterID: clusterID,
		Listen: listen, Voters: voters, Learner: learner, AdvertiseHost: advHost, SnapshotEntries: b.cfg.MetadataSnapshotEntries,
		OnChange: func(*meta.Image) {
			select {
			case b.imageChanged <- struct{}{}:
			default:
			}
		}, Logger: b.logger})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// FormatStorage is the storage format step (as kafka-storage format): it writes
// meta.properties with clusterID into the first log dir. A dir already formatted with the
// same cluster id is left alone; another cluster id is an error.
func FormatStorage(cfg Config, clusterID string) error {
	if _, err := meta.ParseUUID(clusterID); err != nil {
		return fmt.Errorf("cluster id: %w", err)
	}
	if len(cfg.LogDirs) == 0 {
		return fmt.Errorf("config has no log.dirs")
	}
	if err := os.MkdirAll(cfg.LogDirs[0], 0o755); err != nil {
		return fmt.Errorf("create log dir %s: %w", cfg.LogDirs[0], err)
	}
	_, err := ensureMetaProperties(cfg.LogDirs[0], cfg.NodeID, clusterID)
	return err
}

// controllerLoop runs while the broker is up: it brings the open logs in line with every new
// image, heartbeats to the active controller, and, while this node is the active controller,
// fences and unfences brokers.
func (b *Broker) controllerLoop() {
	defer b.bg.Done()
	hb := time.NewTicker(b.cfg.BrokerHeartbeatInterval)
	defer hb.Stop()
	check := time.NewTicker(b.cfg.BrokerHeartbeatInterval / 2)
	defer check.Stop()
	var leaderSince time.Time
	// registered holds when this controller first saw each registration: a registration is
	// as good as a heartbeat.
	registered := map[meta.UUID]time.Time{}
	for {
		select {
		case <-b.stop:
			return
		case <-b.imageChanged:
			if err := b.syncPartitions(); err != nil {
				b.logger.Error("open partitions for the new metadata image", "err", err)
			}
			if err := b.loadOffsetsPartitions(); err != nil {
				b.logger.Error("load offsets partitions", "err", err)
			}
		case <-hb.C:
			if b.cfg.hasRole("broker") {
				go b.heartbeat()
			}
		case <-check.C:
			if !b.meta.IsLeader() {
				if !leaderSince.IsZero() {
					b.logger.Info("no longer the active controller", "node", b.cfg.NodeID)
				}
				leaderSince = time.Time{}
				continue
			}
			now := time.Now()
			if leaderSince.IsZero() {
				b.logger.Info("became the active controller", "node", b.cfg.NodeID)
				leaderSince = now
				b.meta.ResetHeartbeats()
			}
			im := b.meta.Image()
			hbs := b.meta.Heartbeats()
			for _, br := range im.Brokers {
				if _, ok := registered[br.Incarnation]; !ok {
					registered[br.Incarnation] = now
				}
				if hb, ok := hbs[br.NodeID]; !ok || registered[br.Incarnation].After(hb.At) {
					hbs[br.NodeID] = meta.Heartbeat{Incarnation: br.Incarnation, At: registered[br.Incarnation]}
				}
			}
			if b.cfg.hasRole("broker") {
				// The controller runs, so the broker of its own process is alive: a late tick
				// (a long stall of this process) must not fence it.
				hbs[b.cfg.NodeID] = meta.Heartbeat{Incarnation: b.incarnation, At: now}
			}
			recs := fenceRecords(im, hbs, leaderSince, now, b.cfg.BrokerSessionTimeout)
			if len(recs) == 0 {
				continue
			}
			if _, err := b.meta.Commit(recs); err != nil {
				b.logger.Warn("commit broker fencing", "err", err)
			}
		}
	}
}

// heartbeat tells the active controller this broker is alive.
func (b *Broker) heartbeat() {
	if !b.heartbeating.CompareAndSwap(false, true) {
		return
	}
	defer b.heartbeating.Store(false)
	if err := b.meta.Heartbeat(b.cfg.NodeID, b.incarnation); err != nil {
		b.logger.Warn("broker heartbeat", "err", err)
	}
}

// fenceRecords is the active controller's decision: fence the unfenced brokers not heard from
// (with their registered incarnation) for sessionTimeout, unfence fenced ones heard from again,
// and move each partition's leadership to its first unfenced replica, or to -1 (offline) when
// none is. A broker's silence is counted from when this controller began leading at the
// earliest, as heartbeats went to the previous leader before.
func fenceRecords(im *meta.Image, hbs map[int32]meta.Heartbeat, leaderSince, now time.Time, sessionTimeout time.Duration) []meta.Record {
	var recs []meta.Record
	fenced := map[int32]bool{}
	for _, br := range sortedBrokers(im) {
		last := leaderSince
		if hb, ok := hbs[br.NodeID]; ok && hb.Incarnation == br.Incarnation && hb.At.After(last) {
			last = hb.At
		}
		alive := now.Sub(last) < sessionTimeout
		if alive == br.Fenced {
			recs = append(recs, meta.Record{Type: meta.TypeFence, NodeID: br.NodeID, Fenced: !alive})
		}
		fenced[br.NodeID] = !alive
	}
	for _, name := range im.SortedTopicNames() {
		t := im.Topics[name]
		for _, p := range t.Partitions {
			leader := int32(-1)
			for _, r := range p.Replicas {
				if up, ok := fenced[r]; ok && !up {
					leader = r
					break
				}
			}
			if leader != p.Leader {
				recs = append(recs, meta.Record{Type: meta.TypePartition, TopicID: t.ID, Partition: p.Index,
					Replicas: p.Replicas, ISR: p.ISR, Leader: leader, LeaderEpoch: p.LeaderEpoch + 1})
			}
		}
	}
	return recs
}

// placeReplicas assigns n partitions with one replica each, round-robin over the unfenced
// brokers from a random first one (as Kafka's placer), or all to this node when no broker is
// registered yet.
func (b *Broker) placeReplicas(im *meta.Image, n int32) [][]int32 {
	var live []int32
	for _, br := range sortedBrokers(im) {
		if !br.Fenced {
			live = append(live, br.NodeID)
		}
	}
	if len(live) == 0 {
		live = []int32{b.cfg.NodeID}
	}
	start := rand.IntN(len(live))
	out := make([][]int32, n)
	for p := range out {
		out[p] = []int32{live[(start+p)%len(live)]}
	}
	return out
}
