package broker

// DescribeCluster (key 60), versions 0-2.
//
// Behavior: the registered brokers, the cluster id and the controller (this node on a single
// node). Any principal may ask, as in Kafka; the cluster's authorized operations, when asked
// for, are computed from the ACLs, and are 0 for a principal that may not DESCRIBE the cluster.
//
// Version notes: v1 adds the endpoint type, of which only brokers (1) are served; v2 lists the
// fenced brokers too, with their fenced flag, when asked to (KIP-1073, kafka-cluster
// list-endpoints --include-fenced-brokers).

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
)

var describeClusterAPI = &api{key: kmsg.DescribeCluster, minVersion: 0, maxVersion: 2, handle: handleDescribeCluster}

func handleDescribeCluster(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DescribeClusterRequest)
	resp := kmsg.NewPtrDescribeClusterResponse()
	im := b.meta.Image()
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr("ringbroker serves only broker endpoints (type 1)")
		rc.respond(resp)
		return
	}
	resp.EndpointType = 1
	resp.ClusterID = im.ClusterID
	resp.ControllerID = b.controllerIDFor(im)
	if req.IncludeClusterAuthorizedOperations {
		// As Kafka's: the operations only for a principal that may DESCRIBE the cluster.
		z := rc.authorizer()
		resp.ClusterAuthorizedOperations = 0
		if z.mayCluster(acl.OpDescribe) {
			resp.ClusterAuthorizedOperations = z.operations(acl.ResourceCluster, acl.ClusterName)
		}
	}
	for _, mb := range b.metadataBrokers(im, rc.cs.listenerName()) {
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack = mb.NodeID, mb.Host, mb.Port, mb.Rack
		resp.Brokers = append(resp.Brokers, db)
	}
	if req.IncludeFencedBrokers {
		for _, br := range sortedBrokers(im) {
			host, port, ok := br.Endpoint(rc.cs.listenerName())
			if !br.Fenced || !ok {
				continue
			}
			db := kmsg.NewDescribeClusterResponseBroker()
			db.NodeID, db.Host, db.Port, db.IsFenced = br.NodeID, host, port, true
			if br.Rack != "" {
				db.Rack = kmsg.StringPtr(br.Rack)
			}
			resp.Brokers = append(resp.Brokers, db)
		}
		slices.SortFunc(resp.Brokers, func(a, b kmsg.DescribeClusterResponseBroker) int { return cmp.Compare(a.NodeID, b.NodeID) })
	}
	rc.respond(resp)
}
