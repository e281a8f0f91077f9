package broker

// ElectLeaders (key 43), versions 0-2.
//
// Behavior: elects partition leaders on demand, as KRaft's controller does (electPartition in
// leaderbalance.go): a preferred election moves leadership to a partition's first replica when
// it is live and in the ISR (ELECTION_NOT_NEEDED when it already leads,
// PREFERRED_LEADER_NOT_AVAILABLE when it cannot); an unclean election gives a leaderless
// partition a leader, from outside the ISR if need be (ELECTION_NOT_NEEDED when it has one,
// ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is live). Null topics mean every partition,
// and the answer then leaves out those that need no election. The elections are committed to
// the metadata log as one change, from any node; when another change of the same partitions
// commits first, the request is decided again on the newer image (a few times, then
// UNKNOWN_SERVER_ERROR for the partitions it would have elected). An unknown election type is
// INVALID_REQUEST for the whole request. A principal without ALTER on the cluster gets
// CLUSTER_AUTHORIZATION_FAILED for the whole request, before anything else, as Kafka's.
//
// Version notes: v1 adds the election type (v0 is preferred only) and the top-level error
// code; v2 is flexible.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

var electLeadersAPI = &api{key: kmsg.ElectLeaders, minVersion: 0, maxVersion: 2, keepsRequest: true, handle: handleElectLeaders}

// electLeadersAttempts is how many times an ElectLeaders request is decided and committed when
// another change of its partitions commits first; electLeadersBackoff is the wait before the
// next attempt, for the newer image to reach this node.
const (
	electLeadersAttempts = 5
	electLeadersBackoff  = 20 * time.Millisecond
)

func handleElectLeaders(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.ElectLeadersRequest)
	if !rc.authorizer().mayCluster(acl.OpAlter) {
		rc.respond(electLeadersError(req, kerr.ClusterAuthorizationFailed, rc.clusterRefusal(acl.OpAlter)))
		return
	}
	typ := req.ElectionType
	if typ != electionPreferred && typ != electionUnclean {
		rc.respond(electLeadersError(req, kerr.InvalidRequest, fmt.Sprintf("Unknown election type %d", typ)))
		return
	}
	resp := kmsg.NewPtrElectLeadersResponse()
	b.controllerMu.Lock()
	defer b.controllerMu.Unlock()
	var recs []meta.Record
	var err error
	for attempt := range electLeadersAttempts {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * electLeadersBackoff)
		}
		err = nil
		im := b.meta.Image()
		resp.Topics, recs = electLeaders(im, leaderCandidates(im), typ, req.Topics)
		if len(recs) == 0 {
			break
		}
		if _, err = b.meta.Commit(recs); err == nil {
			b.logger.Info("leader election", "type", electionTypeName(typ), "partitions", describeElections(im, recs))
			break
		}
		b.logger.Info("leader election not committed; deciding again", "type", electionTypeName(typ), "attempt", attempt+1, "err", err)
	}
	if err != nil {
		msg := "leader election not committed: " + err.Error()
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if p := &resp.Topics[i].Partitions[j]; p.ErrorCode == 0 {
					p.ErrorCode, p.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(msg)
				}
			}
		}
	}
	rc.respond(resp)
}

// electLeadersError answers a whole request with one error, as Kafka's ElectLeadersRequest
// getErrorResponse does: the top-level code (v1+) and every partition asked for.
func electLeadersError(req *kmsg.ElectLeadersRequest, code *kerr.Error, msg string) *kmsg.ElectLeadersResponse {
	resp := kmsg.NewPtrElectLeadersResponse()
	resp.ErrorCode = code.Code
	for _, t := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, part := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = part
			rp.ErrorCode = code.Code
			rp.ErrorMessage = kmsg.StringPtr(msg)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
