package broker

// FindCoordinator (key 10), versions 0-6.
//
// Group keys (type 0) are coordinated here, the leader of their __consumer_offsets partition on a
// single node; the topic is created on first use, as Kafka does. v4+ batches keys. Transaction
// keys (type 1) need the transaction coordinator, which is not built yet, and share keys (type 2)
// the share coordinator: both get INVALID_REQUEST with a message saying so, which clients report
// instead of retrying for ever.

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var findCoordinatorAPI = &api{key: kmsg.FindCoordinator, minVersion: 0, maxVersion: 6, handle: handleFindCoordinator}

func handleFindCoordinator(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.FindCoordinatorRequest)
	resp := kmsg.NewPtrFindCoordinatorResponse()
	var code *kerr.Error
	var msg string
	switch req.CoordinatorType {
	case 0:
		if err := b.ensureOffsetsTopic(); err != nil {
			b.logger.Error("offsets topic", "err", err)
			code, msg = kerr.CoordinatorNotAvailable, err.Error()
		}
	case 1:
		code, msg = kerr.InvalidRequest, "transactions are not supported by ringbroker yet"
	default:
		code, msg = kerr.InvalidRequest, "ringbroker coordinates consumer groups only"
	}
	adv := b.advertised()
	fill := func(c *kmsg.FindCoordinatorResponseCoordinator) {
		c.NodeID, c.Host, c.Port = -1, "", -1
		if code != nil {
			c.ErrorCode = code.Code
			c.ErrorMessage = kmsg.StringPtr(msg)
			return
		}
		c.NodeID, c.Host, c.Port = b.cfg.NodeID, adv.Host, int32(adv.Port)
	}
	if req.Version >= 4 {
		for _, k := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = k
			fill(&c)
			resp.Coordinators = append(resp.Coordinators, c)
		}
	} else {
		var c kmsg.FindCoordinatorResponseCoordinator
		fill(&c)
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage
	}
	rc.respond(resp)
}

// hostOf is the host part of host:port.
func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
