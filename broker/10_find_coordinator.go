package broker

// FindCoordinator (key 10), versions 0-6.
//
// Behavior: group keys (type 0) are coordinated by the leader of the group's __consumer_offsets
// partition, abs(javaStringHash(group)) % partitions: this node on a single node, the broker the
// controller placed the partition on in a cluster; the topic is created on first use, as Kafka
// does. Transaction keys (type 1) are coordinated by the leader of the transactional id's
// __transaction_state partition, found the same way and created on first use too. Share keys
// (type 2) need a share coordinator, which is not built: INVALID_REQUEST with a message saying
// so, which clients report instead of retrying for ever. A key the principal may not DESCRIBE
// (the group, or the transactional id) is GROUP_AUTHORIZATION_FAILED or
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, checked before anything else, as Kafka's.
//
// Version notes: v4+ batches keys.

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
	"ringbroker/coord"
)

var findCoordinatorAPI = &api{key: kmsg.FindCoordinator, minVersion: 0, maxVersion: 6, keepsRequest: true, handle: handleFindCoordinator}

func handleFindCoordinator(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.FindCoordinatorRequest)
	resp := kmsg.NewPtrFindCoordinatorResponse()
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	// As Kafka's getCoordinator: DESCRIBE on the group or transactional id comes first, and a
	// key that fails it creates no internal topic.
	refused := coordinatorRefusals(rc.authorizer(), req.CoordinatorType, keys)
	var code *kerr.Error
	var msg string
	switch {
	case len(refused) == len(keys) && len(keys) > 0:
		// Nothing to look up.
	case req.CoordinatorType == 0:
		if err := b.ensureOffsetsTopic(); err != nil {
			b.logger.Error("offsets topic", "err", err)
			code, msg = kerr.CoordinatorNotAvailable, err.Error()
		}
	case req.CoordinatorType == 1:
		if err := b.ensureTxnStateTopic(); err != nil {
			b.logger.Error("transaction state topic", "err", err)
			code, msg = kerr.CoordinatorNotAvailable, err.Error()
		}
	default:
		code, msg = kerr.InvalidRequest, "ringbroker coordinates consumer groups and transactions, not share groups"
	}
	im := b.meta.Image()
	fill := func(c *kmsg.FindCoordinatorResponseCoordinator, i int, key string) {
		c.NodeID, c.Host, c.Port = -1, "", -1
		if deny := refused[i]; deny != nil {
			// Kafka's batched answer carries no message; the single one its Errors default.
			c.ErrorCode = deny.Code
			if req.Version < 4 {
				c.ErrorMessage = kmsg.StringPtr(authzMessage(deny))
			}
			return
		}
		ecode, emsg := code, msg
		if ecode == nil && req.CoordinatorType == 1 {
			if br, ok := txnCoordinatorFor(b, key, rc.cs.listenerName()); ok {
				c.NodeID, c.Host, c.Port = br.nodeID, br.host, br.port
				return
			}
			ecode, emsg = kerr.CoordinatorNotAvailable, "the leader of the transactional id's "+txnStateTopic+" partition is not available"
		}
		if ecode == nil {
			br, ok := groupCoordinatorFor(im, key)
			if host, port, reachable := br.Endpoint(rc.cs.listenerName()); ok && reachable {
				c.NodeID, c.Host, c.Port = br.NodeID, host, port
				return
			}
			ecode, emsg = kerr.CoordinatorNotAvailable, "the leader of the group's "+offsetsTopic+" partition is not available"
		}
		c.ErrorCode = ecode.Code
		c.ErrorMessage = kmsg.StringPtr(emsg)
	}
	if req.Version >= 4 {
		for i, k := range keys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = k
			fill(&c, i, k)
			resp.Coordinators = append(resp.Coordinators, c)
		}
	} else {
		var c kmsg.FindCoordinatorResponseCoordinator
		fill(&c, 0, req.CoordinatorKey)
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage
	}
	rc.respond(resp)
}

// coordinatorRefusals maps the index of each key the principal may not DESCRIBE to its error:
// GROUP_AUTHORIZATION_FAILED for a group, TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a
// transactional id.
func coordinatorRefusals(z requestAuthz, keyType int8, keys []string) map[int]*kerr.Error {
	rt, code := acl.ResourceGroup, kerr.GroupAuthorizationFailed
	switch keyType {
	case 0:
	case 1:
		rt, code = acl.ResourceTransactionalID, kerr.TransactionalIDAuthorizationFailed
	default:
		return nil
	}
	var out map[int]*kerr.Error
	for i, k := range keys {
		if !z.may(acl.OpDescribe, rt, k) {
			if out == nil {
				out = make(map[int]*kerr.Error)
			}
			out[i] = code
		}
	}
	return out
}

// groupCoordinatorFor is the broker that leads the __consumer_offsets partition of group: on a
// single node this node, in a cluster whichever broker the controller placed it on.
func groupCoordinatorFor(im *meta.Image, group string) (meta.Broker, bool) {
	t := im.Topics[offsetsTopic]
	if t == nil || len(t.Partitions) == 0 {
		return meta.Broker{}, false
	}
	p := t.Partitions[coord.PartitionFor(group, len(t.Partitions))]
	br, ok := im.Brokers[p.Leader]
	if !ok || br.Fenced {
		return meta.Broker{}, false
	}
	return br, true
}

// hostOf is the host part of host:port.
func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
