package broker

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"ringbroker/broker/meta"
)

// A dynamic quorum (KIP-853) has no controller.quorum.voters: its voters are in the metadata
// log, founded by the format step (--standalone: this controller alone; --initial-controllers:
// the listed ones) and changed by AddRaftVoter and RemoveRaftVoter (kafka-metadata-quorum
// add-controller, remove-controller). Every other node, a controller formatted with
// --no-initial-controllers or a broker, joins through controller.quorum.bootstrap.servers as a
// learner (a KRaft observer). Its kraft.version is 1; a static quorum's is 0 until upgraded
// (kafka-features upgrade --feature kraft.version=1), after which its voters change as here.

// dynamicQuorum reports whether the node belongs to a dynamic quorum.
func (c *Config) dynamicQuorum() bool {
	return c.QuorumVoters == "" && len(c.QuorumBootstrapServers) > 0
}

// inCluster reports whether the node is one of a cluster's, static or dynamic, rather than the
// sole voter of its own quorum.
func (c *Config) inCluster() bool { return c.QuorumVoters != "" || len(c.QuorumBootstrapServers) > 0 }

// QuorumFormat is how the format step founds a dynamic quorum, as kafka-storage format's
// options: exactly one of them on a controller of a dynamic quorum, none elsewhere.
type QuorumFormat struct {
	// Standalone makes this controller the quorum's only voter (--standalone).
	Standalone bool
	// NoInitialControllers formats a controller that joins as an observer, to be added with
	// add-controller (--no-initial-controllers).
	NoInitialControllers bool
	// InitialControllers are the founding voters, "id@host:port:directoryid,..."
	// (--initial-controllers); this node's directory id becomes the one listed for it.
	InitialControllers string
}

// Format is the format step (kafka-storage format): FormatStorage, and for a controller of a
// dynamic quorum founded here the founding voters in the metadata log of the first log dir.
// Quorum options that do not fit the config are refused before anything is written.
func Format(cfg Config, clusterID string, qf QuorumFormat) error {
	founds, err := qf.check(cfg)
	if err != nil {
		return err
	}
	if err := FormatStorage(cfg, clusterID); err != nil {
		return err
	}
	if !founds {
		return nil
	}
	return qf.bootstrap(cfg)
}

// check validates the options against cfg, as kafka-storage format does, and reports whether
// they found a quorum.
func (qf QuorumFormat) check(cfg Config) (bool, error) {
	n := 0
	for _, set := range []bool{qf.Standalone, qf.NoInitialControllers, qf.InitialControllers != ""} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return false, fmt.Errorf("only one of --standalone, --initial-controllers and --no-initial-controllers may be given")
	case n == 1 && !cfg.hasRole("controller"):
		return false, fmt.Errorf("--standalone, --initial-controllers and --no-initial-controllers format a controller; process.roles=%s", strings.Join(cfg.ProcessRoles, ","))
	case n == 1 && !cfg.dynamicQuorum():
		return false, fmt.Errorf("you cannot specify controller.quorum.voters and format the node with --initial-controllers or --standalone: " +
			"for a dynamic quorum, remove controller.quorum.voters and set controller.quorum.bootstrap.servers")
	case n == 0 && cfg.dynamicQuorum() && cfg.hasRole("controller"):
		return false, fmt.Errorf("because controller.quorum.voters is not set on this controller, you must specify one of the following: " +
			"--standalone, --initial-controllers, or --no-initial-controllers")
	}
	if qf.InitialControllers != "" {
		if _, err := qf.initialVoter(cfg.NodeID); err != nil {
			return false, err
		}
	}
	return n == 1 && !qf.NoInitialControllers, nil
}

