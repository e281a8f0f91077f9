package broker

// UnregisterBroker (key 64), version 0.
//
// Behavior: removes a broker's registration, as KRaft's controller does for `kafka-cluster
// unregister --id N`: the broker leaves every ISR it is in (unless it is the last member) and
// the partitions it led get a new leader as when it is fenced (fenceRecords' election), then
// an UnregisterBroker record removes it; it is no longer listed by Metadata or
// DescribeCluster. A broker still running registers again at its next heartbeat, as Kafka's
// does when its heartbeat is refused. A broker that is not registered is
// BROKER_ID_NOT_REGISTERED with Kafka's message. The change is committed to the metadata log
// from any node, decided again on a newer image when another change of the same partitions
// commits first. A principal without ALTER on the cluster gets CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes: v0 is the only version, flexible.

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

var unregisterBrokerAPI = &api{key: kmsg.UnregisterBroker, minVersion: 0, maxVersion: 0, handle: handleUnregisterBroker}

func handleUnregisterBroker(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.UnregisterBrokerRequest)
	resp := kmsg.NewPtrUnregisterBrokerResponse()
	if !rc.authorizer().mayCluster(acl.OpAlter) {
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr(rc.clusterRefusal(acl.OpAlter))
		rc.respond(resp)
		return
	}
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	if _, err := b.meta.CatchUp(); err != nil {
		b.logger.Debug("unregister broker: catching up with the controller", "err", err)
	}
	var err error
	for attempt := range electLeadersAttempts {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * electLeadersBackoff)
		}
		im := b.meta.Image()
		if _, ok := im.Brokers[req.BrokerID]; !ok {
			resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
			resp.ErrorMessage = kmsg.StringPtr("Broker ID " + strconv.Itoa(int(req.BrokerID)) + " is not currently registered")
			rc.respond(resp)
			return
		}
		if _, err = b.meta.Commit(unregisterRecords(im, req.BrokerID, b.uncleanElection)); err == nil {
			b.logger.Info("broker unregistered", "node", req.BrokerID)
			rc.respond(resp)
			return
		}
		b.logger.Info("broker unregistration not committed; deciding again", "node", req.BrokerID, "attempt", attempt+1, "err", err)
	}
	resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(fmt.Sprintf("unregister broker %d: %v", req.BrokerID, err))
	rc.respond(resp)
}

// unregisterRecords are the records that unregister broker id from im: each partition it is
// in the ISR of or leads brought in line with it gone (electLeader, as when it is fenced),
// then the UnregisterBroker record.
func unregisterRecords(im *meta.Image, id int32, unclean func(*meta.Topic) bool) []meta.Record {
	live := map[int32]bool{}
	for nid, br := range im.Brokers {
		live[nid] = nid != id && !br.Fenced && !br.InControlledShutdown
	}
	var recs []meta.Record
	for _, name := range im.SortedTopicNames() {
		t := im.Topics[name]
		for _, p := range t.Partitions {
			if p.Leader != id && !slices.Contains(p.ISR, id) {
				continue
			}
			if rec, ok := electLeader(t, p, live, unclean); ok {
				recs = append(recs, rec)
			}
		}
	}
	return append(recs, meta.Record{Type: meta.TypeUnregisterBroker, NodeID: id})
}
