package broker

import (
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/ring"
)

// The controller listener serves Kafka's protocol to admin clients that bootstrap from the
// controllers (bootstrap.controllers, KIP-919: kafka-metadata-quorum, kafka-features and
// kafka-configs with --bootstrap-controller) beside the quorum's own traffic, on the same
// port: broker/meta tells the connections apart by their first bytes and hands the Kafka ones
// over (meta.RaftStore.ServeClients), and they run through the same connection layer and
// handlers as the client listeners' (ring.Adopted), restricted to the controller's API set.
// The listener is PLAINTEXT only: Raft and the forwarded requests on it are neither
// authenticated nor encrypted, so a SASL or SSL protocol for it would promise what it does not
// do, and is refused at startup.

// controllerAPIKeys are the APIs the controller listener serves: those of Kafka 4.1.1's
// controller API set that are meant for admin clients and that ringbroker serves, its
// quorum RPCs (Vote, Fetch, BrokerHeartbeat, ...) being ringbroker's own protocol here.
var controllerAPIKeys = []kmsg.Key{
	kmsg.SASLHandshake,
	kmsg.ApiVersions,
	kmsg.DescribeACLs,
	kmsg.CreateACLs,
	kmsg.DeleteACLs,
	kmsg.DescribeConfigs,
	kmsg.AlterConfigs,
	kmsg.SASLAuthenticate,
	kmsg.IncrementalAlterConfigs,
	kmsg.DescribeQuorum,
	kmsg.UpdateFeatures,
	kmsg.DescribeCluster,
	kmsg.UnregisterBroker,
	kmsg.AddRaftVoter,
	kmsg.RemoveRaftVoter,
}

// controllerAPITable is the part of the client API table the controller listener serves.
func controllerAPITable(all *apiTable) *apiTable {
	var t apiTable
	for _, k := range controllerAPIKeys {
		t[k] = all[k]
	}
	return &t
}

// checkControllerListenerProtocol refuses a controller listener (the first of
// controller.listener.names) mapped to another security protocol than PLAINTEXT in
// listener.security.protocol.map, before that listener's security is set up.
func (c *Config) checkControllerListenerProtocol() error {
	if len(c.ControllerListenerNames) == 0 {
		return nil
	}
	name := c.ControllerListenerNames[0]
	proto, err := c.listenerProtocol(name)
	if err != nil {
		return err
	}
	if proto != protoPlaintext {
		return fmt.Errorf("listener.security.protocol.map maps the controller listener %s to %s: ringbroker's controller listener is PLAINTEXT only "+
			"(its Raft and controller traffic is neither authenticated nor encrypted); map it to PLAINTEXT and keep the port on a trusted network", name, proto)
	}
	return nil
}

// serveControllerClients starts serving the Kafka clients of this controller's listener.
func (b *Broker) serveControllerClients() error {
	if !b.cfg.hasRole("controller") || !b.cfg.inCluster() {
		return nil // no controller listener: a single node without controller.quorum.voters
	}
	name := b.controllerListenerName()
	srv, err := ring.Adopt(ring.Config{Logger: b.logger}, &connHandler{b: b, listener: b.listeners[name], apis: controllerAPITable(b.apis), controller: true})
	if err != nil {
		return fmt.Errorf("controller listener %s: %w", name, err)
	}
	b.controllerClients = srv
	b.meta.ServeClients(srv.Serve)
	return nil
}

// controllerEndpoints are the controllers DescribeCluster lists to a client of the controller
// listener: every controller of the quorum at its controller listener, by node id.
func (b *Broker) controllerEndpoints() []kmsg.DescribeClusterResponseBroker {
	var out []kmsg.DescribeClusterResponseBroker
	for id, addr := range b.meta.Controllers() {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			continue
		}
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port = id, host, int32(p)
		out = append(out, db)
	}
	slices.SortFunc(out, func(x, y kmsg.DescribeClusterResponseBroker) int { return int(x.NodeID - y.NodeID) })
	return out
}
