package broker

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ringbroker/broker/meta"
)

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
// log dir by itself. With controller.quorum.bootstrap.servers instead of
// controller.quorum.voters the quorum is dynamic (KIP-853, dynamicquorum.go): the voters are in
// the metadata log, and AddRaftVoter and RemoveRaftVoter change them.

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
	controller := c.hasRole("controller")
	voters := map[int32]string{}
	if c.dynamicQuorum() {
		if err := c.checkBootstrapServers(); err != nil {
			return nil, err
		}
	} else {
		var err error
		if voters, err = meta.ParseVoters(c.QuorumVoters); err != nil {
			return nil, fmt.Errorf("controller.quorum.voters=%q: %w", c.QuorumVoters, err)
		}
		if _, ok := voters[c.NodeID]; ok != controller {
			if controller {
				return nil, fmt.Errorf("node.id %d is not in controller.quorum.voters=%q but process.roles includes controller", c.NodeID, c.QuorumVoters)
			}
			return nil, fmt.Errorf("node.id %d is in controller.quorum.voters=%q but process.roles=broker", c.NodeID, c.QuorumVoters)
		}
	}
	if len(c.ControllerListenerNames) == 0 {
		return nil, fmt.Errorf("controller.listener.names is required with controller.quorum.voters or controller.quorum.bootstrap.servers")
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
	// A static quorum's voters tell their directory id only to upgrade to kraft.version 1,
	// which without one is refused; its learners join without one, as the quorum's
	// kraft.version follows from the directory ids recorded (meta.Image.KRaftVersion).
	var dirID meta.UUID
	if b.cfg.dynamicQuorum() || !learner {
		var err error
		if dirID, err = readDirectoryID(b.cfg.LogDirs[0]); err != nil && b.cfg.dynamicQuorum() {
			return nil, err
		}
	}
	if b.cfg.dynamicQuorum() {
		if !learner {
			advHost, _, _ = net.SplitHostPort(listen)
		}
		voters = nil
	}
	s, err := meta.OpenRaft(meta.RaftConfig{NodeID: b.cfg.NodeID, Dir: dir, ClusterID: clusterID,
		Listen: listen, Voters: voters, Learner: learner, AdvertiseHost: advHost, SnapshotEntries: b.cfg.MetadataSnapshotEntries,
		Dynamic: b.cfg.dynamicQuorum(), BootstrapServers: b.cfg.QuorumBootstrapServers, DirectoryID: dirID,
		ListenControl: b.controllerSocketBuffers(listen),
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
// meta.properties with clusterID and a directory.id of its own into every log dir. A dir
// already formatted with the same cluster id is left alone; another cluster id is an error.
func FormatStorage(cfg Config, clusterID string) error {
	if _, err := meta.ParseUUID(clusterID); err != nil {
		return fmt.Errorf("cluster id: %w", err)
	}
	if len(cfg.LogDirs) == 0 {
		return fmt.Errorf("config has no log.dirs")
	}
	for _, d := range cfg.LogDirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create log dir %s: %w", d, err)
		}
		if _, err := ensureMetaProperties(d, cfg.NodeID, clusterID); err != nil {
			return err
		}
	}
	return nil
}

// metadataDirName is where the metadata log lives inside the first log dir, as KRaft's
// __cluster_metadata-0.
const metadataDirName = "__cluster_metadata-0"

// ensureMetaProperties reads or writes Kafka's meta.properties in dir (the storage format step,
// done by itself on a single node) and returns the cluster id.
func ensureMetaProperties(dir string, nodeID int32, want string) (string, error) {
	path := filepath.Join(dir, "meta.properties")
	data, err := os.ReadFile(path)
	if err == nil {
		props := map[string]string{}
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := cutProperty(strings.TrimSpace(line)); ok && !strings.HasPrefix(line, "#") {
				props[k] = v
			}
		}
		if id := props["node.id"]; id != strconv.Itoa(int(nodeID)) {
			return "", fmt.Errorf("%s belongs to node.id %s, not %d", path, id, nodeID)
		}
		cid := props["cluster.id"]
		if want != "" && cid != want {
			return "", fmt.Errorf("%s has cluster.id %s, config says %s", path, cid, want)
		}
		if cid == "" {
			return "", fmt.Errorf("%s has no cluster.id", path)
		}
		return cid, nil
	}
	if !os.IsNotExist(err) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	cid := want
	if cid == "" {
		cid = meta.NewUUID().String()
	}
	content := fmt.Sprintf("#\n#%s\nnode.id=%d\nversion=1\ncluster.id=%s\ndirectory.id=%s\n",
		time.Now().UTC().Format(time.RFC1123), nodeID, cid, meta.NewUUID())
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("rename %s: %w", tmp, err)
	}
	return cid, nil
}

// controllerSocketBuffers is the controller listener's Control: socket.send.buffer.bytes and
// socket.receive.buffer.bytes, as on the client listeners, with a warning for a size the
// kernel caps.
func (b *Broker) controllerSocketBuffers(listen string) func(string, string, syscall.RawConn) error {
	bufs := b.cfg.socketBuffers()
	return func(_, _ string, rc syscall.RawConn) error {
		capped, err := bufs.Apply(rc)
		for _, c := range capped {
			b.logger.Warn("controller listener: socket buffer capped", "addr", listen, "detail", c)
		}
		return err
	}
}
