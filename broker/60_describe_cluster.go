package broker

// DescribeCluster (key 60), versions 0-2.
//
// Behavior: the registered brokers, the cluster id and the controller (this node on a single
// node). On the controller listener (KIP-919, admin clients with bootstrap.controllers) the
// controllers instead, at their controller listeners, and the active controller as the
// controller. Any principal may ask, as in Kafka; the cluster's authorized operations, when
// asked for, are computed from the ACLs, and are 0 for a principal that may not DESCRIBE the
// cluster.
//
// Version notes: v1 adds the endpoint type: brokers (1) on a client listener, controllers (2)
// on the controller listener; the other one is MISMATCHED_ENDPOINT_TYPE and any other type
// UNSUPPORTED_ENDPOINT_TYPE, with Kafka's messages (v0, which has no type, asks for brokers, and
// gets INVALID_REQUEST on the controller listener); v2 lists the fenced brokers too, with their
// fenced flag, when asked to (KIP-1073, kafka-cluster list-endpoints --include-fenced-brokers).

import (
	"cmp"
	"fmt"
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
	served, asked := endpointBroker, endpointBroker
	if rc.cs.controller {
		served = endpointController
	}
	if req.Version >= 1 {
		asked = req.EndpointType
	}
	if code, msg := endpointTypeError(served, asked); code != nil {
		if req.Version == 0 {
			code = kerr.InvalidRequest
		}
		resp.ErrorCode, resp.ErrorMessage = code.Code, &msg
		rc.respond(resp)
		return
	}
	resp.EndpointType = served
	resp.ClusterID = im.ClusterID
	resp.ControllerID = b.controllerIDFor(im)
	if rc.cs.controller {
		resp.ControllerID = b.meta.Leader()
	}
	if req.IncludeClusterAuthorizedOperations {
		// As Kafka's: the operations only for a principal that may DESCRIBE the cluster.
		z := rc.authorizer()
		resp.ClusterAuthorizedOperations = 0
		if z.mayCluster(acl.OpDescribe) {
			resp.ClusterAuthorizedOperations = z.operations(acl.ResourceCluster, acl.ClusterName)
		}
	}
	if rc.cs.controller {
		resp.Brokers = b.controllerEndpoints()
		rc.respond(resp)
		return
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

// DescribeCluster's endpoint types (v1+).
const (
	endpointBroker     int8 = 1
	endpointController int8 = 2
)

// endpointTypeError is Kafka's refusal of a DescribeCluster for endpoint type asked at an
// endpoint of type served: an unknown type, or the other one; nil when asked is served.
func endpointTypeError(served, asked int8) (*kerr.Error, string) {
	name := map[int8]string{endpointBroker: "BROKER", endpointController: "CONTROLLER"}
	switch {
	case name[asked] == "":
		return kerr.UnsupportedEndpointType, fmt.Sprintf("Unsupported endpoint type %d", asked)
	case asked != served:
		return kerr.MismatchedEndpointType, fmt.Sprintf("The request was sent to an endpoint of type %s, but we wanted an endpoint of type %s", name[served], name[asked])
	}
	return nil, ""
}