// initialVoter parses --initial-controllers, which must list node.
func (qf QuorumFormat) initialVoter(node int32) ([]meta.BootstrapVoter, error) {
	voters, err := meta.ParseInitialControllers(qf.InitialControllers)
	if err != nil {
		return nil, fmt.Errorf("--initial-controllers: %w", err)
	}
	for _, v := range voters {
		if v.NodeID == node {
			return voters, nil
		}
	}
	return nil, fmt.Errorf("--initial-controllers does not list node.id %d", node)
}

// bootstrap writes the founding voters into the formatted first log dir.
func (qf QuorumFormat) bootstrap(cfg Config) error {
	dirID, err := readDirectoryID(cfg.LogDirs[0])
	if err != nil {
		return err
	}
	var voters []meta.BootstrapVoter
	if qf.Standalone {
		addr, err := cfg.controllerAddr()
		if err != nil {
			return err
		}
		voters = []meta.BootstrapVoter{{NodeID: cfg.NodeID, QuorumMember: meta.QuorumMember{Addr: addr, DirectoryID: dirID}}}
	} else {
		if voters, err = qf.initialVoter(cfg.NodeID); err != nil {
			return err
		}
		for _, v := range voters {
			if v.NodeID == cfg.NodeID && v.DirectoryID != dirID {
				if err := setDirectoryID(cfg.LogDirs[0], dirID, v.DirectoryID); err != nil {
					return err
				}
			}
		}
	}
	return meta.FormatDynamic(filepath.Join(cfg.LogDirs[0], metadataDirName), voters)
}

// controllerAddr is this controller's listener as the quorum reaches it: the advertised one of
// the first controller.listener.names, else the listener itself, on localhost when it names no
// host (as kafka-metadata-quorum add-controller reads it).
func (c *Config) controllerAddr() (string, error) {
	if len(c.ControllerListenerNames) == 0 {
		return "", fmt.Errorf("controller.listener.names is required to format a controller of a dynamic quorum")
	}
	name := c.ControllerListenerNames[0]
	for _, ls := range [][]Listener{c.AdvertisedListeners, c.Listeners} {
		for _, l := range ls {
			if l.Name == name {
				if l.Host == "" {
					l.Host = "localhost"
				}
				return l.Addr(), nil
			}
		}
	}
	return "", fmt.Errorf("controller listener %s (controller.listener.names) is not in listeners", name)
}

// metaPropertiesPath is where the format step writes Kafka's meta.properties in dir.
func metaPropertiesPath(dir string) string { return filepath.Join(dir, "meta.properties") }

// readDirectoryID returns the directory.id of the formatted log dir.
func readDirectoryID(dir string) (meta.UUID, error) {
	path := metaPropertiesPath(dir)
	data, err := os.ReadFile(path)
	if err != nil {
		return meta.UUID{}, fmt.Errorf("read the directory id: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := cutProperty(strings.TrimSpace(line)); ok && k == "directory.id" {
			id, err := meta.ParseUUID(v)
			if err != nil {
				return meta.UUID{}, fmt.Errorf("%s: directory.id: %w", path, err)
			}
			return id, nil
		}
	}
	return meta.UUID{}, fmt.Errorf("%s has no directory.id: format the log dir again", path)
}

// setDirectoryID replaces directory.id old by id in the meta.properties of dir, for a node
// formatted with --initial-controllers, which names each founder's directory id.
func setDirectoryID(dir string, old, id meta.UUID) error {
	path := metaPropertiesPath(dir)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("set the directory id: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, metadataDirName)); err == nil {
		return fmt.Errorf("%s is formatted with directory.id %s and has a metadata log; --initial-controllers names %s", dir, old, id)
	}
	out := strings.Replace(string(data), "directory.id="+old.String(), "directory.id="+id.String(), 1)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(out), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}

// checkBootstrapServers validates controller.quorum.bootstrap.servers: host:port each.
func (c *Config) checkBootstrapServers() error {
	for _, a := range c.QuorumBootstrapServers {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("controller.quorum.bootstrap.servers: %q: %w", a, err)
		}
	}
	return nil
}
